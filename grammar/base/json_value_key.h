// JsonValueKey: a JSON text reduced to a key that two texts share exactly
// when they are equal as JSON values (the equality JSON Schema's uniqueItems
// uses): numbers by their exact decimal value (1, 1.0 and 10e-1 are one),
// strings after unescaping ("\u0061" is "a"), objects whatever their member
// order (a repeated name keeps its last value, as parsers do), arrays item by
// item. A matcher keeps the keys of the items an array has seen (see
// engine/stack.h).
//
// The text is expected to be one JSON value, as a grammar admits it; text
// that is not (or nests deeper than kMaxJsonKeyDepth) becomes a key of its
// bytes, equal only to the same bytes. Exponents are read up to 10^15 in
// magnitude; beyond that, values that differ only there share a key.
//
// Cost: O(bytes), plus sorting each object's members. Thread-safety: a pure
// function.
#ifndef GRAMMARD_GRAMMAR_BASE_JSON_VALUE_KEY_H_
#define GRAMMARD_GRAMMAR_BASE_JSON_VALUE_KEY_H_

#include <string>
#include <string_view>

namespace grammard::grammar {

inline constexpr int kMaxJsonKeyDepth = 256;

// Appends the key of `text` to `*out`.
void AppendJsonValueKey(std::string_view text, std::string* out);

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_BASE_JSON_VALUE_KEY_H_
