// Parsing JSON text from requests with its nesting and its containers
// bounded. nlohmann's parser is iterative, but a value nested thousands deep
// makes every later recursive walk (canonical forms, schema conversion) slow
// or dangerous: a 10,000-deep schema once took 12 s to canonicalise. And
// ordered_json finds keys by linear search, so an object of 50,000 members
// took 20 s to parse and convert (arrays have no keys: no such bound). So the
// text is scanned for both first, and parsed only within the bounds.
//
// Cost: one pass over the text, then nlohmann's parse. Thread-safety: pure
// functions.
#ifndef GRAMMARD_GRAMMAR_BASE_BOUNDED_JSON_H_
#define GRAMMARD_GRAMMAR_BASE_BOUNDED_JSON_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace grammard::grammar {

// The deepest nesting of a JSON Schema, and of a structural tag (which holds
// schemas).
inline constexpr int kMaxSchemaJsonDepth = 512;
inline constexpr int kMaxStructuralTagJsonDepth = 1024;
// Members of one object (MaskBench's largest container has 2,461).
inline constexpr int kMaxJsonObjectMembers = 10000;

// InvalidArgument "JSON nested deeper than <max_depth> levels", "a JSON
// object of more than 10000 members" or "not valid JSON at line L, column
// C: <why>" (callers say what the text was).
absl::StatusOr<nlohmann::ordered_json> ParseBoundedJson(std::string_view text,
                                                        int max_depth);

// The same depth bound for a value already parsed (a schema inside a larger
// document): "JSON nested deeper than <max_depth> levels". Iterative,
// linear in the value.
absl::Status CheckJsonDepth(const nlohmann::ordered_json& value, int max_depth);

// About how much heap `value` holds (its containers' storage and long
// strings), for budgets that count parsed documents. Linear in the value.
int64_t JsonHeapBytes(const nlohmann::ordered_json& value);

// A lower bound of JsonHeapBytes of the value `text` parses to, read
// without building it (nlohmann's SAX parser: no allocation but the
// parser's), so that a budget can refuse a document before it is built.
// What the text holds up to its first error or past `max_depth` levels
// counts; the rest does not. Members of repeated names count as written
// (the parsed object keeps the last of them only).
int64_t LeastJsonHeapBytes(std::string_view text, int max_depth);

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_BASE_BOUNDED_JSON_H_
