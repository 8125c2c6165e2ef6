// The Converter behind ConvertSchema (converter.h) and the model it reasons
// in: terms (a schema location, possibly negated), fragments (SimpleSchema:
// per JSON type, the constraints left) and disjunctive normal forms of
// fragments. One class, its methods split by idea:
//   converter.cc           policy, terms, the expansion into DNF, the rule
//                          queue and the choice among JSON types;
//   converter_keywords.cc  a location's own keywords, read into a fragment;
//   converter_negation.cc  `not` pushed down through combinators to single
//                          keywords;
//   converter_checks.cc    merging an alternative's fragments, checking
//                          values against them, proving disjointness;
//   converter_scalars.cc   regexes (pattern, format, contentEncoding), string
//                          automata, and the grammar of strings and numbers;
//   converter_arrays.cc    the grammar of arrays (items, contains,
//                          uniqueItems);
//   converter_objects.cc   the grammar of objects (members in any order,
//                          counts, witnesses of negated additionalProperties).
// Only those files include this header; everything else calls ConvertSchema.
//
// Cost: as ConvertSchema (converter.h); every expansion, merge, regex and
// rule is cached in the Converter for the length of one conversion.
// Thread-safety: a Converter, with the SchemaDoc and grammar it writes,
// belongs to one thread for one conversion.
#ifndef GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_CONVERTER_IMPL_H_
#define GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_CONVERTER_IMPL_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grammar/frontends/json_schema/internal/char_dfa.h"
#include "grammar/frontends/json_schema/internal/converter.h"
#include "grammar/frontends/json_schema/internal/formats.h"
#include "grammar/frontends/json_schema/internal/json_emitter.h"
#include "grammar/frontends/json_schema/internal/json_values.h"
#include "grammar/frontends/json_schema/internal/numbers.h"
#include "grammar/frontends/json_schema/internal/schema_doc.h"
#include "grammar/ir/grammar_ir.h"

