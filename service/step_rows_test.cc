#include "service/step_rows.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "proto/mask_rows.h"

namespace grammard::service {
namespace {

using grammard::v1::MaskRow;

StepRowEncoder::ForEach Serial(size_t* calls) {
  return [calls](size_t n, const std::function<void(size_t)>& fn) {
    *calls += n;
    for (size_t i = 0; i < n; ++i) fn(i);
  };
}

std::vector<uint32_t> Decode(const std::vector<MaskRow>& rows,
                             int32_t vocab_size) {
  const size_t words = static_cast<size_t>(vocab_size + 31) / 32;
  std::vector<uint32_t> out(rows.size() * words);
  proto::StepRowDecoder decoder;
  for (size_t i = 0; i < rows.size(); ++i) {
    absl::Status s = decoder.Next(rows[i], vocab_size, out.data() + i * words);
    EXPECT_TRUE(s.ok()) << s;
  }
  return out;
}

// Against a brute-force oracle: steps of rows drawn from a few distinct
// rows, each step's first row belonging to one of a few sequences with a
// memory. Every row decodes back to itself; a row is a reference exactly
// when an equal row came earlier in its step; only rows equal neither to an
// earlier row nor to their sequence's memory are encoded.
TEST(StepRowEncoder, MatchesABruteForceOracle) {
  std::mt19937 rng(11);
  for (int32_t vocab : {1, 70, 1000, 128256}) {
    const size_t words = static_cast<size_t>(vocab + 31) / 32;
    std::vector<std::vector<uint32_t>> distinct(5,
                                                std::vector<uint32_t>(words));
    for (auto& row : distinct) {
      for (auto& w : row) w = static_cast<uint32_t>(rng());
      if (vocab % 32 != 0) row.back() &= (uint32_t{1} << (vocab % 32)) - 1;
    }
    std::vector<RowMemory> memories(3);
    std::vector<std::vector<uint32_t>> oracle_memory(3);
    StepRowEncoder encoder;
    for (int step = 0; step < 40; ++step) {
      const size_t n = 1 + rng() % 8;
      std::vector<uint32_t> rows(n * words);
      std::vector<MaskRow> out(n);
      size_t expected_encodes = 0;
      std::vector<int> memory_of(n, -1);
      for (size_t i = 0; i < n; ++i) {
        const auto& pick = distinct[rng() % distinct.size()];
        std::memcpy(rows.data() + i * words, pick.data(), 4 * words);
        if (i < memories.size() && rng() % 2 == 0) memory_of[i] = int(i);
      }
      for (size_t i = 0; i < n; ++i) {
        const uint32_t* row = rows.data() + i * words;
        RowMemory* memory = memory_of[i] < 0 ? nullptr : &memories[i];
        encoder.Add(row, vocab, memory, &out[i]);
        bool earlier = false;
        for (size_t e = 0; e < i; ++e) {
          earlier |= std::memcmp(rows.data() + e * words, row, 4 * words) == 0;
        }
        EXPECT_EQ(out[i].has_same_as(), earlier)
            << "step " << step << " row " << i;
        if (earlier) continue;
        const bool remembered =
            memory != nullptr &&
            oracle_memory[i] == std::vector<uint32_t>(row, row + words);
        if (!remembered) {
          ++expected_encodes;
          if (memory != nullptr) oracle_memory[i].assign(row, row + words);
        }
      }
      size_t encodes = 0;
      encoder.Finish(Serial(&encodes));
      EXPECT_EQ(encodes, expected_encodes) << "step " << step;
      EXPECT_EQ(Decode(out, vocab), rows)
          << "vocab " << vocab << " step " << step;
    }
  }
}

// Rows that differ only in lanes the hash does not sample share a hash; the
// memcmp tells them apart and a later copy of either still finds it.
TEST(StepRowEncoder, TellsApartRowsWhoseHashesCollide) {
  const int32_t vocab = 128256;
  const size_t words = static_cast<size_t>(vocab) / 32;
  std::vector<uint32_t> rows(4 * words, 0);
  rows[words + 2] = 1;      // word 2: not in a sampled lane
  rows[2 * words + 3] = 1;  // word 3 neither
  std::memcpy(rows.data() + 3 * words, rows.data() + words, 4 * words);
  std::vector<MaskRow> out(4);
  StepRowEncoder encoder;
  for (size_t i = 0; i < 4; ++i) {
    encoder.Add(rows.data() + i * words, vocab, nullptr, &out[i]);
  }
  size_t encodes = 0;
  encoder.Finish(Serial(&encodes));
  EXPECT_EQ(encodes, 3u);
  ASSERT_TRUE(out[3].has_same_as());
  EXPECT_EQ(out[3].same_as(), 1u);
  EXPECT_EQ(Decode(out, vocab), rows);
}

TEST(StepRowEncoder, NeverRefersAcrossVocabularies) {
  std::vector<uint32_t> zeros(4, 0);
  MaskRow a, b;
  StepRowEncoder encoder;
  encoder.Add(zeros.data(), 128, nullptr, &a);
  encoder.Add(zeros.data(), 100, nullptr, &b);  // same words, 100 tokens
  size_t encodes = 0;
  encoder.Finish(Serial(&encodes));
  EXPECT_EQ(encodes, 2u);
  EXPECT_FALSE(b.has_same_as());
}

}  // namespace
}  // namespace grammard::service
