#include "service/step_rows.h"

#include <cstring>
#include <memory>
#include <random>
#include <set>
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

// Decodes a step's rows as a client does: row i belongs to sequence
// sequence[i] (-1: none of the three), whose first rows the client keeps
// in (*client)[k] when keeps[k].
std::vector<uint32_t> DecodeAsClient(
    const std::vector<MaskRow>& out, int32_t vocab,
    const std::vector<int>& sequence, const bool* keeps,
    std::vector<std::vector<uint32_t>>* client) {
  const size_t words = static_cast<size_t>(vocab + 31) / 32;
  std::vector<uint32_t> decoded(out.size() * words);
  proto::StepRowDecoder decoder;
  for (size_t i = 0; i < out.size(); ++i) {
    const int k = sequence[i];
    std::vector<uint32_t>* kept = k >= 0 && keeps[k] ? &(*client)[k] : nullptr;
    absl::Status s = decoder.Next(
        out[i], vocab, decoded.data() + i * words,
        kept != nullptr && !kept->empty() ? kept->data() : nullptr);
    EXPECT_TRUE(s.ok()) << s;
    if (kept != nullptr) {
      kept->assign(decoded.begin() + i * words,
                   decoded.begin() + (i + 1) * words);
    }
  }
  return decoded;
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
    StepRowEncoder encoder(0);
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
      std::vector<bool> expect_previous(n, false), expect_same_as(n, false);
      for (size_t i = 0; i < n; ++i) {
        const uint32_t* row = rows.data() + i * words;
        const std::vector<uint32_t> row_vector(row, row + words);
        const int k = sequence[i];
        encoder.Add(row, vocab, {}, k < 0 ? nullptr : &memories[k],
                    k >= 0 && keeps[k], &out[i]);
        const bool unchanged = k >= 0 && sent[k] == row_vector;
        bool earlier = false;
        for (size_t e = 0; e < i; ++e) {
          earlier |= std::memcmp(rows.data() + e * words, row, 4 * words) == 0;
        }
        if (unchanged && keeps[k]) {
          expect_previous[i] = true;
          continue;
        }
        expect_same_as[i] = earlier;
        if (earlier) {
          if (k >= 0 && !unchanged) encoding_known[k] = false;
        } else if (!(unchanged && encoding_known[k])) {
          ++expected_encodes;
          if (k >= 0) encoding_known[k] = true;
        }
        if (k >= 0) sent[k] = row_vector;
      }
      EXPECT_TRUE(encoder.Settle().empty());
      size_t encodes = 0;
      encoder.Finish(Serial(&encodes));
      EXPECT_EQ(encodes, expected_encodes) << "step " << step;
      for (size_t i = 0; i < n; ++i) {
        SCOPED_TRACE(::testing::Message() << "step " << step << " row " << i);
        EXPECT_EQ(out[i].has_same_as_previous(), expect_previous[i]);
        EXPECT_EQ(out[i].has_same_as(), expect_same_as[i]);
      }

      const std::vector<uint32_t> decoded =
          DecodeAsClient(out, vocab, sequence, keeps, &client);
      EXPECT_EQ(decoded, rows) << "vocab " << vocab << " step " << step;
    }
  }
}

