#include "grammar/base/utf8.h"

namespace grammard::grammar::base {

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool DecodeUtf8(std::string_view text, size_t* pos, uint32_t* cp) {
  size_t i = *pos;
  if (i >= text.size()) return false;
  const uint8_t b0 = static_cast<uint8_t>(text[i]);
  int len;
  uint32_t value;
  uint32_t min_value;
  if (b0 < 0x80) {
    *cp = b0;
    *pos = i + 1;
    return true;
  } else if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    value = b0 & 0x1F;
    min_value = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    value = b0 & 0x0F;
    min_value = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    value = b0 & 0x07;
    min_value = 0x10000;
  } else {
    return false;
  }
  if (text.size() - i < static_cast<size_t>(len)) return false;
  for (int k = 1; k < len; ++k) {
    const uint8_t b = static_cast<uint8_t>(text[i + k]);
    if ((b & 0xC0) != 0x80) return false;
    value = (value << 6) | (b & 0x3F);
  }
  if (value < min_value || !IsScalarValue(value)) return false;
  *cp = value;
  *pos = i + len;
  return true;
}

bool IsValidUtf8(std::string_view text, size_t* error_offset) {
  size_t pos = 0;
  uint32_t cp;
  while (pos < text.size()) {
    if (!DecodeUtf8(text, &pos, &cp)) {
      if (error_offset != nullptr) *error_offset = pos;
      return false;
    }
  }
  return true;
}

}  // namespace grammard::grammar::base
