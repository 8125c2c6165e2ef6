// Runs the CUDA kernel's per-thread code (MaskRowSlice) on the host for every
// thread of the grid LaunchTokenMaskKernel would launch, in the kernel's own
// row loop, and compares the result with ApplyTokenMaskCpu bit for bit. GPU
// threads touch disjoint chunks, so running them one after another gives the
// GPU's result; this checks the kernel's indexing on machines without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gpu/internal/checks.h"
#include "gpu/internal/kernel_params.h"
#include "gpu/internal/mask_kernel.h"
#include "gpu/testing/mask_cases.h"
#include "gpu/token_mask.h"

namespace grammard::gpu {
namespace {

using internal::MaskKernelParams;

template <int kElemBytes>
void RunGrid(const MaskKernelParams& params) {
  const int64_t blocks = internal::BlocksPerRow(params.vocab, kElemBytes);
  const int64_t grid_rows = internal::GridRows(params.mask_rows);
  for (int64_t block_y = 0; block_y < grid_rows; ++block_y) {
    for (int64_t k = block_y; k < params.mask_rows; k += grid_rows) {
      for (int32_t block = 0; block < blocks; ++block) {
        for (int32_t thread = 0; thread < internal::kThreadsPerBlock;
             ++thread) {
          internal::MaskRowSlice<kElemBytes>(params, k, block, thread);
        }
      }
    }
  }
}

absl::Status Emulate(const LogitsView& logits, const TokenMaskView& mask) {
  if (absl::Status s = internal::CheckArguments(logits, mask); !s.ok()) {
    return s;
  }
  if (!internal::HasWork(logits, mask)) return absl::OkStatus();
  const MaskKernelParams params = internal::MakeMaskKernelParams(logits, mask);
  if (LogitsDtypeBytes(logits.dtype) == 4) {
    RunGrid<4>(params);
  } else {
    RunGrid<2>(params);
  }
  return absl::OkStatus();
}

TEST(MaskKernelEmulationTest, EdgeCasesMatchTheCpuReference) {
  for (const testing::MaskCase& c : testing::EdgeCases()) {
    testing::MaskCaseData got(c);
    testing::MaskCaseData want(c);
    ASSERT_TRUE(Emulate(got.logits_view(), got.mask_view()).ok())
        << testing::CaseName(c);
    ASSERT_TRUE(ApplyTokenMaskCpu(want.logits_view(), want.mask_view()).ok())
        << testing::CaseName(c);
    EXPECT_EQ(testing::FirstDifference(got.logits_bytes(), want.logits_bytes(),
                                       got.logits_size(), got.logits_view()),
              "")
        << testing::CaseName(c);
  }
}

// Every alignment of every row start, with vocabularies around the chunk and
// word sizes: the head, body and tail split and mask windows that straddle
// two words.
TEST(MaskKernelEmulationTest, EveryAlignmentAndSmallVocab) {
  for (LogitsDtype dtype : {LogitsDtype::kFloat32, LogitsDtype::kFloat16}) {
    const int bytes = LogitsDtypeBytes(dtype);
    for (int offset = 0; offset < 16; offset += bytes) {
      for (int64_t vocab = 1; vocab <= 70; ++vocab) {
        testing::MaskCase c;
        c.name = "alignment";
        c.dtype = dtype;
        c.rows = 3;
        c.vocab = vocab;
        c.row_stride = vocab + 1;  // Each row starts at another alignment.
        c.offset_bytes = offset;
        c.seed = static_cast<uint32_t>(vocab * 16 + offset);
        testing::MaskCaseData got(c);
        testing::MaskCaseData want(c);
        ASSERT_TRUE(Emulate(got.logits_view(), got.mask_view()).ok());
        ASSERT_TRUE(
            ApplyTokenMaskCpu(want.logits_view(), want.mask_view()).ok());
        EXPECT_EQ(
            testing::FirstDifference(got.logits_bytes(), want.logits_bytes(),
                                     got.logits_size(), got.logits_view()),
            "")
            << testing::CaseName(c) << " offset " << offset << " vocab "
            << vocab;
      }
    }
  }
}

// Device-resident indices are not checked on the host: the kernel must skip
// out-of-range ones rather than write outside the logits.
TEST(MaskKernelEmulationTest, OutOfRangeIndicesAreSkipped) {
  testing::MaskCase c;
  c.name = "bad_indices";
  c.rows = 4;
  c.vocab = 300;
  c.indices = {2, -1, 4, 1 << 30};
  testing::MaskCaseData got(c);
  testing::MaskCaseData want(c);
  const LogitsView logits = got.logits_view();
  const TokenMaskView mask = got.mask_view();
  const MaskKernelParams params = internal::MakeMaskKernelParams(logits, mask);
  RunGrid<4>(params);

  TokenMaskView first_row_only = want.mask_view();
  first_row_only.rows = 1;
  ASSERT_TRUE(ApplyTokenMaskCpu(want.logits_view(), first_row_only).ok());
  EXPECT_EQ(testing::FirstDifference(got.logits_bytes(), want.logits_bytes(),
                                     got.logits_size(), logits),
            "");
}

TEST(MaskKernelEmulationTest, GridCoversEveryChunk) {
  // 128256 fp32 logits: 32064 chunks, 1024 per block.
  EXPECT_EQ(internal::BlocksPerRow(128256, 4), 32);
  EXPECT_EQ(internal::BlocksPerRow(128256, 2), 16);
  EXPECT_EQ(internal::BlocksPerRow(3, 4), 1);
  EXPECT_EQ(internal::BlocksPerRow(4096, 4), 1);
  EXPECT_EQ(internal::BlocksPerRow(4100, 4), 2);
  EXPECT_EQ(internal::GridRows(70000), internal::kMaxGridRows);
  EXPECT_EQ(internal::GridRows(3), 3);
}

}  // namespace
}  // namespace grammard::gpu
