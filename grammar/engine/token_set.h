// TokenSet: a set of token ids, stored the cheaper way to put into a mask
// row, and its saved form.
//
// Cost: AddTo is a copy or OR of the words for a bitset, a bit per id
// otherwise. Thread-safety: immutable once made.
#ifndef GRAMMARD_GRAMMAR_ENGINE_TOKEN_SET_H_
#define GRAMMARD_GRAMMAR_ENGINE_TOKEN_SET_H_

#include <cstdint>
#include <vector>

#include "grammar/base/byte_io.h"

namespace grammard::grammar::internal {

// A set of token ids, stored the cheaper way to put into a mask row: a
// bitset over the vocabulary when many, else the ids (a regex state that
// allows a few digits).
class TokenSet {
 public:
  TokenSet() = default;
  // `bits` has one bit per id of the vocabulary, `words` words.
  static TokenSet FromBits(std::vector<uint32_t> bits);
  static TokenSet FromIds(std::vector<int32_t> ids, int32_t words);

  // ORs the set into `row` (`words` long). `clean` says the row is still
  // all zeros (cleared by the first call that writes it), which lets a
  // bitset be copied rather than merged.
  void AddTo(uint32_t* row, int32_t words, bool* clean) const;
  // Appends to `out` the ids of the set that are in both `filter` and
  // `row` (bitsets of `words` words), clearing them from `row`. O(words)
  // for a bitset, O(ids) otherwise.
  void TakeFrom(uint32_t* row, const uint32_t* filter, int32_t words,
                std::vector<int32_t>* out) const;
  bool is_bitset() const { return !bits_.empty(); }
  bool empty() const { return bits_.empty() && ids_.empty(); }
  size_t MemoryBytes() const;

  void Save(ByteWriter* out) const;
  // False (and `in` failed) unless every id is below `vocab_size`.
  bool Load(ByteReader* in, int32_t vocab_size);

 private:
  std::vector<uint32_t> bits_;  // empty when ids_ holds the set
  std::vector<int32_t> ids_;
};

// Reads a vector of token ids; false (and `in` failed) unless every id is
// below `vocab_size`.
bool LoadTokenIds(ByteReader* in, int32_t vocab_size,
                  std::vector<int32_t>* ids);

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_ENGINE_TOKEN_SET_H_
