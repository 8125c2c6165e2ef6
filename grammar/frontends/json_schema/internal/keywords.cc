#include "grammar/frontends/json_schema/internal/keywords.h"

#include <algorithm>

namespace grammard::grammar::json_schema_internal {

const std::vector<Keyword>& ConverterKeywords() {
  static const std::vector<Keyword>* const kKeywords = new std::vector<Keyword>{
      {"type", "type"},
      {"enum", "enum"},
      {"const", "const"},
      {"minimum", "minimum"},
      {"maximum", "maximum"},
      {"exclusiveMinimum", "exclusiveMinimum"},
      {"exclusiveMaximum", "exclusiveMaximum"},
      {"multipleOf", "multipleOf"},
      {"minLength", "minLength"},
      {"maxLength", "maxLength"},
      {"pattern", "pattern"},
      {"format", "format"},
      {"items", "items"},
      {"prefixItems", "items"},
      {"additionalItems", "items"},  // read only beside an array of items
      {"minItems", "minItems"},
      {"maxItems", "maxItems"},
      {"uniqueItems", "uniqueItems"},
      {"contains", "contains"},
      {"minContains", "contains"},  // read only beside contains
      {"maxContains", "contains"},
      {"properties", "properties"},
      {"patternProperties", "properties"},
      {"additionalProperties", "properties"},
      {"required", "required"},
      {"minProperties", "minProperties"},
      {"maxProperties", "maxProperties"},
      {"propertyNames", "propertyNames"},
      {"contentEncoding", "contentEncoding"},  // asserted in draft 7 only
      {"contentMediaType", "contentMediaType"},
      {"unevaluatedProperties", "unevaluatedProperties"},
      {"unevaluatedItems", "unevaluatedItems"},
      {"dependentRequired", ""},
      {"dependentSchemas", ""},
      {"dependencies", ""},
      {"allOf", ""},
      {"anyOf", ""},
      {"oneOf", ""},
      {"not", ""},
      {"if", ""},
      {"then", ""},
      {"else", ""},
      {"$ref", ""},
      {"$dynamicRef", ""},
      {"$recursiveRef", ""},
  };
  return *kKeywords;
}

bool IsKnownKeyword(std::string_view key) {
  const std::vector<Keyword>& all = ConverterKeywords();
  return std::any_of(all.begin(), all.end(),
                     [&](const Keyword& k) { return k.name == key; });
}

}  // namespace grammard::grammar::json_schema_internal