// Keyed rows against a brute-force oracle. Keys name rows (two keys may
// name one row, as two grammar states may allow the same tokens); a keyed
// row's words are garbage until Settle asks for them. Every row still
// decodes back to itself, whatever the cache budget. With no cache, or one
// that never fills, a keyed row is filled exactly when no earlier row of
// its step has its key, it is not a kept row unchanged since it was last
// sent (by key), and the cache has not got its key (it gets it when a
// filled row goes out encoded).
TEST(StepRowEncoder, KeyedRowsMatchABruteForceOracle) {
  const int32_t vocab = 1000;
  const size_t words = static_cast<size_t>(vocab + 31) / 32;
  // Key k names distinct[kRowOfKey[k]]; keys 0 and 3 name the same row.
  const int kRowOfKey[] = {0, 1, 2, 0, 3};
  const std::vector<std::vector<uintptr_t>> keys = {
      {7, 0}, {7, 1}, {7, 2}, {7, 3}, {7, 4}};
  const auto owner = std::make_shared<int>(0);
  const std::shared_ptr<const void> owner_handle = owner;
  for (size_t budget : {size_t{0}, size_t{600}, size_t{1} << 30}) {
    SCOPED_TRACE(::testing::Message() << "budget " << budget);
    const bool modeled = budget != 600;  // 600: evicts, decoding checked
    std::mt19937 rng(5);
    std::vector<std::vector<uint32_t>> distinct(4,
                                                std::vector<uint32_t>(words));
    for (auto& row : distinct) {
      for (auto& w : row) w = static_cast<uint32_t>(rng());
      row.back() &= (uint32_t{1} << (vocab % 32)) - 1;
    }
    std::vector<RowMemory> memories(3);
    const bool keeps[3] = {true, true, false};
    std::vector<std::vector<uint32_t>> client(3);
    std::vector<int> sent_key(3, -1);  // oracle: key last sent, -1: none
    std::set<int> cached;              // oracle
    StepRowEncoder encoder(budget);
    for (int step = 0; step < 200; ++step) {
      SCOPED_TRACE(::testing::Message() << "step " << step);
      const size_t n = 1 + rng() % 8;
      std::vector<uint32_t> rows(n * words, 0xdeadbeef);
      std::vector<uint32_t> want(n * words);
      std::vector<MaskRow> out(n);
      std::vector<int> sequence(n, -1), key_of(n, -1);
      std::vector<bool> expect_fill(n, false), expect_previous(n, false);
      for (size_t i = 0; i < n; ++i) {
        if (i < memories.size() && rng() % 2 == 0) sequence[i] = int(i);
        const int row_index = static_cast<int>(rng() % distinct.size());
        if (rng() % 4 != 0) {
          key_of[i] = static_cast<int>(rng() % keys.size());
          std::memcpy(want.data() + i * words,
                      distinct[kRowOfKey[key_of[i]]].data(), 4 * words);
        } else {
          std::memcpy(want.data() + i * words, distinct[row_index].data(),
                      4 * words);
          std::memcpy(rows.data() + i * words, distinct[row_index].data(),
                      4 * words);
        }
      }
      for (size_t i = 0; i < n; ++i) {
        const int k = sequence[i];
        const int key = key_of[i];
        RowKey row_key;
        if (key >= 0) row_key = {absl::MakeConstSpan(keys[key]), &owner_handle};
        encoder.Add(rows.data() + i * words, vocab, row_key,
                    k < 0 ? nullptr : &memories[k], k >= 0 && keeps[k],
                    &out[i]);
        if (key >= 0) {
          bool earlier = false;
          for (size_t e = 0; e < i; ++e) earlier |= key_of[e] == key;
          const bool unchanged = k >= 0 && sent_key[k] == key;
          expect_previous[i] = unchanged && keeps[k];
          expect_fill[i] =
              !earlier && !expect_previous[i] && !cached.count(key);
        }
      }
      const std::vector<size_t>& to_fill = encoder.Settle();
      std::vector<bool> filled(n, false);
      for (size_t i : to_fill) {
        ASSERT_LT(i, n);
        filled[i] = true;
        std::memcpy(rows.data() + i * words, want.data() + i * words,
                    4 * words);
      }
      if (modeled) {
        EXPECT_EQ(filled, expect_fill);
      }
      for (size_t i = 0; i < n; ++i) {
        if (expect_previous[i]) {
          EXPECT_TRUE(out[i].has_same_as_previous()) << i;
        }
      }
      size_t encodes = 0;
      encoder.Finish(Serial(&encodes));
      for (size_t i = 0; i < n; ++i) {
        if (sequence[i] >= 0) sent_key[sequence[i]] = key_of[i];
        const bool reference =
            out[i].has_same_as() || out[i].has_same_as_previous();
        if (budget > 0 && filled[i] && !reference) cached.insert(key_of[i]);
      }
      const std::vector<uint32_t> decoded =
          DecodeAsClient(out, vocab, sequence, keeps, &client);
      ASSERT_EQ(decoded, want);
    }
  }
}

// The cache holds its entries' grammars weakly: once a grammar is gone its
// objects' addresses may name another grammar's, so its keys miss.
TEST(StepRowEncoder, ACachedRowDiesWithItsGrammar) {
  const std::vector<uintptr_t> key = {1, 2};
  std::vector<uint32_t> row = {5};
  StepRowEncoder encoder(1 << 20);
  auto step = [&](const std::shared_ptr<const void>& owner) {
    MaskRow out;
    encoder.Add(row.data(), 32, {absl::MakeConstSpan(key), &owner}, nullptr,
                false, &out);
    const size_t fills = encoder.Settle().size();
    size_t encodes = 0;
    encoder.Finish(Serial(&encodes));
    std::vector<uint32_t> back(1);
    EXPECT_TRUE(proto::DecodeMaskRow(out, 32, back.data()).ok());
    EXPECT_EQ(back, row);
    return fills;
  };
  std::shared_ptr<const void> grammar = std::make_shared<int>(0);
  EXPECT_EQ(step(grammar), 1u);
  EXPECT_EQ(step(grammar), 0u) << "cached";
  grammar = std::make_shared<int>(1);  // the first one is gone
  EXPECT_EQ(step(grammar), 1u) << "a miss, not the dead grammar's row";
  EXPECT_EQ(step(grammar), 0u);
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
  StepRowEncoder encoder(0);
  for (size_t i = 0; i < 4; ++i) {
    encoder.Add(rows.data() + i * words, vocab, {}, nullptr, false, &out[i]);
  }
  encoder.Settle();
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
  StepRowEncoder encoder(0);
  encoder.Add(zeros.data(), 128, {}, nullptr, false, &a);
  encoder.Add(zeros.data(), 100, {}, nullptr, false,
              &b);  // same words, 100 tokens
  encoder.Settle();
  size_t encodes = 0;
  encoder.Finish(Serial(&encodes));
  EXPECT_EQ(encodes, 2u);
  EXPECT_FALSE(b.has_same_as());
}

}  // namespace
}  // namespace grammard::service
