// The `format` values the JSON Schema front end enforces, as ECMAScript
// regular expressions matched against the whole string.
//
//   FormatInfo f = LookupFormat("date");
//   if (f.support == FormatSupport::kEnforced) ParseRegex(f.regex) ...
//
// Every regex accepts only valid strings of its format (RFC 3339 dates,
// times and durations, RFC 5321 addresses, RFC 1123 host names, RFC 4291
// IPv6, RFC 3986/3987 URIs, RFC 6901 pointers, RFC 6570 templates). Three
// are knowingly narrower than the format, never wider:
//   - time, date-time: a leap second (:60) only as 23:59:60 in UTC (Z or
//     +/-00:00), since other offsets would need every local time listed;
//   - hostname (and e-mail domains): no labels with "--" in the third and
//     fourth positions (punycode A-labels would need IDNA tables), and the
//     253-byte total is kept by allowing a first label of up to 63
//     characters and at most seven more of up to 24, which a counter-free
//     grammar can express;
//   - e-mail: no comments or obsolete forms.
// Formats that no regular language captures exactly (regex, idn-email,
// idn-hostname) are kUnsupported; names the specification does not define
// are kUnknown, which JSON Schema says to ignore.
//
// Cost: a table lookup. Thread-safety: pure.
#ifndef GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_FORMATS_H_
#define GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_FORMATS_H_

#include <string>
#include <string_view>

namespace grammard::grammar::json_schema_internal {

enum class FormatSupport { kEnforced, kUnsupported, kUnknown };

struct FormatInfo {
  FormatSupport support = FormatSupport::kUnknown;
  std::string regex;  // kEnforced: the full-match regex
  // kEnforced: the regex refuses some valid strings (see above), so its
  // complement is wider than "not this format" and must not be used.
  bool narrower = false;
  std::string reason;  // kUnsupported: why
};

FormatInfo LookupFormat(std::string_view name);

// The same for draft 7's contentEncoding, which a validator may assert:
// base64 (RFC 4648 section 4, padded) is enforced, in its canonical form
// only (unused bits of the last character zero), so it is narrower; other
// encodings are kUnknown.
FormatInfo LookupContentEncoding(std::string_view name);

}  // namespace grammard::grammar::json_schema_internal

#endif  // GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_FORMATS_H_
