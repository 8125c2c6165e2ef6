// Strict UTF-8 encoding and decoding shared by the grammar front ends, the
// printer and the byte lowering.
//
// "Strict" means what RFC 3629 allows and nothing else: no overlong forms, no
// surrogates (U+D800..U+DFFF), nothing above U+10FFFF. Grammars describe text
// a tokenizer will produce, and those are exactly the sequences a model's
// output may contain.
//
// Cost: O(1) per code point, no allocation except appending. Thread-safe.
#ifndef GRAMMARD_GRAMMAR_BASE_UTF8_H_
#define GRAMMARD_GRAMMAR_BASE_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace grammard::grammar::base {

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;
inline constexpr uint32_t kSurrogateLo = 0xD800;
inline constexpr uint32_t kSurrogateHi = 0xDFFF;

inline bool IsSurrogate(uint32_t cp) {
  return cp >= kSurrogateLo && cp <= kSurrogateHi;
}

// A Unicode scalar value: a code point that UTF-8 can encode.
inline bool IsScalarValue(uint32_t cp) {
  return cp <= kMaxCodepoint && !IsSurrogate(cp);
}

// Appends the UTF-8 encoding of `cp`, which must be a scalar value.
void AppendUtf8(uint32_t cp, std::string* out);

// Decodes the code point starting at text[*pos] and advances *pos past it.
// Returns false, leaving *pos unchanged, when the bytes there are not a
// complete, strictly valid encoding.
bool DecodeUtf8(std::string_view text, size_t* pos, uint32_t* cp);

// Whether `text` is entirely valid UTF-8. On failure, *error_offset (when not
// null) receives the offset of the first invalid byte.
bool IsValidUtf8(std::string_view text, size_t* error_offset = nullptr);

}  // namespace grammard::grammar::base

#endif  // GRAMMARD_GRAMMAR_BASE_UTF8_H_
