#include "grammar/frontends/regex/regex_parser.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grammar/base/status_macros.h"
#include "grammar/base/utf8.h"

namespace grammard::grammar {
namespace {

using Ranges = std::vector<CharRange>;

const Ranges& DigitRanges() {
  static const Ranges kDigits = {{'0', '9'}};
  return kDigits;
}

const Ranges& WordRanges() {
  static const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return kWord;
}

// ECMAScript's WhiteSpace and LineTerminator code points.
const Ranges& SpaceRanges() {
  static const Ranges kSpace = {
      {0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680},
      {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
      {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
  return kSpace;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAsciiAlnum(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Which anchors a parsed piece contains, so that its context can check that
// they stand where they are no-ops.
struct Anchors {
  bool start = false;
  bool end = false;
};

// A class escape (\d) or a single code point.
struct ClassAtom {
  bool is_set = false;
  Ranges set;
  uint32_t cp = 0;
  size_t offset = 0;
};

class RegexParser {
 public:
  RegexParser(std::string_view pattern, const GrammarLimits& limits,
              bool keep_anchors)
      : pattern_(pattern), limits_(limits), keep_anchors_(keep_anchors) {}

  absl::StatusOr<Grammar> Parse() {
    size_t bad_offset = 0;
    if (!base::IsValidUtf8(pattern_, &bad_offset)) {
      return Error(bad_offset, "invalid UTF-8 in the pattern");
    }
    Anchors anchors;
    absl::StatusOr<int32_t> body =
        ParseDisjunction(/*depth=*/0, /*at_start=*/true, &anchors);
    if (!body.ok()) return body.status();
    if (!AtEnd()) return Error(pos_, "unmatched )");
    grammar_.root = grammar_.AddRule("root", *body);
    GRAMMARD_RETURN_IF_ERROR(CheckSizeLimit(grammar_, limits_));
    GRAMMARD_RETURN_IF_ERROR(grammar_.Validate());
    return std::move(grammar_);
  }

 private:
  absl::Status Error(
      size_t offset, const std::string& problem,
      absl::StatusCode code = absl::StatusCode::kInvalidArgument) const {
    return absl::Status(
        code, absl::StrCat("regex error at offset ", offset, ": ", problem));
  }

  std::string Source(size_t begin, size_t end) const {
    return std::string(pattern_.substr(begin, end - begin));
  }

  bool AtEnd() const { return pos_ >= pattern_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < pattern_.size() ? pattern_[pos_ + ahead] : '\0';
  }
  bool LookingAt(std::string_view s) const {
    return pattern_.substr(pos_, s.size()) == s;
  }

  absl::StatusOr<int32_t> ParseDisjunction(int depth, bool at_start,
                                           Anchors* anchors) {
    std::vector<int32_t> alternatives;
    while (true) {
      absl::StatusOr<int32_t> alt = ParseAlternative(depth, at_start, anchors);
      if (!alt.ok()) return alt.status();
      const Expr& e = grammar_.exprs[*alt];
      if (e.kind == ExprKind::kChoice) {
        alternatives.insert(alternatives.end(), e.children.begin(),
                            e.children.end());
      } else {
        alternatives.push_back(*alt);
      }
      if (Peek() != '|') break;
      ++pos_;
    }
    if (alternatives.size() == 1) return alternatives[0];
    return grammar_.AddChoice(std::move(alternatives));
  }

  absl::StatusOr<int32_t> ParseAlternative(int depth, bool at_start,
                                           Anchors* anchors) {
    std::vector<int32_t> terms;
    std::string literal;  // Unquantified characters, merged into one string.
    auto flush = [&] {
      if (!literal.empty()) terms.push_back(grammar_.AddBytes(literal));
      literal.clear();
    };
    bool nothing_before = at_start;
    size_t end_anchor = std::string_view::npos;  // Where `$` ended it.
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      const size_t term = pos_;
      if (Peek() == '^' || Peek() == '$') {
        const bool start = Peek() == '^';
        ++pos_;
        if (keep_anchors_) {
          GRAMMARD_RETURN_IF_ERROR(RefuseQuantifier(start ? "^" : "$"));
          flush();
          terms.push_back(grammar_.AddRuleRef(AnchorRule(start)));
          continue;
        }
        if (start && !nothing_before) {
          return Error(term, "^ is only supported at the start of the pattern");
        }
        (start ? anchors->start : anchors->end) = true;
        if (!start) end_anchor = term;
        GRAMMARD_RETURN_IF_ERROR(RefuseQuantifier(start ? "^" : "$"));
        continue;
      }
      if (end_anchor != std::string_view::npos) {
        return Error(end_anchor,
                     "$ is only supported at the end of the pattern");
      }
      Anchors inner;
      std::optional<uint32_t> character;
      absl::StatusOr<int32_t> atom =
          ParseAtom(depth, nothing_before, &inner, &character);
      if (!atom.ok()) return atom.status();
      int32_t min = 1;
      int32_t max = 1;
      absl::StatusOr<bool> quantified = ParseQuantifier(&min, &max);
      if (!quantified.ok()) return quantified.status();
      if (*quantified && (inner.start || inner.end) &&
          (max == kUnbounded || max > 1)) {
        return Error(
            term, "anchors (^, $) inside a repeated group are not supported");
      }
      if (character.has_value() && !*quantified) {
        base::AppendUtf8(*character, &literal);
      } else {
        flush();
        int32_t expr = *atom;
        if (character.has_value()) {
          std::string bytes;
          base::AppendUtf8(*character, &bytes);
          expr = grammar_.AddBytes(bytes);
        }
        if (*quantified) {
          terms.push_back(grammar_.AddRepeat(expr, min, max));
        } else if (grammar_.exprs[expr].kind == ExprKind::kSequence) {
          const std::vector<int32_t> children = grammar_.exprs[expr].children;
          terms.insert(terms.end(), children.begin(), children.end());
        } else {
          terms.push_back(expr);
        }
      }
      anchors->start = anchors->start || inner.start;
      if (inner.end) {
        anchors->end = true;
        end_anchor = term;
      }
      nothing_before = false;
    }
    flush();
    if (terms.empty()) return grammar_.AddEpsilon();
    if (terms.size() == 1) return terms[0];
    return grammar_.AddSequence(std::move(terms));
  }

  // The rule standing for ^ (start) or $, made on first use.
  int32_t AnchorRule(bool start) {
    int32_t& rule = start ? start_anchor_ : end_anchor_;
    if (rule < 0) {
      rule = grammar_.AddRule(start ? kStartAnchorRule : kEndAnchorRule,
                              grammar_.AddEpsilon());
    }
    return rule;
  }

  absl::Status RefuseQuantifier(const std::string& what) {
    int32_t min = 0;
    int32_t max = 0;
    const size_t at = pos_;
    absl::StatusOr<bool> quantifier = ParseQuantifierSyntax(&min, &max);
    if (!quantifier.ok()) return quantifier.status();
    if (*quantifier) {
      return Error(at,
                   absl::StrCat("the anchor ", what, " cannot be repeated"));
    }
    return absl::OkStatus();
  }

  // One atom. A single literal character is returned in *character instead
  // (the result is then -1), so that runs of them can become one string.
  absl::StatusOr<int32_t> ParseAtom(int depth, bool at_start, Anchors* anchors,
                                    std::optional<uint32_t>* character) {
    const size_t start = pos_;
    const char c = Peek();
    switch (c) {
      case '(':
        return ParseGroup(depth, at_start, anchors);
      case '[':
        return ParseClass();
      case '.':
        ++pos_;
        return grammar_.AddCharClass({{'\n', '\n'}}, /*negated=*/true);
      case '*':
      case '+':
      case '?':
        return Error(start, absl::StrCat("the quantifier ", std::string(1, c),
                                         " has nothing to repeat"));
      case '{': {
        int32_t min = 0;
        int32_t max = 0;
        absl::StatusOr<bool> quantifier = ParseQuantifierSyntax(&min, &max);
        if (!quantifier.ok()) return quantifier.status();
        if (*quantifier) {
          return Error(start,
                       absl::StrCat("the quantifier ", Source(start, pos_),
                                    " has nothing to repeat"));
        }
        break;  // A literal '{'.
      }
      case '\\': {
        absl::StatusOr<ClassAtom> escape = ParseEscape(/*in_class=*/false);
        if (!escape.ok()) return escape.status();
        if (escape->is_set) return grammar_.AddCharClass(escape->set);
        *character = escape->cp;
        return -1;
      }
      default:
        break;
    }
    uint32_t cp = 0;
    base::DecodeUtf8(pattern_, &pos_, &cp);  // Validated up front.
    *character = cp;
    return -1;
  }

  absl::StatusOr<int32_t> ParseGroup(int depth, bool at_start,
                                     Anchors* anchors) {
    const size_t open = pos_;
    ++pos_;
    if (Peek() == '?') {
      GRAMMARD_RETURN_IF_ERROR(ParseGroupPrefix(open));
    }
    if (depth + 1 > limits_.max_nesting) {
      return Error(open,
                   absl::StrCat("groups nest deeper than ", limits_.max_nesting,
                                " levels (GrammarLimits::max_nesting)"),
                   absl::StatusCode::kResourceExhausted);
    }
    absl::StatusOr<int32_t> inner =
        ParseDisjunction(depth + 1, at_start, anchors);
    if (!inner.ok()) return inner.status();
    if (Peek() != ')') {
      return Error(open, "missing ) for the group opened here");
    }
    ++pos_;
    return inner;
  }

  // Consumes what follows "(?" in a group we support, or refuses it.
  absl::Status ParseGroupPrefix(size_t open) {
    if (LookingAt("?:")) {
      pos_ += 2;
      return absl::OkStatus();
    }
    if (LookingAt("?=") || LookingAt("?!")) {
      return Error(open,
                   absl::StrCat("lookahead assertion (", Source(pos_, pos_ + 2),
                                "...) is not supported"));
    }
    if (LookingAt("?<=") || LookingAt("?<!")) {
      return Error(
          open, absl::StrCat("lookbehind assertion (", Source(pos_, pos_ + 3),
                             "...) is not supported"));
    }
    if (LookingAt("?P=")) {
      return Error(open, "backreference (?P=name) is not supported");
    }
    if (LookingAt("?<") || LookingAt("?P<")) {
      pos_ += LookingAt("?<") ? 2 : 3;
      const size_t name = pos_;
      while (!AtEnd() &&
             (IsAsciiAlnum(Peek()) || Peek() == '_' || Peek() == '$')) {
        ++pos_;
      }
      if (pos_ == name || IsDigit(pattern_[name]) || Peek() != '>') {
        return Error(name, "invalid group name");
      }
      ++pos_;
      return absl::OkStatus();
    }
    size_t end = pos_ + 1;
    while (end < pattern_.size() && IsAsciiAlnum(pattern_[end])) ++end;
    if (end > pos_ + 1) {
      return Error(open, absl::StrCat("inline flags (", Source(pos_, end),
                                      ") are not supported"));
    }
    return Error(open, absl::StrCat("unsupported group syntax (",
                                    Source(pos_, pos_ + 2)));
  }

  // A quantifier and its lazy mark, if one follows. Laziness is ignored: it
  // never changes the set of full matches.
  absl::StatusOr<bool> ParseQuantifier(int32_t* min, int32_t* max) {
    absl::StatusOr<bool> quantifier = ParseQuantifierSyntax(min, max);
    if (!quantifier.ok() || !*quantifier) return quantifier;
    if (Peek() == '?') ++pos_;
    const size_t next = pos_;
    int32_t unused_min = 0;
    int32_t unused_max = 0;
    absl::StatusOr<bool> another =
        ParseQuantifierSyntax(&unused_min, &unused_max);
    if (!another.ok()) return another.status();
    if (*another) {
      return Error(next,
                   "consecutive quantifiers (possessive quantifiers such "
                   "as a++ are not supported)");
    }
    return true;
  }

  // * + ? {n} {n,} {n,m}; false (consuming nothing) when none starts here.
  absl::StatusOr<bool> ParseQuantifierSyntax(int32_t* min, int32_t* max) {
    const char c = Peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      *min = c == '+' ? 1 : 0;
      *max = c == '?' ? 1 : kUnbounded;
      return true;
    }
    if (c != '{') return false;
    const size_t open = pos_;
    size_t p = pos_ + 1;
    if (p < pattern_.size() && pattern_[p] == ',') {
      size_t q = p + 1;
      while (q < pattern_.size() && IsDigit(pattern_[q])) ++q;
      if (q > p + 1 && q < pattern_.size() && pattern_[q] == '}') {
        return Error(open, "a quantifier needs a lower bound: write {0,m}");
      }
      return false;
    }
    int64_t lower = 0;
    int64_t upper = 0;
    size_t lower_end = 0;
    if (!ScanNumber(&p, &lower, &lower_end)) return false;
    upper = lower;
    bool unbounded = false;
    size_t upper_start = p;
    if (p < pattern_.size() && pattern_[p] == ',') {
      ++p;
      upper_start = p;
      size_t upper_end = 0;
      if (!ScanNumber(&p, &upper, &upper_end)) unbounded = true;
    }
    if (p >= pattern_.size() || pattern_[p] != '}') return false;
    for (const auto& [value, at] :
         {std::pair<int64_t, size_t>{lower, open + 1}, {upper, upper_start}}) {
      if (value > limits_.max_repeat) {
        return Error(
            at,
            absl::StrCat("quantifier bound exceeds the limit of ",
                         limits_.max_repeat, " (GrammarLimits::max_repeat)"),
            absl::StatusCode::kResourceExhausted);
      }
    }
    if (!unbounded && lower > upper) {
      return Error(open, absl::StrCat("numbers out of order in the quantifier ",
                                      Source(open, p + 1)));
    }
    pos_ = p + 1;
    *min = static_cast<int32_t>(lower);
    *max = unbounded ? kUnbounded : static_cast<int32_t>(upper);
    return true;
  }

  // Reads decimal digits at *p, saturating just above the repeat limit.
  bool ScanNumber(size_t* p, int64_t* value, size_t* end) const {
    const size_t start = *p;
    *value = 0;
    while (*p < pattern_.size() && IsDigit(pattern_[*p])) {
      if (*value <= limits_.max_repeat) {
        *value = *value * 10 + (pattern_[*p] - '0');
      }
      ++*p;
    }
    *end = *p;
    return *p > start;
  }

  absl::StatusOr<int32_t> ParseClass() {
    const size_t open = pos_;
    ++pos_;
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    Ranges ranges;
    while (true) {
      if (AtEnd()) return Error(open, "unterminated character class");
      if (Peek() == ']') break;
      absl::StatusOr<ClassAtom> lo = ParseClassAtom();
      if (!lo.ok()) return lo.status();
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < pattern_.size()) {
        ++pos_;
        absl::StatusOr<ClassAtom> hi = ParseClassAtom();
        if (!hi.ok()) return hi.status();
        if (lo->is_set || hi->is_set) {
          return Error(lo->is_set ? lo->offset : hi->offset,
                       "a class escape such as \\d cannot bound a range");
        }
        if (lo->cp > hi->cp) {
          return Error(lo->offset, "range out of order in character class");
        }
        ranges.push_back({lo->cp, hi->cp});
      } else if (lo->is_set) {
        ranges.insert(ranges.end(), lo->set.begin(), lo->set.end());
      } else {
        ranges.push_back({lo->cp, lo->cp});
      }
    }
    ++pos_;
    return grammar_.AddCharClass(std::move(ranges), negated);
  }

  absl::StatusOr<ClassAtom> ParseClassAtom() {
    if (Peek() == '\\') return ParseEscape(/*in_class=*/true);
    ClassAtom atom;
    atom.offset = pos_;
    base::DecodeUtf8(pattern_, &pos_, &atom.cp);
    return atom;
  }

  absl::StatusOr<ClassAtom> ParseEscape(bool in_class) {
    ClassAtom atom;
    atom.offset = pos_;
    const size_t start = pos_;
    ++pos_;
    if (AtEnd()) return Error(start, "the pattern ends with a lone \\");
    const char c = Peek();
    ++pos_;
    auto set = [&](const Ranges& ranges, bool negate) {
      atom.is_set = true;
      atom.set =
          negate ? ComplementCodepointRanges(NormalizeCodepointRanges(ranges))
                 : ranges;
      return atom;
    };
    auto single = [&](uint32_t cp) {
      atom.cp = cp;
      return atom;
    };
    switch (c) {
      case 'd':
      case 'D':
        return set(DigitRanges(), c == 'D');
      case 'w':
      case 'W':
        return set(WordRanges(), c == 'W');
      case 's':
      case 'S':
        return set(SpaceRanges(), c == 'S');
      case 'b':
        if (in_class) return single(0x08);
        return Error(start, "word boundary assertion \\b is not supported");
      case 'B':
        return Error(start, "word boundary assertion \\B is not supported");
      case 'n':
        return single('\n');
      case 't':
        return single('\t');
      case 'r':
        return single('\r');
      case 'f':
        return single('\f');
      case 'v':
        return single('\v');
      case '0':
        if (IsDigit(Peek())) {
          return Error(start, "octal escapes are not supported");
        }
        return single(0);
      case 'k':
        if (Peek() == '<') {
          return Error(start, "backreference \\k<name> is not supported");
        }
        break;
      case 'p':
      case 'P':
        return Error(
            start, absl::StrCat("Unicode property escape \\", std::string(1, c),
                                "{...} is not supported"));
      case 'c':
        if ((Peek() >= 'a' && Peek() <= 'z') ||
            (Peek() >= 'A' && Peek() <= 'Z')) {
          return single(static_cast<uint32_t>(pattern_[pos_++]) % 32);
        }
        return Error(start, "\\c must be followed by a letter");
      case 'x': {
        uint32_t value = 0;
        if (!ReadHex(2, &value)) {
          return Error(start, "\\x must be followed by two hexadecimal digits");
        }
        return single(value);
      }
      case 'u': {
        absl::StatusOr<uint32_t> cp = ParseUnicodeEscape(start);
        if (!cp.ok()) return cp.status();
        return single(*cp);
      }
      default:
        break;
    }
    if (IsDigit(c)) {
      return Error(start, absl::StrCat("backreference \\", std::string(1, c),
                                       " is not supported"));
    }
    // Letters ECMAScript gives no meaning mean something elsewhere (\a bell,
    // \z end of input, \h horizontal space), so guessing would be wrong.
    if (IsAsciiAlnum(c)) {
      return Error(start, absl::StrCat("unknown escape \\", std::string(1, c)));
    }
    // Any other character (\_ and punctuation) stands for itself.
    pos_ = start + 1;
    base::DecodeUtf8(pattern_, &pos_, &atom.cp);
    return atom;
  }

  bool ReadHex(int digits, uint32_t* value) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int d = HexValue(Peek(i));
      if (d < 0) return false;
      v = v * 16 + static_cast<uint32_t>(d);
    }
    pos_ += digits;
    *value = v;
    return true;
  }

  // After "\u": {H...} or HHHH, where a high surrogate followed by an
  // escaped low surrogate is one code point, as in ECMAScript.
  absl::StatusOr<uint32_t> ParseUnicodeEscape(size_t start) {
    uint32_t value = 0;
    if (Peek() == '{') {
      size_t p = pos_ + 1;
      uint64_t v = 0;
      while (p < pattern_.size() && HexValue(pattern_[p]) >= 0 &&
             v <= 0x10FFFF) {
        v = v * 16 + static_cast<uint64_t>(HexValue(pattern_[p]));
        ++p;
      }
      if (p == pos_ + 1 || p >= pattern_.size() || pattern_[p] != '}') {
        if (v > 0x10FFFF) {
          return Error(start, "\\u{...} is beyond the Unicode range");
        }
        return Error(start,
                     "\\u{ must be followed by hexadecimal digits and }");
      }
      if (v > base::kMaxCodepoint) {
        return Error(start, "\\u{...} is beyond the Unicode range");
      }
      pos_ = p + 1;
      value = static_cast<uint32_t>(v);
    } else if (!ReadHex(4, &value)) {
      return Error(start,
                   "\\u must be followed by four hexadecimal digits or {...}");
    }
    if (value >= 0xD800 && value <= 0xDBFF && LookingAt("\\u")) {
      const size_t save = pos_;
      pos_ += 2;
      uint32_t low = 0;
      if (ReadHex(4, &low) && low >= 0xDC00 && low <= 0xDFFF) {
        return 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00);
      }
      pos_ = save;
    }
    if (base::IsSurrogate(value)) {
      return Error(start, "a lone surrogate cannot be matched in UTF-8 text");
    }
    return value;
  }

  std::string_view pattern_;
  const GrammarLimits& limits_;
  const bool keep_anchors_;
  size_t pos_ = 0;
  Grammar grammar_;
  int32_t start_anchor_ = -1;
  int32_t end_anchor_ = -1;
};

}  // namespace

absl::StatusOr<Grammar> ParseRegex(std::string_view pattern) {
  return ParseRegex(pattern, GrammarLimits());
}

absl::StatusOr<Grammar> ParseRegex(std::string_view pattern,
                                   const GrammarLimits& limits) {
  return RegexParser(pattern, limits, /*keep_anchors=*/false).Parse();
}

absl::StatusOr<Grammar> ParseRegexKeepingAnchors(std::string_view pattern,
                                                 const GrammarLimits& limits) {
  return RegexParser(pattern, limits, /*keep_anchors=*/true).Parse();
}

}  // namespace grammard::grammar
