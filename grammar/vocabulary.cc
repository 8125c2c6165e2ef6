#include "grammar/vocabulary.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace grammard::grammar {
namespace {

using Json = nlohmann::json;

// Ids beyond this are taken as a lie rather than a vocabulary: a tokenizer
// claiming id 2^31 must not make us allocate gigabytes.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;
constexpr size_t kMaxFileBytes = size_t{1} << 30;

// GPT-2's byte-to-unicode map, inverted: printable Latin-1 bytes stand for
// themselves, the other 68 bytes are drawn as U+0100.. in byte order.
std::array<int, 324> ByteLevelDecodeTable() {
  std::array<int, 324> table;
  table.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                     (b >= 0xAE && b <= 0xFF);
    table[printable ? b : next++] = b;
  }
  return table;
}

// Decodes one UTF-8 code point at s[*i], advancing *i; -1 if malformed.
int32_t NextCodePoint(std::string_view s, size_t* i) {
  unsigned char c = s[*i];
  int len = c < 0x80         ? 1
            : (c >> 5) == 6  ? 2
            : (c >> 4) == 14 ? 3
            : (c >> 3) == 30 ? 4
                             : 0;
  if (len == 0 || *i + len > s.size()) return -1;
  int32_t cp = len == 1 ? c : c & (0x7F >> len);
  for (int k = 1; k < len; ++k) {
    unsigned char cc = s[*i + k];
    if ((cc & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (cc & 0x3F);
  }
  *i += len;
  return cp;
}

absl::StatusOr<std::string> DecodeByteLevel(std::string_view piece) {
  static const std::array<int, 324> kTable = ByteLevelDecodeTable();
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    int32_t cp = NextCodePoint(piece, &i);
    if (cp < 0 || cp >= static_cast<int32_t>(kTable.size()) || kTable[cp] < 0) {
      return absl::InvalidArgumentError(
          "character outside the ByteLevel alphabet");
    }
    out.push_back(static_cast<char>(kTable[cp]));
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string DecodeSentencePiece(std::string_view piece, bool byte_fallback) {
  if (byte_fallback && piece.size() == 6 && piece.substr(0, 3) == "<0x" &&
      piece[5] == '>' && HexDigit(piece[3]) >= 0 && HexDigit(piece[4]) >= 0) {
    return std::string(
        1, static_cast<char>(HexDigit(piece[3]) * 16 + HexDigit(piece[4])));
  }
  static constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 ▁
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    if (piece.substr(i, kSpaceMark.size()) == kSpaceMark) {
      out.push_back(' ');
      i += kSpaceMark.size();
    } else {
      out.push_back(piece[i++]);
    }
  }
  return out;
}

std::string DescribeType(const Json& j) { return j.type_name(); }

// Finds the decoder (or pre-tokenizer/normalizer) features that tell how
// token strings encode text.
struct EncodingFeatures {
  bool byte_level = false;
  bool space_mark = false;  // Replace("▁", " ") or Metaspace
  bool byte_fallback = false;
  std::string unsupported;  // a decoder type we cannot honour
};

// Notes what `root` and the components listed under it (decoders,
// pretokenizers, normalizers, nested as deep as the file nests them: with a
// stack of its own, since the file comes from a client) say.
void ScanComponent(const Json& root, EncodingFeatures* f) {
  std::vector<const Json*> stack{&root};
  while (!stack.empty()) {
    const Json& j = *stack.back();
    stack.pop_back();
    if (!j.is_object()) continue;
    auto type = j.find("type");
    if (type == j.end() || !type->is_string()) continue;
    const std::string& t = type->get_ref<const std::string&>();
    if (t == "ByteLevel") {
      f->byte_level = true;
    } else if (t == "Metaspace") {
      f->space_mark = true;
    } else if (t == "ByteFallback") {
      f->byte_fallback = true;
    } else if (t == "Replace") {
      auto pattern = j.find("pattern");
      auto content = j.find("content");
      if (pattern != j.end() && pattern->is_object() && content != j.end() &&
          content->is_string()) {
        auto s = pattern->find("String");
        if (s != pattern->end() && s->is_string() &&
            s->get_ref<const std::string&>() == "\xE2\x96\x81" &&
            content->get_ref<const std::string&>() == " ") {
          f->space_mark = true;
        }
      }
    } else if (t == "WordPiece" || t == "BPEDecoder" || t == "CTC") {
      f->unsupported = t;
    }
    // Pushed in reverse, so that components are read in the file's order.
    for (const char* list : {"normalizers", "pretokenizers", "decoders"}) {
      auto it = j.find(list);
      if (it == j.end() || !it->is_array()) continue;
      for (auto sub = it->rbegin(); sub != it->rend(); ++sub) {
        stack.push_back(&*sub);
      }
    }
  }
}

absl::StatusOr<TokenEncoding> DetectEncoding(const Json& root,
                                             bool* byte_fallback) {
  EncodingFeatures decoder;
  auto dec = root.find("decoder");
  if (dec != root.end()) ScanComponent(*dec, &decoder);
  if (!decoder.unsupported.empty()) {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer.json: decoder type '", decoder.unsupported,
                     "' is not supported (expected ByteLevel, Metaspace or "
                     "Replace(\"\xE2\x96\x81\", \" \") with ByteFallback)"));
  }
  *byte_fallback = decoder.byte_fallback;
  auto model = root.find("model");
  if (model != root.end() && model->is_object()) {
    auto bf = model->find("byte_fallback");
    if (bf != model->end() && bf->is_boolean() && bf->get<bool>()) {
      *byte_fallback = true;
    }
  }
  if (decoder.byte_level) return TokenEncoding::kByteLevel;
  if (decoder.space_mark) return TokenEncoding::kSentencePiece;
  // No decoder: the pre-tokenizer or normalizer still tells the family.
  EncodingFeatures other;
  for (const char* key : {"pre_tokenizer", "normalizer"}) {
    auto it = root.find(key);
    if (it != root.end()) ScanComponent(*it, &other);
  }
  if (other.byte_level) return TokenEncoding::kByteLevel;
  if (other.space_mark) return TokenEncoding::kSentencePiece;
  return absl::UnimplementedError(
      "tokenizer.json: cannot tell how tokens encode text: 'decoder' has "
      "neither ByteLevel nor Metaspace/Replace(\"\xE2\x96\x81\", \" \")");
}