namespace grammard::grammar::json_schema_internal {

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

// Rules a counting construction (contains, uniqueItems, min/maxProperties)
// may make for one array or object.
inline constexpr int64_t kMaxCountingRules = 4096;

struct Term {
  int32_t loc;
  bool neg;
};
inline bool operator<(Term a, Term b) {
  return a.loc != b.loc ? a.loc < b.loc : a.neg < b.neg;
}
inline bool operator==(Term a, Term b) {
  return a.loc == b.loc && a.neg == b.neg;
}
// A conjunction of terms, sorted; {} is `true`, {false} is `false`.
using TermSet = std::vector<Term>;

inline const TermSet& FalseSet() {
  static const TermSet kFalse{Term{SchemaDoc::kFalse, false}};
  return kFalse;
}
inline bool IsFalseSet(const TermSet& ts) { return ts == FalseSet(); }

inline TermSet Join(TermSet a, const TermSet& b) {
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
  // The same regex, wherever written.
  bool operator==(const RegexRef& o) const {
    return kind == o.kind && text == o.text;
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

// "Some member has a value satisfying `value` and a name outside
// `not_names` that matches every pattern of `in_patterns`, none of
// `not_patterns` and, as a string, none of `not_schemas`": what negating
// additionalProperties (names neither declared nor matched), a
// patternProperties entry (names it matches) or propertyNames (names it
// rejects) asks for.
struct Witness {
  std::vector<std::string> not_names;
  std::vector<RegexRef> in_patterns;
  std::vector<RegexRef> not_patterns;
  std::vector<TermSet> not_schemas;
  TermSet value;
  int32_t loc = -1;
  // Equal witnesses ask for the same member (wherever they were written).
  bool operator==(const Witness& o) const {
    return not_names == o.not_names && in_patterns == o.in_patterns &&
           not_patterns == o.not_patterns && not_schemas == o.not_schemas &&
           value == o.value;
  }
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

// One position of an array whose items are kept distinct at run time:
// values that may always grow into new ones, compared as they end
// (grammar_ir.h's distinct), and listed scalars, each counted once in the
// array's frame (member_guard). The two never share a value.
struct DistinctPosition {
  std::vector<SimpleSchema> endless;
  std::vector<const Json*> listed;
};

using Alt = std::vector<int32_t>;  // fragment ids, sorted
using Dnf = std::vector<Alt>;

// Reads a non-negative integer keyword value (1.0 counts as 1).
std::optional<int64_t> NonNegativeInt(const Json& v);

// Whether a contentMediaType names JSON (media types ignore case and may
// carry parameters).
bool IsJsonMediaType(const Json& v);

inline std::string DisplayPointer(const std::string& pointer) {
  if (pointer.find('#') != std::string::npos) return pointer;
  return "#" + pointer;
}

// The compile's deadline passing says nothing about a keyword: it must not
// become a refusal (strict) or a drop (lenient), which callers would cache
// as the schema's verdict. Unsupported(loc, keyword, status) passes it
// through; sites that compose their own reason check it first.
inline bool IsDeadline(const absl::Status& s) {
  return s.code() == absl::StatusCode::kDeadlineExceeded;
}

// A pattern's, format's or encoding's regex, parsed once per conversion;
// its automaton and its rule as string content are built when first needed.
struct RegexEntry {
  Grammar ir;
  int32_t expr = -1;
  // Only the automaton reads this pattern exactly: ^ or $ inside it (the IR
  // keeps them as anchor rules, ParseRegexKeepingAnchors) or leading
  // lookaheads (no IR; the automaton is built at once).
  bool automaton_only = false;
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
  // The values other than the array or object `x` (written at `loc`), by
  // JSON equality: another type, another length or member set, or one item
  // or member with another value.
  absl::StatusOr<Dnf> Differs(int32_t loc, const Json& x);
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
  // Adds `v` to `list` when it satisfies `s`.
  absl::Status AddIfValid(const Json* v, const SimpleSchema& s,
                          ValueList* list);
  absl::StatusOr<bool> ValidateTerms(const Json& v, const TermSet& ts,
                                     int depth);
  absl::StatusOr<std::optional<TermSet>> KeyValueTerms(const ObjectC& o,
                                                       const std::string& key);
  // Whether a member named `key` may stand for `w`, and the names that may.
  absl::StatusOr<bool> WitnessName(const Witness& w, const std::string& key);
  absl::StatusOr<CharDfa> WitnessNames(const Witness& w);
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
  // StringDfa(c, true) but for maxLength.
  absl::StatusOr<CharDfa> StringDfaWithoutMax(const StringC& c);
  // A string of `c` whose maxLength matchers count at run time
  // (grammar_ir.h's Rule::max_chars), its other constraints (minLength
  // too) in its automaton `open` (StringDfaWithoutMax): for products too
  // large to build whole, or to write out.
  absl::StatusOr<int32_t> CountedString(const StringC& c);
  absl::StatusOr<int32_t> CountedString(const StringC& c, const CharDfa& open);
  // With `distinct` (one entry per prefix position, then the rest), the
  // array is a rule of its own whose frames keep its items apart at run
  // time: each position's growing values a call of a distinct rule
  // (grammar_ir.h), its listed values once members of the array.
  absl::StatusOr<int32_t> ArrayExpr(
      const ArrayC& a, int depth,
      const std::vector<DistinctPosition>* distinct = nullptr);
  absl::StatusOr<int32_t> ContainsArray(const ArrayC& a, int depth);
  absl::StatusOr<int32_t> UniqueArray(const ArrayC& a, int depth);
  // An array of unique items that are not few listed values: kept distinct
  // at run time where DistinctPositions allows, else refused (or, leniently,
  // not unique).
  absl::StatusOr<int32_t> DistinctOrPlain(const ArrayC& a, int depth);
  // The values `ts` allows, split for keeping them distinct at run time
  // (engine/distinct_values.h): null, booleans, a number's zero and listed
  // scalars are few, counted once each; strings with no upper length,
  // pattern or format may always grow, as may objects that take any further
  // member, arrays of any length, and numbers other than zero written
  // without exponents (1e0 would be one only ever, as an integer's 1.0). A
  // number with bounds or multiples cannot, nor listed arrays and objects
  // where the growing values hold such too: nullopt for those.
  absl::StatusOr<std::optional<DistinctPosition>> SplitDistinct(
      const TermSet& ts);
  // Whether every value in the making under `m` (no null, booleans or
  // listed values; numbers as SplitDistinct leaves them) can still become
  // infinitely many distinct values.
  absl::StatusOr<bool> EndlessAlt(const SimpleSchema& m);
  // SplitDistinct for every position of `a` (prefix, then the rest), when
  // every position splits, the listed values number at most 64 (a frame's
  // bits) and no position past the first that the array requires is left
  // with listed values only (their separator would be refused with the
  // last of them, leaving nothing to follow); nullopt otherwise.
  absl::StatusOr<std::optional<std::vector<DistinctPosition>>>
  DistinctPositions(const ArrayC& a);
  // Every value `ts` allows, when they are few and listed (enum, const,
  // null, booleans); nullopt otherwise.
  absl::StatusOr<std::optional<std::vector<const Json*>>> FiniteValues(
      const TermSet& ts);
  absl::StatusOr<int32_t> ObjectExpr(const ObjectC& o, int depth);
  // A member of an object in any order, each at most once, as the name
  // trie reads it after the first: its name's bytes with the closing quote,
  // and what follows the name.
  struct NextMember {
    int bit;
    std::string quoted;  // the name and the closing quote
    int32_t after;       // a call of the rule reading the separator and value
  };
  // What reads the names of `members` (their first `pos` bytes read already
  // and alike; names JSON would let escape are not among them, so each has
  // one spelling and none is a prefix of another): their common run, then
  // per next byte a call made right after it, of a dispatch for the names
  // it leaves (guarded by their bits) or of the rule of the one member it
  // names (its bit counted and guarded), which reads the rest.
  // Linear in the names' bytes.
  int32_t NameTrie(const std::vector<const NextMember*>& members, size_t pos);
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
  // Disjointness proofs left to this conversion (a proof may intersect
  // string automata; a oneOf of hundreds of branches asks for each pair).
  int64_t disjoint_proofs_left_ = 20000;
};

}  // namespace grammard::grammar::json_schema_internal

#endif  // GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_CONVERTER_IMPL_H_
