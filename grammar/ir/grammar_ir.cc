#include "grammar/ir/grammar_ir.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grammar/base/status_macros.h"
#include "grammar/base/utf8.h"

namespace grammard::grammar {
namespace {

using base::kMaxCodepoint;
using base::kSurrogateHi;
using base::kSurrogateLo;

std::vector<CharRange> SortAndMerge(std::vector<CharRange> ranges,
                                    uint32_t max_value) {
  std::vector<CharRange> clipped;
  clipped.reserve(ranges.size());
  for (const CharRange& r : ranges) {
    if (r.lo > r.hi || r.lo > max_value) continue;
    clipped.push_back({r.lo, std::min(r.hi, max_value)});
  }
  std::sort(clipped.begin(), clipped.end(),
            [](const CharRange& a, const CharRange& b) {
              return a.lo < b.lo || (a.lo == b.lo && a.hi < b.hi);
            });
  std::vector<CharRange> merged;
  for (const CharRange& r : clipped) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

std::vector<CharRange> Complement(const std::vector<CharRange>& ranges,
                                  uint32_t max_value) {
  std::vector<CharRange> out;
  uint32_t next = 0;
  for (const CharRange& r : ranges) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= max_value) out.push_back({next, max_value});
  return out;
}

std::vector<CharRange> RemoveSurrogates(const std::vector<CharRange>& ranges) {
  std::vector<CharRange> out;
  for (const CharRange& r : ranges) {
    if (r.hi < kSurrogateLo || r.lo > kSurrogateHi) {
      out.push_back(r);
      continue;
    }
    if (r.lo < kSurrogateLo) out.push_back({r.lo, kSurrogateLo - 1});
    if (r.hi > kSurrogateHi) out.push_back({kSurrogateHi + 1, r.hi});
  }
  return out;
}

bool IsNormalized(const std::vector<CharRange>& ranges, uint32_t max_value,
                  bool code_points) {
  for (size_t i = 0; i < ranges.size(); ++i) {
    const CharRange& r = ranges[i];
    if (r.lo > r.hi || r.hi > max_value) return false;
    if (code_points && r.hi >= kSurrogateLo && r.lo <= kSurrogateHi) {
      return false;
    }
    // Touching ranges must be merged.
    if (i > 0 && r.lo <= ranges[i - 1].hi + 1) return false;
  }
  return true;
}

// Code points printed as themselves inside strings and classes. Everything
// else is escaped so that printed grammars show no invisible characters.
bool PrintsRaw(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if (cp >= 0x2000 && cp <= 0x206F) return false;  // Spaces, format marks.
  if (cp >= 0xE000 && cp <= 0xF8FF) return false;  // Private use.
  if (cp >= 0xFE00 && cp <= 0xFE0F) return false;  // Variation selectors.
  if (cp == 0xFEFF || (cp >= 0xFFF0 && cp <= 0xFFFF)) return false;
  return cp < 0xE0000;  // Tags and the supplementary private use planes.
}

// `\` `prefix` then `digits` lower-case hex digits of `value`.
void AppendHexEscape(char prefix, uint32_t value, int digits,
                     std::string* out) {
  out->push_back('\\');
  out->push_back(prefix);
  for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) {
    out->push_back("0123456789abcdef"[(value >> shift) & 0xF]);
  }
}

void AppendCodepointEscape(uint32_t cp, std::string* out) {
  switch (cp) {
    case '\n':
      out->append("\\n");
      return;
    case '\r':
      out->append("\\r");
      return;
    case '\t':
      out->append("\\t");
      return;
    default:
      break;
  }
  if (cp <= 0xFF) {
    AppendHexEscape('x', cp, 2, out);
  } else if (cp <= 0xFFFF) {
    AppendHexEscape('u', cp, 4, out);
  } else {
    AppendHexEscape('U', cp, 8, out);
  }
}

void AppendStringChar(uint32_t cp, std::string* out) {
  if (cp == '"' || cp == '\\') {
    out->push_back('\\');
    out->push_back(static_cast<char>(cp));
  } else if (PrintsRaw(cp)) {
    base::AppendUtf8(cp, out);
  } else {
    AppendCodepointEscape(cp, out);
  }
}

void AppendClassChar(uint32_t cp, std::string* out) {
  if (cp == ']' || cp == '[' || cp == '\\' || cp == '^' || cp == '-') {
    out->push_back('\\');
    out->push_back(static_cast<char>(cp));
  } else if (PrintsRaw(cp)) {
    base::AppendUtf8(cp, out);
  } else {
    AppendCodepointEscape(cp, out);
  }
}

void AppendByteClassChar(uint32_t byte, std::string* out) {
  if (byte == ']' || byte == '[' || byte == '\\' || byte == '^' ||
      byte == '-') {
    out->push_back('\\');
    out->push_back(static_cast<char>(byte));
  } else if (byte > 0x20 && byte < 0x7F) {
    out->push_back(static_cast<char>(byte));
  } else {
    AppendHexEscape('x', byte, 2, out);
  }
}

using CharPrinter = void (*)(uint32_t, std::string*);

void AppendRanges(const std::vector<CharRange>& ranges, CharPrinter print,
                  std::string* out) {
  for (const CharRange& r : ranges) {
    print(r.lo, out);
    if (r.hi == r.lo + 1) {
      print(r.hi, out);
    } else if (r.hi > r.lo) {
      out->push_back('-');
      print(r.hi, out);
    }
  }
}

// Prints whichever of the class and its complement has fewer ranges, so `.`
// and `[^"]` read back as they were written.
void AppendClass(const std::vector<CharRange>& ranges,
                 const std::vector<CharRange>& complement, CharPrinter print,
                 std::string* out) {
  out->push_back('[');
  if (complement.size() < ranges.size()) {
    out->push_back('^');
    AppendRanges(complement, print, out);
  } else {
    AppendRanges(ranges, print, out);
  }
  out->push_back(']');
}

void AppendQuantifier(int32_t min, int32_t max, std::string* out) {
  if (min == 0 && max == kUnbounded) {
    out->push_back('*');
  } else if (min == 1 && max == kUnbounded) {
    out->push_back('+');
  } else if (min == 0 && max == 1) {
    out->push_back('?');
  } else if (max == kUnbounded) {
    absl::StrAppend(out, "{", min, ",}");
  } else if (min == max) {
    absl::StrAppend(out, "{", min, "}");
  } else {
    absl::StrAppend(out, "{", min, ",", max, "}");
  }
}

// Where an expression is printed, which decides whether it needs
// parentheses to read back with the same structure.
enum class Context { kTop, kSequence, kChoice, kRepeat };

class Printer {
 public:
  explicit Printer(const Grammar& grammar) : g_(grammar) {}