absl::StatusOr<int32_t> CheckedId(const Json& j, const std::string& where) {
  if (!j.is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": id must be an integer, got ", DescribeType(j)));
  }
  int64_t id = j.get<int64_t>();
  if (id < 0 || id > kMaxTokenId) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": id ", id, " is outside [0, ", kMaxTokenId, "]"));
  }
  return static_cast<int32_t>(id);
}

// The piece strings of model.vocab, indexed by id (nullopt for gaps).
absl::StatusOr<std::vector<std::optional<std::string>>> ReadModelVocab(
    const Json& model) {
  std::vector<std::optional<std::string>> pieces;
  auto vocab = model.find("vocab");
  if (vocab == model.end()) {
    return absl::InvalidArgumentError("tokenizer.json: model.vocab is missing");
  }
  auto place = [&](int32_t id, std::string piece) -> absl::Status {
    if (static_cast<size_t>(id) >= pieces.size()) pieces.resize(id + 1);
    if (pieces[id].has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer.json: model.vocab: id ", id, " is given to both '",
          *pieces[id], "' and '", piece, "'"));
    }
    pieces[id] = std::move(piece);
    return absl::OkStatus();
  };
  if (vocab->is_object()) {  // BPE, WordPiece, WordLevel: {piece: id}
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
      auto id = CheckedId(it.value(),
                          "tokenizer.json: model.vocab['" + it.key() + "']");
      if (!id.ok()) return id.status();
      if (auto s = place(*id, it.key()); !s.ok()) return s;
    }
  } else if (vocab->is_array()) {  // Unigram: [[piece, score], ...]
    int32_t id = 0;
    for (const Json& entry : *vocab) {
      if (!entry.is_array() || entry.empty() || !entry[0].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tokenizer.json: model.vocab[", id, "] must be [piece, score]"));
      }
      if (id > kMaxTokenId) {
        return absl::InvalidArgumentError(
            "tokenizer.json: model.vocab is too large");
      }
      if (auto s = place(id, entry[0].get<std::string>()); !s.ok()) return s;
      ++id;
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer.json: model.vocab must be an object or an array, got ",
        DescribeType(*vocab)));
  }
  return pieces;
}

