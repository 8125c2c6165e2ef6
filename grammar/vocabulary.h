// Vocabulary: for every token id of a tokenizer, the exact bytes that token
// contributes to the output text, plus which ids are not text at all.
//
// This is what a grammar engine needs of a tokenizer: a token mask is decided
// by running each token's bytes through the grammar, so the bytes must be the
// ones the model's detokenizer would print. Two families of HuggingFace
// tokenizer.json are understood:
//   - ByteLevel (GPT-2 style: every byte drawn as a printable code point),
//   - SentencePiece style ("▁" for a space, "<0xXX>" byte-fallback tokens,
//     Replace/Metaspace decoders).
// Added tokens that are special (BOS, EOS, chat markers) are not text: a
// grammar never allows them, except an end-of-sequence id where the grammar
// may end. Non-special added tokens (Qwen's "<think>", Gemma's whitespace
// runs) are text tokens whose bytes are their decoded content.
//
// Per-token bytes are what the token adds on its own. A SentencePiece
// tokenizer whose decoder strips one leading space of the whole text (Llama 2)
// is not special-cased: its first token's space counts as output, as it does
// for the grammar engines vLLM and SGLang call.
//
// Cost: loading parses the JSON (about 0.1 s for a 128K vocabulary at -O2);
// afterwards every query is O(1) and token bytes are views into one buffer.
// Thread-safety: immutable once built; share it freely across threads.
#ifndef GRAMMARD_GRAMMAR_VOCABULARY_H_
#define GRAMMARD_GRAMMAR_VOCABULARY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace grammard::grammar {

// How a token id is treated by a grammar.
enum class TokenKind : uint8_t {
  kText,     // ordinary text: its bytes go through the grammar
  kSpecial,  // a special added token: never text, allowed only if it is EOS
  kAbsent,   // no token has this id (a gap, or padding of the model's vocab)
};

// The encoding of token strings in tokenizer.json.
enum class TokenEncoding : uint8_t {
  kByteLevel,      // GPT-2 byte-to-unicode map
  kSentencePiece,  // "▁" for space, "<0xXX>" byte fallback
  kRaw,            // token strings are the text itself (test vocabularies)
};

struct VocabularyOptions {
  // A name for logs and metrics (e.g. "llama3"); not part of the fingerprint.
  std::string name;
  // End-of-sequence ids. Empty: the eos_token of tokenizer_config.json.
  std::vector<int32_t> eos_ids;
  // The model's vocabulary size (rows of its embedding), which may exceed the
  // tokenizer's. 0: the tokenizer's own size. Ids past the tokenizer are
  // kAbsent and never allowed. Smaller than the tokenizer's size is an error.
  int32_t model_vocab_size = 0;
};

class Vocabulary {
 public:
  // Loads a tokenizer.json and, when non-empty, its tokenizer_config.json.
  // Errors name the field and the reason (InvalidArgument for malformed or
  // inconsistent input, Unimplemented for an unsupported tokenizer family).
  static absl::StatusOr<std::shared_ptr<const Vocabulary>> FromJson(
      std::string_view tokenizer_json, std::string_view tokenizer_config_json,
      const VocabularyOptions& options);

  // Reads dir/tokenizer.json and, if present, dir/tokenizer_config.json.
  static absl::StatusOr<std::shared_ptr<const Vocabulary>> FromDirectory(
      const std::string& dir, const VocabularyOptions& options);

  // A vocabulary given directly, for tests and tools: tokens[i] is the text
  // of id i; ids listed in special_ids are kSpecial (their text is ignored).
  // eos_ids must be among special_ids.
  static absl::StatusOr<std::shared_ptr<const Vocabulary>> FromTokens(
      const std::vector<std::string>& tokens,
      const std::vector<int32_t>& special_ids,
      const std::vector<int32_t>& eos_ids, const VocabularyOptions& options);

  Vocabulary(const Vocabulary&) = delete;
  Vocabulary& operator=(const Vocabulary&) = delete;

  // Number of ids a mask covers: the model's vocabulary size.
  int32_t size() const { return static_cast<int32_t>(kinds_.size()); }
  // Number of ids the tokenizer defines (max id + 1); <= size().
  int32_t tokenizer_size() const { return tokenizer_size_; }

  TokenKind kind(int32_t id) const { return kinds_[id]; }
  // The bytes token `id` adds to the text; empty for kSpecial and kAbsent.
  std::string_view bytes(int32_t id) const {
    return std::string_view(blob_.data() + spans_[id].begin, spans_[id].length);
  }
  // Starts loading where id's bytes lie, and (once that is near) the bytes
  // themselves: a read of a long list of ids asks for those a few ahead.
  void PrefetchSpan(int32_t id) const { __builtin_prefetch(&spans_[id]); }
  void PrefetchBytes(int32_t id) const {
    __builtin_prefetch(blob_.data() + spans_[id].begin);
  }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  bool is_eos(int32_t id) const;

  TokenEncoding encoding() const { return encoding_; }
  const std::string& name() const { return name_; }

  // SHA-256 (64 hex digits) over the size, every token's kind and bytes, and
  // the EOS ids: equal for the same tokenizer however loaded, different after
  // any change that could change a mask. Keys compiled-grammar caches.
  const std::string& fingerprint() const { return fingerprint_; }

  // Counts for a one-line summary.
  int32_t num_text_tokens() const { return num_text_; }
  int32_t num_special_tokens() const { return num_special_; }
  // "llama3: 128256 ids (128000 text, 256 special), eos 128001, byte-level,
  // fingerprint 1a2b3c4d..."
  std::string Summary() const;

 private:
  Vocabulary() = default;
  // Sets spans_ and blob_ from each id's bytes (empty where not text).
  void Lay(const std::vector<std::string_view>& text);
  // Fills counts and the fingerprint once kinds_, spans_, blob_ and
  // eos_ids_ are set.
  void Finish();

  std::string name_;
  TokenEncoding encoding_ = TokenEncoding::kRaw;
  int32_t tokenizer_size_ = 0;
  std::vector<TokenKind> kinds_;
  struct Span {
    uint32_t begin, length;
  };
  std::vector<Span> spans_;  // by id, into blob_
  // Token bytes in the order of their first bytes, not of the ids: reads
  // of many tokens go in byte order (TokenIndex::SortByBytes), and a read
  // that walked the blob by id missed the cache on most tokens.
  std::string blob_;
  std::vector<int32_t> eos_ids_;
  std::string fingerprint_;
  int32_t num_text_ = 0;
  int32_t num_special_ = 0;
};

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_VOCABULARY_H_
