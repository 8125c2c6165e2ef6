#include "service/step_rows.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "proto/mask_rows.h"

namespace grammard::service {
namespace {

constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;

size_t WordsFor(int32_t vocab_size) {
  return static_cast<size_t>(vocab_size + 31) / 32;
}

// A hash of every fourth 64-bit lane of the row (four lanes at a time, so
// the multiplies overlap). Rows that differ only elsewhere collide; the
// memcmp behind every match keeps that harmless.
uint64_t SampledHash(const uint32_t* words, size_t num_words) {
  uint64_t h[4] = {num_words, 1, 2, 3};
  size_t w = 0;
  for (; w + 32 <= num_words; w += 32) {
    for (int lane = 0; lane < 4; ++lane) {
      uint64_t x;
      std::memcpy(&x, words + w + 8 * lane, sizeof x);
      h[lane] = (h[lane] ^ x) * kMul;
    }
  }
  for (; w < num_words; ++w) h[0] = (h[0] ^ words[w]) * kMul;
  uint64_t out = h[0] ^ (h[1] >> 1) ^ (h[2] >> 2) ^ (h[3] >> 3);
  return out ^ (out >> 29);
}

uint64_t KeyHash(absl::Span<const uintptr_t> key, int32_t vocab_size) {
  uint64_t h = static_cast<uint64_t>(vocab_size);
  for (uintptr_t k : key) h = (h ^ k) * kMul;
  return h ^ (h >> 29);
}

bool SameKey(absl::Span<const uintptr_t> a, absl::Span<const uintptr_t> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

bool Encoded(const grammard::v1::MaskRow& row) {
  switch (row.encoding_case()) {
    case grammard::v1::MaskRow::ENCODING_NOT_SET:
    case grammard::v1::MaskRow::kSameAs:
    case grammard::v1::MaskRow::kSameAsPrevious:
      return false;
    default:
      return true;
  }
}

}  // namespace

StepRowEncoder::StepRowEncoder(size_t cache_bytes)
    : cache_bytes_(cache_bytes) {}

size_t StepRowEncoder::KeyHasher::operator()(
    absl::Span<const uintptr_t> key) const {
  return KeyHash(key, 0);
}

bool StepRowEncoder::KeyEq::operator()(absl::Span<const uintptr_t> a,
                                       absl::Span<const uintptr_t> b) const {
  return SameKey(a, b);
}

void StepRowEncoder::Add(const uint32_t* words, int32_t vocab_size, RowKey key,
                         RowMemory* memory, bool client_keeps_previous,
                         grammard::v1::MaskRow* out) {
  rows_.push_back(Row{words, vocab_size, key.key, key.owner, memory,
                      client_keeps_previous, out, /*settled=*/false,
                      /*unchanged=*/false, kNone, kNone});
}

uint32_t StepRowEncoder::Link(absl::flat_hash_map<uint64_t, uint32_t>* last,
                              uint64_t hash, uint32_t index) {
  auto [it, inserted] = last->try_emplace(hash, index);
  if (inserted) return kNone;
  return std::exchange(it->second, index);
}

template <typename Same>
uint32_t StepRowEncoder::Earlier(const Row& row, uint32_t Row::*next,
                                 Same same) const {
  for (uint32_t e = row.*next; e != kNone; e = rows_[e].*next) {
    if (rows_[e].vocab_size == row.vocab_size && same(rows_[e])) return e;
  }
  return kNone;
}

const grammard::v1::MaskRow* StepRowEncoder::FindCached(
    absl::Span<const uintptr_t> key) {
  // A key whose grammar is gone may name another grammar's objects now.
  if (auto it = newer_.find(key); it != newer_.end()) {
    if (!it->second.owner.expired()) return &it->second.row;
    newer_.erase(it);
    return nullptr;
  }
  auto it = older_.find(key);
  if (it == older_.end()) return nullptr;
  if (it->second.owner.expired()) {
    older_.erase(it);
    return nullptr;
  }
  auto node = older_.extract(it);
  newer_bytes_ +=
      node.mapped().row.ByteSizeLong() + sizeof(uintptr_t) * node.key().size();
  return &newer_.insert(std::move(node)).position->second.row;
}

void StepRowEncoder::Cache(const Row& row) {
  if (cache_bytes_ == 0) return;
  if (newer_bytes_ > cache_bytes_ / 2) {
    older_ = std::move(newer_);
    newer_.clear();
    newer_bytes_ = 0;
  }
  Cached& cached =
      newer_[std::vector<uintptr_t>(row.key.begin(), row.key.end())];
  cached.owner = *row.owner;
  cached.row = *row.out;
  newer_bytes_ += row.out->ByteSizeLong() + sizeof(uintptr_t) * row.key.size();
}

void StepRowEncoder::Remember(const Row& row) {
  RowMemory* memory = row.memory;
  if (memory == nullptr) return;
  if (!row.key.empty()) {
    // The cache, not the memory, keeps the encodings of keyed rows.
    if (!row.unchanged) memory->key.assign(row.key.begin(), row.key.end());
    memory->words.clear();
    memory->encoded.Clear();
    return;
  }
  if (!row.unchanged) {
    memory->key.clear();
    memory->words.assign(row.words, row.words + WordsFor(row.vocab_size));
  }
  // An unchanged row sent as a reference keeps its known encoding.
  if (Encoded(*row.out)) {
    memory->encoded = *row.out;
  } else if (!row.unchanged) {
    memory->encoded.Clear();
  }
}

const std::vector<size_t>& StepRowEncoder::Settle() {
  to_fill_.clear();
  for (uint32_t i = 0; i < rows_.size(); ++i) {
    Row& row = rows_[i];
    if (row.key.empty()) continue;
    row.unchanged = row.memory != nullptr && SameKey(row.memory->key, row.key);
    // Every keyed row is listed, whatever it is sent as: later rows may
    // refer to it.
    row.next_same_key =
        Link(&last_with_key_hash_, KeyHash(row.key, row.vocab_size), i);
    row.settled = true;
    if (row.unchanged && row.client_keeps_previous) {
      row.out->set_same_as_previous(true);
      continue;
    }
    const uint32_t earlier =
        Earlier(row, &Row::next_same_key,
                [&](const Row& e) { return SameKey(e.key, row.key); });
    if (earlier != kNone) {
      row.out->set_same_as(earlier);
      Remember(row);
      continue;
    }
    if (const grammard::v1::MaskRow* cached = FindCached(row.key)) {
      *row.out = *cached;
      Remember(row);
      continue;
    }
    row.settled = false;
    to_fill_.push_back(i);
  }
  return to_fill_;
}

void StepRowEncoder::Finish(const ForEach& for_each) {
  for (uint32_t i = 0; i < rows_.size(); ++i) {
    Row& row = rows_[i];
    if (row.settled) continue;
    const size_t num_words = WordsFor(row.vocab_size);
    const size_t bytes = sizeof(uint32_t) * num_words;
    if (row.key.empty()) {
      row.unchanged =
          row.memory != nullptr && row.memory->key.empty() &&
          row.memory->words.size() == num_words &&
          std::memcmp(row.memory->words.data(), row.words, bytes) == 0;
    }
    // Every row with words is listed, whatever it is sent as.
    row.next_same_hash =
        Link(&last_with_hash_, SampledHash(row.words, num_words), i);
    if (row.unchanged && row.client_keeps_previous) {
      row.out->set_same_as_previous(true);
      continue;
    }
    const uint32_t earlier =
        Earlier(row, &Row::next_same_hash, [&](const Row& e) {
          return std::memcmp(e.words, row.words, bytes) == 0;
        });
    if (earlier != kNone) {
      row.out->set_same_as(earlier);
      Remember(row);
      continue;
    }
    if (row.unchanged && Encoded(row.memory->encoded)) {
      *row.out = row.memory->encoded;
      continue;
    }
    pending_.push_back(&row);
  }
  for_each(pending_.size(), [this](size_t i) {
    const Row& row = *pending_[i];
    row.out->Clear();
    proto::EncodeMaskRow(row.words, row.vocab_size, row.out);
    Remember(row);
  });
  for (const Row* row : pending_) {
    if (!row->key.empty()) Cache(*row);
  }
  rows_.clear();
  last_with_key_hash_.clear();
  last_with_hash_.clear();
  pending_.clear();
}

}  // namespace grammard::service
