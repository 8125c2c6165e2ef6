// The keywords the JSON Schema converter acts on, in one table: which are
// known (a $ref beside a known keyword is not a mere alias) and how `not`
// groups a location's own keywords (patternProperties and
// additionalProperties are negated together with properties, because which
// schema a member answers to depends on all three).
//
// Cost: a static table; lookups scan it (a few dozen entries).
// Thread-safety: immutable.
#ifndef GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_KEYWORDS_H_
#define GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_KEYWORDS_H_

#include <string_view>
#include <vector>

namespace grammard::grammar::json_schema_internal {

struct Keyword {
  std::string_view name;
  // For a location's own constraints: the keyword of the group a negation
  // reads it in (its own name for the group's first keyword). Empty for
  // the applicators (allOf, anyOf, oneOf, not, if/then/else, references,
  // dependencies), which positive and negative expansion read themselves.
  std::string_view group;
};

// Every keyword the converter acts on; groups in the order a negation
// writes them.
const std::vector<Keyword>& ConverterKeywords();

bool IsKnownKeyword(std::string_view key);

}  // namespace grammard::grammar::json_schema_internal

#endif  // GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_KEYWORDS_H_
