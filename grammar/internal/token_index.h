// TokenIndex: a vocabulary's text tokens sorted by their bytes, with the
// length each shares with the one before it, so that walking all tokens in
// order is a depth-first walk of the token trie: work done for a shared
// prefix is done once.
//
// Cost: built once per vocabulary, O(V log V) (about 30 ms for 128K tokens).
// Thread-safety: immutable once built.
#ifndef GRAMMARD_GRAMMAR_INTERNAL_TOKEN_INDEX_H_
#define GRAMMARD_GRAMMAR_INTERNAL_TOKEN_INDEX_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/vocabulary.h"

namespace grammard::grammar::internal {

class TokenIndex {
 public:
  explicit TokenIndex(std::shared_ptr<const Vocabulary> vocab);

  const Vocabulary& vocab() const { return *vocab_; }
  // Text tokens with at least one byte, in byte order.
  int32_t size() const { return static_cast<int32_t>(ids_.size()); }
  int32_t id(int32_t i) const { return ids_[i]; }
  std::string_view bytes(int32_t i) const { return vocab_->bytes(ids_[i]); }
  // Bytes token i shares with token i - 1 (0 for i == 0).
  int32_t lcp(int32_t i) const { return lcp_[i]; }
  // The first position after i whose token does not start with the first
  // `depth` bytes of token i (depth <= its length); for skipping a dead
  // subtree of the trie.
  int32_t SkipPast(int32_t i, int32_t depth) const;
  // The id of the longest token that is a prefix of `text`, or -1.
  int32_t LongestPrefix(std::string_view text) const;

 private:
  std::shared_ptr<const Vocabulary> vocab_;
  std::vector<int32_t> ids_;
  std::vector<int32_t> lcp_;
};

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_INTERNAL_TOKEN_INDEX_H_
