#include "gpu/token_mask.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gpu/testing/mask_cases.h"

namespace grammard::gpu {
namespace {

constexpr uint32_t kF32NegInf = 0xFF800000u;
constexpr uint16_t kF16NegInf = 0xFC00u;
constexpr uint16_t kBF16NegInf = 0xFF80u;

// The semantics of token_mask.h spelled out column by column, independently
// of ApplyTokenMaskCpu's word-skipping loop.
void ApplyOracle(const LogitsView& logits, const TokenMaskView& mask) {
  const int bytes = LogitsDtypeBytes(logits.dtype);
  const uint32_t neg_inf = NegativeInfinityBits(logits.dtype);
  const int64_t mask_vocab =
      mask.vocab == -1 ? mask.words_per_row * 32 : mask.vocab;
  for (int64_t k = 0; k < mask.rows; ++k) {
    const int64_t row = mask.indices == nullptr ? k : mask.indices[k];
    for (int64_t col = 0; col < logits.vocab; ++col) {
      const bool allowed =
          col < mask_vocab &&
          ((mask.words[k * mask.row_stride + col / 32] >> (col % 32)) & 1);
      if (!allowed) {
        std::memcpy(static_cast<char*>(logits.data) +
                        (row * logits.row_stride + col) * bytes,
                    &neg_inf, bytes);
      }
    }
  }
}

// Runs ApplyTokenMaskCpu and the oracle on two copies of a case and returns
// where they differ ("" when they agree).
std::string CompareWithOracle(const testing::MaskCase& c) {
  testing::MaskCaseData got(c);
  testing::MaskCaseData want(c);
  const absl::Status status =
      ApplyTokenMaskCpu(got.logits_view(), got.mask_view());
  if (!status.ok()) return status.ToString();
  ApplyOracle(want.logits_view(), want.mask_view());
  return testing::FirstDifference(got.logits_bytes(), want.logits_bytes(),
                                  got.logits_size(), got.logits_view());
}

TokenMaskView Mask(const std::vector<uint32_t>& words, int64_t rows,
                   int64_t words_per_row) {
  TokenMaskView mask;
  mask.words = words.data();
  mask.rows = rows;
  mask.words_per_row = words_per_row;
  mask.row_stride = words_per_row;
  return mask;
}

uint32_t Bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

TEST(LogitsDtypeTest, SizesAndNegativeInfinity) {
  EXPECT_EQ(LogitsDtypeBytes(LogitsDtype::kFloat32), 4);
  EXPECT_EQ(LogitsDtypeBytes(LogitsDtype::kFloat16), 2);
  EXPECT_EQ(LogitsDtypeBytes(LogitsDtype::kBFloat16), 2);
  EXPECT_EQ(LogitsDtypeBytes(static_cast<LogitsDtype>(7)), 0);
  EXPECT_EQ(NegativeInfinityBits(LogitsDtype::kFloat32),
            Bits(-std::numeric_limits<float>::infinity()));
  // bf16 is the top half of fp32; fp16 -inf is sign 1, exponent 0x1F,
  // mantissa 0.
  EXPECT_EQ(NegativeInfinityBits(LogitsDtype::kBFloat16), kF32NegInf >> 16);
  EXPECT_EQ(NegativeInfinityBits(LogitsDtype::kFloat16),
            (1u << 15) | (0x1Fu << 10));
  EXPECT_EQ(LogitsDtypeOf<float>::value, LogitsDtype::kFloat32);
}

TEST(ApplyTokenMaskCpuTest, Float32KeepsAllowedValuesAndMasksTheRest) {
  std::vector<float> logits(40);
  for (int i = 0; i < 40; ++i) logits[i] = static_cast<float>(i) + 0.5f;
  // Tokens 0, 3 and 31 allowed in word 0; 33 in word 1; columns 40.. are
  // past the logits and their bits are ignored.
  const std::vector<uint32_t> words = {(1u << 0) | (1u << 3) | (1u << 31),
                                       (1u << 1) | 0xFFFFFF00u};
  ASSERT_TRUE(ApplyTokenMaskCpu(MakeLogitsView(logits.data(), 1, 40, 40),
                                Mask(words, 1, 2))
                  .ok());
  for (int i = 0; i < 40; ++i) {
    if (i == 0 || i == 3 || i == 31 || i == 33) {
      EXPECT_EQ(logits[i], static_cast<float>(i) + 0.5f) << "column " << i;
    } else {
      EXPECT_EQ(Bits(logits[i]), kF32NegInf) << "column " << i;
    }
  }
}

TEST(ApplyTokenMaskCpuTest, SixteenBitDtypesWriteTheirOwnNegativeInfinity) {
  for (const auto& [dtype, neg_inf] :
       {std::pair{LogitsDtype::kFloat16, kF16NegInf},
        std::pair{LogitsDtype::kBFloat16, kBF16NegInf}}) {
    std::vector<uint16_t> logits(35, 0x3C00u);
    const std::vector<uint32_t> words = {0xAAAAAAAAu, 0x5u};
    ASSERT_TRUE(ApplyTokenMaskCpu(LogitsView{logits.data(), dtype, 1, 35, 35},
                                  Mask(words, 1, 2))
                    .ok());
    for (int i = 0; i < 35; ++i) {
      const bool allowed = i < 32 ? i % 2 == 1 : i == 32 || i == 34;
      EXPECT_EQ(logits[i], allowed ? 0x3C00u : neg_inf)
          << "dtype " << static_cast<int>(dtype) << " column " << i;
    }
  }
}

TEST(ApplyTokenMaskCpuTest, VocabNotAMultipleOf32) {
  std::vector<float> logits(45, 1.0f);
  const std::vector<uint32_t> words = {~0u, 1u << 12};  // 32..44: only 44.
  ASSERT_TRUE(ApplyTokenMaskCpu(MakeLogitsView(logits.data(), 1, 45, 45),
                                Mask(words, 1, 2))
                  .ok());
  for (int i = 0; i < 45; ++i) {
    EXPECT_EQ(Bits(logits[i]), i < 32 || i == 44 ? Bits(1.0f) : kF32NegInf)
        << "column " << i;
  }
}

TEST(ApplyTokenMaskCpuTest, IndicesSelectTheLogitsRows) {
  std::vector<float> logits(4 * 32, 2.0f);
  const std::vector<uint32_t> words = {0x1u, 0x2u};
  const std::vector<int32_t> indices = {3, 1};
  TokenMaskView mask = Mask(words, 2, 1);
  mask.indices = indices.data();
  ASSERT_TRUE(
      ApplyTokenMaskCpu(MakeLogitsView(logits.data(), 4, 32, 32), mask).ok());
  for (int row = 0; row < 4; ++row) {
    for (int col = 0; col < 32; ++col) {
      const bool allowed = row == 0 || row == 2 || (row == 3 && col == 0) ||
                           (row == 1 && col == 1);
      EXPECT_EQ(Bits(logits[row * 32 + col]), allowed ? Bits(2.0f) : kF32NegInf)
          << "row " << row << " column " << col;
    }
  }
}

TEST(ApplyTokenMaskCpuTest, ColumnsPastTheMaskArePadding) {
  // 70 logits, 64 mask bits, all allowed: columns 64..69 are padding.
  std::vector<float> logits(70, 3.0f);
  const std::vector<uint32_t> words = {~0u, ~0u};
  ASSERT_TRUE(ApplyTokenMaskCpu(MakeLogitsView(logits.data(), 1, 70, 70),
                                Mask(words, 1, 2))
                  .ok());
  for (int i = 0; i < 70; ++i) {
    EXPECT_EQ(Bits(logits[i]), i < 64 ? Bits(3.0f) : kF32NegInf)
        << "column " << i;
  }

  // An explicit mask.vocab moves the padding boundary inside a word.
  std::fill(logits.begin(), logits.end(), 3.0f);
  TokenMaskView mask = Mask(words, 1, 2);
  mask.vocab = 50;
  ASSERT_TRUE(
      ApplyTokenMaskCpu(MakeLogitsView(logits.data(), 1, 70, 70), mask).ok());
  for (int i = 0; i < 70; ++i) {
    EXPECT_EQ(Bits(logits[i]), i < 50 ? Bits(3.0f) : kF32NegInf)
        << "column " << i;
  }
}

TEST(ApplyTokenMaskCpuTest, MaskBitsPastTheLogitsAreIgnored) {
  // 10 logits in a row of stride 16; the mask speaks for 64 tokens.
  std::vector<float> logits(16, 4.0f);
  const std::vector<uint32_t> words = {0x1u, 0x0u};
  ASSERT_TRUE(ApplyTokenMaskCpu(MakeLogitsView(logits.data(), 1, 10, 16),
                                Mask(words, 1, 2))
                  .ok());
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(Bits(logits[i]), i == 0 || i >= 10 ? Bits(4.0f) : kF32NegInf)
        << "column " << i;
  }
}

TEST(ApplyTokenMaskCpuTest, StridesLeaveTheGapsUntouched) {
  // 2 rows of 33 logits, stride 40; mask rows of 2 words, stride 3.
  std::vector<float> logits(80, 5.0f);
  const std::vector<uint32_t> words = {0x0u, 0x1u, 0xDEADu, ~0u, 0x0u, 0xBEEFu};
  TokenMaskView mask = Mask(words, 2, 2);
  mask.row_stride = 3;
  ASSERT_TRUE(
      ApplyTokenMaskCpu(MakeLogitsView(logits.data(), 2, 33, 40), mask).ok());
  for (int row = 0; row < 2; ++row) {
    for (int col = 0; col < 40; ++col) {
      const bool allowed = col >= 33 || (row == 0 ? col == 32 : col < 32);
      EXPECT_EQ(Bits(logits[row * 40 + col]), allowed ? Bits(5.0f) : kF32NegInf)
          << "row " << row << " column " << col;
    }
  }
}

TEST(ApplyTokenMaskCpuTest, AllowedLogitsKeepTheirExactBits) {
  // NaN payloads, signalling NaNs, -0 and denormals must survive untouched:
  // allowed logits are never written, not even with their own value.
  const std::vector<uint32_t> specials = {0x7FC01234u, 0xFFC00001u,
                                          0x7F800001u, 0x80000000u,
                                          0x00000001u, 0x7F800000u};
  std::vector<uint32_t> logits(3 * 100);
  for (size_t i = 0; i < logits.size(); ++i) {
    logits[i] = specials[i % specials.size()] ^ static_cast<uint32_t>(i << 4);
  }
  const std::vector<uint32_t> before = logits;
  // Row 0 and 2 allow everything; row 1 allows every other token.
  std::vector<uint32_t> words(3 * 4, ~0u);
  for (int w = 4; w < 8; ++w) words[w] = 0x55555555u;
  ASSERT_TRUE(ApplyTokenMaskCpu(
                  LogitsView{logits.data(), LogitsDtype::kFloat32, 3, 100, 100},
                  Mask(words, 3, 4))
                  .ok());
  for (int i = 0; i < 300; ++i) {
    const bool masked = i / 100 == 1 && i % 2 == 1;
    EXPECT_EQ(logits[i], masked ? kF32NegInf : before[i]) << "element " << i;
  }
  // The 16-bit dtypes too.
  std::vector<uint16_t> halves(64);
  for (size_t i = 0; i < halves.size(); ++i) {
    halves[i] = static_cast<uint16_t>(0x7E01u + i);  // NaN payloads.
  }
  const std::vector<uint16_t> halves_before = halves;
  const std::vector<uint32_t> all = {~0u, ~0u};
  for (LogitsDtype dtype : {LogitsDtype::kFloat16, LogitsDtype::kBFloat16}) {
    ASSERT_TRUE(ApplyTokenMaskCpu(LogitsView{halves.data(), dtype, 1, 64, 64},
                                  Mask(all, 1, 2))
                    .ok());
    EXPECT_EQ(halves, halves_before);
  }
}

TEST(ApplyTokenMaskCpuTest, EmptyShapesAreNoOps) {
  const std::vector<uint32_t> words = {0u};
  EXPECT_TRUE(
      ApplyTokenMaskCpu(LogitsView{nullptr, LogitsDtype::kFloat32, 0, 100, 100},
                        Mask(words, 0, 1))
          .ok());
  float logit = 1.0f;
  EXPECT_TRUE(
      ApplyTokenMaskCpu(MakeLogitsView(&logit, 1, 0, 0), Mask(words, 1, 1))
          .ok());
  EXPECT_EQ(logit, 1.0f);
}

TEST(ApplyTokenMaskCpuTest, EdgeCasesMatchTheOracle) {
  for (const testing::MaskCase& c : testing::EdgeCases()) {
    EXPECT_EQ(CompareWithOracle(c), "") << testing::CaseName(c);
  }
}

TEST(ApplyTokenMaskCpuTest, OneRowAnd1024RowsInEveryDtype) {
  for (LogitsDtype dtype :
       {LogitsDtype::kFloat32, LogitsDtype::kFloat16, LogitsDtype::kBFloat16}) {
    for (int64_t rows : {1, 1024}) {
      testing::MaskCase c;
      c.name = "rows";
      c.dtype = dtype;
      c.rows = rows;
      c.vocab = 3001;
      c.seed = static_cast<uint32_t>(rows);
      EXPECT_EQ(CompareWithOracle(c), "")
          << testing::CaseName(c) << " rows " << rows;
    }
  }
}

// A valid call that each BadArguments case breaks in one way.
struct ValidCall {
  std::vector<float> logits = std::vector<float>(4 * 64, 1.0f);
  std::vector<uint32_t> words = std::vector<uint32_t>(4 * 2, 0x0F0F0F0Fu);
  std::vector<int32_t> indices = {2, 0};
  LogitsView logits_view{logits.data(), LogitsDtype::kFloat32, 4, 64, 64};
  TokenMaskView mask_view = Mask(words, 4, 2);
};

TEST(ApplyTokenMaskCpuTest, BadArgumentsAreRejectedWithTheirName) {
  struct BadCase {
    std::string expected;
    std::function<void(ValidCall&)> breaks;
  };
  const std::vector<BadCase> cases = {
      {"logits.data is null",
       [](ValidCall& c) { c.logits_view.data = nullptr; }},
      {"logits.data is not aligned",
       [](ValidCall& c) {
         c.logits_view.data = reinterpret_cast<char*>(c.logits.data()) + 2;
       }},
      {"logits.dtype (9)",
       [](ValidCall& c) { c.logits_view.dtype = static_cast<LogitsDtype>(9); }},
      {"logits shape [-1, 64]", [](ValidCall& c) { c.logits_view.rows = -1; }},
      {"logits.vocab (2147483648) exceeds",
       [](ValidCall& c) {
         c.logits_view.vocab = int64_t{1} << 31;
         c.logits_view.row_stride = int64_t{1} << 31;
       }},
      {"logits.row_stride (63) is smaller than logits.vocab (64)",
       [](ValidCall& c) { c.logits_view.row_stride = 63; }},
      {"overflows int64",
       [](ValidCall& c) { c.logits_view.rows = int64_t{1} << 61; }},
      {"mask.words is null", [](ValidCall& c) { c.mask_view.words = nullptr; }},
      {"mask.words is not aligned",
       [](ValidCall& c) {
         c.mask_view.words = reinterpret_cast<const uint32_t*>(
             reinterpret_cast<const char*>(c.words.data()) + 1);
       }},
      {"mask shape [4, -2]",
       [](ValidCall& c) { c.mask_view.words_per_row = -2; }},
      {"mask.row_stride (1) is smaller than mask.words_per_row (2)",
       [](ValidCall& c) { c.mask_view.row_stride = 1; }},
      {"mask.vocab (65) is outside [0, mask.words_per_row * 32 = 64]",
       [](ValidCall& c) { c.mask_view.vocab = 65; }},
      {"mask.vocab (-2)", [](ValidCall& c) { c.mask_view.vocab = -2; }},
      {"mask.rows (3) != logits.rows (4)",
       [](ValidCall& c) { c.mask_view.rows = 3; }},
      {"mask.rows (5) exceeds logits.rows (4)",
       [](ValidCall& c) {
         c.indices = {0, 1, 2, 3, 0};
         c.words.resize(5 * 2);
         c.mask_view = Mask(c.words, 5, 2);
         c.mask_view.indices = c.indices.data();
       }},
      {"mask.indices[1] (4) is outside [0, 4)",
       [](ValidCall& c) {
         c.indices = {0, 4};
         c.mask_view.rows = 2;
         c.mask_view.indices = c.indices.data();
       }},
      {"mask.indices[1] (-1) is outside",
       [](ValidCall& c) {
         c.indices = {0, -1};
         c.mask_view.rows = 2;
         c.mask_view.indices = c.indices.data();
       }},
      {"mask.indices[2] (1) repeats an earlier index",
       [](ValidCall& c) {
         c.indices = {1, 3, 1};
         c.mask_view.rows = 3;
         c.mask_view.indices = c.indices.data();
       }},
      {"mask.indices is not aligned",
       [](ValidCall& c) {
         c.mask_view.rows = 1;
         c.mask_view.indices = reinterpret_cast<const int32_t*>(
             reinterpret_cast<const char*>(c.indices.data()) + 2);
       }},
  };
  for (const BadCase& bad : cases) {
    ValidCall call;
    ASSERT_TRUE(ApplyTokenMaskCpu(call.logits_view, call.mask_view).ok());
    ValidCall broken;
    bad.breaks(broken);
    const std::vector<float> before = broken.logits;
    const absl::Status status =
        ApplyTokenMaskCpu(broken.logits_view, broken.mask_view);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << bad.expected;
    EXPECT_NE(status.message().find(bad.expected), std::string::npos)
        << status.message() << "\n  does not contain: " << bad.expected;
    EXPECT_EQ(broken.logits, before) << bad.expected << ": logits changed";
  }
}

}  // namespace
}  // namespace grammard::gpu
