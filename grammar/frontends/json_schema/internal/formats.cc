#include "grammar/frontends/json_schema/internal/formats.h"

#include "absl/strings/str_cat.h"

namespace grammard::grammar::json_schema_internal {
namespace {

std::string DecOctet() {
  return "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
}

std::string Ipv4() {
  return absl::StrCat(DecOctet(), "(\\.", DecOctet(), "){3}");
}

std::string Ipv6() {
  const std::string h = "[0-9A-Fa-f]{1,4}";
  const std::string ls32 = absl::StrCat("(", h, ":", h, "|", Ipv4(), ")");
  auto upto = [&](int n) {  // [ *n( h16 ":" ) h16 ]
    return absl::StrCat("((", h, ":){0,", n, "}", h, ")?");
  };
  return absl::StrCat("((", h, ":){6}", ls32,                 //
                      "|::(", h, ":){5}", ls32,               //
                      "|(", h, ")?::(", h, ":){4}", ls32,     //
                      "|", upto(1), "::(", h, ":){3}", ls32,  //
                      "|", upto(2), "::(", h, ":){2}", ls32,  //
                      "|", upto(3), "::", h, ":", ls32,       //
                      "|", upto(4), "::", ls32,               //
                      "|", upto(5), "::", h,                  //
                      "|", upto(6), "::)");
}

// An LDH label of 1..max characters (max >= 5) without "--" in the third
// and fourth positions.
std::string Label(int max) {
  const std::string a = "[A-Za-z0-9]";
  const std::string b = "[A-Za-z0-9-]";
  return absl::StrCat("(", a, "(", b, "?", a, ")?|", a, b, b, a, "|", a, b, "(",
                      a, b, "|-", a, ")", b, "{0,", max - 5, "}", a, ")");
}

std::string Hostname() {
  return absl::StrCat(Label(63), "(\\.", Label(24), "){0,7}");
}

std::string Email() {
  const std::string atext = R"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-])";
  const std::string dot_atom = absl::StrCat(atext, "+(\\.", atext, "+)*");
  const std::string quoted =
      R"("([\x20\x21\x23-\x5B\x5D-\x7E]|\\[\x20-\x7E])*")";
  return absl::StrCat("(", dot_atom, "|", quoted, ")@(", Hostname(), "|\\[",
                      Ipv4(), "\\]|\\[IPv6:", Ipv6(), "\\])");
}

constexpr char kUcschar[] =
    "\\u00A0-\\uD7FF\\uF900-\\uFDCF\\uFDF0-\\uFFEF\\u{10000}-\\u{1FFFD}"
    "\\u{20000}-\\u{2FFFD}\\u{30000}-\\u{3FFFD}\\u{40000}-\\u{4FFFD}"
    "\\u{50000}-\\u{5FFFD}\\u{60000}-\\u{6FFFD}\\u{70000}-\\u{7FFFD}"
    "\\u{80000}-\\u{8FFFD}\\u{90000}-\\u{9FFFD}\\u{A0000}-\\u{AFFFD}"
    "\\u{B0000}-\\u{BFFFD}\\u{C0000}-\\u{CFFFD}\\u{D0000}-\\u{DFFFD}"
    "\\u{E1000}-\\u{EFFFD}";
constexpr char kIprivate[] =
    "\\uE000-\\uF8FF\\u{F0000}-\\u{FFFFD}\\u{100000}-\\u{10FFFD}";

// RFC 3986 (iri = false) or RFC 3987 (iri = true): the absolute form, or
// the reference form (absolute or relative) when `reference`.
std::string Uri(bool iri, bool reference) {
  const std::string unreserved =
      absl::StrCat("A-Za-z0-9\\-._~", iri ? kUcschar : "");
  const std::string sub = "!$&'()*+,;=";
  const std::string pct = "%[0-9A-Fa-f]{2}";
  const std::string pchar =
      absl::StrCat("([", unreserved, sub, ":@]|", pct, ")");
  const std::string scheme = "[A-Za-z][A-Za-z0-9+\\-.]*";
  const std::string userinfo =
      absl::StrCat("([", unreserved, sub, ":]|", pct, ")*");
  const std::string ip_literal = absl::StrCat(
      "\\[(", Ipv6(), "|[vV][0-9A-Fa-f]+\\.[", unreserved, sub, ":]+)\\]");
  const std::string reg_name =
      absl::StrCat("([", unreserved, sub, "]|", pct, ")*");
  const std::string authority =
      absl::StrCat("(", userinfo, "@)?(", ip_literal, "|", Ipv4(), "|",
                   reg_name, ")(:[0-9]*)?");
  const std::string segment = pchar + "*";
  const std::string path_abempty = absl::StrCat("(/", segment, ")*");
  const std::string path_absolute =
      absl::StrCat("/(", pchar, "+(/", segment, ")*)?");
  const std::string path_rootless = absl::StrCat(pchar, "+(/", segment, ")*");
  const std::string path_noscheme =
      absl::StrCat("([", unreserved, sub, "@]|", pct, ")+(/", segment, ")*");
  const std::string query =
      absl::StrCat("(", pchar, "|[/?", iri ? kIprivate : "", "])*");
  const std::string fragment = absl::StrCat("(", pchar, "|[/?])*");
  const std::string tail = absl::StrCat("(\\?", query, ")?(#", fragment, ")?");
  const std::string absolute =
      absl::StrCat(scheme, ":(//", authority, path_abempty, "|", path_absolute,
                   "|", path_rootless, "|)", tail);
  if (!reference) return absolute;
  const std::string relative =
      absl::StrCat("(//", authority, path_abempty, "|", path_absolute, "|",
                   path_noscheme, "|)", tail);
  return absl::StrCat("(", absolute, "|", relative, ")");
}

std::string UriTemplate() {
  const std::string pct = "%[0-9A-Fa-f]{2}";
  const std::string literal =
      absl::StrCat("[!#$&-;=?-\\[\\]_a-z~", kUcschar, kIprivate, "]");
  const std::string varchar = absl::StrCat("([A-Za-z0-9_]|", pct, ")");
  const std::string varspec =
      absl::StrCat(varchar, "(\\.?", varchar, ")*(:[1-9][0-9]{0,3}|\\*)?");
  const std::string expression =
      absl::StrCat("\\{[+#./;?&=,!@|]?", varspec, "(,", varspec, ")*\\}");
  return absl::StrCat("(", literal, "|", pct, "|", expression, ")*");
}

std::string Date() {
  return "([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])"
         "|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
         "|02-(0[1-9]|1[0-9]|2[0-8]))"
         "|([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])"
         "00)"
         "-02-29)";
}

std::string Time() {
  return "(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?"
         "([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
         "|23:59:60(\\.[0-9]+)?([Zz]|[+-]00:00))";
}

std::string Duration() {
  const std::string time =
      "T([0-9]+H([0-9]+M([0-9]+S)?)?|[0-9]+M([0-9]+S)?|[0-9]+S)";
  return absl::StrCat(
      "P(([0-9]+D|[0-9]+M([0-9]+D)?|[0-9]+Y([0-9]+M([0-9]+D)?)?)(", time, ")?|",
      time, "|[0-9]+W)");
}

}  // namespace

FormatInfo LookupFormat(std::string_view name) {
  FormatInfo info;
  info.support = FormatSupport::kEnforced;
  if (name == "date") {
    info.regex = Date();
  } else if (name == "time") {
    info.regex = Time();
  } else if (name == "date-time") {
    info.regex = absl::StrCat(Date(), "[Tt]", Time());
  } else if (name == "duration") {
    info.regex = Duration();
  } else if (name == "email") {
    info.regex = Email();
  } else if (name == "hostname") {
    info.regex = Hostname();
  } else if (name == "ipv4") {
    info.regex = Ipv4();
  } else if (name == "ipv6") {
    info.regex = Ipv6();
  } else if (name == "uuid") {
    info.regex =
        "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-"
        "f]{12}";
  } else if (name == "uri") {
    info.regex = Uri(/*iri=*/false, /*reference=*/false);
  } else if (name == "uri-reference") {
    info.regex = Uri(/*iri=*/false, /*reference=*/true);
  } else if (name == "iri") {
    info.regex = Uri(/*iri=*/true, /*reference=*/false);
  } else if (name == "iri-reference") {
    info.regex = Uri(/*iri=*/true, /*reference=*/true);
  } else if (name == "uri-template") {
    info.regex = UriTemplate();
  } else if (name == "json-pointer") {
    info.regex = "(/([^~/]|~[01])*)*";
  } else if (name == "relative-json-pointer") {
    info.regex = "(0|[1-9][0-9]*)(#|(/([^~/]|~[01])*)*)";
  } else if (name == "regex") {
    info.support = FormatSupport::kUnsupported;
    info.reason = "valid regular expressions are not a regular language";
  } else if (name == "idn-email" || name == "idn-hostname") {
    info.support = FormatSupport::kUnsupported;
    info.reason = "internationalized names need IDNA tables";
  } else {
    info.support = FormatSupport::kUnknown;
  }
  info.narrower = name == "time" || name == "date-time" || name == "hostname" ||
                  name == "email";
  return info;
}

FormatInfo LookupContentEncoding(std::string_view name) {
  FormatInfo info;
  if (name != "base64") return info;
  info.support = FormatSupport::kEnforced;
  // A decoder may ignore the unused low bits of the character before the
  // padding; a canonical encoder writes them as zero, and so does the
  // grammar, which makes it narrower than lax decoders.
  info.regex =
      "([A-Za-z0-9+/]{4})*([A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}"
      "[AEIMQUYcgkosw048]=)?";
  info.narrower = true;
  return info;
}

}  // namespace grammard::grammar::json_schema_internal