  void Append(int32_t index, Context context, std::string* out) const {
    const Expr& e = g_.exprs[index];
    bool parens = false;
    switch (e.kind) {
      case ExprKind::kSequence:
        parens = context == Context::kSequence || context == Context::kRepeat;
        break;
      case ExprKind::kChoice:
        parens = context != Context::kTop;
        break;
      case ExprKind::kRepeat:
        parens = context == Context::kRepeat;
        break;
      case ExprKind::kBytes:
        // Invalid UTF-8 prints as a sequence of strings and byte classes.
        parens = !base::IsValidUtf8(e.bytes) &&
                 (context == Context::kSequence || context == Context::kRepeat);
        break;
      default:
        break;
    }
    if (parens) out->push_back('(');
    AppendBare(e, out);
    if (parens) out->push_back(')');
  }

 private:
  void AppendBare(const Expr& e, std::string* out) const {
    switch (e.kind) {
      case ExprKind::kBytes:
        AppendBytes(e.bytes, out);
        break;
      case ExprKind::kCharClass:
        AppendClass(e.ranges, ComplementCodepointRanges(e.ranges),
                    AppendClassChar, out);
        break;
      case ExprKind::kByteClass:
        out->push_back('%');
        AppendClass(e.ranges, ComplementByteRanges(e.ranges),
                    AppendByteClassChar, out);
        break;
      case ExprKind::kSequence:
        for (size_t i = 0; i < e.children.size(); ++i) {
          if (i > 0) out->push_back(' ');
          Append(e.children[i], Context::kSequence, out);
        }
        break;
      case ExprKind::kChoice:
        for (size_t i = 0; i < e.children.size(); ++i) {
          if (i > 0) out->append(" | ");
          Append(e.children[i], Context::kChoice, out);
        }
        break;
      case ExprKind::kRepeat:
        Append(e.children[0], Context::kRepeat, out);
        AppendQuantifier(e.min, e.max, out);
        break;
      case ExprKind::kRuleRef:
        out->append(g_.rules[e.rule].name);
        break;
    }
  }

