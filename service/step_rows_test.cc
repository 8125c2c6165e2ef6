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

// Decodes rows that make no same_as_previous reference.
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
// rows; the first rows of a step may belong to one of three sequences with
// a memory (sequence 1's client keeps its previous row). Every row decodes
// back to itself; a kept, unchanged first row is same_as_previous; else a
// row is a reference exactly when an equal row came earlier in its step;
// only rows that are neither, nor an unchanged row whose encoding is known,
// are encoded.
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
    const bool keeps[3] = {false, true, false};
    std::vector<std::vector<uint32_t>> sent(3);    // oracle: last row sent
    std::vector<bool> encoding_known(3, false);    // oracle
    std::vector<std::vector<uint32_t>> client(3);  // the client's kept rows
    StepRowEncoder encoder;
    for (int step = 0; step < 60; ++step) {
      const size_t n = 1 + rng() % 8;
      std::vector<uint32_t> rows(n * words);
      std::vector<MaskRow> out(n);
      std::vector<int> sequence(n, -1);
      for (size_t i = 0; i < n; ++i) {
        const auto& pick = distinct[rng() % distinct.size()];
        std::memcpy(rows.data() + i * words, pick.data(), 4 * words);
        if (i < memories.size() && rng() % 2 == 0) sequence[i] = int(i);
      }
      size_t expected_encodes = 0;
      for (size_t i = 0; i < n; ++i) {
        const uint32_t* row = rows.data() + i * words;
        const std::vector<uint32_t> row_vector(row, row + words);
        const int k = sequence[i];
        encoder.Add(row, vocab, k < 0 ? nullptr : &memories[k],
                    k >= 0 && keeps[k], &out[i]);
        const bool unchanged = k >= 0 && sent[k] == row_vector;
        bool earlier = false;
        for (size_t e = 0; e < i; ++e) {
          earlier |= std::memcmp(rows.data() + e * words, row, 4 * words) == 0;
        }
        SCOPED_TRACE(::testing::Message() << "step " << step << " row " << i);
        if (unchanged && keeps[k]) {
          EXPECT_TRUE(out[i].has_same_as_previous());
          continue;
        }
        EXPECT_EQ(out[i].has_same_as(), earlier);
        if (earlier) {
          if (k >= 0 && !unchanged) encoding_known[k] = false;
        } else if (!(unchanged && encoding_known[k])) {
          ++expected_encodes;
          if (k >= 0) encoding_known[k] = true;
        }
        if (k >= 0) sent[k] = row_vector;
      }
      size_t encodes = 0;
      encoder.Finish(Serial(&encodes));
      EXPECT_EQ(encodes, expected_encodes) << "step " << step;

      std::vector<uint32_t> decoded(n * words);
      proto::StepRowDecoder decoder;
      for (size_t i = 0; i < n; ++i) {
        const int k = sequence[i];
        const bool kept = k >= 0 && keeps[k] && !client[k].empty();
        absl::Status s = decoder.Next(out[i], vocab, decoded.data() + i * words,
                                      kept ? client[k].data() : nullptr);
        ASSERT_TRUE(s.ok()) << s;
        if (k >= 0 && keeps[k]) {
          client[k].assign(decoded.begin() + i * words,
                           decoded.begin() + (i + 1) * words);
        }
      }
      EXPECT_EQ(decoded, rows) << "vocab " << vocab << " step " << step;
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
    encoder.Add(rows.data() + i * words, vocab, nullptr, false, &out[i]);
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
  encoder.Add(zeros.data(), 128, nullptr, false, &a);
  encoder.Add(zeros.data(), 100, nullptr, false, &b);  // same words, 100 tokens
  size_t encodes = 0;
  encoder.Finish(Serial(&encodes));
  EXPECT_EQ(encodes, 2u);
  EXPECT_FALSE(b.has_same_as());
}

}  // namespace
}  // namespace grammard::service