std::optional<std::string> ConfigTokenContent(const Json& config,
                                              const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) {
      return content->get<std::string>();
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0 || static_cast<size_t>(size) > kMaxFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": size ", size, " is not readable or over 1 GiB"));
  }
  std::string data(static_cast<size_t>(size), '\0');
  in.seekg(0);
  in.read(data.data(), size);
  if (!in) return absl::DataLossError(absl::StrCat("cannot read ", path));
  return data;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 15]);
  }
  return hex;
}

void AppendU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

}  // namespace

bool Vocabulary::is_eos(int32_t id) const {
  return std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end();
}

void Vocabulary::Lay(const std::vector<std::string_view>& text) {
  // By their first eight bytes, read as one big-endian number: near enough
  // the byte order for reads in it to stay close, and an integer sort (one
  // of the strings themselves made loading llama3 half as slow again).
  std::vector<std::pair<uint64_t, int32_t>> order(text.size());
  size_t total = 0;
  for (size_t id = 0; id < text.size(); ++id) {
    uint64_t key = 0;
    for (size_t k = 0; k < 8; ++k) {
      key = key << 8 |
            (k < text[id].size() ? static_cast<uint8_t>(text[id][k]) : 0);
    }
    order[id] = {key, static_cast<int32_t>(id)};
    total += text[id].size();
  }
  std::sort(order.begin(), order.end());
  blob_.clear();
  blob_.reserve(total);
  spans_.assign(text.size(), Span{0, 0});
  for (const auto& [key, id] : order) {
    spans_[id] = {static_cast<uint32_t>(blob_.size()),
                  static_cast<uint32_t>(text[id].size())};
    blob_.append(text[id]);
  }
}

void Vocabulary::Finish() {
  num_text_ = static_cast<int32_t>(
      std::count(kinds_.begin(), kinds_.end(), TokenKind::kText));
  num_special_ = static_cast<int32_t>(
      std::count(kinds_.begin(), kinds_.end(), TokenKind::kSpecial));
  // Everything a mask depends on, in a framing with lengths so that no two
  // different vocabularies serialise alike.
  std::string canon = "grammard-vocabulary-v1";
  AppendU32(&canon, static_cast<uint32_t>(size()));
  AppendU32(&canon, static_cast<uint32_t>(tokenizer_size_));
  for (int32_t id = 0; id < size(); ++id) {
    canon.push_back(static_cast<char>(kinds_[id]));
    std::string_view b = bytes(id);
    AppendU32(&canon, static_cast<uint32_t>(b.size()));
    canon.append(b);
  }
  AppendU32(&canon, static_cast<uint32_t>(eos_ids_.size()));
  for (int32_t id : eos_ids_) AppendU32(&canon, static_cast<uint32_t>(id));
  fingerprint_ = Sha256Hex(canon);
}

