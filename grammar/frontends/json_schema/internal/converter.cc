#include "grammar/frontends/json_schema/internal/converter.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "grammar/frontends/json_schema/internal/formats.h"
#include "grammar/frontends/json_schema/internal/json_values.h"
#include "grammar/frontends/json_schema/internal/numbers.h"
#include "grammar/frontends/regex/regex_parser.h"

namespace grammard::grammar::json_schema_internal {
namespace {

// JSON types as bits; integers are numbers whose constraints say integer.
enum TypeBit : uint8_t {
  kNullT = 1,
  kBoolT = 2,
  kNumT = 4,
  kStrT = 8,
  kArrT = 16,
  kObjT = 32,
  kAllT = 63,
};

// Nesting of values and of schemas a single check may follow.
constexpr int kMaxCheckDepth = 256;
// Schemas expanded inside one another through allOf/anyOf/$ref.
constexpr int kMaxExpandDepth = 128;
// Distinct patternProperties regexes an object may combine.
constexpr int kMaxKeyPatterns = 6;
// Values uniqueItems may choose among.
constexpr int kMaxUniqueValues = 12;
// The longest string length minLength/maxLength may count. The engine
// spends an automaton state per counted character (100000 by default), so
// 64 KiB keeps the common 32767 and 65535 within reach.
constexpr int64_t kMaxCountedLength = 65536;
// Rules a counting construction (contains, uniqueItems, min/maxProperties)
// may make for one array or object.
constexpr int64_t kMaxCountingRules = 4096;

struct Term {
  int32_t loc;
  bool neg;
};
bool operator<(Term a, Term b) {
  return a.loc != b.loc ? a.loc < b.loc : a.neg < b.neg;
}
bool operator==(Term a, Term b) { return a.loc == b.loc && a.neg == b.neg; }
// A conjunction of terms, sorted; {} is `true`, {false} is `false`.
using TermSet = std::vector<Term>;

const TermSet& FalseSet() {
  static const TermSet kFalse{Term{SchemaDoc::kFalse, false}};
  return kFalse;
}
bool IsFalseSet(const TermSet& ts) { return ts == FalseSet(); }

TermSet Join(TermSet a, const TermSet& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A regular string constraint: a pattern, a format or a content encoding.
struct RegexRef {
  enum Kind : uint8_t { kPattern, kFormat, kEncoding };
  Kind kind = kPattern;
  std::string text;  // the pattern, or the format or encoding name
  int32_t loc = -1;  // where it was written
  std::string Key() const {
    static constexpr const char* kPrefix[] = {"p:", "f:", "e:"};
    return kPrefix[kind] + text;
  }
  const char* Keyword() const {
    static constexpr const char* kKeyword[] = {"pattern", "format",
                                               "contentEncoding"};
    return kKeyword[kind];
  }
  // A format's or encoding's regex (empty for a pattern).
  FormatInfo Info() const {
    return kind == kFormat     ? LookupFormat(text)
           : kind == kEncoding ? LookupContentEncoding(text)
                               : FormatInfo{};
  }
  // Whether its regex refuses some strings the keyword allows, so that
  // neither its complement nor an empty intersection with it proves
  // anything.
  bool Narrower() const { return kind != kPattern && Info().narrower; }
};

struct StringC {
  int64_t min_len = 0;
  int64_t max_len = -1;
  int32_t length_loc = -1;
  std::vector<RegexRef> must;
  std::vector<RegexRef> must_not;
  std::vector<std::string> excluded;

  bool HasLength() const { return min_len > 0 || max_len >= 0; }
  bool Unconstrained() const {
    return !HasLength() && must.empty() && must_not.empty() && excluded.empty();
  }
  std::string Key() const {
    std::string key = absl::StrCat(min_len, ",", max_len);
    std::vector<std::string> parts;
    for (const auto& r : must) parts.push_back("+" + r.Key());
    for (const auto& r : must_not) parts.push_back("-" + r.Key());
    for (const auto& e : excluded) parts.push_back("!" + e);
    std::sort(parts.begin(), parts.end());
    parts.erase(std::unique(parts.begin(), parts.end()), parts.end());
    for (const auto& p : parts) absl::StrAppend(&key, "\x1f", p);
    return key;
  }
};

struct ContainsC {
  TermSet schema;
  int64_t min = 1;
  int64_t max = -1;
  int32_t loc = -1;
};

struct ArrayC {
  std::vector<TermSet> prefix;
  TermSet rest;  // items past the prefix
  int64_t min_items = 0;
  int64_t max_items = -1;
  std::vector<ContainsC> contains;
  bool unique = false;
  int32_t unique_loc = -1;
  int32_t loc = -1;  // where item counts were written
};

// What one schema says about an object's members: its properties, its
// patternProperties and its additionalProperties (for keys that are neither).
struct KeyRule {
  std::vector<std::pair<std::string, TermSet>> props;
  std::vector<std::pair<RegexRef, TermSet>> patterns;
  bool has_additional = false;
  TermSet additional;
};

// "Some member is named outside `not_names` and has a value satisfying
// `value`": what negating additionalProperties asks for.
struct Witness {
  std::vector<std::string> not_names;
  TermSet value;
  int32_t loc = -1;
};

struct ObjectC {
  std::vector<KeyRule> rules;
  std::vector<std::string> required;
  std::vector<TermSet> names;  // propertyNames
  int64_t min_props = 0;
  int64_t max_props = -1;
  int32_t loc = -1;
  std::vector<Witness> witnesses;
};

// What an alternative of a schema allows, type by type.
struct SimpleSchema {
  uint8_t types = kAllT;
  NumberConstraints number;
  int32_t number_loc = -1;
  StringC string;
  ArrayC array;
  ObjectC object;
  bool has_values = false;
  ValueList values;    // enum/const: only these
  ValueList excluded;  // scalars it must not equal
};

using Alt = std::vector<int32_t>;  // fragment ids, sorted
using Dnf = std::vector<Alt>;

uint8_t TypeOf(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return kNullT;
    case Json::value_t::boolean:
      return kBoolT;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return kNumT;
    case Json::value_t::string:
      return kStrT;
    case Json::value_t::array:
      return kArrT;
    case Json::value_t::object:
      return kObjT;
    default:
      return 0;
  }
}

const Json& StaticValue(int which) {
  static const Json kValues[] = {Json(nullptr), Json(true), Json(false)};
  return kValues[which];
}

// Reads a non-negative integer keyword value (1.0 counts as 1).
std::optional<int64_t> NonNegativeInt(const Json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    return static_cast<int64_t>(std::min<uint64_t>(u, uint64_t{1} << 62));
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < 0) return std::nullopt;
    return i;
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (d >= 0 && d < 4e18 &&
        d == static_cast<double>(static_cast<int64_t>(d))) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

// Whether a contentMediaType names JSON (media types ignore case and may
// carry parameters).
bool IsJsonMediaType(const Json& v) {
  std::string type = absl::AsciiStrToLower(v.get<std::string>());
  type =
      std::string(absl::StripAsciiWhitespace(type.substr(0, type.find(';'))));
  return type == "application/json";
}

// Keywords this converter acts on.
bool IsKnownKeyword(const std::string& key) {
  static const std::set<std::string> kKeys = {"type",
                                              "enum",
                                              "const",
                                              "minimum",
                                              "maximum",
                                              "exclusiveMinimum",
                                              "exclusiveMaximum",
                                              "multipleOf",
                                              "minLength",
                                              "maxLength",
                                              "pattern",
                                              "format",
                                              "items",
                                              "prefixItems",
                                              "additionalItems",
                                              "minItems",
                                              "maxItems",
                                              "uniqueItems",
                                              "contains",
                                              "minContains",
                                              "maxContains",
                                              "properties",
                                              "patternProperties",
                                              "additionalProperties",
                                              "required",
                                              "minProperties",
                                              "maxProperties",
                                              "propertyNames",
                                              "dependentRequired",
                                              "dependentSchemas",
                                              "dependencies",
                                              "allOf",
                                              "anyOf",
                                              "oneOf",
                                              "not",
                                              "if",
                                              "then",
                                              "else",
                                              "$ref",
                                              "$dynamicRef",
                                              "$recursiveRef",
                                              "unevaluatedProperties",
                                              "unevaluatedItems"};
  return kKeys.count(key) > 0;
}

std::string DisplayPointer(const std::string& pointer) {
  if (pointer.find('#') != std::string::npos) return pointer;
  return "#" + pointer;
}

// Splits a pattern into its top-level alternatives, each with whether it is
// anchored at the start (^) and at the end ($). Fails on anchors anywhere
// else, whose meaning under JSON Schema's search semantics the regex
// parser's full-match reading would change.
struct PatternAlt {
  std::string text;
  bool start = false;
  bool end = false;
};
// The inside of `p` when all of it is one group, "(...)" or "(?:...)";
// nullopt otherwise.
std::optional<std::string> GroupInside(const std::string& p) {
  if (p.size() < 2 || p[0] != '(' || p.back() != ')') return std::nullopt;
  int depth = 0;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      ++i;
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')' && --depth == 0 && i + 1 != p.size()) {
      return std::nullopt;  // the first group closes before the end
    }
  }
  if (p.compare(0, 3, "(?:") == 0) return p.substr(3, p.size() - 4);
  if (p.compare(0, 2, "(?") == 0) return std::nullopt;  // lookaround, names
  return p.substr(1, p.size() - 2);
}

absl::StatusOr<std::vector<PatternAlt>> SplitPattern(const std::string& p,
                                                     int depth_left = 32) {
  if (depth_left == 0) {
    return absl::InvalidArgumentError("groups nested too deeply");
  }
  std::vector<PatternAlt> alts;
  std::vector<size_t> anchors;  // offsets of unescaped ^ and $ outside classes
  size_t begin = 0;
  int depth = 0;
  bool in_class = false;
  auto finish = [&](size_t end) -> absl::Status {
    // An alternative that is one group, as in "(^a+$)|^b", is the
    // alternatives inside it.
    if (std::optional<std::string> inside =
            GroupInside(p.substr(begin, end - begin))) {
      absl::StatusOr<std::vector<PatternAlt>> inner =
          SplitPattern(*inside, depth_left - 1);
      if (!inner.ok()) return inner.status();
      alts.insert(alts.end(), inner->begin(), inner->end());
      anchors.clear();
      return absl::OkStatus();
    }
    PatternAlt alt;
    size_t b = begin, e = end;
    for (size_t a : anchors) {
      if (a == b && p[a] == '^' && !alt.start) {
        alt.start = true;
        b = a + 1;
      } else if (a + 1 == e && p[a] == '$' && a >= b) {
        alt.end = true;
        e = a;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("an anchor (", std::string(1, p[a]),
                         ") inside a group at offset ", a));
      }
    }
    alt.text = p.substr(b, e - b);
    alts.push_back(std::move(alt));
    anchors.clear();
    return absl::OkStatus();
  };
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\') {
      ++i;
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      continue;
    }
    if (c == '[') {
      in_class = true;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == '|' && depth == 0) {
      if (absl::Status s = finish(i); !s.ok()) return s;
      begin = i + 1;
    } else if (c == '^' || c == '$') {
      anchors.push_back(i);
    }
  }
  if (absl::Status s = finish(p.size()); !s.ok()) return s;
  return alts;
}

// ECMAScript's `.` matches no line terminator (\n, \r, U+2028, U+2029);
// the regex parser's matches every code point but \n. Spells each `.`
// outside a class out as the class ECMAScript means.
std::string EcmaDots(const std::string& p) {
  std::string out;
  bool in_class = false;  // ECMAScript classes end at the first `]`
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      out += p.substr(i, 2);
      ++i;
    } else if (in_class) {
      in_class = c != ']';
      out += c;
    } else if (c == '.') {
      out += "[^\\n\\r\\u2028\\u2029]";
    } else {
      in_class = c == '[';
      out += c;
    }
  }
  return out;
}

// Copies expression `expr` of `src` (no rule references) into `dst`.
int32_t ImportExpr(Grammar* dst, const Grammar& src, int32_t expr) {
  std::vector<char> reachable(expr + 1, 0);
  reachable[expr] = 1;
  for (int32_t i = expr; i >= 0; --i) {
    if (!reachable[i]) continue;
    for (int32_t c : src.exprs[i].children) reachable[c] = 1;
  }
  std::vector<int32_t> mapped(expr + 1, -1);
  for (int32_t i = 0; i <= expr; ++i) {
    if (!reachable[i]) continue;
    Expr e = src.exprs[i];
    for (int32_t& c : e.children) c = mapped[c];
    dst->exprs.push_back(std::move(e));
    mapped[i] = static_cast<int32_t>(dst->exprs.size()) - 1;
  }
  return mapped[expr];
}

struct RegexEntry {
  Grammar ir;
  int32_t expr = -1;
  bool dfa_done = false;
  absl::Status dfa_status;
  CharDfa dfa;
  int32_t content_rule = -1;
};

class Converter {
 public:
  Converter(SchemaDoc* doc, const ConvertOptions& options, Grammar* grammar,
            std::vector<DroppedKeyword>* dropped)
      : doc_(*doc),
        opt_(options),
        e_(grammar, options.layout),
        dropped_(dropped) {}

  absl::Status Run();

 private:
  // --- Policy ---------------------------------------------------------
  absl::Status Unsupported(int32_t loc, absl::string_view keyword,
                           absl::string_view reason);
  // The same for a failure's status: a passed deadline is returned as is
  // (see IsDeadline), anything else refused or dropped by its message.
  absl::Status Unsupported(int32_t loc, absl::string_view keyword,
                           const absl::Status& cause);
  std::string Where(int32_t loc, absl::string_view keyword) const {
    std::string p = loc >= 0 ? doc_.pointer(loc) : "";
    return DisplayPointer(keyword.empty() ? p : absl::StrCat(p, "/", keyword));
  }
  absl::Status CheckBudget();
  // The deadline, read every kTickEvery calls: loops over values call it
  // once a value, so that a list of 100,000 of them stops at the deadline.
  absl::Status Tick() {
    if (++ticks_ % kTickEvery != 0) return absl::OkStatus();
    return opt_.dfa.CheckDeadline();
  }
  static constexpr uint32_t kTickEvery = 256;

  // --- Terms ----------------------------------------------------------
  int32_t Alias(int32_t loc);
  TermSet Canon(TermSet ts);
  TermSet One(int32_t loc) { return Canon({Term{loc, false}}); }

  // --- Expansion ------------------------------------------------------
  int32_t AddFragment(SimpleSchema s);
  absl::StatusOr<int32_t> OwnFragment(int32_t loc);
  // The own fragment of `loc` (an unconstrained one if it has none).
  absl::StatusOr<SimpleSchema> OwnCopy(int32_t loc);
  absl::Status ParseOwn(int32_t loc, SimpleSchema* s, bool* any);
  // The members a schema and everything it applies in place (allOf, $ref)
  // evaluate, for unevaluatedProperties.
  struct EvaluatedMembers {
    bool all = false;      // additionalProperties somewhere: every member
    bool dynamic = false;  // depends on which branches pass (anyOf, if, ...)
    std::vector<std::string> names;
    std::vector<RegexRef> patterns;
  };
  absl::Status CollectEvaluated(int32_t loc, int depth, EvaluatedMembers* ev);
  absl::StatusOr<Dnf> Expand(int32_t loc, bool neg);
  absl::StatusOr<Dnf> ExpandUncached(int32_t loc, bool neg);
  absl::StatusOr<Dnf> ExpandPositive(int32_t loc);
  absl::StatusOr<Dnf> ExpandNegative(int32_t loc);
  absl::StatusOr<Dnf> NegOwn(int32_t loc);
  absl::StatusOr<Dnf> NegKeyword(int32_t loc, const std::string& key);
  // Whether content keyword `key` with value `v` is an assertion here: in
  // draft 7, which lets validators check them, and only for the values
  // grammard knows (base64, application/json); else an annotation.
  bool AssertsContent(const std::string& key, const Json& v) const {
    if (doc_.draft() != Draft::k7 || !v.is_string()) return false;
    return key == "contentMediaType"
               ? IsJsonMediaType(v)
               : LookupContentEncoding(v.get<std::string>()).support ==
                     FormatSupport::kEnforced;
  }
  absl::StatusOr<Dnf> ExpandOneOf(int32_t loc, const Dnf& context);
  absl::StatusOr<Dnf> ExpandSet(const TermSet& ts);
  absl::StatusOr<Dnf> Product(const Dnf& a, const Dnf& b);
  absl::StatusOr<Dnf> Union(std::vector<Dnf> parts);
  absl::StatusOr<int32_t> RefTarget(int32_t loc);
  // The target of $dynamicRef when it is certain; -1 when lenient mode
  // drops it.
  absl::StatusOr<int32_t> DynamicRefTarget(int32_t loc);
  Dnf Single(SimpleSchema s) { return Dnf{Alt{AddFragment(std::move(s))}}; }

