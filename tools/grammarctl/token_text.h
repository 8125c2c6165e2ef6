// The bytes each token id stands for, read from a Hugging Face tokenizer.json,
// so that a pure gRPC client (which receives only token ids and masks) can
// print what it generated. grammard has no detokenize RPC, hence this.
//
// Two vocabularies are understood: byte-level BPE (GPT-2 style: Llama 3,
// Qwen 3, DeepSeek V3, gpt-oss), where each byte is spelled as one printable
// code point; and SentencePiece-style BPE (Llama 2, Gemma 3), where "▁" is a
// space and "<0xXX>" a raw byte. Added tokens decode to their content. The
// SentencePiece decoders' "strip the leading space" step is not applied.
//
// Cost: Load parses the whole tokenizer.json (a few hundred ms for a 128K
// vocabulary) and keeps one string per token. Thread-safety: immutable after
// Load; concurrent Bytes calls are safe.
#ifndef GRAMMARD_TOOLS_GRAMMARCTL_TOKEN_TEXT_H_
#define GRAMMARD_TOOLS_GRAMMARCTL_TOKEN_TEXT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grammard::grammarctl {

class TokenText {
 public:
  // From the text of a tokenizer.json.
  static absl::StatusOr<TokenText> Parse(const std::string& tokenizer_json);
  // From a tokenizer.json file.
  static absl::StatusOr<TokenText> Load(const std::string& path);

  // The bytes of token `id`; empty for an id the file does not name (the
  // padding rows of a model vocabulary larger than the tokenizer's).
  const std::string& Bytes(int32_t id) const;

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }

 private:
  std::vector<std::string> bytes_;
};

}  // namespace grammard::grammarctl

#endif  // GRAMMARD_TOOLS_GRAMMARCTL_TOKEN_TEXT_H_