absl::StatusOr<std::shared_ptr<const Vocabulary>> Vocabulary::FromJson(
    std::string_view tokenizer_json, std::string_view tokenizer_config_json,
    const VocabularyOptions& options) {
  Json root = Json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return absl::InvalidArgumentError("tokenizer.json: not valid JSON");
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        "tokenizer.json: top level must be an object");
  }
  auto model = root.find("model");
  if (model == root.end() || !model->is_object()) {
    return absl::InvalidArgumentError(
        "tokenizer.json: 'model' must be an object");
  }
  auto model_type = model->find("type");
  if (model_type != model->end()) {
    if (!model_type->is_string()) {
      return absl::InvalidArgumentError(
          "tokenizer.json: model.type must be a string");
    }
    const std::string& t = model_type->get_ref<const std::string&>();
    if (t != "BPE" && t != "Unigram" && t != "WordLevel") {
      return absl::UnimplementedError(absl::StrCat(
          "tokenizer.json: model.type '", t,
          "' is not supported (expected BPE, Unigram or WordLevel)"));
    }
  }
  bool byte_fallback = false;
  auto encoding = DetectEncoding(root, &byte_fallback);
  if (!encoding.ok()) return encoding.status();

  auto pieces = ReadModelVocab(*model);
  if (!pieces.ok()) return pieces.status();

  // Added tokens (decoded below).
  struct Added {
    int32_t id;
    std::string content;
    bool special;
  };
  std::vector<Added> added;
  auto added_json = root.find("added_tokens");
  if (added_json != root.end() && !added_json->is_null()) {
    if (!added_json->is_array()) {
      return absl::InvalidArgumentError(
          "tokenizer.json: added_tokens must be an array");
    }
    for (size_t i = 0; i < added_json->size(); ++i) {
      const Json& a = (*added_json)[i];
      std::string where = absl::StrCat("tokenizer.json: added_tokens[", i, "]");
      if (!a.is_object())
        return absl::InvalidArgumentError(where + " must be an object");
      auto id_it = a.find("id");
      auto content = a.find("content");
      if (id_it == a.end() || content == a.end() || !content->is_string()) {
        return absl::InvalidArgumentError(
            where + " needs an integer 'id' and a string 'content'");
      }
      auto id = CheckedId(*id_it, where);
      if (!id.ok()) return id.status();
      auto special = a.find("special");
      added.push_back({*id, content->get<std::string>(),
                       special != a.end() && special->is_boolean() &&
                           special->get<bool>()});
    }
  }

  int32_t tokenizer_size = static_cast<int32_t>(pieces->size());
  for (const Added& a : added)
    tokenizer_size = std::max(tokenizer_size, a.id + 1);
  if (tokenizer_size == 0) {
    return absl::InvalidArgumentError(
        "tokenizer.json: the vocabulary is empty");
  }
  int32_t size = tokenizer_size;
  if (options.model_vocab_size != 0) {
    if (options.model_vocab_size < tokenizer_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model vocabulary size ", options.model_vocab_size,
          " is smaller than the tokenizer's ", tokenizer_size, " ids"));
    }
    size = options.model_vocab_size;
  }

  std::vector<TokenKind> kinds(size, TokenKind::kAbsent);
  std::vector<std::string> text(size);
  for (int32_t id = 0; id < static_cast<int32_t>(pieces->size()); ++id) {
    const std::optional<std::string>& piece = (*pieces)[id];
    if (!piece.has_value()) continue;
    kinds[id] = TokenKind::kText;
    if (*encoding == TokenEncoding::kByteLevel) {
      auto decoded = DecodeByteLevel(*piece);
      if (!decoded.ok()) {
        // Tokens overridden by added_tokens may use any text.
        bool overridden =
            std::any_of(added.begin(), added.end(),
                        [&](const Added& a) { return a.id == id; });
        if (!overridden) {
          return absl::InvalidArgumentError(
              absl::StrCat("tokenizer.json: model.vocab token ", id, " ('",
                           *piece, "'): ", decoded.status().message()));
        }
        continue;
      }
      text[id] = *std::move(decoded);
    } else {
      text[id] = DecodeSentencePiece(*piece, byte_fallback);
    }
  }
  // Added tokens' content goes through the decoder like any token string,
  // except that ByteLevel keeps content outside its alphabet as is (as the
  // HuggingFace decoder does): Gemma's "▁▁" is two spaces, DeepSeek's
  // "<｜tool▁sep｜>" stays itself.
  for (const Added& a : added) {
    kinds[a.id] = a.special ? TokenKind::kSpecial : TokenKind::kText;
    if (a.special) {
      text[a.id].clear();
    } else if (*encoding == TokenEncoding::kByteLevel) {
      auto decoded = DecodeByteLevel(a.content);
      text[a.id] = decoded.ok() ? *std::move(decoded) : a.content;
    } else {
      text[a.id] = DecodeSentencePiece(a.content, byte_fallback);
    }
  }

  // End of sequence.
  std::vector<int32_t> eos = options.eos_ids;
  if (eos.empty() && !tokenizer_config_json.empty()) {
    Json config = Json::parse(tokenizer_config_json, nullptr, false);
    if (config.is_discarded() || !config.is_object()) {
      return absl::InvalidArgumentError(
          "tokenizer_config.json: not a valid JSON object");
    }
    std::optional<std::string> eos_text =
        ConfigTokenContent(config, "eos_token");
    if (eos_text.has_value()) {
      std::optional<int32_t> found;
      for (const Added& a : added) {
        if (a.content == *eos_text) found = a.id;
      }
      for (int32_t id = 0; !found && id < static_cast<int32_t>(pieces->size());
           ++id) {
        if ((*pieces)[id] == *eos_text) found = id;
      }
      if (!found) {
        return absl::InvalidArgumentError(
            absl::StrCat("tokenizer_config.json: eos_token '", *eos_text,
                         "' is not a token of tokenizer.json"));
      }
      eos.push_back(*found);
    }
  }
  for (int32_t id : eos) {
    if (id < 0 || id >= tokenizer_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("end-of-sequence id ", id,
                       " is outside the tokenizer's ", tokenizer_size, " ids"));
    }
    // An EOS id only ever ends the sequence; it is never text.
    kinds[id] = TokenKind::kSpecial;
    text[id].clear();
  }
  std::sort(eos.begin(), eos.end());
  eos.erase(std::unique(eos.begin(), eos.end()), eos.end());

  std::shared_ptr<Vocabulary> v(new Vocabulary());
  v->name_ = options.name;
  v->encoding_ = *encoding;
  v->tokenizer_size_ = tokenizer_size;
  v->kinds_ = std::move(kinds);
  v->Lay(std::vector<std::string_view>(text.begin(), text.end()));
  v->eos_ids_ = std::move(eos);
  v->Finish();
  return std::shared_ptr<const Vocabulary>(std::move(v));
}