  static void AppendBytes(const std::string& bytes, std::string* out) {
    bool in_string = false;
    bool first = true;
    size_t pos = 0;
    if (bytes.empty()) {
      out->append("\"\"");
      return;
    }
    while (pos < bytes.size()) {
      uint32_t cp;
      size_t next = pos;
      if (base::DecodeUtf8(bytes, &next, &cp)) {
        if (!in_string) {
          if (!first) out->push_back(' ');
          out->push_back('"');
          in_string = true;
        }
        AppendStringChar(cp, out);
        pos = next;
      } else {
        if (in_string) out->push_back('"');
        in_string = false;
        if (!first) out->push_back(' ');
        out->append("%[");
        AppendByteClassChar(static_cast<uint8_t>(bytes[pos]), out);
        out->push_back(']');
        ++pos;
      }
      first = false;
    }
    if (in_string) out->push_back('"');
  }

  const Grammar& g_;
};

bool ExprsEqual(const Grammar& ga, int32_t a, const Grammar& gb, int32_t b) {
  const Expr& x = ga.exprs[a];
  const Expr& y = gb.exprs[b];
  if (x.kind != y.kind) return false;
  switch (x.kind) {
    case ExprKind::kBytes:
      return x.bytes == y.bytes;
    case ExprKind::kCharClass:
    case ExprKind::kByteClass:
      return x.ranges == y.ranges;
    case ExprKind::kRuleRef:
      return x.rule == y.rule;
    case ExprKind::kRepeat:
      if (x.min != y.min || x.max != y.max) return false;
      break;
    case ExprKind::kSequence:
    case ExprKind::kChoice:
      break;
  }
  if (x.children.size() != y.children.size()) return false;
  for (size_t i = 0; i < x.children.size(); ++i) {
    if (!ExprsEqual(ga, x.children[i], gb, y.children[i])) return false;
  }
  return true;
}

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b
             ? std::numeric_limits<uint64_t>::max()
             : a + b;
}

uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) {
    return std::numeric_limits<uint64_t>::max();
  }
  return a * b;
}

const char* KindName(ExprKind kind) {
  switch (kind) {
    case ExprKind::kBytes:
      return "bytes";
    case ExprKind::kCharClass:
      return "char class";
    case ExprKind::kByteClass:
      return "byte class";
    case ExprKind::kSequence:
      return "sequence";
    case ExprKind::kChoice:
      return "choice";
    case ExprKind::kRepeat:
      return "repeat";
    case ExprKind::kRuleRef:
      return "rule reference";
  }
  return "?";
}

absl::Status ValidateExpr(const Grammar& g, int32_t index) {
  const Expr& e = g.exprs[index];
  auto fail = [&](const std::string& problem) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid grammar: expression ", index, " (",
                     KindName(e.kind), "): ", problem));
  };
  for (int32_t child : e.children) {
    if (child < 0 || child >= index) {
      return fail(absl::StrCat("child ", child,
                               " is out of range or does not precede it"));
    }
  }
  switch (e.kind) {
    case ExprKind::kBytes:
      break;
    case ExprKind::kCharClass:
      if (!IsNormalized(e.ranges, kMaxCodepoint, /*code_points=*/true)) {
        return fail("ranges are not sorted, merged scalar values");
      }
      break;
    case ExprKind::kByteClass:
      if (!IsNormalized(e.ranges, 0xFF, /*code_points=*/false)) {
        return fail("ranges are not sorted, merged bytes");
      }
      break;
    case ExprKind::kSequence:
    case ExprKind::kChoice:
      if (e.children.empty()) return fail("has no children");
      break;
    case ExprKind::kRepeat:
      if (e.children.size() != 1) return fail("needs exactly one child");
      if (e.min < 0 || (e.max != kUnbounded && e.max < e.min)) {
        return fail(absl::StrCat("bad bounds {", e.min, ",", e.max, "}"));
      }
      break;
    case ExprKind::kRuleRef:
      if (e.rule < 0 || e.rule >= static_cast<int32_t>(g.rules.size())) {
        return fail(absl::StrCat("rule ", e.rule, " is out of range"));
      }
      break;
  }
  if (e.kind != ExprKind::kSequence && e.kind != ExprKind::kChoice &&
      e.kind != ExprKind::kRepeat && !e.children.empty()) {
    return fail("has children");
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<CharRange> NormalizeCodepointRanges(std::vector<CharRange> ranges) {
  return RemoveSurrogates(SortAndMerge(std::move(ranges), kMaxCodepoint));
}

std::vector<CharRange> NormalizeByteRanges(std::vector<CharRange> ranges) {
  return SortAndMerge(std::move(ranges), 0xFF);
}

std::vector<CharRange> ComplementCodepointRanges(
    const std::vector<CharRange>& ranges) {
  return RemoveSurrogates(Complement(ranges, kMaxCodepoint));
}

std::vector<CharRange> ComplementByteRanges(
    const std::vector<CharRange>& ranges) {
  return Complement(ranges, 0xFF);
}

bool IsValidRuleName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    const bool ok = alpha || c == '_' ||
                    (i > 0 && ((c >= '0' && c <= '9') || c == '.' || c == '-'));
    if (!ok) return false;
  }
  return true;
}

