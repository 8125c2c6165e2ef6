// TokenIndex: a vocabulary's text tokens sorted by their bytes, and the trie
// of those bytes laid out in depth-first order, so that a walk over all
// tokens does the work of a shared prefix once and skips a dead prefix's
// whole subtree in one jump.
//
// It also keeps what classifying tokens learns about the vocabulary that
// any grammar may reuse: the walks of leaf_tokens.h, within a byte budget.
//
// Cost: built once per vocabulary, O(V log V) (about 30 ms for 128K tokens).
// Thread-safety: immutable once built, but for the leaf cache and the rows
// of TokensWithByte, which are safe from any thread.
#ifndef GRAMMARD_GRAMMAR_ENGINE_TOKEN_INDEX_H_
#define GRAMMARD_GRAMMAR_ENGINE_TOKEN_INDEX_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/vocabulary.h"

namespace grammard::grammar::internal {

class LeafCache;

// What the leaf cache of one vocabulary may hold: a string state's walk is
// a bitset of the vocabulary and its leavers (about 20 KB for 128K tokens),
// so a few hundred distinct DFAs.
inline constexpr size_t kLeafCacheBytes = size_t{16} << 20;

class TokenIndex {
 public:
  explicit TokenIndex(std::shared_ptr<const Vocabulary> vocab);
  ~TokenIndex();

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
  // Sorts distinct ids of text tokens here into byte order (ties by id),
  // the order ReadSorted wants: by their positions, not their bytes (near a
  // counted string's bound a matcher reads 120K tokens, whose byte
  // comparisons cost 60 ms); a list of more than 1/16 of the tokens is laid
  // out through a bitset of positions, O(V / 64). Other ids go first.
  void SortByBytes(std::vector<int32_t>* ids) const;
  // The most bytes of any token.
  int32_t max_token_length() const { return max_token_length_; }
  // The id of the longest token that is a prefix of `text`, or -1.
  int32_t LongestPrefix(std::string_view text) const;
  // The ids of every token here, one bit per id of the vocabulary.
  const std::vector<uint32_t>& all_bits() const { return all_bits_; }
  // The ids of the tokens here holding `byte`, in all_bits' layout: the
  // tokens holding one of some bytes are an OR of their rows. The rows of
  // every byte are built together on first use (one read of every token,
  // a few milliseconds for 128K tokens; 4 MB kept): a grammar's names
  // bring dozens of bytes, and a walk of the trie for them cost each
  // compile more than half a millisecond.
  const std::vector<uint32_t>& TokensWithByte(uint8_t byte) const;
  // A bitset of tokens (all_bits' layout) chosen by bytes alone, kept under
  // `key` (which must name everything `make` reads) for the grammars of
  // this vocabulary that ask again: counted members' filters are nearly
  // always the same few, and making them was a third of a small schema's
  // compile. At most kMaxByteFilters are kept (16 KB each for 128K
  // tokens); past that they are made each time. Thread-safe; `make` runs
  // outside the lock, so two threads may both make a new one.
  static constexpr size_t kMaxByteFilters = 64;
  std::shared_ptr<const std::vector<uint32_t>> ByteFilter(
      const std::string& key,
      const std::function<std::vector<uint32_t>()>& make) const;
  // The ids of the tokens here, longest first (ties in byte order): near a
  // counted string's bound only tokens longer than its slack can pass it,
  // so a matcher reads for real a prefix of this list (distinct_values.h).
  const std::vector<int32_t>& longest_first() const { return longest_first_; }

  // Shared by every grammar of this vocabulary (see leaf_tokens.h).
  LeafCache* leaf_cache() const { return leaf_cache_.get(); }

  // The trie: node 0 is the root (the empty prefix); nodes 1.. follow in
  // depth-first order, each one byte below its parent.
  int32_t num_nodes() const { return static_cast<int32_t>(node_byte_.size()); }
  uint8_t node_byte(int32_t n) const { return node_byte_[n]; }
  int32_t node_depth(int32_t n) const { return node_depth_[n]; }
  // One past the last node of n's subtree.
  int32_t node_end(int32_t n) const { return node_end_[n]; }
  // The tokens whose bytes end at node n: ids(), positions [begin, end).
  int32_t node_tokens_begin(int32_t n) const { return node_tokens_[n]; }
  int32_t node_tokens_end(int32_t n) const { return node_tokens_[n + 1]; }
  // For nodes with a large subtree: the bytes of every node strictly below
  // n, as a 256-bit set (4 words, bit b % 64 of word b / 64); else null. A
  // walk whose sets read every one of them back into themselves settles
  // the whole subtree at once.
  const uint64_t* subtree_bytes(int32_t n) const {
    int32_t slot = subtree_slot_[n];
    return slot < 0 ? nullptr : &subtree_bytes_[4 * slot];
  }

 private:
  void BuildTrie();
  void BuildSubtreeBytes(const std::vector<int32_t>& parent);

  std::shared_ptr<const Vocabulary> vocab_;
  std::vector<int32_t> ids_;
  std::vector<int32_t> position_;  // per vocabulary id: index in ids_, or -1
  std::vector<uint32_t> all_bits_;
  mutable std::once_flag byte_rows_once_;
  mutable std::array<std::vector<uint32_t>, 256> byte_rows_;
  mutable std::mutex byte_filters_mu_;
  mutable std::unordered_map<std::string,
                             std::shared_ptr<const std::vector<uint32_t>>>
      byte_filters_;
  std::vector<int32_t> longest_first_;
  std::vector<int32_t> lcp_;
  std::vector<uint8_t> node_byte_;
  std::vector<uint16_t> node_depth_;
  std::vector<int32_t> node_end_;
  std::vector<int32_t> node_tokens_;  // num_nodes() + 1 offsets into ids_
  std::vector<int32_t> subtree_slot_;
  std::vector<uint64_t> subtree_bytes_;
  int32_t max_token_length_ = 0;
  std::unique_ptr<LeafCache> leaf_cache_;
};

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_ENGINE_TOKEN_INDEX_H_