  // --- Merging and checking -------------------------------------------
  absl::StatusOr<const SimpleSchema*> Merge(const Alt& alt);
  // DeadlineExceeded only.
  absl::Status Intersect(SimpleSchema* acc, const SimpleSchema& f);
  absl::StatusOr<bool> CheckValue(const Json& v, const SimpleSchema& s,
                                  int depth);
  absl::StatusOr<bool> ValidateTerms(const Json& v, const TermSet& ts,
                                     int depth);
  absl::StatusOr<std::optional<TermSet>> KeyValueTerms(const ObjectC& o,
                                                       const std::string& key);
  absl::StatusOr<bool> Disjoint(const SimpleSchema& a, const SimpleSchema& b,
                                int depth);
  absl::StatusOr<bool> DisjointSets(const TermSet& a, const TermSet& b,
                                    int depth);

  // --- Strings --------------------------------------------------------
  absl::StatusOr<RegexEntry*> GetRegex(const RegexRef& r);
  absl::StatusOr<const CharDfa*> RegexDfa(const RegexRef& r);
  // The string contents `c` allows (lengths only when `with_length`).
  absl::StatusOr<CharDfa> StringDfa(const StringC& c, bool with_length);
  // The names every propertyNames schema allows; nullopt when there are
  // none.
  absl::StatusOr<std::optional<CharDfa>> NamesDfa(
      const std::vector<TermSet>& names);

  // --- Emission -------------------------------------------------------
  // A reference to the rule for values satisfying every term of `ts` at
  // nesting `depth`, made (and queued for Run) on first use.
  int32_t ValueRef(const TermSet& ts, int depth);
  absl::Status EmitRule(const TermSet& ts, int depth, int32_t rule);
  absl::StatusOr<int32_t> EmitAlt(const SimpleSchema& s, int depth);
  absl::StatusOr<int32_t> NumberExpr(const SimpleSchema& s);
  absl::StatusOr<int32_t> StringExpr(const SimpleSchema& s);
  absl::StatusOr<int32_t> ArrayExpr(const ArrayC& a, int depth);
  absl::StatusOr<int32_t> ContainsArray(const ArrayC& a, int depth);
  absl::StatusOr<int32_t> UniqueArray(const ArrayC& a, int depth);
  // Every value `ts` allows, when they are few and listed (enum, const,
  // null, booleans); nullopt otherwise.
  absl::StatusOr<std::optional<std::vector<const Json*>>> FiniteValues(
      const TermSet& ts);
  absl::StatusOr<int32_t> ObjectExpr(const ObjectC& o, int depth);
  // The items allowed at position `i` (the prefix schema, else the rest).
  const TermSet& ItemTerms(const ArrayC& a, size_t i) const {
    return i < a.prefix.size() ? a.prefix[i] : a.rest;
  }
  std::string HintFor(const TermSet& ts) const;

  SchemaDoc& doc_;
  const ConvertOptions& opt_;
  uint32_t ticks_ = 0;
  JsonEmitter e_;
  std::vector<DroppedKeyword>* dropped_;
  std::set<std::pair<std::string, std::string>> dropped_seen_;

  std::vector<SimpleSchema> fragments_;
  std::map<int32_t, int32_t> own_fragment_;
  std::map<std::pair<int32_t, bool>, Dnf> expanded_;
  std::set<std::pair<int32_t, bool>> expanding_;
  int expand_depth_ = 0;
  std::map<Alt, std::unique_ptr<SimpleSchema>> merged_;
  std::map<std::string, std::unique_ptr<RegexEntry>> regexes_;
  std::map<std::string, int32_t> string_rules_;
  std::map<std::string, int32_t> number_rules_;
  std::map<std::pair<TermSet, int>, int32_t> value_rules_;
  std::deque<std::tuple<TermSet, int, int32_t>> queue_;
  // While set (proving disjointness), a check that narrowed formats make
  // inexact fails instead of answering false.
  bool exact_checks_ = false;
};

// ===================================================================== Policy

// The compile's deadline passing says nothing about a keyword: it must not
// become a refusal (strict) or a drop (lenient), which callers would cache
// as the schema's verdict. Unsupported(loc, keyword, status) passes it
// through; sites that compose their own reason check it first.
bool IsDeadline(const absl::Status& s) {
  return s.code() == absl::StatusCode::kDeadlineExceeded;
}

absl::Status Converter::Unsupported(int32_t loc, absl::string_view keyword,
                                    const absl::Status& cause) {
  if (IsDeadline(cause)) return cause;
  return Unsupported(loc, keyword, cause.message());
}

absl::Status Converter::Unsupported(int32_t loc, absl::string_view keyword,
                                    absl::string_view reason) {
  std::string where = Where(loc, keyword);
  if (opt_.strict) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot enforce \"", keyword, "\" at ", where, ": ",
                     reason, " (lenient mode would drop it)"));
  }
  if (dropped_seen_.emplace(std::string(keyword), where).second) {
    dropped_->push_back({std::string(keyword), where, std::string(reason)});
  }
  return absl::OkStatus();
}

absl::Status Converter::CheckBudget() {
  if (static_cast<int64_t>(e_.g().exprs.size()) > opt_.max_exprs ||
      static_cast<int64_t>(e_.g().rules.size()) > opt_.max_rules) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the grammar for this schema grows past ", opt_.max_rules,
                     " rules or ", opt_.max_exprs, " expressions"));
  }
  return opt_.dfa.CheckDeadline();
}

// ====================================================================== Terms

int32_t Converter::Alias(int32_t loc) {
  // Follows locations that are nothing but a $ref, so that every path to a
  // schema shares one rule.
  for (int hops = 0; hops < 64; ++hops) {
    const Json& n = doc_.node(loc);
    if (!n.is_object()) return loc;
    auto ref = n.find("$ref");
    if (ref == n.end() || !ref->is_string()) return loc;
    if (doc_.draft() >= Draft::k2019) {
      for (auto it = n.begin(); it != n.end(); ++it) {
        if (it.key() != "$ref" && IsKnownKeyword(it.key())) return loc;
      }
    }
    absl::StatusOr<int32_t> target =
        doc_.ResolveRef(loc, ref->get_ref<const std::string&>());
    if (!target.ok()) return loc;
    loc = *target;
  }
  return loc;
}

TermSet Converter::Canon(TermSet ts) {
  TermSet out;
  for (Term t : ts) {
    t.loc = Alias(t.loc);
    const Json& n = doc_.node(t.loc);
    if (n.is_boolean()) {
      if (n.get<bool>() != t.neg) continue;  // true
      return FalseSet();
    }
    if (n.is_object() && n.empty()) {
      if (!t.neg) continue;
      return FalseSet();
    }
    out.push_back(t);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i].loc == out[i + 1].loc) return FalseSet();  // x and not x
  }
  return out;
}

// ================================================================= Expansion

int32_t Converter::AddFragment(SimpleSchema s) {
  fragments_.push_back(std::move(s));
  return static_cast<int32_t>(fragments_.size()) - 1;
}

absl::StatusOr<int32_t> Converter::OwnFragment(int32_t loc) {
  auto it = own_fragment_.find(loc);
  if (it != own_fragment_.end()) return it->second;
  SimpleSchema s;
  bool any = false;
  if (absl::Status st = ParseOwn(loc, &s, &any); !st.ok()) return st;
  int32_t id = any ? AddFragment(std::move(s)) : -1;
  own_fragment_[loc] = id;
  return id;
}

absl::StatusOr<SimpleSchema> Converter::OwnCopy(int32_t loc) {
  absl::StatusOr<int32_t> own = OwnFragment(loc);
  if (!own.ok()) return own.status();
  return *own >= 0 ? fragments_[*own] : SimpleSchema{};
}

absl::StatusOr<Dnf> Converter::Product(const Dnf& a, const Dnf& b) {
  if (static_cast<int64_t>(a.size()) * static_cast<int64_t>(b.size()) >
      int64_t{opt_.max_alternatives} * 8) {
    return absl::ResourceExhaustedError(
        absl::StrCat("combining allOf/anyOf/oneOf gives more than ",
                     opt_.max_alternatives, " alternatives"));
  }
  std::set<Alt> seen;
  Dnf out;
  for (const Alt& x : a) {
    for (const Alt& y : b) {
      Alt z;
      std::set_union(x.begin(), x.end(), y.begin(), y.end(),
                     std::back_inserter(z));
      uint8_t types = kAllT;
      for (int32_t f : z) types &= fragments_[f].types;
      if (types == 0) continue;  // contradictory types: nothing to keep
      if (seen.insert(z).second) out.push_back(std::move(z));
    }
  }
  if (static_cast<int32_t>(out.size()) > opt_.max_alternatives) {
    return absl::ResourceExhaustedError(
        absl::StrCat("combining allOf/anyOf/oneOf gives more than ",
                     opt_.max_alternatives, " alternatives"));
  }
  return out;
}

absl::StatusOr<Dnf> Converter::Union(std::vector<Dnf> parts) {
  Dnf all;
  std::set<Alt> seen;
  for (Dnf& p : parts) {
    for (Alt& a : p) {
      if (seen.insert(a).second) all.push_back(std::move(a));
    }
  }
  // An alternative that includes another's fragments is implied by it.
  std::sort(all.begin(), all.end(),
            [](const Alt& x, const Alt& y) { return x.size() < y.size(); });
  Dnf out;
  for (Alt& a : all) {
    bool absorbed = false;
    if (out.size() < 512) {
      for (const Alt& kept : out) {
        if (std::includes(a.begin(), a.end(), kept.begin(), kept.end())) {
          absorbed = true;
          break;
        }
      }
    }
    if (!absorbed) out.push_back(std::move(a));
  }
  if (static_cast<int32_t>(out.size()) > opt_.max_alternatives) {
    return absl::ResourceExhaustedError(
        absl::StrCat("combining allOf/anyOf/oneOf gives more than ",
                     opt_.max_alternatives, " alternatives"));
  }
  return out;
}

absl::StatusOr<int32_t> Converter::RefTarget(int32_t loc) {
  const Json& ref = doc_.node(loc)["$ref"];
  if (!ref.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("$ref at ", Where(loc, "$ref"), " is not a string"));
  }
  absl::StatusOr<int32_t> target =
      doc_.ResolveRef(loc, ref.get_ref<const std::string&>());
  if (!target.ok()) {
    return absl::Status(
        target.status().code(),
        absl::StrCat(Where(loc, "$ref"), ": ", target.status().message()));
  }
  return *target;
}

absl::StatusOr<int32_t> Converter::DynamicRefTarget(int32_t loc) {
  const Json& ref = doc_.node(loc)["$dynamicRef"];
  if (!ref.is_string()) {
    if (absl::Status s = Unsupported(loc, "$dynamicRef", "must be a string");
        !s.ok()) {
      return s;
    }
    return -1;
  }
  const std::string& text = ref.get_ref<const std::string&>();
  absl::StatusOr<int32_t> target = doc_.ResolveRef(loc, text);
  if (!target.ok()) {
    return absl::Status(target.status().code(),
                        absl::StrCat(Where(loc, "$dynamicRef"), ": ",
                                     target.status().message()));
  }
  // It resolves like $ref unless its target is a $dynamicAnchor of the same
  // name, which the dynamic scope may override: only when no other
  // $dynamicAnchor of that name exists anywhere is the target certain.
  const size_t hash = text.find('#');
  const std::string name =
      hash == std::string::npos ? "" : text.substr(hash + 1);
  const Json& node = doc_.node(*target);
  const auto anchor =
      node.is_object() ? node.find("$dynamicAnchor") : node.end();
  if (!name.empty() && name[0] != '/' && node.is_object() &&
      anchor != node.end() && *anchor == name &&
      doc_.DynamicAnchorCount(name) > 1) {
    if (absl::Status s = Unsupported(
            loc, "$dynamicRef",
            absl::StrCat(
                "several $dynamicAnchor \"", name,
                "\" exist, so the target depends on the dynamic scope"));
        !s.ok()) {
      return s;
    }
    return -1;
  }
  return *target;
}

absl::StatusOr<Dnf> Converter::Expand(int32_t loc, bool neg) {
  auto key = std::make_pair(loc, neg);
  auto it = expanded_.find(key);
  if (it != expanded_.end()) return it->second;
  if (!expanding_.insert(key).second) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the schema at ", Where(loc, ""),
        " refers to itself through allOf/anyOf/oneOf/$ref without a property "
        "or item in between, which no finite value can satisfy"));
  }
  if (++expand_depth_ > kMaxExpandDepth) {
    --expand_depth_;
    expanding_.erase(key);
    return absl::ResourceExhaustedError(
        "schemas nested too deeply through allOf/anyOf/oneOf/$ref");
  }
  absl::StatusOr<Dnf> d = ExpandUncached(loc, neg);
  --expand_depth_;
  expanding_.erase(key);
  if (!d.ok()) return d.status();
  expanded_.emplace(key, *d);
  return d;
}

absl::StatusOr<Dnf> Converter::ExpandUncached(int32_t loc, bool neg) {
  if (absl::Status s = CheckBudget(); !s.ok()) return s;
  const Json& n = doc_.node(loc);
  if (n.is_boolean()) {
    return n.get<bool>() != neg ? Dnf{Alt{}} : Dnf{};
  }
  if (!n.is_object()) {
    if (absl::Status s =
            Unsupported(loc, "", "a schema must be an object or a boolean");
        !s.ok()) {
      return s;
    }
    return neg ? Dnf{} : Dnf{Alt{}};  // lenient: read as `true`
  }
  if (n.contains("$ref") && doc_.draft() <= Draft::k7) {
    // Before 2019-09, $ref replaces the schema it stands in.
    absl::StatusOr<int32_t> target = RefTarget(loc);
    if (!target.ok()) return target.status();
    return Expand(*target, neg);
  }
  return neg ? ExpandNegative(loc) : ExpandPositive(loc);
}

absl::StatusOr<Dnf> Converter::ExpandSet(const TermSet& ts) {
  Dnf d{Alt{}};
  for (Term t : ts) {
    absl::StatusOr<Dnf> x = Expand(t.loc, t.neg);
    if (!x.ok()) return x.status();
    absl::StatusOr<Dnf> p = Product(d, *x);
    if (!p.ok()) return p.status();
    d = *std::move(p);
  }
  return d;
}