int32_t Grammar::AddBytes(std::string_view bytes) {
  Expr e;
  e.kind = ExprKind::kBytes;
  e.bytes = std::string(bytes);
  exprs.push_back(std::move(e));
  return static_cast<int32_t>(exprs.size()) - 1;
}

int32_t Grammar::AddCharClass(std::vector<CharRange> ranges, bool negated) {
  Expr e;
  e.kind = ExprKind::kCharClass;
  e.ranges = NormalizeCodepointRanges(std::move(ranges));
  if (negated) e.ranges = ComplementCodepointRanges(e.ranges);
  exprs.push_back(std::move(e));
  return static_cast<int32_t>(exprs.size()) - 1;
}

int32_t Grammar::AddByteClass(std::vector<CharRange> ranges, bool negated) {
  Expr e;
  e.kind = ExprKind::kByteClass;
  e.ranges = NormalizeByteRanges(std::move(ranges));
  if (negated) e.ranges = ComplementByteRanges(e.ranges);
  exprs.push_back(std::move(e));
  return static_cast<int32_t>(exprs.size()) - 1;
}

int32_t Grammar::AddSequence(std::vector<int32_t> children) {
  Expr e;
  e.kind = ExprKind::kSequence;
  e.children = std::move(children);
  exprs.push_back(std::move(e));
  return static_cast<int32_t>(exprs.size()) - 1;
}

int32_t Grammar::AddChoice(std::vector<int32_t> children) {
  Expr e;
  e.kind = ExprKind::kChoice;
  e.children = std::move(children);
  exprs.push_back(std::move(e));
  return static_cast<int32_t>(exprs.size()) - 1;
}

int32_t Grammar::AddRepeat(int32_t child, int32_t min, int32_t max) {
  Expr e;
  e.kind = ExprKind::kRepeat;
  e.children = {child};
  e.min = min;
  e.max = max;
  exprs.push_back(std::move(e));
  return static_cast<int32_t>(exprs.size()) - 1;
}

int32_t Grammar::AddRuleRef(int32_t rule_index) {
  Expr e;
  e.kind = ExprKind::kRuleRef;
  e.rule = rule_index;
  exprs.push_back(std::move(e));
  return static_cast<int32_t>(exprs.size()) - 1;
}

int32_t Grammar::AddRule(std::string name, int32_t body) {
  rules.push_back(Rule{std::move(name), body});
  return static_cast<int32_t>(rules.size()) - 1;
}

int32_t Grammar::FindRule(std::string_view name) const {
  for (size_t i = 0; i < rules.size(); ++i) {
    if (rules[i].name == name) return static_cast<int32_t>(i);
  }
  return -1;
}

std::string Grammar::ToString() const {
  std::string out;
  Printer printer(*this);
  for (const Rule& rule : rules) {
    absl::StrAppend(&out, rule.name, " ::= ");
    printer.Append(rule.body, Context::kTop, &out);
    out.push_back('\n');
  }
  return out;
}

std::string Grammar::ExprToString(int32_t expr) const {
  std::string out;
  Printer(*this).Append(expr, Context::kTop, &out);
  return out;
}

