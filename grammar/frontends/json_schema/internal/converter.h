// The JSON Schema to grammar conversion behind json_schema.h.
//
// Schemas are read as conjunctions of "terms" (a schema location, possibly
// negated). Each term expands into a disjunctive normal form whose literals
// are "fragments": the keywords of one location that constrain values
// directly (type, enum, bounds, properties, items, ...), or pieces made up
// by the expansion (a forbidden property, a required one, a negated
// keyword). allOf and $ref multiply forms, anyOf adds alternatives, oneOf
// adds them when its branches are provably disjoint and otherwise expands
// into "this branch and not the others", not pushes negation down to single
// keywords, if/then/else becomes (if and then) or (not if and else), and
// dependentRequired/dependentSchemas become "absent, or present with ...".
// Every alternative's fragments merge into one SimpleSchema (per JSON type:
// the constraints left), which is written as grammar; subschemas of
// properties and items become rules of their own, keyed by their term sets,
// so recursion and sharing come for free. Arrays and objects whose
// constraints count (contains, uniqueItems over listed values, required
// and min/maxProperties, a member that must exist because
// additionalProperties was negated) become small state machines of rules.
//
// Soundness rests on two habits: a negated term is always checked through
// its own (negative) expansion, and a language that was narrowed on purpose
// (some formats) is never complemented nor used to prove disjointness.
//
// Cost: linear in the schema for plain schemas; combinators multiply
// alternatives (bounded by ConvertOptions::max_alternatives), and string and
// number constraints build automata (bounded by DfaLimits).
// Thread-safety: one converter per conversion.
#ifndef GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_CONVERTER_H_
#define GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_CONVERTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "grammar/base/member_set.h"
#include "grammar/frontends/json_schema/internal/char_dfa.h"
#include "grammar/frontends/json_schema/internal/json_emitter.h"
#include "grammar/frontends/json_schema/internal/schema_doc.h"
#include "grammar/ir/grammar_ir.h"

namespace grammard::grammar::json_schema_internal {

// The order members of an object may appear in.
enum class PropertyOrder {
  kAsWritten,      // declared properties in schema order
  kRequiredFirst,  // required ones first, then the others, each as written
  kAny,            // any order (costs rules exponential in the properties)
  kAnyWhenSmall,   // kAny up to kMaxAnyOrderProperties, else kAsWritten
  kAnyRepeatable,  // kAnyWhenSmall, but larger objects in any order too,
                   // declared members repeatable (see JsonPropertyOrder)
};

// The largest object PropertyOrder::kAnyWhenSmall lets write its members in
// any order: 2^6 subsets of members written, a few hundred automaton states.
inline constexpr int kMaxAnyOrderProperties = 6;

// The most members counted at run time (a bit each in a matcher's frame:
// grammar_ir.h's member_bit): kAny's declared members of objects with more
// than kMaxAnyOrderProperties, and kAnyRepeatable's required ones.
inline constexpr int kMaxCountedMembers = MemberSet::kMax;

struct ConvertOptions {
  bool strict = true;
  PropertyOrder order = PropertyOrder::kAsWritten;
  JsonLayout layout;
  DfaLimits dfa;
  // Alternatives one schema may expand into (anyOf x oneOf x ...).
  int32_t max_alternatives = 512;
  // Rules and expressions the grammar may have while being built.
  int32_t max_rules = 50000;
  int64_t max_exprs = 2000000;
};

struct DroppedKeyword {
  std::string keyword;
  std::string pointer;  // JSON pointer of the keyword, e.g.
                        // "#/properties/a/uniqueItems"
  std::string reason;
};

// Converts the whole document into `grammar` (which must be empty); the
// root rule is the document's root schema. In lenient mode every keyword
// that was dropped is appended to `dropped`.
absl::Status ConvertSchema(SchemaDoc* doc, const ConvertOptions& options,
                           Grammar* grammar,
                           std::vector<DroppedKeyword>* dropped);

}  // namespace grammard::grammar::json_schema_internal

#endif  // GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_CONVERTER_H_