absl::StatusOr<Dnf> Converter::ExpandPositive(int32_t loc) {
  const Json& n = doc_.node(loc);
  absl::StatusOr<int32_t> own = OwnFragment(loc);
  if (!own.ok()) return own.status();
  Dnf d = *own >= 0 ? Dnf{Alt{*own}} : Dnf{Alt{}};
  auto times = [&](absl::StatusOr<Dnf> x) -> absl::Status {
    if (!x.ok()) return x.status();
    absl::StatusOr<Dnf> p = Product(d, *x);
    if (!p.ok()) return p.status();
    d = *std::move(p);
    return absl::OkStatus();
  };
  auto each_child =
      [&](const char* key,
          const std::function<absl::Status(int32_t)>& fn) -> absl::Status {
    auto it = n.find(key);
    if (it == n.end()) return absl::OkStatus();
    if (!it->is_array() || it->empty()) {
      return Unsupported(loc, key, "must be a non-empty array of schemas");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      if (absl::Status s = fn(doc_.Child(loc, key, i)); !s.ok()) return s;
    }
    return absl::OkStatus();
  };
  absl::Status s =
      each_child("allOf", [&](int32_t c) { return times(Expand(c, false)); });
  if (!s.ok()) return s;
  if (n.contains("$ref")) {
    absl::StatusOr<int32_t> target = RefTarget(loc);
    if (!target.ok()) return target.status();
    if (absl::Status st = times(Expand(*target, false)); !st.ok()) return st;
  }
  if (n.contains("$dynamicRef")) {
    absl::StatusOr<int32_t> target = DynamicRefTarget(loc);
    if (!target.ok()) return target.status();
    if (*target >= 0) {
      if (absl::Status st = times(Expand(*target, false)); !st.ok()) return st;
    }
  }
  if (n.contains("$recursiveRef")) {
    if (absl::Status st = Unsupported(loc, "$recursiveRef",
                                      "dynamic references are not supported");
        !st.ok()) {
      return st;
    }
  }
  if (n.contains("anyOf")) {
    std::vector<Dnf> branches;
    s = each_child("anyOf", [&](int32_t c) -> absl::Status {
      absl::StatusOr<Dnf> x = Expand(c, false);
      if (!x.ok()) return x.status();
      branches.push_back(*std::move(x));
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    if (!branches.empty()) {
      if (absl::Status st = times(Union(std::move(branches))); !st.ok())
        return st;
    }
  }
  if (n.contains("oneOf")) {
    const Json& one = n["oneOf"];
    if (!one.is_array() || one.empty()) {
      if (absl::Status st =
              Unsupported(loc, "oneOf", "must be a non-empty array of schemas");
          !st.ok()) {
        return st;
      }
    } else {
      absl::StatusOr<Dnf> x = ExpandOneOf(loc, d);
      if (!x.ok()) return x.status();
      d = *std::move(x);
    }
  }
  if (n.contains("not")) {
    if (absl::Status st = times(Expand(doc_.Child(loc, "not"), true)); !st.ok())
      return st;
  }
  if (n.contains("if")) {
    const int32_t cond = doc_.Child(loc, "if");
    absl::StatusOr<Dnf> yes = Expand(cond, false);
    absl::StatusOr<Dnf> no = Expand(cond, true);
    if (!yes.ok()) return yes.status();
    if (!no.ok()) return no.status();
    absl::StatusOr<Dnf> then_d = n.contains("then")
                                     ? Expand(doc_.Child(loc, "then"), false)
                                     : Dnf{Alt{}};
    absl::StatusOr<Dnf> else_d = n.contains("else")
                                     ? Expand(doc_.Child(loc, "else"), false)
                                     : Dnf{Alt{}};
    if (!then_d.ok()) return then_d.status();
    if (!else_d.ok()) return else_d.status();
    absl::StatusOr<Dnf> a = Product(*yes, *then_d);
    absl::StatusOr<Dnf> b = Product(*no, *else_d);
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    if (absl::Status st = times(Union({*std::move(a), *std::move(b)}));
        !st.ok())
      return st;
  }
  // dependentRequired / dependentSchemas / dependencies: for each trigger
  // property, either it is absent or it is present with what it demands.
  for (const char* key :
       {"dependentRequired", "dependentSchemas", "dependencies"}) {
    auto it = n.find(key);
    if (it == n.end()) continue;
    if (!it->is_object()) {
      if (absl::Status st = Unsupported(loc, key, "must be an object");
          !st.ok())
        return st;
      continue;
    }
    for (auto dep = it->begin(); dep != it->end(); ++dep) {
      SimpleSchema absent;
      absent.object.rules.push_back(
          KeyRule{{{dep.key(), FalseSet()}}, {}, false, {}});
      SimpleSchema present;
      present.object.required.push_back(dep.key());
      Dnf present_d;
      if (dep->is_array()) {
        bool ok = true;
        for (const Json& name : *dep) {
          if (!name.is_string())
            ok = false;
          else
            present.object.required.push_back(name.get<std::string>());
        }
        if (!ok) {
          if (absl::Status st =
                  Unsupported(loc, key, "lists must hold property names");
              !st.ok()) {
            return st;
          }
          continue;
        }
        present_d = Single(std::move(present));
      } else if (std::string(key) != "dependentRequired") {
        absl::StatusOr<Dnf> sub =
            Expand(doc_.Child(loc, key, dep.key()), false);
        if (!sub.ok()) return sub.status();
        absl::StatusOr<Dnf> p = Product(Single(std::move(present)), *sub);
        if (!p.ok()) return p.status();
        present_d = *std::move(p);
      } else {
        if (absl::Status st =
                Unsupported(loc, key, "values must be arrays of names");
            !st.ok()) {
          return st;
        }
        continue;
      }
      if (absl::Status st =
              times(Union({Single(std::move(absent)), present_d}));
          !st.ok()) {
        return st;
      }
    }
  }
  return d;
}

absl::StatusOr<Dnf> Converter::ExpandOneOf(int32_t loc, const Dnf& context) {
  const Json& branches = doc_.node(loc)["oneOf"];
  const size_t k = branches.size();
  std::vector<int32_t> locs;
  std::vector<Dnf> in_context;
  for (size_t i = 0; i < k; ++i) {
    locs.push_back(doc_.Child(loc, "oneOf", i));
    absl::StatusOr<Dnf> x = Expand(locs.back(), false);
    if (!x.ok()) return x.status();
    absl::StatusOr<Dnf> p = Product(context, *x);
    if (!p.ok()) return p.status();
    in_context.push_back(*std::move(p));
  }
  // Provably disjoint branches make oneOf an anyOf.
  bool disjoint = true;
  for (size_t i = 0; i < k && disjoint; ++i) {
    for (size_t j = i + 1; j < k && disjoint; ++j) {
      for (const Alt& a : in_context[i]) {
        for (const Alt& b : in_context[j]) {
          absl::StatusOr<const SimpleSchema*> ma = Merge(a);
          absl::StatusOr<const SimpleSchema*> mb = Merge(b);
          if (!ma.ok()) return ma.status();
          if (!mb.ok()) return mb.status();
          absl::StatusOr<bool> d = Disjoint(**ma, **mb, 0);
          if (!d.ok() || !*d) {
            disjoint = false;
            break;
          }
        }
        if (!disjoint) break;
      }
    }
  }
  if (disjoint) return Union(in_context);
  // Otherwise exactly one branch holds: branch i and not the others.
  std::vector<Dnf> exact;
  absl::Status failure;
  for (size_t i = 0; i < k && failure.ok(); ++i) {
    Dnf d = in_context[i];
    for (size_t j = 0; j < k && failure.ok(); ++j) {
      if (j == i) continue;
      absl::StatusOr<Dnf> no = Expand(locs[j], true);
      if (!no.ok()) {
        failure = no.status();
        break;
      }
      absl::StatusOr<Dnf> p = Product(d, *no);
      if (!p.ok()) {
        failure = p.status();
        break;
      }
      d = *std::move(p);
    }
    exact.push_back(std::move(d));
  }
  if (failure.ok()) {
    absl::StatusOr<Dnf> u = Union(std::move(exact));
    if (u.ok()) return u;
    failure = u.status();
  }
  if (IsDeadline(failure)) return failure;
  if (opt_.strict) {
    return absl::Status(
        failure.code(),
        absl::StrCat("cannot enforce \"oneOf\" at ", Where(loc, "oneOf"),
                     ": its branches may overlap, and excluding the others "
                     "failed: ",
                     failure.message()));
  }
  if (absl::Status s =
          Unsupported(loc, "oneOf", "branches may overlap; read as anyOf");
      !s.ok()) {
    return s;
  }
  return Union(in_context);
}

absl::StatusOr<Dnf> Converter::ExpandNegative(int32_t loc) {
  const Json& n = doc_.node(loc);
  std::vector<Dnf> parts;
  auto add = [&](absl::StatusOr<Dnf> x) -> absl::Status {
    if (!x.ok()) return x.status();
    parts.push_back(*std::move(x));
    return absl::OkStatus();
  };
  if (absl::Status s = add(NegOwn(loc)); !s.ok()) return s;
  auto children = [&](const char* key) {
    std::vector<int32_t> out;
    auto it = n.find(key);
    if (it != n.end() && it->is_array()) {
      for (size_t i = 0; i < it->size(); ++i)
        out.push_back(doc_.Child(loc, key, i));
    }
    return out;
  };
  for (int32_t c : children("allOf")) {
    if (absl::Status s = add(Expand(c, true)); !s.ok()) return s;
  }
  if (n.contains("$ref")) {
    absl::StatusOr<int32_t> target = RefTarget(loc);
    if (!target.ok()) return target.status();
    if (absl::Status s = add(Expand(*target, true)); !s.ok()) return s;
  }
  if (n.contains("$dynamicRef")) {
    absl::StatusOr<int32_t> target = DynamicRefTarget(loc);
    if (!target.ok()) return target.status();
    if (*target < 0) return Dnf{Alt{}};  // lenient: read as `true`
    if (absl::Status s = add(Expand(*target, true)); !s.ok()) return s;
  }
  if (n.contains("$recursiveRef")) {
    if (absl::Status s = Unsupported(loc, "$recursiveRef",
                                     "dynamic references are not supported");
        !s.ok()) {
      return s;
    }
    return Dnf{Alt{}};
  }
  if (n.contains("anyOf")) {
    Dnf none{Alt{}};
    for (int32_t c : children("anyOf")) {
      absl::StatusOr<Dnf> x = Expand(c, true);
      if (!x.ok()) return x.status();
      absl::StatusOr<Dnf> p = Product(none, *x);
      if (!p.ok()) return p.status();
      none = *std::move(p);
    }
    parts.push_back(std::move(none));
  }
  if (n.contains("oneOf")) {
    std::vector<int32_t> cs = children("oneOf");
    Dnf none{Alt{}};
    std::vector<Dnf> pos;
    for (int32_t c : cs) {
      absl::StatusOr<Dnf> x = Expand(c, true);
      absl::StatusOr<Dnf> y = Expand(c, false);
      if (!x.ok()) return x.status();
      if (!y.ok()) return y.status();
      absl::StatusOr<Dnf> p = Product(none, *x);
      if (!p.ok()) return p.status();
      none = *std::move(p);
      pos.push_back(*std::move(y));
    }
    parts.push_back(std::move(none));
    for (size_t i = 0; i < pos.size(); ++i) {
      for (size_t j = i + 1; j < pos.size(); ++j) {
        if (absl::Status s = add(Product(pos[i], pos[j])); !s.ok()) return s;
      }
    }
  }
  if (n.contains("not")) {
    if (absl::Status s = add(Expand(doc_.Child(loc, "not"), false)); !s.ok())
      return s;
  }
  if (n.contains("if")) {
    const int32_t cond = doc_.Child(loc, "if");
    absl::StatusOr<Dnf> yes = Expand(cond, false);
    absl::StatusOr<Dnf> no = Expand(cond, true);
    if (!yes.ok()) return yes.status();
    if (!no.ok()) return no.status();
    absl::StatusOr<Dnf> not_then =
        n.contains("then") ? Expand(doc_.Child(loc, "then"), true) : Dnf{};
    absl::StatusOr<Dnf> not_else =
        n.contains("else") ? Expand(doc_.Child(loc, "else"), true) : Dnf{};
    if (!not_then.ok()) return not_then.status();
    if (!not_else.ok()) return not_else.status();
    if (absl::Status s = add(Product(*yes, *not_then)); !s.ok()) return s;
    if (absl::Status s = add(Product(*no, *not_else)); !s.ok()) return s;
  }
  for (const char* key :
       {"dependentRequired", "dependentSchemas", "dependencies"}) {
    auto it = n.find(key);
    if (it == n.end() || !it->is_object()) continue;
    for (auto dep = it->begin(); dep != it->end(); ++dep) {
      if (dep->is_array()) {
        for (const Json& name : *dep) {
          if (!name.is_string()) continue;
          SimpleSchema s;
          s.types = kObjT;
          s.object.required.push_back(dep.key());
          s.object.rules.push_back(
              KeyRule{{{name.get<std::string>(), FalseSet()}}, {}, false, {}});
          parts.push_back(Single(std::move(s)));
        }
      } else if (std::string(key) != "dependentRequired") {
        SimpleSchema s;
        s.types = kObjT;
        s.object.required.push_back(dep.key());
        absl::StatusOr<Dnf> sub = Expand(doc_.Child(loc, key, dep.key()), true);
        if (!sub.ok()) return sub.status();
        if (absl::Status st = add(Product(Single(std::move(s)), *sub));
            !st.ok()) {
          return st;
        }
      }
    }
  }
  return Union(std::move(parts));
}

// ================================================================ Own keywords

absl::Status Converter::ParseOwn(int32_t loc, SimpleSchema* s, bool* any) {
  const Json& n = doc_.node(loc);
  auto bad = [&](const char* key, const auto& reason) {
    return Unsupported(loc, key, reason);  // a text, or a failure's status
  };
  auto decimal = [&](const char* key,
                     std::optional<Decimal>* out) -> absl::Status {
    out->reset();
    auto it = n.find(key);
    if (it == n.end() || it->is_boolean()) return absl::OkStatus();
    if (!it->is_number()) return bad(key, "must be a number");
    absl::StatusOr<Decimal> d = ParseDecimal(it->dump());
    if (!d.ok()) return bad(key, d.status().message());
    *out = *d;
    return absl::OkStatus();
  };
  auto count = [&](const char* key,
                   std::optional<int64_t>* out) -> absl::Status {
    out->reset();
    auto it = n.find(key);
    if (it == n.end()) return absl::OkStatus();
    *out = NonNegativeInt(*it);
    if (!*out) return bad(key, "must be a non-negative integer");
    return absl::OkStatus();
  };
#define GRAMMARD_RETURN(expr)                   \
  do {                                          \
    if (absl::Status st_ = (expr); !st_.ok()) { \
      return st_;                               \
    }                                           \
  } while (0)

  // type
  if (auto it = n.find("type"); it != n.end()) {
    uint8_t mask = 0;
    bool number = false, integer = false, ok = true;
    auto add = [&](const Json& t) {
      if (!t.is_string()) {
        ok = false;
        return;
      }
      const std::string& name = t.get_ref<const std::string&>();
      if (name == "null")
        mask |= kNullT;
      else if (name == "boolean")
        mask |= kBoolT;
      else if (name == "number")
        mask |= kNumT, number = true;
      else if (name == "integer")
        mask |= kNumT, integer = true;
      else if (name == "string")
        mask |= kStrT;
      else if (name == "array")
        mask |= kArrT;
      else if (name == "object")
        mask |= kObjT;
      else
        ok = false;
    };
    if (it->is_array()) {
      for (const Json& t : *it) add(t);
    } else {
      add(*it);
    }
    if (!ok) {
      GRAMMARD_RETURN(bad("type", "must name JSON types"));
    } else {
      s->types = mask;
      s->number.integer = integer && !number;
      s->number.integer_zero_fraction = doc_.draft() != Draft::k4;
      *any = true;
    }
  }
  // enum, const
  if (auto it = n.find("enum"); it != n.end()) {
    if (!it->is_array()) {
      GRAMMARD_RETURN(bad("enum", "must be an array"));
    } else {
      s->has_values = true;
      for (const Json& v : *it) {
        if (absl::Status st = Tick(); !st.ok()) return st;
        s->values.Add(&v);
      }
      *any = true;
    }
  }
  if (auto it = n.find("const"); it != n.end()) {
    // Of an enum beside it, the value as the enum writes it.
    const Json* kept = s->has_values ? s->values.Find(*it) : &*it;
    s->values = ValueList();
    if (kept != nullptr) s->values.Add(kept);
    s->has_values = true;
    *any = true;
  }
  // numbers
  {
    std::optional<Decimal> d;
    GRAMMARD_RETURN(decimal("minimum", &d));
    if (d) {
      const Json* ex =
          n.contains("exclusiveMinimum") ? &n["exclusiveMinimum"] : nullptr;
      s->number.lower = Bound{*d, ex && ex->is_boolean() && ex->get<bool>()};
    }
    GRAMMARD_RETURN(decimal("exclusiveMinimum", &d));
    if (d && (!s->number.lower || Compare(*d, s->number.lower->value) >= 0)) {
      s->number.lower = Bound{*d, true};
    }
    GRAMMARD_RETURN(decimal("maximum", &d));
    if (d) {
      const Json* ex =
          n.contains("exclusiveMaximum") ? &n["exclusiveMaximum"] : nullptr;
      s->number.upper = Bound{*d, ex && ex->is_boolean() && ex->get<bool>()};
    }
    GRAMMARD_RETURN(decimal("exclusiveMaximum", &d));
    if (d && (!s->number.upper || Compare(*d, s->number.upper->value) <= 0)) {
      s->number.upper = Bound{*d, true};
    }
    GRAMMARD_RETURN(decimal("multipleOf", &d));
    if (d) {
      if (d->IsZero() || d->negative) {
        GRAMMARD_RETURN(bad("multipleOf", "must be greater than 0"));
      } else {
        NumberConstraints probe;
        probe.multiple_of.push_back(*d);
        absl::StatusOr<CharDfa> dfa = NumberDfa(probe, opt_.dfa);
        if (!dfa.ok()) {
          GRAMMARD_RETURN(bad("multipleOf", dfa.status()));
        } else {
          s->number.multiple_of.push_back(*d);
        }
      }
    }
    if (!s->number.Unconstrained()) {
      s->number_loc = loc;
      *any = true;
    }
  }
  // strings
  {
    std::optional<int64_t> c;
    GRAMMARD_RETURN(count("minLength", &c));
    if (c) s->string.min_len = *c;
    GRAMMARD_RETURN(count("maxLength", &c));
    if (c) s->string.max_len = *c;
    if (s->string.HasLength()) s->string.length_loc = loc;
    // A string must match `r`'s regex (dropped, in lenient mode, when the
    // regex cannot be built).
    auto require = [&](RegexRef r) -> absl::Status {
      absl::StatusOr<RegexEntry*> entry = GetRegex(r);
      if (!entry.ok()) return bad(r.Keyword(), entry.status());
      s->string.must.push_back(std::move(r));
      return absl::OkStatus();
    };
    if (auto it = n.find("pattern"); it != n.end()) {
      if (!it->is_string()) {
        GRAMMARD_RETURN(bad("pattern", "must be a string"));
      } else {
        GRAMMARD_RETURN(
            require(RegexRef{RegexRef::kPattern, it->get<std::string>(), loc}));
      }
    }
    if (auto it = n.find("format"); it != n.end() && it->is_string()) {
      const std::string name = it->get<std::string>();
      FormatInfo info = LookupFormat(name);
      if (info.support == FormatSupport::kUnsupported) {
        GRAMMARD_RETURN(bad(
            "format", absl::StrCat("format \"", name, "\": ", info.reason)));
      } else if (info.support == FormatSupport::kEnforced) {
        GRAMMARD_RETURN(require(RegexRef{RegexRef::kFormat, name, loc}));
      }
    }
    if (auto it = n.find("contentMediaType");
        it != n.end() && AssertsContent("contentMediaType", *it)) {
      GRAMMARD_RETURN(bad("contentMediaType",
                          "JSON documents inside strings are not enforced"));
    }
    if (auto it = n.find("contentEncoding");
        it != n.end() && AssertsContent("contentEncoding", *it)) {
      GRAMMARD_RETURN(
          require(RegexRef{RegexRef::kEncoding, it->get<std::string>(), loc}));
    }
    if (!s->string.Unconstrained()) *any = true;
  }
  // arrays
  {
    ArrayC& a = s->array;
    bool has_prefix = false;
    if (auto it = n.find("prefixItems"); it != n.end()) {
      if (!it->is_array()) {
        GRAMMARD_RETURN(bad("prefixItems", "must be an array of schemas"));
      } else {
        for (size_t i = 0; i < it->size(); ++i) {
          a.prefix.push_back(One(doc_.Child(loc, "prefixItems", i)));
        }
        has_prefix = true;
      }
    }
    if (auto it = n.find("items"); it != n.end()) {
      if (it->is_array()) {
        if (has_prefix) {
          GRAMMARD_RETURN(bad("items", "an array of items beside prefixItems"));
        } else {
          for (size_t i = 0; i < it->size(); ++i) {
            a.prefix.push_back(One(doc_.Child(loc, "items", i)));
          }
          has_prefix = true;
          if (n.contains("additionalItems"))
            a.rest = One(doc_.Child(loc, "additionalItems"));
        }
      } else if (it->is_object() || it->is_boolean()) {
        a.rest = One(doc_.Child(loc, "items"));
      } else {
        GRAMMARD_RETURN(bad("items", "must be a schema"));
      }
    }
    std::optional<int64_t> c;
    GRAMMARD_RETURN(count("minItems", &c));
    if (c) a.min_items = *c;
    GRAMMARD_RETURN(count("maxItems", &c));
    if (c) a.max_items = *c;
    if (a.min_items > 0 || a.max_items >= 0) a.loc = loc;
    if (auto it = n.find("uniqueItems"); it != n.end()) {
      if (!it->is_boolean()) {
        GRAMMARD_RETURN(bad("uniqueItems", "must be a boolean"));
      } else if (it->get<bool>()) {
        a.unique = true;
        a.unique_loc = loc;
      }
    }
    if (n.contains("contains")) {
      ContainsC cc;
      cc.schema = One(doc_.Child(loc, "contains"));
      cc.loc = loc;
      GRAMMARD_RETURN(count("minContains", &c));
      if (c) cc.min = *c;
      GRAMMARD_RETURN(count("maxContains", &c));
      if (c) cc.max = *c;
      if (cc.min > 0 || cc.max >= 0) a.contains.push_back(std::move(cc));
    }
    if (has_prefix || !a.rest.empty() || a.min_items > 0 || a.max_items >= 0 ||
        a.unique || !a.contains.empty()) {
      *any = true;
    }
  }
  // objects
  {
    ObjectC& o = s->object;
    o.loc = loc;
    KeyRule rule;
    bool has_rule = false, rule_ok = true;
    if (auto it = n.find("properties"); it != n.end()) {
      if (!it->is_object()) {
        GRAMMARD_RETURN(bad("properties", "must be an object"));
        rule_ok = false;
      } else {
        for (auto p = it->begin(); p != it->end(); ++p) {
          rule.props.emplace_back(p.key(),
                                  One(doc_.Child(loc, "properties", p.key())));
        }
        has_rule = true;
      }
    }
    if (auto it = n.find("patternProperties"); it != n.end()) {
      if (!it->is_object()) {
        GRAMMARD_RETURN(bad("patternProperties", "must be an object"));
        rule_ok = false;
      } else {
        for (auto p = it->begin(); p != it->end(); ++p) {
          RegexRef r{RegexRef::kPattern, p.key(), loc};
          absl::StatusOr<RegexEntry*> entry = GetRegex(r);
          if (!entry.ok()) {
            // Without the pattern the keys it governs cannot be told apart
            // from additional ones: drop the whole member rule.
            GRAMMARD_RETURN(bad("patternProperties", entry.status()));
            rule_ok = false;
            break;
          }
          rule.patterns.emplace_back(
              std::move(r), One(doc_.Child(loc, "patternProperties", p.key())));
        }
        has_rule = true;
      }
    }
    if (n.contains("additionalProperties")) {
      TermSet add = One(doc_.Child(loc, "additionalProperties"));
      if (!add.empty()) {
        rule.has_additional = true;
        rule.additional = std::move(add);
      }
      has_rule = true;
    }
    if (has_rule && rule_ok) {
      o.rules.push_back(std::move(rule));
      *any = true;
    }
    if (auto it = n.find("required"); it != n.end() && !it->is_boolean()) {
      // (A boolean is draft 3's per-property flag, which later drafts ignore.)
      bool ok = it->is_array();
      if (ok) {
        for (const Json& r : *it) ok = ok && r.is_string();
      }
      if (!ok) {
        GRAMMARD_RETURN(bad("required", "must be an array of names"));
      } else {
        for (const Json& r : *it) {
          const std::string& name = r.get_ref<const std::string&>();
          if (std::find(o.required.begin(), o.required.end(), name) ==
              o.required.end()) {
            o.required.push_back(name);
          }
        }
        if (!o.required.empty()) *any = true;
      }
    }
    std::optional<int64_t> c;
    GRAMMARD_RETURN(count("minProperties", &c));
    if (c) o.min_props = *c;
    GRAMMARD_RETURN(count("maxProperties", &c));
    if (c) o.max_props = *c;
    if (o.min_props > 0 || o.max_props >= 0) *any = true;
    if (n.contains("propertyNames")) {
      TermSet names = One(doc_.Child(loc, "propertyNames"));
      if (!names.empty()) {
        o.names.push_back(std::move(names));
        *any = true;
      }
    }
  }
  // unevaluated*: without in-place applicators beside them, the members and
  // items evaluated are exactly those this schema's own keywords cover, so
  // they read as additionalProperties / the items after the prefix. With
  // only allOf and $ref (which always apply), the members evaluated are
  // still known statically: see EvaluatedMembers.
  bool applicators = false;
  for (const char* key :
       {"allOf", "anyOf", "oneOf", "if", "then", "else", "$ref", "$dynamicRef",
        "$recursiveRef", "dependentSchemas", "dependencies"}) {
    applicators = applicators || n.contains(key);
  }
  if (auto it = n.find("unevaluatedProperties");
      applicators && it != n.end() &&
      !((it->is_boolean() && it->get<bool>()) ||
        (it->is_object() && it->empty()))) {
    EvaluatedMembers ev;
    if (absl::Status st = CollectEvaluated(loc, 0, &ev); !st.ok()) return st;
    if (ev.dynamic) {
      GRAMMARD_RETURN(bad("unevaluatedProperties",
                          "unevaluatedProperties beside anyOf/oneOf/if/"
                          "dependentSchemas/$dynamicRef is not supported"));
    } else if (!ev.all) {
      KeyRule rule;
      for (const std::string& name : ev.names)
        rule.props.emplace_back(name, TermSet{});
      for (const RegexRef& r : ev.patterns)
        rule.patterns.emplace_back(r, TermSet{});
      rule.has_additional = true;
      rule.additional = One(doc_.Child(loc, "unevaluatedProperties"));
      s->object.rules.push_back(std::move(rule));
      *any = true;
    }
  }
  for (const char* key : {"unevaluatedProperties", "unevaluatedItems"}) {
    auto it = n.find(key);
    if (it == n.end()) continue;
    if ((it->is_boolean() && it->get<bool>()) ||
        (it->is_object() && it->empty())) {
      continue;
    }
    const bool items = std::string(key) == "unevaluatedItems";
    if (!items && applicators) continue;  // handled above
    // contains marks the items it matches as evaluated.
    if (applicators || (items && n.contains("contains"))) {
      GRAMMARD_RETURN(bad(key,
                          "unevaluated* beside allOf/anyOf/oneOf/if/$ref/"
                          "dependentSchemas/contains is not supported"));
      continue;
    }
    const TermSet rest = One(doc_.Child(loc, key));
    if (items) {
      auto it_items = n.find("items");
      const bool all_evaluated =
          (it_items != n.end() && !it_items->is_array()) ||
          (it_items != n.end() && n.contains("additionalItems"));
      if (!all_evaluated) s->array.rest = rest;
    } else if (!n.contains("additionalProperties")) {
      if (s->object.rules.empty()) s->object.rules.emplace_back();
      s->object.rules.back().has_additional = true;
      s->object.rules.back().additional = rest;
    }
    *any = true;
  }
  return absl::OkStatus();
}

absl::Status Converter::CollectEvaluated(int32_t loc, int depth,
                                         EvaluatedMembers* ev) {
  const Json& n = doc_.node(loc);
  if (!n.is_object()) return absl::OkStatus();
  if (depth > 32) {
    ev->dynamic = true;  // deep or cyclic $ref chains: give up, refuse
    return absl::OkStatus();
  }
  for (const char* key :
       {"anyOf", "oneOf", "if", "then", "else", "dependentSchemas",
        "dependencies", "$dynamicRef", "$recursiveRef"}) {
    ev->dynamic = ev->dynamic || n.contains(key);
  }
  // Both cover every member of the object they apply to.
  ev->all = ev->all || n.contains("additionalProperties") ||
            (depth > 0 && n.contains("unevaluatedProperties"));
  if (auto it = n.find("properties"); it != n.end() && it->is_object()) {
    for (auto p = it->begin(); p != it->end(); ++p)
      ev->names.push_back(p.key());
  }
  if (auto it = n.find("patternProperties"); it != n.end() && it->is_object()) {
    for (auto p = it->begin(); p != it->end(); ++p) {
      ev->patterns.push_back(RegexRef{RegexRef::kPattern, p.key(), loc});
    }
  }
  if (auto it = n.find("allOf"); it != n.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      absl::Status s =
          CollectEvaluated(doc_.Child(loc, "allOf", i), depth + 1, ev);
      if (!s.ok()) return s;
    }
  }
  if (n.contains("$ref")) {
    absl::StatusOr<int32_t> target = RefTarget(loc);
    if (!target.ok()) return target.status();
    return CollectEvaluated(*target, depth + 1, ev);
  }
  return absl::OkStatus();
}

absl::StatusOr<Dnf> Converter::NegOwn(int32_t loc) {
  const Json& n = doc_.node(loc);
  static const char* const kGroups[] = {"type",
                                        "enum",
                                        "const",
                                        "minimum",
                                        "maximum",
                                        "exclusiveMinimum",
                                        "exclusiveMaximum",
                                        "multipleOf",
                                        "minLength",
                                        "maxLength",
                                        "pattern",
                                        "format",
                                        "items",
                                        "minItems",
                                        "maxItems",
                                        "uniqueItems",
                                        "contains",
                                        "properties",
                                        "required",
                                        "minProperties",
                                        "maxProperties",
                                        "propertyNames",
                                        "contentEncoding",
                                        "contentMediaType",
                                        "unevaluatedProperties",
                                        "unevaluatedItems"};
  std::vector<Dnf> parts;
  for (const char* key : kGroups) {
    bool present = n.contains(key);
    // Member and item keywords negate as one group each.
    if (std::string(key) == "items") {
      present = present || n.contains("prefixItems");
    } else if (std::string(key) == "properties") {
      present = present || n.contains("patternProperties") ||
                n.contains("additionalProperties");
    }
    if (!present) continue;
    absl::StatusOr<Dnf> d = NegKeyword(loc, key);
    if (!d.ok()) {
      if (opt_.strict) return d.status();
      // Lenient: a negation we cannot express is read as `true`, which
      // accepts more, never less.
      if (absl::Status s = Unsupported(loc, key, d.status()); !s.ok()) {
        return s;
      }
      return Dnf{Alt{}};
    }
    parts.push_back(*std::move(d));
  }
  return Union(std::move(parts));
}

absl::StatusOr<Dnf> Converter::NegKeyword(int32_t loc, const std::string& key) {
  const Json& n = doc_.node(loc);
  const Json& v = n.contains(key) ? n[key] : n;
  auto unsupported = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot enforce \"", key, "\" at ", Where(loc, key),
        " under a negation: ", why, " (lenient mode would drop the negation)"));
  };
  auto decimal = [&](const Json& x) -> std::optional<Decimal> {
    if (!x.is_number()) return std::nullopt;
    absl::StatusOr<Decimal> d = ParseDecimal(x.dump());
    if (!d.ok()) return std::nullopt;
    return *d;
  };
  SimpleSchema s;
  if (key == "type") {
    absl::StatusOr<SimpleSchema> own = OwnCopy(loc);
    if (!own.ok()) return own.status();
    const SimpleSchema& pos = *own;
    s.types = static_cast<uint8_t>(kAllT & ~pos.types);
    if (pos.number.integer && (pos.types & kNumT)) {
      s.types |= kNumT;
      s.number.not_multiple_of.push_back(*ParseDecimal("1"));
    }
    if (s.types == 0) return Dnf{};
    return Single(std::move(s));
  }
  if (key == "enum" || key == "const") {
    std::vector<const Json*> values;
    if (key == "const") {
      values.push_back(&v);
    } else if (v.is_array()) {
      for (const Json& x : v) values.push_back(&x);
    } else {
      return unsupported("enum must be an array");
    }
    for (const Json* x : values) {
      if (x->is_array() || x->is_object()) {
        return unsupported("excluding array or object values");
      }
      if (absl::Status st = Tick(); !st.ok()) return st;
      s.excluded.Add(x);
    }
    return Single(std::move(s));
  }
  if (key == "minimum" || key == "exclusiveMinimum" || key == "maximum" ||
      key == "exclusiveMaximum") {
    if (v.is_boolean()) return Dnf{};  // draft 4: read with minimum/maximum
    std::optional<Decimal> d = decimal(v);
    if (!d) return unsupported("not a number");
    const bool lower = key == "minimum" || key == "exclusiveMinimum";
    bool exclusive = key == "exclusiveMinimum" || key == "exclusiveMaximum";
    if (!exclusive) {
      const char* flag = lower ? "exclusiveMinimum" : "exclusiveMaximum";
      exclusive =
          n.contains(flag) && n[flag].is_boolean() && n[flag].get<bool>();
    }
    s.types = kNumT;
    // not (x >= d) is x < d; not (x > d) is x <= d; likewise above.
    if (lower) {
      s.number.upper = Bound{*d, !exclusive};
    } else {
      s.number.lower = Bound{*d, !exclusive};
    }
    return Single(std::move(s));
  }
  if (key == "multipleOf") {
    std::optional<Decimal> d = decimal(v);
    if (!d || d->IsZero() || d->negative)
      return unsupported("not a positive number");
    s.types = kNumT;
    s.number.not_multiple_of.push_back(*d);
    return Single(std::move(s));
  }
  auto bound = [&](const Json& x) -> absl::StatusOr<int64_t> {
    std::optional<int64_t> c = NonNegativeInt(x);
    if (!c) return unsupported("not a non-negative integer");
    return *c;
  };
  if (key == "minLength" || key == "maxLength" || key == "minItems" ||
      key == "maxItems" || key == "minProperties" || key == "maxProperties") {
    absl::StatusOr<int64_t> c = bound(v);
    if (!c.ok()) return c.status();
    const bool is_min = key.compare(0, 3, "min") == 0;
    if (is_min && *c == 0) return Dnf{};
    int64_t lo = is_min ? 0 : *c + 1;
    int64_t hi = is_min ? *c - 1 : -1;
    if (key == "minLength" || key == "maxLength") {
      s.types = kStrT;
      s.string.min_len = lo;
      s.string.max_len = hi;
      s.string.length_loc = loc;
    } else if (key == "minItems" || key == "maxItems") {
      s.types = kArrT;
      s.array.min_items = lo;
      s.array.max_items = hi;
    } else {
      s.types = kObjT;
      s.object.min_props = lo;
      s.object.max_props = hi;
    }
    return Single(std::move(s));
  }
  if (key == "pattern" || key == "format") {
    if (!v.is_string()) return unsupported("not a string");
    RegexRef r{key == "format" ? RegexRef::kFormat : RegexRef::kPattern,
               v.get<std::string>(), loc};
    if (r.kind == RegexRef::kFormat) {
      FormatInfo info = LookupFormat(r.text);
      if (info.support == FormatSupport::kUnknown) return Dnf{};
      if (info.support == FormatSupport::kUnsupported)
        return unsupported(info.reason);
      if (info.narrower) {
        return unsupported(absl::StrCat(
            "the grammar for format \"", r.text,
            "\" refuses some valid strings, so its complement is inexact"));
      }
    }
    absl::StatusOr<RegexEntry*> entry = GetRegex(r);
    if (IsDeadline(entry.status())) return entry.status();
    if (!entry.ok()) return unsupported(entry.status().message());
    s.types = kStrT;
    s.string.must_not.push_back(std::move(r));
    return Single(std::move(s));
  }
  if (key == "contentEncoding" || key == "contentMediaType") {
    if (!AssertsContent(key, v)) return Dnf{};  // an annotation, always true
    return unsupported("its grammar is narrower, so its complement is inexact");
  }
  if (key == "uniqueItems") {
    if (v.is_boolean() && !v.get<bool>()) return Dnf{};
    return unsupported("arrays with a repeated item");
  }
  if (key == "items") {
    absl::StatusOr<SimpleSchema> own = OwnCopy(loc);
    if (!own.ok()) return own.status();
    const SimpleSchema& pos = *own;
    std::vector<Dnf> alts;
    for (size_t i = 0; i < pos.array.prefix.size(); ++i) {
      if (pos.array.prefix[i].empty()) continue;
      SimpleSchema a;
      a.types = kArrT;
      a.array.min_items = static_cast<int64_t>(i) + 1;
      a.array.prefix.assign(i + 1, TermSet{});
      if (pos.array.prefix[i].size() != 1) {
        return unsupported("an item schema that is itself a conjunction");
      }
      const Term t = pos.array.prefix[i][0];
      a.array.prefix[i] = Canon({Term{t.loc, !t.neg}});
      alts.push_back(Single(std::move(a)));
    }
    if (!pos.array.rest.empty()) {
      if (!pos.array.prefix.empty() || pos.array.rest.size() != 1) {
        return unsupported("additional items after a tuple");
      }
      SimpleSchema a;
      a.types = kArrT;
      a.array.contains.push_back(ContainsC{
          Canon({Term{pos.array.rest[0].loc, !pos.array.rest[0].neg}}), 1, -1,
          loc});
      alts.push_back(Single(std::move(a)));
    }
    return Union(std::move(alts));
  }
  if (key == "contains") {
    absl::StatusOr<SimpleSchema> own = OwnCopy(loc);
    if (!own.ok()) return own.status();
    const SimpleSchema& pos = *own;
    std::vector<Dnf> alts;
    for (const ContainsC& c : pos.array.contains) {
      if (c.min > 0) {
        SimpleSchema a;
        a.types = kArrT;
        a.array.contains.push_back(ContainsC{c.schema, 0, c.min - 1, loc});
        alts.push_back(Single(std::move(a)));
      }
      if (c.max >= 0) {
        SimpleSchema a;
        a.types = kArrT;
        a.array.contains.push_back(ContainsC{c.schema, c.max + 1, -1, loc});
        alts.push_back(Single(std::move(a)));
      }
    }
    return Union(std::move(alts));
  }
  if (key == "properties") {
    if (n.contains("patternProperties")) {
      return unsupported("a member outside the declared patterns");
    }
    std::vector<Dnf> alts;
    if (n.contains("properties") && !n["properties"].is_object()) {
      return unsupported("properties must be an object");
    }
    // not additionalProperties: some undeclared member breaks it.
    if (n.contains("additionalProperties")) {
      const TermSet add = One(doc_.Child(loc, "additionalProperties"));
      if (add.size() > 1) {
        return unsupported("a conjunction as additionalProperties");
      }
      if (!add.empty()) {
        Witness w;
        w.loc = loc;
        w.value = IsFalseSet(add) ? TermSet{}
                                  : Canon({Term{add[0].loc, !add[0].neg}});
        if (n.contains("properties")) {
          for (auto p = n["properties"].begin(); p != n["properties"].end();
               ++p) {
            w.not_names.push_back(p.key());
          }
        }
        SimpleSchema a;
        a.types = kObjT;
        a.object.witnesses.push_back(std::move(w));
        alts.push_back(Single(std::move(a)));
      }
    }
    if (!n.contains("properties")) return Union(std::move(alts));
    for (auto p = v.begin(); p != v.end(); ++p) {
      TermSet value = One(doc_.Child(loc, "properties", p.key()));
      if (value.empty()) continue;
      if (value.size() != 1)
        return unsupported("a conjunction as a property schema");
      SimpleSchema a;
      a.types = kObjT;
      a.object.required.push_back(p.key());
      a.object.rules.push_back(
          KeyRule{{{p.key(), Canon({Term{value[0].loc, !value[0].neg}})}},
                  {},
                  false,
                  {}});
      alts.push_back(Single(std::move(a)));
    }
    return Union(std::move(alts));
  }
  if (key == "required") {
    if (v.is_boolean()) return Dnf{};
    if (!v.is_array()) return unsupported("required must be an array");
    std::vector<Dnf> alts;
    for (const Json& name : v) {
      if (!name.is_string()) return unsupported("required must list names");
      SimpleSchema a;
      a.types = kObjT;
      a.object.rules.push_back(
          KeyRule{{{name.get<std::string>(), FalseSet()}}, {}, false, {}});
      alts.push_back(Single(std::move(a)));
    }
    return Union(std::move(alts));
  }
  if (key == "propertyNames") {
    if (One(doc_.Child(loc, "propertyNames")).empty()) return Dnf{};
    return unsupported("a member whose name breaks propertyNames");
  }
  if (key == "unevaluatedProperties" || key == "unevaluatedItems") {
    if ((v.is_boolean() && v.get<bool>()) || (v.is_object() && v.empty()))
      return Dnf{};
    return unsupported("unevaluated* keywords are not supported");
  }
  return Dnf{};
}

