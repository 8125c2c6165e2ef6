#include "service/step_rows.h"

#include <cstring>

#include "proto/mask_rows.h"

namespace grammard::service {
namespace {

size_t WordsFor(int32_t vocab_size) {
  return static_cast<size_t>(vocab_size + 31) / 32;
}

// A hash of every fourth 64-bit lane of the row (four lanes at a time, so
// the multiplies overlap). Rows that differ only elsewhere collide; the
// memcmp behind every match keeps that harmless.
uint64_t SampledHash(const uint32_t* words, size_t num_words) {
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
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

}  // namespace

void StepRowEncoder::Add(const uint32_t* words, int32_t vocab_size,
                         RowMemory* memory, bool client_keeps_previous,
                         grammard::v1::MaskRow* out) {
  const size_t num_words = WordsFor(vocab_size);
  const size_t bytes = sizeof(uint32_t) * num_words;
  const bool unchanged = memory != nullptr &&
                         memory->words.size() == num_words &&
                         std::memcmp(memory->words.data(), words, bytes) == 0;
  // Every row is listed, whatever it is sent as: later rows may refer to it.
  const auto index = static_cast<uint32_t>(rows_.size());
  auto [last, inserted] =
      last_with_hash_.try_emplace(SampledHash(words, num_words), index);
  const uint32_t earlier = inserted ? kNone : last->second;
  rows_.push_back(Row{words, vocab_size, earlier});
  if (!inserted) last->second = index;
  if (unchanged && client_keeps_previous) {
    out->set_same_as_previous(true);
    return;
  }
  for (uint32_t e = earlier; e != kNone; e = rows_[e].next_same_hash) {
    if (rows_[e].vocab_size == vocab_size &&
        std::memcmp(rows_[e].words, words, bytes) == 0) {
      out->set_same_as(e);
      if (memory != nullptr && !unchanged) {
        memory->words.assign(words, words + num_words);
        memory->encoded.Clear();
      }
      return;
    }
  }
  if (unchanged && memory->encoded.encoding_case() !=
                       grammard::v1::MaskRow::ENCODING_NOT_SET) {
    *out = memory->encoded;
    return;
  }
  pending_.push_back(Pending{words, vocab_size, memory, out});
}

void StepRowEncoder::Finish(const ForEach& for_each) {
  for_each(pending_.size(), [this](size_t i) {
    const Pending& p = pending_[i];
    p.out->Clear();
    proto::EncodeMaskRow(p.words, p.vocab_size, p.out);
    if (p.memory != nullptr) {
      p.memory->words.assign(p.words, p.words + WordsFor(p.vocab_size));
      p.memory->encoded = *p.out;
    }
  });
  rows_.clear();
  last_with_hash_.clear();
  pending_.clear();
}

}  // namespace grammard::service
