#include "tools/grammarctl/token_text.h"

#include <array>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace grammard::grammarctl {
namespace {

using Json = nlohmann::json;

enum class Scheme { kByteLevel, kSentencePiece };

// Reads one UTF-8 code point at s[*i], advancing *i; malformed input yields
// its first byte as the code point, so nothing is lost.
uint32_t NextCodePoint(const std::string& s, size_t* i) {
  const auto c = static_cast<unsigned char>(s[*i]);
  int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
  if (*i + static_cast<size_t>(extra) >= s.size()) extra = 0;  // truncated
  uint32_t cp = extra == 0   ? c
                : extra == 1 ? (c & 0x1Fu)
                : extra == 2 ? (c & 0x0Fu)
                             : (c & 0x07u);
  for (int k = 1; k <= extra; ++k) {
    const auto next =
        static_cast<unsigned char>(s[*i + static_cast<size_t>(k)]);
    if ((next & 0xC0u) != 0x80u) {
      ++*i;
      return c;
    }
    cp = (cp << 6) | (next & 0x3Fu);
  }
  *i += 1 + static_cast<size_t>(extra);
  return cp;
}

// GPT-2's byte-to-unicode table, inverted: printable Latin-1 bytes stand for
// themselves, the other 68 bytes for U+0100 onwards in byte order.
const std::array<int, 324>& ByteLevelInverse() {
  static const std::array<int, 324> table = [] {
    std::array<int, 324> t;
    t.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      t[static_cast<size_t>(printable ? b : next++)] = b;
    }
    return t;
  }();
  return table;
}

std::string DecodeByteLevel(const std::string& piece) {
  const auto& inverse = ByteLevelInverse();
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    const size_t start = i;
    const uint32_t cp = NextCodePoint(piece, &i);
    if (cp < inverse.size() && inverse[cp] >= 0) {
      out.push_back(static_cast<char>(inverse[cp]));
    } else {
      out.append(piece, start, i - start);  // not byte-level: keep as is
    }
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string DecodeSentencePiece(const std::string& piece) {
  if (piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>' &&
      HexDigit(piece[3]) >= 0 && HexDigit(piece[4]) >= 0) {
    return std::string(
        1, static_cast<char>(HexDigit(piece[3]) * 16 + HexDigit(piece[4])));
  }
  static const std::string kSpace = "\xE2\x96\x81";  // U+2581 "▁"
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpace.size(), kSpace) == 0) {
      out.push_back(' ');
      i += kSpace.size();
    } else {
      out.push_back(piece[i++]);
    }
  }
  return out;
}

bool HasDecoder(const Json& decoder, const std::string& type) {
  if (!decoder.is_object()) return false;
  if (decoder.value("type", "") == type) return true;
  if (auto it = decoder.find("decoders");
      it != decoder.end() && it->is_array()) {
    for (const Json& d : *it) {
      if (HasDecoder(d, type)) return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<TokenText> TokenText::Parse(const std::string& tokenizer_json) {
  Json doc = Json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError("tokenizer.json is not a JSON object");
  }
  const Json& decoder = doc.contains("decoder") ? doc["decoder"] : Json();
  Scheme scheme;
  if (HasDecoder(decoder, "ByteLevel")) {
    scheme = Scheme::kByteLevel;
  } else if (HasDecoder(decoder, "ByteFallback") ||
             HasDecoder(decoder, "Replace")) {
    scheme = Scheme::kSentencePiece;
  } else {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer.json decoder ", decoder.dump(),
                     " is neither ByteLevel nor SentencePiece-style"));
  }
  const Json* vocab = nullptr;
  if (auto model = doc.find("model"); model != doc.end()) {
    if (auto v = model->find("vocab"); v != model->end() && v->is_object()) {
      vocab = &*v;
    }
  }
  if (vocab == nullptr) {
    return absl::InvalidArgumentError(
        "tokenizer.json has no model.vocab object");
  }
  TokenText text;
  auto put = [&text](int64_t id, std::string bytes) {
    if (id < 0 || id > (int64_t{1} << 24)) return;
    if (static_cast<size_t>(id) >= text.bytes_.size()) {
      text.bytes_.resize(static_cast<size_t>(id) + 1);
    }
    text.bytes_[static_cast<size_t>(id)] = std::move(bytes);
  };
  for (const auto& [piece, id] : vocab->items()) {
    if (!id.is_number_integer()) continue;
    put(id.get<int64_t>(), scheme == Scheme::kByteLevel
                               ? DecodeByteLevel(piece)
                               : DecodeSentencePiece(piece));
  }
  // Added tokens are matched on their raw content, before the model, so
  // their content is their text.
  if (auto added = doc.find("added_tokens");
      added != doc.end() && added->is_array()) {
    for (const Json& token : *added) {
      if (!token.is_object() || !token.contains("id") ||
          !token["id"].is_number_integer() || !token.contains("content") ||
          !token["content"].is_string()) {
        continue;
      }
      put(token["id"].get<int64_t>(), token["content"].get<std::string>());
    }
  }
  return text;
}

absl::StatusOr<TokenText> TokenText::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  absl::StatusOr<TokenText> text = Parse(buffer.str());
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat(path, ": ", text.status().message()));
  }
  return text;
}

const std::string& TokenText::Bytes(int32_t id) const {
  static const std::string kEmpty;
  if (id < 0 || id >= size()) return kEmpty;
  return bytes_[static_cast<size_t>(id)];
}

}  // namespace grammard::grammarctl
