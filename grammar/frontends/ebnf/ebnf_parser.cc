#include "grammar/frontends/ebnf/ebnf_parser.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grammar/base/status_macros.h"
#include "grammar/base/utf8.h"

namespace grammard::grammar {
namespace {

bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool IsNameChar(char c) {
  return IsNameStart(c) || (c >= '0' && c <= '9') || c == '.' || c == '-';
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// XGrammar's macros, which take arguments in parentheses.
bool IsXGrammarMacro(std::string_view name) {
  return name == "Regex" || name == "TagDispatch" || name == "Token" ||
         name == "ExcludeToken" || name == "TokenTagDispatch";
}

// Where an escape sequence appears: classes accept more escapes than strings
// (their metacharacters), byte classes accept only byte values.
enum class EscapeContext { kString, kClass, kByteClass };

class EbnfParser {
 public:
  EbnfParser(std::string_view text, const GrammarLimits& limits,
             const Deadline& deadline)
      : text_(text), limits_(limits), deadline_(deadline) {
    // Editors on some systems start UTF-8 files with a byte order mark.
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") text_.remove_prefix(3);
  }

  absl::StatusOr<Grammar> Parse(std::string_view root_rule) {
    size_t bad_offset = 0;
    if (!base::IsValidUtf8(text_, &bad_offset)) {
      return Error(bad_offset, "invalid UTF-8 in the grammar text");
    }
    SkipSpace();
    for (int rules = 0; pos_ < text_.size(); ++rules) {
      if (rules % 16 == 0 && deadline_.Passed()) {
        return absl::DeadlineExceededError(
            "parsing the grammar took longer than its deadline");
      }
      GRAMMARD_RETURN_IF_ERROR(ParseRule());
    }
    GRAMMARD_RETURN_IF_ERROR(ResolveReferences());
    grammar_.root = grammar_.FindRule(root_rule);
    if (grammar_.root < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("EBNF error: the root rule \"", std::string(root_rule),
                       "\" is not defined"));
    }
    GRAMMARD_RETURN_IF_ERROR(CheckSizeLimit(grammar_, limits_));
    GRAMMARD_RETURN_IF_ERROR(grammar_.Validate());
    return std::move(grammar_);
  }

 private:
  // A rule name met in a body, resolved once every rule is known.
  struct Reference {
    int32_t expr;  // -1 when only checked (inside a dropped lookahead).
    std::string name;
    size_t offset;
  };

  // "line L, column C" of a byte offset; columns count code points.
  std::string LineColumn(size_t offset) const {
    int line = 1;
    int column = 1;
    for (size_t i = 0; i < offset && i < text_.size(); ++i) {
      const auto byte = static_cast<uint8_t>(text_[i]);
      if (byte == '\n') {
        ++line;
        column = 1;
      } else if ((byte & 0xC0) != 0x80) {
        ++column;
      }
    }
    return absl::StrCat("line ", line, ", column ", column);
  }

  absl::Status Error(
      size_t offset, const std::string& problem,
      absl::StatusCode code = absl::StatusCode::kInvalidArgument) const {
    return absl::Status(code, absl::StrCat("EBNF error at ", LineColumn(offset),
                                           ": ", problem));
  }

  // The source text in [begin, end), for messages.
  std::string Source(size_t begin, size_t end) const {
    return std::string(text_.substr(begin, end - begin));
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  void SkipSpace() {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  size_t NameEnd(size_t start) const {
    if (start >= text_.size() || !IsNameStart(text_[start])) return start;
    size_t end = start + 1;
    while (end < text_.size() && IsNameChar(text_[end])) ++end;
    return end;
  }

  // Whether a rule definition starts at `start`: a name, optionally an
  // attribute block, then `::=`.
  bool RuleDefinitionAt(size_t start) const {
    size_t p = NameEnd(start);
    if (p == start) return false;
    if (p < text_.size() && text_[p] == '[') {
      const size_t close = text_.find(']', p);
      if (close == std::string_view::npos) return false;
      p = close + 1;
    }
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  absl::Status ParseRule() {
    const size_t start = pos_;
    const size_t name_end = NameEnd(start);
    if (name_end == start) {
      if (text_.substr(pos_, 3) == "::=") {
        return Error(pos_, "expected a rule name before ::=");
      }
      return Error(pos_, "expected a rule definition (name ::= ...)");
    }
    for (size_t i = start; i > 0; --i) {
      const char c = text_[i - 1];
      if (c == '\n') break;
      if (c != ' ' && c != '\t' && c != '\r') {
        return Error(start, "a rule definition must start on a new line");
      }
    }
    std::string name(text_.substr(start, name_end - start));
    pos_ = name_end;
    if (Peek() == '[') {
      return Error(pos_, absl::StrCat("rule attributes (", name,
                                      "[...] ::=) are an XGrammar extension "
                                      "that is not supported"));
    }
    while (Peek() == ' ' || Peek() == '\t') ++pos_;
    if (text_.substr(pos_, 3) != "::=") {
      return Error(pos_, absl::StrCat("expected ::= after the rule name \"",
                                      name, "\""));
    }
    pos_ += 3;
    auto previous = rule_offsets_.find(name);
    if (previous != rule_offsets_.end()) {
      return Error(start, absl::StrCat("rule \"", name,
                                       "\" is defined more than once (first "
                                       "definition at ",
                                       LineColumn(previous->second), ")"));
    }
    rule_offsets_.emplace(name, start);
    rule_index_.emplace(name, static_cast<int32_t>(grammar_.rules.size()));

    absl::StatusOr<int32_t> body = ParseChoice(/*depth=*/0);
    if (!body.ok()) return body.status();
    if (text_.substr(pos_, 2) == "(=") {
      GRAMMARD_RETURN_IF_ERROR(ParseLookahead());
      SkipSpace();
      if (!AtEnd() && !RuleDefinitionAt(pos_)) {
        return Error(pos_,
                     "a lookahead assertion (= ...) must end its rule; "
                     "found more after it");
      }
    } else if (Peek() == ')') {
      return Error(pos_, "unmatched )");
    }
    grammar_.AddRule(std::move(name), *body);
    return absl::OkStatus();
  }

  // Parses and drops `(= ...)`, keeping only the check that its rule names
  // are defined.
  absl::Status ParseLookahead() {
    const size_t open = pos_;
    pos_ += 2;
    const size_t arena_size = grammar_.exprs.size();
    const size_t first_reference = references_.size();
    SkipSpace();
    if (Peek() != ')') {
      absl::StatusOr<int32_t> ignored = ParseChoice(/*depth=*/1);
      if (!ignored.ok()) return ignored.status();
    }
    if (Peek() != ')') {
      return Error(pos_, absl::StrCat("expected ) to close the lookahead "
                                      "assertion opened at ",
                                      LineColumn(open)));
    }
    ++pos_;
    for (size_t i = first_reference; i < references_.size(); ++i) {
      references_[i].expr = -1;
    }
    grammar_.exprs.resize(arena_size);
    return absl::OkStatus();
  }

  absl::StatusOr<int32_t> ParseChoice(int depth) {
    std::vector<int32_t> alternatives;
    while (true) {
      absl::StatusOr<int32_t> seq = ParseSequence(depth);
      if (!seq.ok()) return seq.status();
      const Expr& e = grammar_.exprs[*seq];
      if (e.kind == ExprKind::kChoice) {
        alternatives.insert(alternatives.end(), e.children.begin(),
                            e.children.end());
      } else {
        alternatives.push_back(*seq);
      }
      if (Peek() != '|') break;
      ++pos_;
    }
    if (alternatives.size() == 1) return alternatives[0];
    return grammar_.AddChoice(std::move(alternatives));
  }

  absl::StatusOr<int32_t> ParseSequence(int depth) {
    std::vector<int32_t> elements;
    while (true) {
      SkipSpace();
      if (AtEnd() || Peek() == '|' || Peek() == ')' ||
          text_.substr(pos_, 2) == "(=" || RuleDefinitionAt(pos_)) {
        break;
      }
      absl::StatusOr<int32_t> element = ParseQuantified(depth);
      if (!element.ok()) return element.status();
      const Expr& e = grammar_.exprs[*element];
      if (e.kind == ExprKind::kSequence) {
        elements.insert(elements.end(), e.children.begin(), e.children.end());
      } else {
        elements.push_back(*element);
      }
    }
    if (elements.empty()) return grammar_.AddEpsilon();
    if (elements.size() == 1) return elements[0];
    return grammar_.AddSequence(std::move(elements));
  }

  absl::StatusOr<int32_t> ParseQuantified(int depth) {
    absl::StatusOr<int32_t> element = ParseElement(depth);
    if (!element.ok()) return element.status();
    int32_t result = *element;
    bool quantified = false;
    while (true) {
      SkipSpace();  // Both dialects allow `x {2,3}` and `x *`.
      const size_t at = pos_;
      int32_t min = 0;
      int32_t max = 0;
      const char c = Peek();
      if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        min = c == '+' ? 1 : 0;
        max = c == '?' ? 1 : kUnbounded;
      } else if (c == '{') {
        GRAMMARD_RETURN_IF_ERROR(ParseBounds(&min, &max));
      } else {
        return result;
      }
      if (quantified) {
        return Error(at,
                     "consecutive quantifiers; use parentheses, as in "
                     "(x*)?, to repeat a repetition");
      }
      quantified = true;
      result = grammar_.AddRepeat(result, min, max);
    }
  }

  absl::Status ParseBounds(int32_t* min, int32_t* max) {
    const size_t open = pos_;
    ++pos_;
    SkipSpace();
    if (Peek() == ',') {
      return Error(open, "a repetition needs a lower bound: write {0,m}");
    }
    absl::StatusOr<int32_t> lower = ParseBound();
    if (!lower.ok()) return lower.status();
    *min = *max = *lower;
    SkipSpace();
    if (Peek() == ',') {
      ++pos_;
      SkipSpace();
      if (Peek() == '}') {
        *max = kUnbounded;
      } else if (Peek() == '-' && Peek(1) == '1' && !IsDigit(Peek(2))) {
        pos_ += 2;  // XGrammar prints {n,} as {n, -1}.
        *max = kUnbounded;
      } else {
        absl::StatusOr<int32_t> upper = ParseBound();
        if (!upper.ok()) return upper.status();
        *max = *upper;
      }
      SkipSpace();
    }
    if (Peek() != '}') {
      return Error(pos_, "expected } to close the repetition bounds");
    }
    ++pos_;
    if (*max != kUnbounded && *min > *max) {
      return Error(open, absl::StrCat("repetition lower bound ", *min,
                                      " is larger than upper bound ", *max));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int32_t> ParseBound() {
    const size_t start = pos_;
    if (!IsDigit(Peek())) {
      return Error(pos_, "expected a non-negative integer repetition bound");
    }
    int64_t value = 0;
    while (IsDigit(Peek())) {
      if (value <= limits_.max_repeat) value = value * 10 + (Peek() - '0');
      ++pos_;
    }
    if (value > limits_.max_repeat) {
      return Error(start,
                   absl::StrCat("repetition bound ", Source(start, pos_),
                                " exceeds the limit of ", limits_.max_repeat,
                                " (GrammarLimits::max_repeat)"),
                   absl::StatusCode::kResourceExhausted);
    }
    return static_cast<int32_t>(value);
  }

  absl::StatusOr<int32_t> ParseElement(int depth) {
    const char c = Peek();
    if (c == '"') return ParseString();
    if (c == '[') return ParseClass(EscapeContext::kClass);
    if (c == '%' && Peek(1) == '[') {
      ++pos_;
      return ParseClass(EscapeContext::kByteClass);
    }
    if (c == '.') {
      ++pos_;
      return grammar_.AddCharClass({}, /*negated=*/true);
    }
    if (c == '(') return ParseGroup(depth);
    if (IsNameStart(c)) return ParseReference();
    if (c == '<' || (c == '!' && Peek(1) == '<')) {
      return Error(pos_, "token references (<...>, !<...>) are not supported");
    }
    if (c == '\'') {
      return Error(pos_,
                   "single-quoted strings are not supported; use \"...\"");
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') {
      return Error(pos_, absl::StrCat("quantifier '", std::string(1, c),
                                      "' has nothing to repeat"));
    }
    size_t end = pos_;
    uint32_t cp = 0;
    base::DecodeUtf8(text_, &end, &cp);
    return Error(pos_, absl::StrCat("unexpected '", Source(pos_, end),
                                    "'; expected a string, a character class, "
                                    "a rule name or a group"));
  }

  absl::StatusOr<int32_t> ParseGroup(int depth) {
    const size_t open = pos_;
    if (Peek(1) == '=') {
      return Error(
          pos_, "a lookahead assertion (= ...) may only come last in a rule");
    }
    if (depth + 1 > limits_.max_nesting) {
      return Error(pos_,
                   absl::StrCat("groups nest deeper than ", limits_.max_nesting,
                                " levels (GrammarLimits::max_nesting)"),
                   absl::StatusCode::kResourceExhausted);
    }
    ++pos_;
    absl::StatusOr<int32_t> inner = ParseChoice(depth + 1);
    if (!inner.ok()) return inner.status();
    if (text_.substr(pos_, 2) == "(=") {
      return Error(
          pos_, "a lookahead assertion (= ...) may only come last in a rule");
    }
    if (Peek() != ')') {
      return Error(pos_,
                   absl::StrCat("expected ) to close the group opened at ",
                                LineColumn(open)));
    }
    ++pos_;
    return inner;
  }

  absl::StatusOr<int32_t> ParseReference() {
    const size_t start = pos_;
    pos_ = NameEnd(start);
    std::string name(text_.substr(start, pos_ - start));
    if (Peek() == '(' && IsXGrammarMacro(name)) {
      return Error(start, absl::StrCat("the XGrammar macro ", name,
                                       "(...) is not supported"));
    }
    const int32_t expr = grammar_.AddRuleRef(-1);
    references_.push_back({expr, std::move(name), start});
    return expr;
  }

  absl::StatusOr<int32_t> ParseString() {
    const size_t open = pos_;
    ++pos_;
    std::string bytes;
    while (true) {
      if (AtEnd()) return Error(open, "unterminated string literal");
      const char c = Peek();
      if (c == '"') break;
      if (c == '\n' || c == '\r') {
        return Error(pos_, "newline in a string literal; write \\n");
      }
      absl::StatusOr<uint32_t> cp = ParseChar(EscapeContext::kString);
      if (!cp.ok()) return cp.status();
      base::AppendUtf8(*cp, &bytes);
    }
    ++pos_;
    return grammar_.AddBytes(bytes);
  }

  // `context` is kClass or kByteClass; pos_ is at '['.
  absl::StatusOr<int32_t> ParseClass(EscapeContext context) {
    const size_t open = context == EscapeContext::kByteClass ? pos_ - 1 : pos_;
    ++pos_;
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CharRange> ranges;
    while (true) {
      if (AtEnd()) return Error(open, "unterminated character class");
      if (Peek() == ']') break;
      if (Peek() == '\n' || Peek() == '\r') {
        return Error(pos_, "newline in a character class; write \\n");
      }
      const size_t item = pos_;
      absl::StatusOr<uint32_t> lo = ParseChar(context);
      if (!lo.ok()) return lo.status();
      uint32_t hi = *lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        if (Peek() == '\n' || Peek() == '\r') {
          return Error(pos_, "newline in a character class; write \\n");
        }
        absl::StatusOr<uint32_t> upper = ParseChar(context);
        if (!upper.ok()) return upper.status();
        hi = *upper;
        if (*lo > hi) {
          return Error(item,
                       "invalid character class range: the lower "
                       "bound is larger than the upper bound");
        }
      }
      ranges.push_back({*lo, hi});
    }
    ++pos_;
    if (context == EscapeContext::kByteClass) {
      return grammar_.AddByteClass(std::move(ranges), negated);
    }
    return grammar_.AddCharClass(std::move(ranges), negated);
  }

  // One character of a string or class: raw UTF-8 or an escape sequence.
  absl::StatusOr<uint32_t> ParseChar(EscapeContext context) {
    const size_t start = pos_;
    if (Peek() != '\\') {
      uint32_t cp = 0;
      base::DecodeUtf8(text_, &pos_, &cp);  // Validated up front.
      if (context == EscapeContext::kByteClass && cp >= 0x80) {
        return Error(start,
                     "a byte class %[...] takes ASCII characters and "
                     "\\xHH escapes only");
      }
      return cp;
    }
    ++pos_;
    const char c = Peek();
    ++pos_;
    switch (c) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case 'a':
        return 0x07;
      case 'b':
        return 0x08;
      case 'f':
        return 0x0C;
      case 'v':
        return 0x0B;
      case 'e':
        return 0x1B;
      case '0':
        return 0;
      case '\\':
      case '"':
      case '\'':
      case '/':
      case '?':
      case '[':
      case ']':
        return static_cast<uint32_t>(c);
      case 'x':
      case 'u':
      case 'U':
        return ParseHexEscape(start, c == 'x' ? 2 : c == 'u' ? 4 : 8, context);
      default:
        break;
    }
    if (context != EscapeContext::kString) {
      const std::string_view class_specials = "-^$.*+(){}|";
      if (class_specials.find(c) != std::string_view::npos) {
        return static_cast<uint32_t>(c);
      }
      if (std::string_view("dDwWsS").find(c) != std::string_view::npos) {
        return Error(start,
                     absl::StrCat("the class escape \\", std::string(1, c),
                                  " is not supported in EBNF; spell "
                                  "the characters out, as in [0-9]"));
      }
    }
    pos_ = start;
    size_t end = start + 1;
    uint32_t cp = 0;
    if (!base::DecodeUtf8(text_, &end, &cp)) end = text_.size();
    return Error(start, absl::StrCat("invalid escape sequence \\",
                                     Source(start + 1, end)));
  }

  absl::StatusOr<uint32_t> ParseHexEscape(size_t start, int digits,
                                          EscapeContext context) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const int digit = HexValue(Peek());
      if (digit < 0) {
        return Error(
            start, absl::StrCat("invalid escape sequence: \\",
                                Source(start + 1, start + 2), " needs exactly ",
                                digits, " hexadecimal digits"));
      }
      value = value * 16 + static_cast<uint32_t>(digit);
      ++pos_;
    }
    if (context == EscapeContext::kByteClass) {
      if (value > 0xFF) {
        return Error(start, "a byte class %[...] holds values up to \\xff");
      }
      return value;
    }
    if (base::IsSurrogate(value)) {
      return Error(start, absl::StrCat(Source(start, pos_),
                                       " is a surrogate code point, which "
                                       "UTF-8 cannot encode"));
    }
    if (value > base::kMaxCodepoint) {
      return Error(start, absl::StrCat(Source(start, pos_),
                                       " is beyond the last code point "
                                       "U+10FFFF"));
    }
    return value;
  }

  absl::Status ResolveReferences() {
    for (const Reference& ref : references_) {
      auto rule = rule_index_.find(ref.name);
      if (rule == rule_index_.end()) {
        return Error(ref.offset,
                     absl::StrCat("rule \"", ref.name, "\" is not defined"));
      }
      if (ref.expr >= 0) grammar_.exprs[ref.expr].rule = rule->second;
    }
    return absl::OkStatus();
  }

  std::string_view text_;
  const GrammarLimits& limits_;
  const Deadline deadline_;
  size_t pos_ = 0;
  Grammar grammar_;
  std::map<std::string, size_t, std::less<>> rule_offsets_;
  std::map<std::string, int32_t, std::less<>> rule_index_;
  std::vector<Reference> references_;
};

}  // namespace

absl::StatusOr<Grammar> ParseEbnf(std::string_view text,
                                  std::string_view root_rule) {
  return ParseEbnf(text, root_rule, GrammarLimits(), Deadline());
}

absl::StatusOr<Grammar> ParseEbnf(std::string_view text,
                                  std::string_view root_rule,
                                  const GrammarLimits& limits,
                                  const Deadline& deadline) {
  return EbnfParser(text, limits, deadline).Parse(root_rule);
}

}  // namespace grammard::grammar
