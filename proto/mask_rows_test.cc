#include "proto/mask_rows.h"

#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace grammard::proto {
namespace {

using grammard::v1::MaskRow;

std::vector<uint32_t> RandomRow(int32_t vocab, double density,
                                std::mt19937* rng) {
  std::vector<uint32_t> words((vocab + 31) / 32, 0);
  std::bernoulli_distribution bit(density);
  for (int32_t i = 0; i < vocab; ++i) {
    if (bit(*rng)) words[i / 32] |= uint32_t{1} << (i % 32);
  }
  return words;
}

size_t BitmapBytes(const std::vector<uint32_t>& words) {
  MaskRow row;
  for (uint32_t w : words) row.mutable_bitmap()->add_words(w);
  return row.ByteSizeLong();
}

TEST(MaskRows, RoundTripsAndIsNeverLargerThanTheBitmap) {
  std::mt19937 rng(7);
  for (int32_t vocab : {1, 31, 32, 33, 1000, 128256, 151669}) {
    for (double density : {0.0, 0.0001, 0.01, 0.3, 0.5, 0.9, 0.999, 1.0}) {
      std::vector<uint32_t> words = RandomRow(vocab, density, &rng);
      MaskRow row;
      EncodeMaskRow(words.data(), vocab, &row);
      std::vector<uint32_t> back(words.size(), 0xdeadbeef);
      ASSERT_TRUE(DecodeMaskRow(row, vocab, back.data()).ok());
      EXPECT_EQ(back, words) << "vocab " << vocab << " density " << density;
      EXPECT_LE(row.ByteSizeLong(), BitmapBytes(words));
      if (density == 1.0) {
        EXPECT_EQ(EncodingOf(row), MaskEncoding::kAllAllowed);
      }
    }
  }
}

// Against the decoded row: every encoding answers how many tokens it
// allows and which is the k-th, for every k.
TEST(MaskRows, CountsAndIndexesAllowedTokensAsEncoded) {
  std::mt19937 rng(9);
  std::set<MaskEncoding> seen;
  for (int32_t vocab : {1, 33, 1000, 5000}) {
    for (double density : {0.0005, 0.01, 0.3, 0.5, 0.99, 1.0}) {
      std::vector<uint32_t> words = RandomRow(vocab, density, &rng);
      MaskRow row;
      EncodeMaskRow(words.data(), vocab, &row);
      seen.insert(EncodingOf(row));
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab; ++id) {
        if ((words[id / 32] >> (id % 32)) & 1) allowed.push_back(id);
      }
      SCOPED_TRACE(::testing::Message()
                   << "vocab " << vocab << " density " << density);
      auto count = CountAllowed(row, vocab);
      ASSERT_TRUE(count.ok()) << count.status();
      ASSERT_EQ(*count, static_cast<int64_t>(allowed.size()));
      for (size_t k = 0; k < allowed.size(); ++k) {
        auto id = NthAllowed(row, vocab, static_cast<int64_t>(k));
        ASSERT_TRUE(id.ok()) << id.status();
        ASSERT_EQ(*id, allowed[k]) << "k " << k;
      }
      EXPECT_EQ(NthAllowed(row, vocab, *count).status().code(),
                absl::StatusCode::kOutOfRange);
      EXPECT_EQ(NthAllowed(row, vocab, -1).status().code(),
                absl::StatusCode::kOutOfRange);
    }
  }
  EXPECT_EQ(seen.size(), 4u) << "every encoding but the references";
  MaskRow reference;
  reference.set_same_as(0);
  EXPECT_EQ(CountAllowed(reference, 10).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NthAllowed(reference, 10, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MaskRows, PicksIdListsForSparseAndDenseRows) {
  const int32_t vocab = 128256;
  std::vector<uint32_t> words((vocab + 31) / 32, 0);
  words[0] = 0b101;
  words[10] = 1u << 31;  // id 351: gap 351 - 2 - 1 = 348, two varint bytes
  MaskRow sparse;
  EncodeMaskRow(words.data(), vocab, &sparse);
  ASSERT_EQ(EncodingOf(sparse), MaskEncoding::kAllowed);
  EXPECT_EQ(sparse.allowed_gaps(), std::string("\x00\x01\xdc\x02", 4));

  for (auto& w : words) w = ~0u;
  words[10] &= ~(uint32_t{1} << 3);
  MaskRow dense;
  EncodeMaskRow(words.data(), vocab, &dense);
  ASSERT_EQ(EncodingOf(dense), MaskEncoding::kForbidden);
  EXPECT_EQ(dense.forbidden_gaps(), "\xc3\x02");  // id 323
}

// Fewer ids than the bitmap has bytes, but some gaps take two bytes: 20 ids
// 200 apart, then ids 7 apart up to 10 short of the bitmap's 16,032 bytes.
TEST(MaskRows, FallsBackToTheBitmapWhenTheListOutgrowsIt) {
  const int32_t vocab = 128256;
  std::vector<uint32_t> words((vocab + 31) / 32, 0);
  auto set = [&](int32_t id) { words[id / 32] |= uint32_t{1} << (id % 32); };
  for (int32_t i = 0; i < 20; ++i) set(i * 200);
  for (int32_t i = 0; i < 16002; ++i) set(4000 + i * 7);
  MaskRow row;
  EncodeMaskRow(words.data(), vocab, &row);
  EXPECT_EQ(EncodingOf(row), MaskEncoding::kBitmap);
  std::vector<uint32_t> back(words.size());
  ASSERT_TRUE(DecodeMaskRow(row, vocab, back.data()).ok());
  EXPECT_EQ(back, words);
}

TEST(MaskRows, RejectsMalformedRows) {
  std::vector<uint32_t> words(4);
  MaskRow empty;
  EXPECT_EQ(DecodeMaskRow(empty, 100, words.data()).code(),
            absl::StatusCode::kInvalidArgument);
  MaskRow out_of_range;
  out_of_range.set_allowed_gaps(std::string("\x63\x00", 2));  // ids 99, 100
  absl::Status s = DecodeMaskRow(out_of_range, 100, words.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("100"), std::string::npos);
  MaskRow truncated;
  truncated.set_forbidden_gaps("\x81");
  s = DecodeMaskRow(truncated, 100, words.data());
  EXPECT_NE(s.message().find("varint"), std::string::npos) << s;
  MaskRow overlong;
  overlong.set_forbidden_gaps("\xff\xff\xff\xff\xff\x01");
  EXPECT_FALSE(DecodeMaskRow(overlong, 100, words.data()).ok());
  MaskRow huge_gap;
  huge_gap.set_allowed_gaps("\xff\xff\xff\xff\x0f");  // 2^32 - 1
  EXPECT_FALSE(DecodeMaskRow(huge_gap, 100, words.data()).ok());
  MaskRow short_bitmap;
  short_bitmap.mutable_bitmap()->add_words(1);
  EXPECT_FALSE(DecodeMaskRow(short_bitmap, 100, words.data()).ok());
  // Found by mask_rows_fuzzer: a bitmap allowing ids past the vocabulary.
  MaskRow past_the_end;
  for (uint32_t w : {0u, 0u, 0u, 1u << 4}) {
    past_the_end.mutable_bitmap()->add_words(w);
  }
  s = DecodeMaskRow(past_the_end, 100, words.data());
  EXPECT_NE(s.message().find("past the vocabulary"), std::string::npos) << s;
}

TEST(StepRowDecoder, CopiesSameAsRowsFromWhereTheyWereDecoded) {
  std::mt19937 rng(3);
  const int32_t vocab = 1000;
  std::vector<uint32_t> first = RandomRow(vocab, 0.3, &rng);
  std::vector<uint32_t> second = RandomRow(vocab, 0.999, &rng);
  MaskRow a, b, repeat;
  EncodeMaskRow(first.data(), vocab, &a);
  EncodeMaskRow(second.data(), vocab, &b);
  repeat.set_same_as(0);
  EXPECT_EQ(EncodingOf(repeat), MaskEncoding::kSameAs);
  EXPECT_FALSE(DecodeMaskRow(repeat, vocab, first.data()).ok());

  std::vector<uint32_t> out(3 * first.size(), 0xdeadbeef);
  uint32_t* rows[3] = {out.data(), out.data() + first.size(),
                       out.data() + 2 * first.size()};
  StepRowDecoder decoder;
  ASSERT_TRUE(decoder.Next(a, vocab, rows[0]).ok());
  ASSERT_TRUE(decoder.Next(b, vocab, rows[1]).ok());
  ASSERT_TRUE(decoder.Next(repeat, vocab, rows[2]).ok());
  EXPECT_EQ(std::vector<uint32_t>(rows[2], rows[2] + first.size()), first);
  EXPECT_EQ(std::vector<uint32_t>(rows[1], rows[1] + first.size()), second);

  // Only earlier rows, and only of the same vocabulary.
  MaskRow forward;
  forward.set_same_as(3);
  absl::Status s = decoder.Next(forward, vocab, rows[2]);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not an earlier row"), std::string::npos) << s;
  s = decoder.Next(repeat, vocab - 32, rows[2]);
  EXPECT_NE(s.message().find("968"), std::string::npos) << s;

  decoder.Reset();
  EXPECT_FALSE(decoder.Next(repeat, vocab, rows[0]).ok());
}

TEST(DecodeStepRows, ResolvesSameAsPreviousFromTheKeptFirstRow) {
  std::mt19937 rng(9);
  std::vector<uint32_t> kept = RandomRow(100, 0.5, &rng);
  grammard::v1::StepResult step;
  grammard::v1::SequenceResult* first = step.add_sequences();
  first->add_rows()->set_same_as_previous(true);
  first->add_rows()->set_same_as(0);  // a draft row repeating the first
  step.add_sequences()->add_rows()->set_same_as(1);
  EXPECT_EQ(EncodingOf(first->rows(0)), MaskEncoding::kSameAsPrevious);
  auto decoded = DecodeStepRows(
      step, [](size_t) { return 100; },
      [&](size_t i) -> const uint32_t* {
        return i == 0 ? kept.data() : nullptr;
      });
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  std::vector<uint32_t> expected;
  for (int i = 0; i < 3; ++i)
    expected.insert(expected.end(), kept.begin(), kept.end());
  EXPECT_EQ(decoded->words, expected);

  // Without a kept row, or on a row other than the first, it is refused.
  auto none = DecodeStepRows(step, [](size_t) { return 100; });
  EXPECT_NE(none.status().message().find("no previous row"), std::string::npos)
      << none.status();
  first->mutable_rows(1)->set_same_as_previous(true);
  EXPECT_FALSE(DecodeStepRows(
                   step, [](size_t) { return 100; },
                   [&](size_t) -> const uint32_t* { return kept.data(); })
                   .ok());
  EXPECT_FALSE(DecodeMaskRow(first->rows(0), 100, expected.data()).ok());
}

TEST(DecodeStepRows, PlacesEachSequencesRowsWithItsVocabulary) {
  std::mt19937 rng(5);
  const int32_t vocabs[3] = {100, 40, 100};
  std::vector<uint32_t> a = RandomRow(100, 0.5, &rng);
  std::vector<uint32_t> b = RandomRow(40, 0.1, &rng);
  grammard::v1::StepResult step;
  EncodeMaskRow(a.data(), 100, step.add_sequences()->add_rows());
  grammard::v1::SequenceResult* second = step.add_sequences();
  EncodeMaskRow(b.data(), 40, second->add_rows());
  second->add_rows()->set_same_as(1);
  step.add_sequences()->add_rows()->set_same_as(0);
  auto decoded = DecodeStepRows(step, [&](size_t i) { return vocabs[i]; });
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->offsets, (std::vector<size_t>{0, 4, 8}));
  std::vector<uint32_t> expected = a;
  expected.insert(expected.end(), b.begin(), b.end());
  expected.insert(expected.end(), b.begin(), b.end());
  expected.insert(expected.end(), a.begin(), a.end());
  EXPECT_EQ(decoded->words, expected);

  // A reference across vocabularies is refused.
  step.mutable_sequences(2)->mutable_rows(0)->set_same_as(1);
  EXPECT_FALSE(DecodeStepRows(step, [&](size_t i) { return vocabs[i]; }).ok());
}

}  // namespace
}  // namespace grammard::proto