absl::StatusOr<std::shared_ptr<const Vocabulary>> Vocabulary::FromDirectory(
    const std::string& dir, const VocabularyOptions& options) {
  auto tokenizer = ReadFile(dir + "/tokenizer.json");
  if (!tokenizer.ok()) return tokenizer.status();
  std::string config;
  std::ifstream probe(dir + "/tokenizer_config.json");
  if (probe.good()) {
    auto read = ReadFile(dir + "/tokenizer_config.json");
    if (!read.ok()) return read.status();
    config = *std::move(read);
  }
  auto v = FromJson(*tokenizer, config, options);
  if (!v.ok()) {
    return absl::Status(v.status().code(),
                        absl::StrCat(dir, ": ", v.status().message()));
  }
  return v;
}

absl::StatusOr<std::shared_ptr<const Vocabulary>> Vocabulary::FromTokens(
    const std::vector<std::string>& tokens,
    const std::vector<int32_t>& special_ids,
    const std::vector<int32_t>& eos_ids, const VocabularyOptions& options) {
  int32_t tokenizer_size = static_cast<int32_t>(tokens.size());
  if (tokenizer_size == 0 || tokenizer_size > kMaxTokenId) {
    return absl::InvalidArgumentError("vocabulary size must be in [1, 2^24)");
  }
  int32_t size = std::max(tokenizer_size, options.model_vocab_size);
  std::shared_ptr<Vocabulary> v(new Vocabulary());
  v->name_ = options.name;
  v->tokenizer_size_ = tokenizer_size;
  v->kinds_.assign(size, TokenKind::kAbsent);
  std::fill(v->kinds_.begin(), v->kinds_.begin() + tokenizer_size,
            TokenKind::kText);
  for (int32_t id : special_ids) {
    if (id < 0 || id >= tokenizer_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("special id ", id, " is out of range"));
    }
    v->kinds_[id] = TokenKind::kSpecial;
  }
  for (int32_t id : eos_ids) {
    if (id < 0 || id >= tokenizer_size ||
        v->kinds_[id] != TokenKind::kSpecial) {
      return absl::InvalidArgumentError(
          absl::StrCat("end-of-sequence id ", id, " must be a special token"));
    }
  }
  std::vector<std::string_view> text(size);
  for (int32_t id = 0; id < tokenizer_size; ++id) {
    if (v->kinds_[id] == TokenKind::kText) text[id] = tokens[id];
  }
  v->Lay(text);
  v->eos_ids_ = eos_ids;
  std::sort(v->eos_ids_.begin(), v->eos_ids_.end());
  v->eos_ids_.erase(std::unique(v->eos_ids_.begin(), v->eos_ids_.end()),
                    v->eos_ids_.end());
  v->Finish();
  return std::shared_ptr<const Vocabulary>(std::move(v));
}

std::string Vocabulary::Summary() const {
  const char* enc = encoding_ == TokenEncoding::kByteLevel ? "byte-level"
                    : encoding_ == TokenEncoding::kSentencePiece
                        ? "sentencepiece"
                        : "raw";
  return absl::StrCat(
      name_.empty() ? "vocabulary" : name_, ": ", size(), " ids (", num_text_,
      " text, ", num_special_, " special",
      size() > tokenizer_size_
          ? absl::StrCat(", ", size() - tokenizer_size_, " padding")
          : std::string(),
      "), eos [", absl::StrJoin(eos_ids_, ","), "], ", enc, ", fingerprint ",
      fingerprint_.substr(0, 16));
}

}  // namespace grammard::grammar
