#include "grammar/base/json_value_key.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "grammar/base/utf8.h"

namespace grammard::grammar {
namespace {

// Keys are written with their lengths, so that no key is a prefix of
// another and concatenations of them cannot be confused:
//   null: 'z', true: 't', false: 'f'
//   number: 'n' sign digits 'e' exponent ';' (digits without leading or
//           trailing zeros; zero is "n0;")
//   string: 's' length ':' bytes
//   array:  'a' keys... ']'
//   object: 'o' (string key, value key)... '}' in key order
class KeyWriter {
 public:
  explicit KeyWriter(std::string_view text) : text_(text) {}

  bool Value(std::string* out, int depth) {
    SkipSpace();
    if (pos_ >= text_.size() || depth > kMaxJsonKeyDepth) return false;
    const char c = text_[pos_];
    if (c == '{') return Object(out, depth);
    if (c == '[') return Array(out, depth);
    if (c == '"') {
      std::string s;
      if (!String(&s)) return false;
      AppendString(s, out);
      return true;
    }
    if (Literal("null")) return out->push_back('z'), true;
    if (Literal("true")) return out->push_back('t'), true;
    if (Literal("false")) return out->push_back('f'), true;
    return Number(out);
  }

  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }

 private:
  static void AppendString(const std::string& s, std::string* out) {
    out->push_back('s');
    out->append(std::to_string(s.size()));
    out->push_back(':');
    out->append(s);
  }

  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
            text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  bool Hex4(uint32_t* v) {
    if (pos_ + 4 > text_.size()) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      *v <<= 4;
      if (h >= '0' && h <= '9') {
        *v |= static_cast<uint32_t>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        *v |= static_cast<uint32_t>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        *v |= static_cast<uint32_t>(h - 'A' + 10);
      } else {
        return false;
      }
    }
    return true;
  }

  // The unescaped bytes of the string at pos_.
  bool String(std::string* s) {
    ++pos_;  // the opening quote
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        s->push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) return false;
      const char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          s->push_back(e);
          break;
        case 'b':
          s->push_back('\b');
          break;
        case 'f':
          s->push_back('\f');
          break;
        case 'n':
          s->push_back('\n');
          break;
        case 'r':
          s->push_back('\r');
          break;
        case 't':
          s->push_back('\t');
          break;
        case 'u': {
          uint32_t cp;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && text_.substr(pos_, 2) == "\\u") {
            const size_t back = pos_;
            pos_ += 2;
            uint32_t low;
            if (Hex4(&low) && low >= 0xDC00 && low < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else {
              pos_ = back;
            }
          }
          // A lone surrogate has no UTF-8 form; it is kept apart from every
          // scalar value by a byte UTF-8 never uses.
          if (cp >= 0xD800 && cp < 0xE000) {
            s->push_back('\xff');
            s->push_back(static_cast<char>(cp >> 8));
            s->push_back(static_cast<char>(cp & 0xff));
          } else {
            base::AppendUtf8(cp, s);
          }
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }

  bool Number(std::string* out) {
    const size_t begin = pos_;
    bool negative = false;
    if (pos_ < text_.size() && text_[pos_] == '-') {
      negative = true;
      ++pos_;
    }
    std::string digits;  // integer and fraction digits together
    int64_t exponent = 0;
    size_t int_digits = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      digits.push_back(text_[pos_++]);
      ++int_digits;
    }
    if (int_digits == 0) return false;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      const size_t frac_begin = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        digits.push_back(text_[pos_++]);
      }
      if (pos_ == frac_begin) return false;
      exponent -= static_cast<int64_t>(pos_ - frac_begin);
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      bool exp_negative = false;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) {
        exp_negative = text_[pos_++] == '-';
      }
      const size_t exp_begin = pos_;
      int64_t e = 0;
      constexpr int64_t kCap = 1000000000000000;  // 10^15
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        e = std::min(kCap, e * 10 + (text_[pos_++] - '0'));
      }
      if (pos_ == exp_begin) return false;
      exponent += exp_negative ? -e : e;
    }
    if (pos_ == begin) return false;
    // value = digits * 10^exponent: drop leading and trailing zeros.
    size_t first = digits.find_first_not_of('0');
    if (first == std::string::npos) {
      out->append("n0;");
      return true;
    }
    size_t last = digits.find_last_not_of('0');
    exponent += static_cast<int64_t>(digits.size() - 1 - last);
    out->push_back('n');
    if (negative) out->push_back('-');
    out->append(digits, first, last + 1 - first);
    out->push_back('e');
    out->append(std::to_string(exponent));
    out->push_back(';');
    return true;
  }

  bool Array(std::string* out, int depth) {
    ++pos_;
    out->push_back('a');
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      out->push_back(']');
      return true;
    }
    for (;;) {
      if (!Value(out, depth + 1)) return false;
      SkipSpace();
      if (pos_ >= text_.size()) return false;
      const char c = text_[pos_++];
      if (c == ']') break;
      if (c != ',') return false;
    }
    out->push_back(']');
    return true;
  }

  bool Object(std::string* out, int depth) {
    ++pos_;
    std::vector<std::pair<std::string, std::string>> members;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
    } else {
      for (;;) {
        SkipSpace();
        if (pos_ >= text_.size() || text_[pos_] != '"') return false;
        std::pair<std::string, std::string> m;
        if (!String(&m.first)) return false;
        SkipSpace();
        if (pos_ >= text_.size() || text_[pos_++] != ':') return false;
        if (!Value(&m.second, depth + 1)) return false;
        members.push_back(std::move(m));
        SkipSpace();
        if (pos_ >= text_.size()) return false;
        const char c = text_[pos_++];
        if (c == '}') break;
        if (c != ',') return false;
      }
    }
    // The last of equal names wins: stable order, then the last of a run.
    std::stable_sort(
        members.begin(), members.end(),
        [](const auto& a, const auto& b) { return a.first < b.first; });
    out->push_back('o');
    for (size_t i = 0; i < members.size(); ++i) {
      if (i + 1 < members.size() && members[i + 1].first == members[i].first)
        continue;
      AppendString(members[i].first, out);
      out->append(members[i].second);
    }
    out->push_back('}');
    return true;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

void AppendJsonValueKey(std::string_view text, std::string* out) {
  const size_t mark = out->size();
  KeyWriter writer(text);
  if (writer.Value(out, 0) && writer.AtEnd()) return;
  out->resize(mark);
  out->push_back('x');
  out->append(text);
}

}  // namespace grammard::grammar