absl::Status Grammar::Validate() const {
  if (rules.empty()) return absl::InvalidArgumentError("grammar has no rules");
  if (root < 0 || root >= static_cast<int32_t>(rules.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid grammar: root rule ", root, " is out of range"));
  }
  if (rules[root].distinct) {
    return absl::InvalidArgumentError(
        "invalid grammar: the root rule cannot be distinct (no rule calls it)");
  }
  if (rules[root].max_chars >= 0) {
    return absl::InvalidArgumentError(
        "invalid grammar: the root rule cannot count characters (it reads "
        "the rest of a string after a quote)");
  }
  if (rules[root].member_bit >= 0) {
    return absl::InvalidArgumentError(
        "invalid grammar: the root rule cannot count as a member (no rule "
        "calls it)");
  }
  std::set<std::string_view> names;
  for (const Rule& rule : rules) {
    if (rule.max_chars < -1) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid grammar: rule \"", rule.name,
                       "\" counts at most ", rule.max_chars, " characters"));
    }
    if (rule.member_bit < -1 || rule.member_bit >= MemberSet::kMax) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid grammar: rule \"", rule.name, "\" has member bit ",
          rule.member_bit, " (0 to ", MemberSet::kMax - 1, ")"));
    }
    // A member's rule is guarded by its own bit or not at all.
    MemberSet own;
    if (rule.member_bit >= 0) own.Add(rule.member_bit);
    if (rule.member_bit >= 0 && rule.member_dispatch) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid grammar: rule \"", rule.name,
                       "\" counts a member but is a dispatch"));
    }
    if (rule.member_bit >= 0 && !rule.member_guard.empty() &&
        rule.member_guard != own) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid grammar: rule \"", rule.name, "\" counts member ",
          rule.member_bit, " but is guarded by other members"));
    }
    if (!IsValidRuleName(rule.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid grammar: bad rule name \"", rule.name, "\""));
    }
    if (!names.insert(rule.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid grammar: rule \"", rule.name, "\" is defined twice"));
    }
    if (rule.body < 0 || rule.body >= static_cast<int32_t>(exprs.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid grammar: rule \"", rule.name, "\" has no valid body"));
    }
  }
  std::vector<int32_t> depth(exprs.size(), 1);
  for (size_t i = 0; i < exprs.size(); ++i) {
    GRAMMARD_RETURN_IF_ERROR(ValidateExpr(*this, static_cast<int32_t>(i)));
    for (int32_t child : exprs[i].children) {
      depth[i] = std::max(depth[i], depth[child] + 1);
    }
    if (depth[i] > kMaxExprDepth) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid grammar: expressions nest deeper than ",
                       kMaxExprDepth, " levels"));
    }
  }
  return absl::OkStatus();
}

bool StructurallyEqual(const Grammar& a, const Grammar& b) {
  if (a.root != b.root || a.rules.size() != b.rules.size()) return false;
  for (size_t i = 0; i < a.rules.size(); ++i) {
    if (a.rules[i].name != b.rules[i].name) return false;
    if (a.rules[i].distinct != b.rules[i].distinct ||
        a.rules[i].member_bit != b.rules[i].member_bit ||
        a.rules[i].required_members != b.rules[i].required_members ||
        a.rules[i].member_guard != b.rules[i].member_guard ||
        a.rules[i].member_dispatch != b.rules[i].member_dispatch ||
        a.rules[i].max_chars != b.rules[i].max_chars) {
      return false;
    }
    if (!ExprsEqual(a, a.rules[i].body, b, b.rules[i].body)) return false;
  }
  return true;
}

uint64_t ExpandedSize(const Grammar& grammar) {
  std::vector<uint64_t> size(grammar.exprs.size(), 1);
  for (size_t i = 0; i < grammar.exprs.size(); ++i) {
    const Expr& e = grammar.exprs[i];
    if (e.kind == ExprKind::kRepeat) {
      const uint64_t copies =
          e.max == kUnbounded ? static_cast<uint64_t>(e.min) + 1
                              : static_cast<uint64_t>(std::max(e.min, e.max));
      size[i] = SaturatingAdd(1, SaturatingMul(copies, size[e.children[0]]));
    } else {
      for (int32_t child : e.children) {
        size[i] = SaturatingAdd(size[i], size[child]);
      }
    }
  }
  uint64_t total = 0;
  for (const Rule& rule : grammar.rules) {
    total = SaturatingAdd(total, size[rule.body]);
  }
  return total;
}

absl::Status CheckSizeLimit(const Grammar& grammar,
                            const GrammarLimits& limits) {
  const uint64_t size = ExpandedSize(grammar);
  if (size > limits.max_exprs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "grammar too large: it expands to ",
        size == std::numeric_limits<uint64_t>::max()
            ? std::string("more than 2^64")
            : absl::StrCat(size),
        " expressions once repetitions are unrolled, above the limit of ",
        limits.max_exprs, " (GrammarLimits::max_exprs)"));
  }
  return absl::OkStatus();
}

}  // namespace grammard::grammar