// ======================================================== Merging & checking

absl::StatusOr<const SimpleSchema*> Converter::Merge(const Alt& alt) {
  auto it = merged_.find(alt);
  if (it != merged_.end()) return it->second.get();
  auto s = std::make_unique<SimpleSchema>();
  for (int32_t f : alt) {
    if (absl::Status st = Intersect(s.get(), fragments_[f]); !st.ok()) {
      return st;
    }
  }
  const SimpleSchema* out = s.get();
  merged_.emplace(alt, std::move(s));
  return out;
}

absl::Status Converter::Intersect(SimpleSchema* acc, const SimpleSchema& f) {
  acc->types &= f.types;
  NumberConstraints& num = acc->number;
  num.integer = num.integer || f.number.integer;
  num.integer_zero_fraction =
      num.integer_zero_fraction && f.number.integer_zero_fraction;
  if (f.number.lower) {
    int c = num.lower ? Compare(f.number.lower->value, num.lower->value) : 1;
    if (c > 0) num.lower = f.number.lower;
    if (c == 0 && f.number.lower->exclusive) num.lower->exclusive = true;
  }
  if (f.number.upper) {
    int c = num.upper ? Compare(f.number.upper->value, num.upper->value) : -1;
    if (c < 0) num.upper = f.number.upper;
    if (c == 0 && f.number.upper->exclusive) num.upper->exclusive = true;
  }
  for (const Decimal& m : f.number.multiple_of) {
    if (std::find(num.multiple_of.begin(), num.multiple_of.end(), m) ==
        num.multiple_of.end()) {
      num.multiple_of.push_back(m);
    }
  }
  num.not_multiple_of.insert(num.not_multiple_of.end(),
                             f.number.not_multiple_of.begin(),
                             f.number.not_multiple_of.end());
  num.excluded.insert(num.excluded.end(), f.number.excluded.begin(),
                      f.number.excluded.end());
  if (f.number_loc >= 0) acc->number_loc = f.number_loc;

  StringC& str = acc->string;
  str.min_len = std::max(str.min_len, f.string.min_len);
  if (f.string.max_len >= 0) {
    str.max_len = str.max_len < 0 ? f.string.max_len
                                  : std::min(str.max_len, f.string.max_len);
  }
  if (f.string.length_loc >= 0) str.length_loc = f.string.length_loc;
  str.must.insert(str.must.end(), f.string.must.begin(), f.string.must.end());
  str.must_not.insert(str.must_not.end(), f.string.must_not.begin(),
                      f.string.must_not.end());
  str.excluded.insert(str.excluded.end(), f.string.excluded.begin(),
                      f.string.excluded.end());

  ArrayC& arr = acc->array;
  const size_t n = std::max(arr.prefix.size(), f.array.prefix.size());
  std::vector<TermSet> prefix(n);
  for (size_t i = 0; i < n; ++i) {
    const TermSet& a = i < arr.prefix.size() ? arr.prefix[i] : arr.rest;
    const TermSet& b =
        i < f.array.prefix.size() ? f.array.prefix[i] : f.array.rest;
    prefix[i] = Canon(Join(a, b));
  }
  arr.prefix = std::move(prefix);
  arr.rest = Canon(Join(arr.rest, f.array.rest));
  arr.min_items = std::max(arr.min_items, f.array.min_items);
  if (f.array.max_items >= 0) {
    arr.max_items = arr.max_items < 0
                        ? f.array.max_items
                        : std::min(arr.max_items, f.array.max_items);
  }
  arr.contains.insert(arr.contains.end(), f.array.contains.begin(),
                      f.array.contains.end());
  if (arr.loc < 0) arr.loc = f.array.loc;
  if (f.array.unique) {
    arr.unique = true;
    arr.unique_loc = f.array.unique_loc;
  }

  ObjectC& obj = acc->object;
  obj.rules.insert(obj.rules.end(), f.object.rules.begin(),
                   f.object.rules.end());
  for (const std::string& r : f.object.required) {
    if (std::find(obj.required.begin(), obj.required.end(), r) ==
        obj.required.end()) {
      obj.required.push_back(r);
    }
  }
  obj.names.insert(obj.names.end(), f.object.names.begin(),
                   f.object.names.end());
  obj.min_props = std::max(obj.min_props, f.object.min_props);
  if (f.object.max_props >= 0) {
    obj.max_props = obj.max_props < 0
                        ? f.object.max_props
                        : std::min(obj.max_props, f.object.max_props);
  }
  if (obj.loc < 0) obj.loc = f.object.loc;
  obj.witnesses.insert(obj.witnesses.end(), f.object.witnesses.begin(),
                       f.object.witnesses.end());

  if (f.has_values) {
    if (acc->has_values) {
      ValueList kept;
      for (const Json* v : acc->values) {
        if (absl::Status st = Tick(); !st.ok()) return st;
        if (f.values.Contains(*v)) kept.Add(v);
      }
      acc->values = std::move(kept);
    } else {
      acc->values = f.values;
    }
    acc->has_values = true;
  }
  for (const Json* x : f.excluded) acc->excluded.Add(x);
  return absl::OkStatus();
}

