#include "grammar/engine/token_set.h"

#include <algorithm>
#include <utility>

namespace grammard::grammar::internal {

namespace {

// Setting a bit per id costs about as much as merging a few words, so ids
// win while they are fewer than a quarter of the words.
bool IdsAreCheaper(int64_t count, int64_t words) { return count * 4 < words; }

}  // namespace

TokenSet TokenSet::FromBits(std::vector<uint32_t> bits) {
  // Ids are collected as found and given up at the first one too many, not
  // counted first: without -mpopcnt, __builtin_popcount is a libgcc call
  // per word, and counting a dense walk's 4,000 words was 7% of the slowest
  // masks' time.
  TokenSet set;
  const auto words = static_cast<int64_t>(bits.size());
  for (size_t w = 0; w < bits.size(); ++w) {
    for (uint32_t b = bits[w]; b != 0; b &= b - 1) {
      if (!IdsAreCheaper(static_cast<int64_t>(set.ids_.size()) + 1, words)) {
        std::vector<int32_t>().swap(set.ids_);
        set.bits_ = std::move(bits);
        return set;
      }
      set.ids_.push_back(static_cast<int32_t>(32 * w) + __builtin_ctz(b));
    }
  }
  return set;
}

TokenSet TokenSet::FromIds(std::vector<int32_t> ids, int32_t words) {
  TokenSet set;
  if (IdsAreCheaper(static_cast<int64_t>(ids.size()), words)) {
    set.ids_ = std::move(ids);
    return set;
  }
  set.bits_.assign(words, 0);
  for (int32_t id : ids) set.bits_[id >> 5] |= 1u << (id & 31);
  return set;
}

void TokenSet::TakeFrom(uint32_t* row, const uint32_t* filter, int32_t words,
                        std::vector<int32_t>* out) const {
  if (!bits_.empty()) {
    for (int32_t w = 0; w < words; ++w) {
      const uint32_t m = bits_[w] & filter[w] & row[w];
      if (m == 0) continue;
      row[w] &= ~m;
      for (uint32_t b = m; b != 0; b &= b - 1) {
        out->push_back(32 * w + __builtin_ctz(b));
      }
    }
    return;
  }
  for (int32_t id : ids_) {
    const uint32_t bit = 1u << (id & 31);
    if ((filter[id >> 5] & bit) && (row[id >> 5] & bit)) {
      row[id >> 5] &= ~bit;
      out->push_back(id);
    }
  }
}

void TokenSet::AddTo(uint32_t* row, int32_t words, bool* clean) const {
  if (!bits_.empty()) {
    if (*clean) {
      std::copy(bits_.begin(), bits_.begin() + words, row);
    } else {
      for (int32_t w = 0; w < words; ++w) row[w] |= bits_[w];
    }
    *clean = false;
    return;
  }
  if (*clean) std::fill(row, row + words, 0u);
  *clean = false;
  for (int32_t id : ids_) row[id >> 5] |= 1u << (id & 31);
}

size_t TokenSet::MemoryBytes() const {
  return bits_.size() * sizeof(uint32_t) + ids_.size() * sizeof(int32_t);
}

bool LoadTokenIds(ByteReader* in, int32_t vocab_size,
                  std::vector<int32_t>* ids) {
  if (!in->GetVector(ids)) return false;
  for (int32_t id : *ids) {
    if (id < 0 || id >= vocab_size) return in->Fail();
  }
  return true;
}

void TokenSet::Save(ByteWriter* out) const {
  out->PutVector(bits_);
  out->PutVector(ids_);
}

bool TokenSet::Load(ByteReader* in, int32_t vocab_size) {
  if (!in->GetVector(&bits_) || !LoadTokenIds(in, vocab_size, &ids_))
    return false;
  const size_t words = (static_cast<size_t>(vocab_size) + 31) / 32;
  if (!bits_.empty() && bits_.size() != words) return in->Fail();
  return true;
}

}  // namespace grammard::grammar::internal