absl::StatusOr<bool> Converter::ValidateTerms(const Json& v, const TermSet& ts,
                                              int depth) {
  if (depth > kMaxCheckDepth) {
    return absl::ResourceExhaustedError("value nested too deeply to check");
  }
  for (Term t : ts) {
    // A negated term is checked through its own (negative) expansion,
    // never as "the positive check failed": positive checks of some
    // formats are narrower than the format.
    absl::StatusOr<Dnf> d = Expand(t.loc, t.neg);
    if (!d.ok()) return d.status();
    bool ok = false;
    for (const Alt& alt : *d) {
      absl::StatusOr<const SimpleSchema*> s = Merge(alt);
      if (!s.ok()) return s.status();
      absl::StatusOr<bool> r = CheckValue(v, **s, depth + 1);
      if (!r.ok()) return r.status();
      if (*r) {
        ok = true;
        break;
      }
    }
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<std::optional<TermSet>> Converter::KeyValueTerms(
    const ObjectC& o, const std::string& key) {
  TermSet ts;
  const Json key_json = key;
  for (const KeyRule& rule : o.rules) {
    bool declared = false;
    for (const auto& [name, value] : rule.props) {
      if (name == key) {
        declared = true;
        ts = Join(ts, value);
      }
    }
    bool matched = false;
    for (const auto& [re, value] : rule.patterns) {
      absl::StatusOr<const CharDfa*> dfa = RegexDfa(re);
      if (!dfa.ok()) return dfa.status();
      if (Matches(**dfa, key)) {
        matched = true;
        ts = Join(ts, value);
      }
    }
    if (!declared && !matched && rule.has_additional)
      ts = Join(ts, rule.additional);
  }
  ts = Canon(std::move(ts));
  if (IsFalseSet(ts)) return std::optional<TermSet>();
  return std::optional<TermSet>(std::move(ts));
}

absl::StatusOr<bool> Converter::CheckValue(const Json& v, const SimpleSchema& s,
                                           int depth) {
  if (depth > kMaxCheckDepth) {
    return absl::ResourceExhaustedError("value nested too deeply to check");
  }
  const uint8_t type = TypeOf(v);
  if (!(s.types & type)) return false;
  if (absl::Status st = Tick(); !st.ok()) return st;
  if (s.has_values && !s.values.Contains(v)) return false;
  if (s.excluded.Contains(v)) return false;
  switch (type) {
    case kNumT: {
      std::optional<Decimal> d = NumberOf(v);
      if (!d) return false;
      if (s.number.integer && !d->IsInteger()) return false;
      // Draft 4 integers have no fraction part, even a zero one.
      if (s.number.integer && !s.number.integer_zero_fraction &&
          v.is_number_float()) {
        return false;
      }
      return SatisfiesNumber(*d, s.number);
    }
    case kStrT: {
      const std::string& str = v.get_ref<const std::string&>();
      int64_t len = CodepointCount(str);
      if (len < s.string.min_len) return false;
      if (s.string.max_len >= 0 && len > s.string.max_len) return false;
      for (const RegexRef& r : s.string.must) {
        absl::StatusOr<const CharDfa*> dfa = RegexDfa(r);
        if (!dfa.ok()) return dfa.status();
        if (Matches(**dfa, str)) continue;
        if (exact_checks_ && r.Narrower()) {
          return absl::UnimplementedError(absl::StrCat(
              r.Keyword(), " \"", r.text, "\" is checked inexactly"));
        }
        return false;
      }
      for (const RegexRef& r : s.string.must_not) {
        absl::StatusOr<const CharDfa*> dfa = RegexDfa(r);
        if (!dfa.ok()) return dfa.status();
        if (Matches(**dfa, str)) return false;
      }
      for (const std::string& x : s.string.excluded) {
        if (x == str) return false;
      }
      return true;
    }
    case kArrT: {
      const ArrayC& a = s.array;
      const int64_t size = static_cast<int64_t>(v.size());
      if (size < a.min_items || (a.max_items >= 0 && size > a.max_items))
        return false;
      for (size_t i = 0; i < v.size(); ++i) {
        const TermSet& ts = i < a.prefix.size() ? a.prefix[i] : a.rest;
        absl::StatusOr<bool> ok = ValidateTerms(v[i], ts, depth + 1);
        if (!ok.ok() || !*ok) return ok;
      }
      for (const ContainsC& c : a.contains) {
        int64_t hits = 0;
        for (const Json& item : v) {
          absl::StatusOr<bool> ok = ValidateTerms(item, c.schema, depth + 1);
          if (!ok.ok()) return ok.status();
          hits += *ok ? 1 : 0;
        }
        if (hits < c.min || (c.max >= 0 && hits > c.max)) return false;
      }
      if (a.unique) {
        for (size_t i = 0; i < v.size(); ++i) {
          for (size_t j = i + 1; j < v.size(); ++j) {
            if (JsonEqual(v[i], v[j])) return false;
          }
        }
      }
      return true;
    }
    case kObjT: {
      const ObjectC& o = s.object;
      const int64_t size = static_cast<int64_t>(v.size());
      if (size < o.min_props || (o.max_props >= 0 && size > o.max_props))
        return false;
      for (const std::string& r : o.required) {
        if (!v.contains(r)) return false;
      }
      for (auto it = v.begin(); it != v.end(); ++it) {
        absl::StatusOr<std::optional<TermSet>> ts = KeyValueTerms(o, it.key());
        if (!ts.ok()) return ts.status();
        if (!*ts) return false;
        absl::StatusOr<bool> ok = ValidateTerms(it.value(), **ts, depth + 1);
        if (!ok.ok() || !*ok) return ok;
        const Json name = it.key();
        for (const TermSet& names : o.names) {
          absl::StatusOr<bool> named = ValidateTerms(name, names, depth + 1);
          if (!named.ok() || !*named) return named;
        }
      }
      for (const Witness& w : o.witnesses) {
        bool found = false;
        for (auto it = v.begin(); it != v.end() && !found; ++it) {
          if (std::find(w.not_names.begin(), w.not_names.end(), it.key()) !=
              w.not_names.end()) {
            continue;
          }
          absl::StatusOr<bool> ok =
              ValidateTerms(it.value(), w.value, depth + 1);
          if (!ok.ok()) return ok.status();
          found = *ok;
        }
        if (!found) return false;
      }
      return true;
    }
    default:
      return true;
  }
}

absl::StatusOr<bool> Converter::DisjointSets(const TermSet& a, const TermSet& b,
                                             int depth) {
  absl::StatusOr<Dnf> da = ExpandSet(a);
  absl::StatusOr<Dnf> db = ExpandSet(b);
  if (!da.ok() || !db.ok()) return false;
  for (const Alt& x : *da) {
    for (const Alt& y : *db) {
      absl::StatusOr<const SimpleSchema*> mx = Merge(x);
      absl::StatusOr<const SimpleSchema*> my = Merge(y);
      if (!mx.ok() || !my.ok()) return false;
      absl::StatusOr<bool> d = Disjoint(**mx, **my, depth + 1);
      if (!d.ok() || !*d) return false;
    }
  }
  return true;
}

absl::StatusOr<bool> Converter::Disjoint(const SimpleSchema& a,
                                         const SimpleSchema& b, int depth) {
  if (depth > 4) return false;
  const uint8_t common = a.types & b.types;
  if (common == 0) return true;
  // A value proves nothing when a check of it is inexact (CheckValue then
  // fails, which reads as "shared").
  const bool was_exact = exact_checks_;
  exact_checks_ = true;
  struct Restore {
    bool* flag;
    bool value;
    ~Restore() { *flag = value; }
  } restore{&exact_checks_, was_exact};
  // Listed values: disjoint when none of one side's values passes both.
  for (const SimpleSchema* side : {&a, &b}) {
    if (!side->has_values) continue;
    bool shared = false;
    for (const Json* v : side->values) {
      absl::StatusOr<bool> in_a = CheckValue(*v, a, 0);
      absl::StatusOr<bool> in_b = CheckValue(*v, b, 0);
      if (!in_a.ok() || !in_b.ok() || (*in_a && *in_b)) {
        shared = true;
        break;
      }
    }
    if (!shared) return true;
  }
  for (uint8_t t = 1; t <= kObjT; t <<= 1) {
    if (!(common & t)) continue;
    bool apart = false;
    if (t == kNumT) {
      const NumberConstraints& x = a.number;
      const NumberConstraints& y = b.number;
      auto below = [](const std::optional<Bound>& hi,
                      const std::optional<Bound>& lo) {
        if (!hi || !lo) return false;
        int c = Compare(hi->value, lo->value);
        return c < 0 || (c == 0 && (hi->exclusive || lo->exclusive));
      };
      apart = below(x.upper, y.lower) || below(y.upper, x.lower);
      Decimal one = *ParseDecimal("1");
      auto non_integer = [&](const NumberConstraints& c) {
        return std::find(c.not_multiple_of.begin(), c.not_multiple_of.end(),
                         one) != c.not_multiple_of.end();
      };
      apart = apart || (x.integer && non_integer(y)) ||
              (y.integer && non_integer(x));
    } else if (t == kStrT) {
      // Emptiness of the intersection proves nothing when a side's
      // language was narrowed.
      auto narrowed = [](const StringC& c) {
        for (const RegexRef& r : c.must) {
          if (r.Narrower()) return true;
        }
        return false;
      };
      if (!a.string.Unconstrained() && !b.string.Unconstrained() &&
          !narrowed(a.string) && !narrowed(b.string)) {
        absl::StatusOr<CharDfa> x = StringDfa(a.string, true);
        absl::StatusOr<CharDfa> y = StringDfa(b.string, true);
        if (x.ok() && y.ok()) {
          absl::StatusOr<CharDfa> both =
              json_schema_internal::Intersect(*x, *y, opt_.dfa);
          apart = both.ok() && both->IsEmpty();
        }
      }
    } else if (t == kArrT) {
      apart =
          (a.array.max_items >= 0 && a.array.max_items < b.array.min_items) ||
          (b.array.max_items >= 0 && b.array.max_items < a.array.min_items);
    } else if (t == kObjT) {
      for (const std::string& k : a.object.required) {
        if (apart) break;
        absl::StatusOr<std::optional<TermSet>> vb = KeyValueTerms(b.object, k);
        if (!vb.ok()) return false;
        if (!*vb) {
          apart = true;  // required by a, forbidden by b
          break;
        }
        if (std::find(b.object.required.begin(), b.object.required.end(), k) ==
            b.object.required.end()) {
          continue;
        }
        absl::StatusOr<std::optional<TermSet>> va = KeyValueTerms(a.object, k);
        if (!va.ok()) return false;
        if (!*va) {
          apart = true;
          break;
        }
        absl::StatusOr<bool> d = DisjointSets(**va, **vb, depth);
        apart = d.ok() && *d;
      }
      for (const std::string& k : b.object.required) {
        if (apart) break;
        absl::StatusOr<std::optional<TermSet>> va = KeyValueTerms(a.object, k);
        if (va.ok() && !*va) apart = true;
      }
      apart =
          apart ||
          (a.object.max_props >= 0 &&
           a.object.max_props < b.object.min_props) ||
          (b.object.max_props >= 0 && b.object.max_props < a.object.min_props);
    }
    if (!apart) return false;
  }
  return true;
}

// ==================================================================== Strings

absl::StatusOr<RegexEntry*> Converter::GetRegex(const RegexRef& r) {
  const std::string key = r.Key();
  auto it = regexes_.find(key);
  if (it != regexes_.end()) return it->second.get();
  auto entry = std::make_unique<RegexEntry>();
  if (r.kind != RegexRef::kPattern) {
    FormatInfo info = r.Info();
    absl::StatusOr<Grammar> g = ParseRegex(info.regex);
    if (!g.ok()) return g.status();
    entry->ir = *std::move(g);
    entry->expr = entry->ir.rules[entry->ir.root].body;
  } else {
    // JSON Schema patterns search: an alternative not anchored at an end may
    // have anything before or after it.
    absl::StatusOr<std::vector<PatternAlt>> alts = SplitPattern(r.text);
    if (!alts.ok()) return alts.status();
    Grammar& ir = entry->ir;
    const int32_t any =
        ir.AddRepeat(ir.AddCharClass({{0, kMaxCodepoint}}), 0, kUnbounded);
    std::vector<int32_t> choices;
    for (const PatternAlt& alt : *alts) {
      absl::StatusOr<Grammar> g = ParseRegex(EcmaDots(alt.text));
      if (!g.ok()) return g.status();
      std::vector<int32_t> parts;
      if (!alt.start) parts.push_back(any);
      parts.push_back(ImportExpr(&ir, *g, g->rules[g->root].body));
      if (!alt.end) parts.push_back(any);
      choices.push_back(ir.AddSequence(std::move(parts)));
    }
    entry->expr = ir.AddChoice(std::move(choices));
  }
  RegexEntry* out = entry.get();
  regexes_.emplace(key, std::move(entry));
  return out;
}

absl::StatusOr<const CharDfa*> Converter::RegexDfa(const RegexRef& r) {
  absl::StatusOr<RegexEntry*> entry = GetRegex(r);
  if (!entry.ok()) return entry.status();
  RegexEntry& e = **entry;
  if (!e.dfa_done) {
    e.dfa_done = true;
    CharNfa nfa;
    absl::StatusOr<CharNfa::Fragment> f = nfa.AddExpr(e.ir, e.expr, opt_.dfa);
    if (!f.ok()) {
      e.dfa_status = f.status();
    } else {
      absl::StatusOr<CharDfa> dfa = Determinize(nfa, *f, opt_.dfa);
      if (dfa.ok()) {
        e.dfa = *std::move(dfa);
      } else {
        e.dfa_status = dfa.status();
      }
    }
  }
  if (!e.dfa_status.ok()) return e.dfa_status;
  return &e.dfa;
}

absl::StatusOr<CharDfa> Converter::StringDfa(const StringC& c,
                                             bool with_length) {
  CharDfa dfa = AnyStringDfa();
  for (const RegexRef& r : c.must) {
    absl::StatusOr<const CharDfa*> x = RegexDfa(r);
    if (!x.ok()) return x.status();
    absl::StatusOr<CharDfa> y =
        json_schema_internal::Intersect(dfa, **x, opt_.dfa);
    if (!y.ok()) return y.status();
    dfa = *std::move(y);
  }
  for (const RegexRef& r : c.must_not) {
    absl::StatusOr<const CharDfa*> x = RegexDfa(r);
    if (!x.ok()) return x.status();
    absl::StatusOr<CharDfa> y = Subtract(dfa, **x, opt_.dfa);
    if (!y.ok()) return y.status();
    dfa = *std::move(y);
  }
  if (!c.excluded.empty()) {
    absl::StatusOr<CharDfa> words = LiteralsDfa(c.excluded);
    if (!words.ok()) return words.status();
    absl::StatusOr<CharDfa> y = Subtract(dfa, *words, opt_.dfa);
    if (!y.ok()) return y.status();
    dfa = *std::move(y);
  }
  if (with_length && c.HasLength()) {
    return LimitLength(dfa, c.min_len, c.max_len, opt_.dfa);
  }
  return dfa;
}

absl::StatusOr<std::optional<CharDfa>> Converter::NamesDfa(
    const std::vector<TermSet>& names) {
  if (names.empty()) return std::optional<CharDfa>();
  CharDfa all = AnyStringDfa();
  for (const TermSet& ts : names) {
    absl::StatusOr<Dnf> d = ExpandSet(ts);
    if (!d.ok()) return d.status();
    CharDfa allowed = EmptyDfa();
    for (const Alt& alt : *d) {
      absl::StatusOr<const SimpleSchema*> s = Merge(alt);
      if (!s.ok()) return s.status();
      const SimpleSchema& m = **s;
      if (!(m.types & kStrT)) continue;
      absl::StatusOr<CharDfa> part = EmptyDfa();
      if (m.has_values) {
        std::vector<std::string> words;
        for (const Json* v : m.values) {
          if (!v->is_string()) continue;
          absl::StatusOr<bool> ok = CheckValue(*v, m, 0);
          if (!ok.ok()) return ok.status();
          if (*ok) words.push_back(v->get<std::string>());
        }
        part = LiteralsDfa(words);
      } else {
        StringC c = m.string;
        for (const Json* v : m.excluded) {
          if (v->is_string()) c.excluded.push_back(v->get<std::string>());
        }
        part = StringDfa(c, true);
      }
      if (!part.ok()) return part.status();
      absl::StatusOr<CharDfa> u =
          json_schema_internal::Union(allowed, *part, opt_.dfa);
      if (!u.ok()) return u.status();
      allowed = *std::move(u);
    }
    absl::StatusOr<CharDfa> both =
        json_schema_internal::Intersect(all, allowed, opt_.dfa);
    if (!both.ok()) return both.status();
    all = *std::move(both);
  }
  return std::optional<CharDfa>(std::move(all));
}

// =================================================================== Emission

std::string Converter::HintFor(const TermSet& ts) const {
  if (ts.empty()) return "any";
  const std::string& p = doc_.pointer(ts[0].loc);
  size_t slash = p.rfind('/');
  std::string last = slash == std::string::npos ? p : p.substr(slash + 1);
  if (last.empty() || last == "#") last = "root";
  return (ts[0].neg ? "not_" : "") + last;
}

int32_t Converter::ValueRef(const TermSet& ts, int depth) {
  const int level = e_.indented() ? depth : 0;
  auto key = std::make_pair(ts, level);
  auto it = value_rules_.find(key);
  if (it != value_rules_.end()) return e_.Ref(it->second);
  const int32_t rule = e_.NewRule(HintFor(ts));
  value_rules_.emplace(key, rule);
  queue_.emplace_back(ts, level, rule);
  return e_.Ref(rule);
}

absl::Status Converter::EmitRule(const TermSet& ts, int depth, int32_t rule) {
  if (absl::Status s = CheckBudget(); !s.ok()) return s;
  int32_t body;
  if (IsFalseSet(ts) || (e_.indented() && depth > kMaxIndentDepth)) {
    body = e_.Nothing();
  } else if (ts.empty()) {
    body = e_.AnyValue(depth);
  } else {
    absl::StatusOr<Dnf> d = ExpandSet(ts);
    if (!d.ok()) return d.status();
    std::vector<int32_t> alts;
    for (const Alt& alt : *d) {
      absl::StatusOr<const SimpleSchema*> s = Merge(alt);
      if (!s.ok()) return s.status();
      absl::StatusOr<int32_t> x = EmitAlt(**s, depth);
      if (!x.ok()) return x.status();
      alts.push_back(*x);
    }
    body = e_.Alt(std::move(alts));
  }
  e_.g().rules[rule].body = body;
  return absl::OkStatus();
}

absl::StatusOr<int32_t> Converter::EmitAlt(const SimpleSchema& s, int depth) {
  if (s.has_values) {
    // Listed values (distinct): exactly those that pass every other
    // constraint.
    std::vector<int32_t> parts;
    for (const Json* v : s.values) {
      absl::StatusOr<bool> ok = CheckValue(*v, s, 0);
      if (!ok.ok()) return ok.status();
      if (!*ok) continue;
      absl::StatusOr<int32_t> x = e_.Value(*v, depth);
      if (!x.ok()) return x.status();
      parts.push_back(*x);
    }
    return e_.Alt(std::move(parts));
  }
  auto excluded = [&](const Json& v) { return s.excluded.Contains(v); };
  std::vector<int32_t> parts;
  if ((s.types & kNullT) && !excluded(Json(nullptr))) {
    parts.push_back(e_.Bytes("null"));
  }
  if (s.types & kBoolT) {
    if (!excluded(Json(true))) parts.push_back(e_.Bytes("true"));
    if (!excluded(Json(false))) parts.push_back(e_.Bytes("false"));
  }
  if (s.types & kNumT) {
    absl::StatusOr<int32_t> x = NumberExpr(s);
    if (!x.ok()) return x.status();
    parts.push_back(*x);
  }
  if (s.types & kStrT) {
    absl::StatusOr<int32_t> x = StringExpr(s);
    if (!x.ok()) return x.status();
    parts.push_back(*x);
  }
  if (s.types & kArrT) {
    absl::StatusOr<int32_t> x = ArrayExpr(s.array, depth);
    if (!x.ok()) return x.status();
    parts.push_back(*x);
  }
  if (s.types & kObjT) {
    absl::StatusOr<int32_t> x = ObjectExpr(s.object, depth);
    if (!x.ok()) return x.status();
    parts.push_back(*x);
  }
  return e_.Alt(std::move(parts));
}

absl::StatusOr<int32_t> Converter::NumberExpr(const SimpleSchema& s) {
  NumberConstraints c = s.number;
  for (const Json* x : s.excluded) {
    std::optional<Decimal> d = NumberOf(*x);
    if (d) c.excluded.push_back(*d);
  }
  if (c.Unconstrained()) {
    if (!c.integer) return e_.AnyNumber();
    return c.integer_zero_fraction ? e_.AnyInteger() : e_.AnyPlainInteger();
  }
  const std::string key = c.Key();
  auto it = number_rules_.find(key);
  if (it != number_rules_.end()) return e_.Ref(it->second);
  absl::StatusOr<CharDfa> dfa = NumberDfa(c, opt_.dfa);
  if (!dfa.ok()) {
    const char* keyword = !c.multiple_of.empty() ? "multipleOf" : "minimum";
    if (absl::Status st = Unsupported(s.number_loc, keyword, dfa.status());
        !st.ok()) {
      return st;
    }
    if (!c.integer) return e_.AnyNumber();
    return c.integer_zero_fraction ? e_.AnyInteger() : e_.AnyPlainInteger();
  }
  const int32_t rule = e_.NewRule("number", e_.DfaPlain(*dfa, "number"));
  number_rules_.emplace(key, rule);
  return e_.Ref(rule);
}

absl::StatusOr<int32_t> Converter::StringExpr(const SimpleSchema& s) {
  StringC c = s.string;
  for (const Json* x : s.excluded) {
    if (x->is_string()) c.excluded.push_back(x->get<std::string>());
  }
  if (c.Unconstrained()) return e_.AnyString();
  if (c.max_len >= 0 && c.min_len > c.max_len) return e_.Nothing();
  const std::string key = c.Key();
  auto it = string_rules_.find(key);
  if (it != string_rules_.end()) return e_.Ref(it->second);
  int32_t body;
  if (c.must.empty() && c.must_not.empty() && c.excluded.empty()) {
    // Lengths alone count code points in any JSON encoding.
    if (c.min_len > kMaxCountedLength || c.max_len > kMaxCountedLength) {
      if (absl::Status st = Unsupported(
              c.length_loc,
              c.min_len > kMaxCountedLength ? "minLength" : "maxLength",
              absl::StrCat("lengths above ", kMaxCountedLength,
                           " are not supported"));
          !st.ok()) {
        return st;
      }
      return e_.AnyString();
    }
    body = e_.Quoted(e_.g().AddRepeat(
        e_.CountedChar(), static_cast<int32_t>(c.min_len),
        c.max_len < 0 ? kUnbounded : static_cast<int32_t>(c.max_len)));
  } else if (c.must.size() == 1 && c.must_not.empty() && c.excluded.empty() &&
             !c.HasLength()) {
    // A single pattern or format is written straight from its regex, which
    // keeps large formats (date-time, ipv6, uri) out of automata.
    absl::StatusOr<RegexEntry*> entry = GetRegex(c.must[0]);
    if (!entry.ok()) return entry.status();
    if ((*entry)->content_rule < 0) {
      absl::StatusOr<int32_t> content =
          e_.TranslateRegex((*entry)->ir, (*entry)->expr);
      if (!content.ok()) return content.status();
      (*entry)->content_rule = e_.NewRule("string_content", *content);
    }
    body = e_.Quoted(e_.Ref((*entry)->content_rule));
  } else {
    absl::StatusOr<CharDfa> dfa = StringDfa(c, true);
    if (!dfa.ok()) {
      if (IsDeadline(dfa.status())) return dfa.status();
      const RegexRef* r = !c.must.empty()       ? &c.must[0]
                          : !c.must_not.empty() ? &c.must_not[0]
                                                : nullptr;
      const int32_t loc = r != nullptr ? r->loc : c.length_loc;
      const char* keyword = r == nullptr ? "maxLength" : r->Keyword();
      if (absl::Status st = Unsupported(
              loc, keyword,
              absl::StrCat("combining the string constraints failed: ",
                           dfa.status().message()));
          !st.ok()) {
        return st;
      }
      return e_.AnyString();
    }
    body = e_.DfaString(*dfa, "string");
  }
  const int32_t rule = e_.NewRule("string", body);
  string_rules_.emplace(key, rule);
  return e_.Ref(rule);
}

absl::StatusOr<int32_t> Converter::ArrayExpr(const ArrayC& a, int depth) {
  int64_t max_items = a.max_items;
  // Past the prefix, a `false` rest schema ends the array.
  if (IsFalseSet(a.rest)) {
    const int64_t p = static_cast<int64_t>(a.prefix.size());
    max_items = max_items < 0 ? p : std::min(max_items, p);
  }
  // An item that must be absent also ends the array there.
  for (size_t i = 0; i < a.prefix.size(); ++i) {
    if (IsFalseSet(a.prefix[i])) {
      const int64_t p = static_cast<int64_t>(i);
      max_items = max_items < 0 ? p : std::min(max_items, p);
      break;
    }
  }
  if (max_items >= 0 && a.min_items > max_items) return e_.Nothing();
  ArrayC b = a;
  b.max_items = max_items;
  if (b.unique && (max_items < 0 || max_items > 1)) {
    if (!b.contains.empty()) {
      if (absl::Status st = Unsupported(
              b.unique_loc, "uniqueItems",
              "uniqueItems together with contains is not supported");
          !st.ok()) {
        return st;
      }
    } else {
      return UniqueArray(b, depth);
    }
  }
  if (!b.contains.empty()) return ContainsArray(b, depth);
  const int32_t max_repeat = GrammarLimits{}.max_repeat;
  if (b.min_items > max_repeat || max_items > max_repeat) {
    if (absl::Status st = Unsupported(
            b.loc, b.min_items > max_repeat ? "minItems" : "maxItems",
            absl::StrCat("item counts above ", max_repeat,
                         " are not supported"));
        !st.ok()) {
      return st;
    }
    b.min_items = std::min<int64_t>(b.min_items, max_repeat);
    max_items = max_items > max_repeat ? -1 : max_items;
  }
  const int64_t p = static_cast<int64_t>(b.prefix.size());
  // tail(i): items i, i+1, ... given that i items came before (so each is
  // preceded by a separator), built from the back (prefixes may be long).
  auto rest_items = [&](int64_t i) -> int32_t {
    if (max_items >= 0 && i >= max_items) return e_.Bytes("");
    const int32_t lo =
        static_cast<int32_t>(std::max<int64_t>(0, b.min_items - i));
    const int32_t hi =
        max_items < 0 ? kUnbounded : static_cast<int32_t>(max_items - i);
    return e_.g().AddRepeat(
        e_.Seq({e_.ItemSeparator(depth), ValueRef(b.rest, depth + 1)}), lo, hi);
  };
  int32_t tail = rest_items(std::max<int64_t>(p, 1));
  for (int64_t i = p - 1; i >= 1; --i) {
    if (max_items >= 0 && i >= max_items) {
      tail = e_.Bytes("");
      continue;
    }
    const int32_t x = e_.Seq(
        {e_.ItemSeparator(depth), ValueRef(b.prefix[i], depth + 1), tail});
    tail = i >= b.min_items ? e_.Alt({e_.Bytes(""), x}) : x;
    // A rule now and then keeps long tuples from nesting past the
    // grammar's depth limit.
    if (i % 128 == 0) tail = e_.Ref(e_.NewRule("items", tail));
  }
  int32_t nonempty = e_.Nothing();
  if (max_items != 0) {
    nonempty =
        e_.Seq({e_.Open('[', depth), ValueRef(ItemTerms(b, 0), depth + 1), tail,
                e_.Close(']', depth)});
  }
  return e_.Alt(
      {b.min_items == 0 ? e_.Empty('[', ']') : e_.Nothing(), nonempty});
}

absl::StatusOr<int32_t> Converter::ContainsArray(const ArrayC& a, int depth) {
  if (a.contains.size() > 1) {
    if (absl::Status st =
            Unsupported(a.contains[1].loc, "contains",
                        "more than one contains on the same array");
        !st.ok()) {
      return st;
    }
  }
  const ContainsC& c = a.contains[0];
  const int64_t p = static_cast<int64_t>(a.prefix.size());
  // Positions saturate at `top`: past it, every position behaves alike.
  const int64_t top = a.max_items >= 0
                          ? a.max_items
                          : std::max<int64_t>({p, a.min_items, int64_t{1}});
  // Counts of matching items saturate at `cap`.
  const int64_t cap = c.max >= 0 ? c.max + 1 : c.min;
  if ((top + 1) * (cap + 1) > kMaxCountingRules) {
    if (absl::Status st =
            Unsupported(c.loc, "contains",
                        absl::StrCat("counting contains over ", top,
                                     " items needs more than ",
                                     kMaxCountingRules, " rules"));
        !st.ok()) {
      return st;
    }
    ArrayC plain = a;
    plain.contains.clear();
    return ArrayExpr(plain, depth);
  }
  // Matching and non-matching items at each position.
  TermSet negated;
  bool never_matches = IsFalseSet(c.schema);
  if (c.schema.size() == 1 && !never_matches) {
    negated = Canon({Term{c.schema[0].loc, !c.schema[0].neg}});
  }
  auto item = [&](int64_t pos, bool match) -> int32_t {
    const TermSet& base = ItemTerms(a, static_cast<size_t>(pos));
    if (match) {
      return never_matches ? e_.Nothing()
                           : ValueRef(Canon(Join(base, c.schema)), depth + 1);
    }
    if (never_matches) return ValueRef(base, depth + 1);
    if (c.schema.empty()) return e_.Nothing();
    if (c.schema.size() == 1) {
      return ValueRef(Canon(Join(base, negated)), depth + 1);
    }
    std::vector<int32_t> alts;
    for (Term t : c.schema) {
      alts.push_back(
          ValueRef(Canon(Join(base, {Term{t.loc, !t.neg}})), depth + 1));
    }
    return e_.Alt(std::move(alts));
  };
  auto accepts = [&](int64_t pos, int64_t count) {
    return pos >= a.min_items && count >= c.min &&
           (c.max < 0 || count <= c.max);
  };
  std::map<std::pair<int64_t, int64_t>, int32_t> rules;
  std::vector<std::pair<int64_t, int64_t>> pending;
  auto state = [&](int64_t pos, int64_t count) {
    pos = std::min(pos, top);
    count = std::min(count, cap);
    auto key = std::make_pair(pos, count);
    auto it = rules.find(key);
    if (it != rules.end()) return e_.Ref(it->second);
    const int32_t rule = e_.NewRule("contains_state");
    rules.emplace(key, rule);
    pending.push_back(key);
    return e_.Ref(rule);
  };
  // The items after the first `pos` ones, each with its separator.
  auto steps = [&](int64_t pos, int64_t count, bool first) {
    std::vector<int32_t> alts;
    if (a.max_items >= 0 && pos >= a.max_items) return e_.Nothing();
    const int32_t sep = first ? e_.Bytes("") : e_.ItemSeparator(depth);
    for (bool match : {true, false}) {
      const int32_t x = item(pos, match);
      if (e_.IsNothing(x)) continue;
      alts.push_back(e_.Seq({sep, x, state(pos + 1, count + (match ? 1 : 0))}));
    }
    return e_.Alt(std::move(alts));
  };
  const int32_t start =
      e_.Alt({accepts(0, 0) ? e_.Empty('[', ']') : e_.Nothing(),
              e_.Seq({e_.Open('[', depth), steps(0, 0, true)})});
  while (!pending.empty()) {
    auto [pos, count] = pending.back();
    pending.pop_back();
    e_.g().rules[rules[{pos, count}]].body =
        e_.Alt({accepts(pos, count) ? e_.Close(']', depth) : e_.Nothing(),
                steps(pos, count, false)});
  }
  return start;
}

absl::StatusOr<std::optional<std::vector<const Json*>>> Converter::FiniteValues(
    const TermSet& ts) {
  using Out = std::optional<std::vector<const Json*>>;
  if (ts.empty()) return Out();
  absl::StatusOr<Dnf> d = ExpandSet(ts);
  if (!d.ok()) return d.status();
  ValueList values;
  auto add = [&](const Json* v, const SimpleSchema& s) -> absl::Status {
    absl::StatusOr<bool> ok = CheckValue(*v, s, 0);
    if (!ok.ok()) return ok.status();
    if (*ok) values.Add(v);
    return absl::OkStatus();
  };
  for (const Alt& alt : *d) {
    absl::StatusOr<const SimpleSchema*> s = Merge(alt);
    if (!s.ok()) return s.status();
    const SimpleSchema& m = **s;
    if (m.has_values) {
      for (const Json* v : m.values) {
        if (absl::Status st = add(v, m); !st.ok()) return st;
      }
    } else if ((m.types & ~(kNullT | kBoolT)) == 0) {
      for (int i = 0; i < 3; ++i) {
        if (absl::Status st = add(&StaticValue(i), m); !st.ok()) return st;
      }
    } else {
      return Out();
    }
  }
  return Out(std::vector<const Json*>(values.begin(), values.end()));
}

absl::StatusOr<int32_t> Converter::UniqueArray(const ArrayC& a, int depth) {
  // Unique items are decidable when every position allows a few listed
  // values: the grammar then tracks the set of values used so far.
  const size_t positions = a.prefix.size() + 1;
  std::vector<std::vector<const Json*>> allowed(positions);
  ValueList all;
  for (size_t i = 0; i < positions; ++i) {
    const TermSet& ts = ItemTerms(a, i);
    if (i == a.prefix.size() && IsFalseSet(ts)) break;
    absl::StatusOr<std::optional<std::vector<const Json*>>> v =
        FiniteValues(ts);
    if (!v.ok()) return v.status();
    if (!*v) {
      if (absl::Status st = Unsupported(
              a.unique_loc, "uniqueItems",
              "unique items are enforced only among listed values (enum, "
              "const, booleans, null)");
          !st.ok()) {
        return st;
      }
      ArrayC plain = a;
      plain.unique = false;
      return ArrayExpr(plain, depth);
    }
    allowed[i] = **v;
    for (const Json* x : **v) all.Add(x);
  }
  if (all.size() > static_cast<size_t>(kMaxUniqueValues)) {
    if (absl::Status st =
            Unsupported(a.unique_loc, "uniqueItems",
                        absl::StrCat("more than ", kMaxUniqueValues,
                                     " values to keep apart"));
        !st.ok()) {
      return st;
    }
    ArrayC plain = a;
    plain.unique = false;
    return ArrayExpr(plain, depth);
  }
  auto index_of = [&](const Json* v) {
    const Json* listed = all.Find(*v);
    return static_cast<size_t>(std::find(all.begin(), all.end(), listed) -
                               all.begin());
  };
  std::vector<uint32_t> masks(positions, 0);
  for (size_t i = 0; i < positions; ++i) {
    for (const Json* v : allowed[i]) masks[i] |= 1u << index_of(v);
  }
  std::vector<int32_t> literal;
  for (const Json* v : all) {
    absl::StatusOr<int32_t> x = e_.Value(*v, depth + 1);
    if (!x.ok()) return x.status();
    literal.push_back(*x);
  }
  const int64_t max_items = a.max_items < 0
                                ? static_cast<int64_t>(all.size())
                                : std::min<int64_t>(a.max_items, all.size());
  std::map<std::pair<int64_t, uint32_t>, int32_t> rules;
  std::vector<std::pair<int64_t, uint32_t>> pending;
  absl::Status budget;
  auto state = [&](int64_t pos, uint32_t used) {
    auto key = std::make_pair(pos, used);
    auto it = rules.find(key);
    if (it != rules.end()) return e_.Ref(it->second);
    if (static_cast<int64_t>(rules.size()) >= kMaxCountingRules) {
      budget = absl::ResourceExhaustedError("too many states");
    }
    const int32_t rule = e_.NewRule("unique_state");
    rules.emplace(key, rule);
    pending.push_back(key);
    return e_.Ref(rule);
  };
  auto steps = [&](int64_t pos, uint32_t used, bool first) {
    std::vector<int32_t> alts;
    if (pos >= max_items) return e_.Nothing();
    const uint32_t mask =
        masks[std::min<size_t>(static_cast<size_t>(pos), positions - 1)];
    const int32_t sep = first ? e_.Bytes("") : e_.ItemSeparator(depth);
    for (size_t k = 0; k < all.size(); ++k) {
      if (!(mask & (1u << k)) || (used & (1u << k))) continue;
      alts.push_back(e_.Seq({sep, literal[k], state(pos + 1, used | 1u << k)}));
    }
    return e_.Alt(std::move(alts));
  };
  const int32_t start =
      e_.Alt({a.min_items == 0 ? e_.Empty('[', ']') : e_.Nothing(),
              e_.Seq({e_.Open('[', depth), steps(0, 0, true)})});
  while (!pending.empty() && budget.ok()) {
    auto [pos, used] = pending.back();
    pending.pop_back();
    e_.g().rules[rules[{pos, used}]].body =
        e_.Alt({pos >= a.min_items ? e_.Close(']', depth) : e_.Nothing(),
                steps(pos, used, false)});
  }
  if (!budget.ok()) {
    // Left unfinished, the states match nothing; the array falls back below.
    for (const auto& key : pending)
      e_.g().rules[rules[key]].body = e_.Nothing();
    if (absl::Status st =
            Unsupported(a.unique_loc, "uniqueItems",
                        absl::StrCat("tracking unique items needs more than ",
                                     kMaxCountingRules, " rules"));
        !st.ok()) {
      return st;
    }
    ArrayC plain = a;
    plain.unique = false;
    return ArrayExpr(plain, depth);
  }
  return start;
}

absl::StatusOr<int32_t> Converter::ObjectExpr(const ObjectC& o, int depth) {
  // Declared names: every property named by a rule or by `required`. Each
  // gets its own member; all other names share "other" members.
  std::vector<std::string> declared;
  auto declare = [&](const std::string& k) {
    if (std::find(declared.begin(), declared.end(), k) == declared.end()) {
      declared.push_back(k);
    }
  };
  if (opt_.order == PropertyOrder::kRequiredFirst) {
    for (const std::string& k : o.required) declare(k);
  }
  for (const KeyRule& rule : o.rules) {
    for (const auto& prop : rule.props) declare(prop.first);
  }
  for (const std::string& k : o.required) declare(k);

  // Lenient mode reads a constraint it cannot keep as "any members".
  auto loose = [&](absl::string_view keyword,
                   const auto& why) -> absl::StatusOr<int32_t> {
    if (absl::Status st = Unsupported(o.loc, keyword, why); !st.ok()) return st;
    const int32_t member =
        e_.Seq({e_.AnyString(), e_.KeySeparator(), e_.AnyValue(depth + 1)});
    return e_.Alt(
        {e_.Empty('{', '}'),
         e_.Seq({e_.Open('{', depth), member,
                 e_.g().AddRepeat(e_.Seq({e_.ItemSeparator(depth), member}), 0,
                                  kUnbounded),
                 e_.Close('}', depth)})});
  };
  // A witness (from "not additionalProperties") is a member the object must
  // have; the states below remember whether it was written.
  if (o.witnesses.size() > 1) {
    return loose("additionalProperties",
                 "more than one negated additionalProperties on one object");
  }
  const Witness* witness = o.witnesses.empty() ? nullptr : &o.witnesses[0];
  auto witness_name = [&](const std::string& k) {
    return witness != nullptr &&
           std::find(witness->not_names.begin(), witness->not_names.end(), k) ==
               witness->not_names.end();
  };
  // A member's value of `ts`, or the same as a witness.
  auto value_with = [&](const TermSet& ts, bool as_witness) {
    TermSet value = as_witness ? Canon(Join(ts, witness->value)) : ts;
    if (IsFalseSet(value)) return e_.Nothing();
    return ValueRef(value, depth + 1);
  };
  // The member `key` with values `ts`, or the same as a witness.
  auto member_with = [&](int32_t key, const TermSet& ts, bool as_witness) {
    const int32_t value = value_with(ts, as_witness);
    if (e_.IsNothing(value)) return value;
    return e_.Seq({key, e_.KeySeparator(), value});
  };

  struct Member {
    bool required;
    int32_t key;            // the quoted name
    int32_t value;          // Nothing when no value is allowed
    int32_t witness_value;  // Nothing when it cannot be the witness
    int32_t expr = -1, witness_expr = -1;  // written below
  };
  std::vector<Member> members;
  for (const std::string& k : declared) {
    const bool required =
        std::find(o.required.begin(), o.required.end(), k) != o.required.end();
    absl::StatusOr<std::optional<TermSet>> vt = KeyValueTerms(o, k);
    if (!vt.ok()) return vt.status();
    bool allowed = vt->has_value();
    const Json name = k;
    for (const TermSet& names : o.names) {
      if (!allowed) break;
      absl::StatusOr<bool> ok = ValidateTerms(name, names, 0);
      if (!ok.ok()) return ok.status();
      allowed = *ok;
    }
    if (!allowed) {
      if (required) return e_.Nothing();
      continue;
    }
    members.push_back(Member{
        required, e_.Quoted(e_.StringContent(k)), value_with(**vt, false),
        witness_name(k) ? value_with(**vt, true) : e_.Nothing()});
  }

  // Other names, split into classes by the patterns they match.
  std::vector<std::pair<RegexRef, int>> patterns;  // (pattern, rule index)
  for (size_t r = 0; r < o.rules.size(); ++r) {
    for (const auto& pat : o.rules[r].patterns) {
      patterns.emplace_back(pat.first, static_cast<int>(r));
    }
  }
  if (patterns.size() > static_cast<size_t>(kMaxKeyPatterns)) {
    return loose("patternProperties",
                 absl::StrCat("more than ", kMaxKeyPatterns,
                              " patterns apply to one object"));
  }
  absl::StatusOr<std::optional<CharDfa>> names = NamesDfa(o.names);
  if (!names.ok()) return loose("propertyNames", names.status());
  absl::StatusOr<CharDfa> declared_dfa = LiteralsDfa(declared);
  if (!declared_dfa.ok()) return declared_dfa.status();
  absl::StatusOr<CharDfa> not_witness_dfa = LiteralsDfa(
      witness != nullptr ? witness->not_names : std::vector<std::string>{});
  if (!not_witness_dfa.ok()) return not_witness_dfa.status();
  std::vector<int32_t> others;
  std::vector<int32_t> witness_others;
  // Names whose values share one schema, one key automaton each: a pattern
  // whose value is what additionalProperties allows anyway (`"^.{1,255}$":
  // {}` beside the default `true`) constrains nothing, and its counted key
  // would cost every first mask there a walk of the vocabulary per count.
  struct NameClass {
    TermSet value;
    std::optional<CharDfa> keys;  // none: any string
  };
  std::vector<NameClass> name_classes;
  const bool any_key = patterns.empty() && declared.empty() && !*names;
  const uint32_t classes = 1u << patterns.size();
  for (uint32_t in = 0; in < classes; ++in) {
    TermSet value;
    for (size_t r = 0; r < o.rules.size(); ++r) {
      const KeyRule& rule = o.rules[r];
      bool matched = false;
      for (size_t i = 0; i < patterns.size(); ++i) {
        if (patterns[i].second != static_cast<int>(r) || !(in & (1u << i))) {
          continue;
        }
        matched = true;
        for (const auto& pat : rule.patterns) {
          if (pat.first.Key() == patterns[i].first.Key()) {
            value = Join(value, pat.second);
          }
        }
      }
      if (!matched && rule.has_additional) value = Join(value, rule.additional);
    }
    value = Canon(std::move(value));
    if (IsFalseSet(value)) continue;
    CharDfa keys = Complement(*declared_dfa);
    if (!any_key) {
      absl::Status st;
      auto narrow = [&](const CharDfa& x, bool keep) {
        if (!st.ok()) return;
        absl::StatusOr<CharDfa> y =
            keep ? json_schema_internal::Intersect(keys, x, opt_.dfa)
                 : Subtract(keys, x, opt_.dfa);
        if (y.ok()) {
          keys = *std::move(y);
        } else {
          st = y.status();
        }
      };
      for (size_t i = 0; i < patterns.size(); ++i) {
        absl::StatusOr<const CharDfa*> x = RegexDfa(patterns[i].first);
        if (!x.ok()) {
          st = x.status();
          break;
        }
        narrow(**x, (in & (1u << i)) != 0);
      }
      if (*names) narrow(**names, true);
      if (!st.ok()) return loose("patternProperties", st);
      if (keys.IsEmpty()) continue;
    }
    auto same =
        std::find_if(name_classes.begin(), name_classes.end(),
                     [&](const NameClass& c) { return c.value == value; });
    if (same == name_classes.end()) {
      name_classes.push_back(
          {std::move(value),
           any_key ? std::nullopt : std::optional<CharDfa>(std::move(keys))});
    } else {
      absl::StatusOr<CharDfa> both =
          json_schema_internal::Union(*same->keys, keys, opt_.dfa);
      if (!both.ok()) return loose("patternProperties", both.status());
      same->keys = *std::move(both);
    }
  }
  for (const NameClass& c : name_classes) {
    const int32_t key_expr =
        c.keys ? e_.Ref(e_.NewRule("key", e_.DfaString(*c.keys, "key")))
               : e_.AnyString();
    others.push_back(member_with(key_expr, c.value, false));
    if (witness != nullptr) {
      absl::StatusOr<CharDfa> wkeys = Subtract(
          c.keys ? *c.keys : AnyStringDfa(), *not_witness_dfa, opt_.dfa);
      if (!wkeys.ok()) return loose("additionalProperties", wkeys.status());
      if (!wkeys->IsEmpty()) {
        witness_others.push_back(
            member_with(e_.Ref(e_.NewRule("key", e_.DfaString(*wkeys, "key"))),
                        c.value, true));
      }
    }
  }
  const bool has_other = !others.empty();
  const int32_t other =
      has_other ? e_.Ref(e_.NewRule("member", e_.Alt(std::move(others))))
                : e_.Nothing();
  const int32_t witness_other =
      witness_others.empty()
          ? e_.Nothing()
          : e_.Ref(e_.NewRule("witness", e_.Alt(std::move(witness_others))));

  // States: which declared members were written (a subset in any order, an
  // index in declared order) and how many members so far (counted only up
  // to what minProperties/maxProperties need).
  const size_t n = members.size();
  const bool small = n <= static_cast<size_t>(kMaxAnyOrderProperties);
  const int64_t cap = o.max_props >= 0 ? o.max_props : o.min_props;
  // kAnyRepeatable's larger objects: declared members in any order, each as
  // often as the model likes (every occurrence valid, so whichever one a
  // parser keeps is valid), remembering only which required ones were
  // written. Counting members, or a witness that a later duplicate could
  // overwrite, needs each name once: such objects stay as written.
  size_t num_required = 0;
  for (const Member& m : members) num_required += m.required;
  const bool repeatable =
      opt_.order == PropertyOrder::kAnyRepeatable && !small && cap <= 0 &&
      witness == nullptr &&
      num_required <= static_cast<size_t>(kMaxAnyOrderProperties);
  const bool any_order =
      opt_.order == PropertyOrder::kAny || repeatable ||
      (small && (opt_.order == PropertyOrder::kAnyWhenSmall ||
                 opt_.order == PropertyOrder::kAnyRepeatable));
  // The bit member j sets in `seen` when written in any order (none for an
  // optional member that may repeat).
  std::vector<uint64_t> bit(n, 0);
  for (size_t j = 0, r = 0; j < n; ++j) {
    if (!repeatable) {
      bit[j] = j < 64 ? uint64_t{1} << j : 0;  // past 20: refused below
    } else if (members[j].required) {
      bit[j] = uint64_t{1} << r++;
    }
  }
  const int64_t count_states = (cap + 1) * (witness != nullptr ? 2 : 1);
  const size_t seen_bits = repeatable ? num_required : n;
  const int64_t member_states =
      any_order ? (seen_bits >= 20 ? int64_t{1} << 20 : int64_t{1} << seen_bits)
                : static_cast<int64_t>(n) + 1;
  if (member_states * count_states > kMaxCountingRules) {
    // Blame the count only when there is one to blame.
    const char* keyword = any_order || cap <= 0 ? "properties"
                          : o.max_props >= 0    ? "maxProperties"
                                                : "minProperties";
    return loose(
        keyword,
        absl::StrCat("an object with ", n, " properties",
                     cap > 0 ? absl::StrCat(", counting up to ", cap) : "",
                     " needs more than ", kMaxCountingRules, " grammar rules",
                     any_order ? " in any order" : ""));
  }
  for (Member& m : members) {
    // In any order, every state of which members were written calls the
    // members not written yet. Written inline, each state would get a trie
    // of keys of its own (a five-property object: 743 automaton states for
    // 64), and a state after each key, before its value. A value read at
    // the member's end is copied into it only when no other rule would
    // copy it too (compiler.cc, AbsorbedRules).
    auto with = [&](int32_t value) {
      if (e_.IsNothing(value)) return value;
      const int32_t member = e_.Seq({m.key, e_.KeySeparator(), value});
      return any_order ? e_.Ref(e_.NewRule("member", member)) : member;
    };
    m.expr = with(m.value);
    m.witness_expr = with(m.witness_value);
  }
  auto accepts = [&](uint64_t seen, int64_t count, bool found) {
    if (count < o.min_props || !found) return false;
    for (size_t j = 0; j < n; ++j) {
      if (!members[j].required) continue;
      // Any order: `seen` is a set; declared order: an index past j.
      if (any_order ? !(seen & bit[j]) : seen <= j) return false;
    }
    return true;
  };
  // Repeatable objects: the members that may come again in any state, as
  // one rule all states call. Copied into each of the 2^required states,
  // they made most of such an object's automaton (a 20 KB schema: 20,600
  // states for 5,200).
  int32_t repeat_rule = -1;
  if (repeatable) {
    std::vector<int32_t> optional;
    for (size_t j = 0; j < n; ++j) {
      if (bit[j] == 0) optional.push_back(members[j].expr);
    }
    if (has_other) optional.push_back(other);
    if (!optional.empty()) {
      repeat_rule = e_.NewRule("members", e_.Alt(std::move(optional)));
    }
  }
  using State = std::tuple<uint64_t, int64_t, bool>;
  std::map<State, int32_t> rules;
  std::vector<State> pending;
  auto state = [&](uint64_t seen, int64_t count, bool found) {
    count = std::min(count, cap);
    State key{seen, count, found};
    auto it = rules.find(key);
    if (it != rules.end()) return e_.Ref(it->second);
    const int32_t rule = e_.NewRule("object_state");
    rules.emplace(key, rule);
    pending.push_back(key);
    return e_.Ref(rule);
  };
  auto steps = [&](uint64_t seen, int64_t count, bool found, bool first) {
    std::vector<int32_t> alts;
    if (o.max_props >= 0 && count >= o.max_props) return e_.Nothing();
    // Writing member `expr` (or, not yet found, its witness form) and going
    // on from `next`.
    auto add = [&](int32_t expr, int32_t witness_expr, uint64_t next) {
      alts.push_back(e_.Seq({expr, state(next, count + 1, found)}));
      if (!found && !e_.IsNothing(witness_expr)) {
        alts.push_back(e_.Seq({witness_expr, state(next, count + 1, true)}));
      }
    };
    if (repeatable) {
      // Members that leave `seen` as it is share one alternative.
      std::vector<int32_t> same;
      if (repeat_rule >= 0) same.push_back(e_.Ref(repeat_rule));
      for (size_t j = 0; j < n; ++j) {
        if (bit[j] == 0) continue;
        if (seen & bit[j]) {
          same.push_back(members[j].expr);
        } else {
          add(members[j].expr, members[j].witness_expr, seen | bit[j]);
        }
      }
      if (!same.empty()) {
        alts.push_back(
            e_.Seq({e_.Alt(std::move(same)), state(seen, count + 1, found)}));
      }
    } else if (any_order) {
      for (size_t j = 0; j < n; ++j) {
        if (seen & bit[j]) continue;
        add(members[j].expr, members[j].witness_expr, seen | bit[j]);
      }
    } else {
      // The next declared member may be any later one, skipping only
      // optional ones.
      for (size_t j = seen; j < n; ++j) {
        add(members[j].expr, members[j].witness_expr, j + 1);
        if (members[j].required) break;
      }
    }
    if (has_other && !repeatable) add(other, witness_other, seen);
    if (alts.empty()) return e_.Nothing();
    // One separator before the choice: one per alternative made an
    // object's states mostly copies of it.
    return e_.Seq({first ? e_.Bytes("") : e_.ItemSeparator(depth),
                   e_.Alt(std::move(alts))});
  };
  const bool found0 = witness == nullptr;
  const int32_t start =
      e_.Alt({accepts(0, 0, found0) ? e_.Empty('{', '}') : e_.Nothing(),
              e_.Seq({e_.Open('{', depth), steps(0, 0, found0, true)})});
  while (!pending.empty()) {
    auto [seen, count, found] = pending.back();
    pending.pop_back();
    e_.g().rules[rules[{seen, count, found}]].body = e_.Alt(
        {accepts(seen, count, found) ? e_.Close('}', depth) : e_.Nothing(),
         steps(seen, count, found, false)});
  }
  return start;
}

absl::Status Converter::Run() {
  // A meta-schema of its own may turn vocabularies off (or on), which
  // would change what every keyword means.
  const Json& top = doc_.node(doc_.root());
  if (top.is_object() && top.contains("$schema")) {
    const Json& meta = top["$schema"];
    if (!meta.is_string() || meta.get_ref<const std::string&>().find(
                                 "json-schema.org/") == std::string::npos) {
      if (absl::Status s =
              Unsupported(doc_.root(), "$schema",
                          "only the json-schema.org meta-schemas are known");
          !s.ok()) {
        return s;
      }
    }
  }
  Grammar& g = e_.g();
  const int32_t root = e_.NewRule("root");
  g.root = root;
  g.rules[root].body = ValueRef(One(doc_.root()), 0);
  while (!queue_.empty()) {
    auto [ts, depth, rule] = queue_.front();
    queue_.pop_front();
    if (absl::Status s = EmitRule(ts, depth, rule); !s.ok()) return s;
  }
  return CheckBudget();
}

}  // namespace

absl::Status ConvertSchema(SchemaDoc* doc, const ConvertOptions& options,
                           Grammar* grammar,
                           std::vector<DroppedKeyword>* dropped) {
  Converter converter(doc, options, grammar, dropped);
  return converter.Run();
}

}  // namespace grammard::grammar::json_schema_internal
