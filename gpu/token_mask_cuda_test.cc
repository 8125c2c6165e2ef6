#include "gpu/token_mask_cuda.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpu/testing/mask_cases.h"
#include "gpu/token_mask.h"

namespace grammard::gpu {
namespace {

static_assert(LogitsDtypeOf<__half>::value == LogitsDtype::kFloat16);
static_assert(LogitsDtypeOf<__nv_bfloat16>::value == LogitsDtype::kBFloat16);

// Empty when a device is usable, else why not.
std::string NoDeviceReason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::StrCat("no CUDA device: ", cudaGetErrorString(err));
  }
  if (count == 0) return "no CUDA device: cudaGetDeviceCount found none";
  return "";
}

#define ASSERT_CUDA(expr)                                                      \
  do {                                                                         \
    const cudaError_t err_ = (expr);                                           \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_); \
  } while (false)

// Device memory freed on destruction.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) {
    err_ = cudaMalloc(&data_, bytes == 0 ? 1 : bytes);
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  cudaError_t error() const { return err_; }
  char* get() const { return static_cast<char*>(data_); }

 private:
  void* data_ = nullptr;
  cudaError_t err_ = cudaSuccess;
};

// Pinned host memory freed on destruction.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t bytes) {
    err_ = cudaHostAlloc(&data_, bytes == 0 ? 1 : bytes, cudaHostAllocDefault);
  }
  ~PinnedBuffer() { cudaFreeHost(data_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  cudaError_t error() const { return err_; }
  char* get() const { return static_cast<char*>(data_); }

 private:
  void* data_ = nullptr;
  cudaError_t err_ = cudaSuccess;
};

size_t MaskWords(const TokenMaskView& mask) {
  return std::max<size_t>(1, mask.rows * mask.row_stride);
}

class TokenMaskCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string reason = NoDeviceReason(); !reason.empty()) {
      GTEST_SKIP() << reason;
    }
    ASSERT_CUDA(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Masks a copy of the case on the GPU, with ApplyTokenMaskInplace or, when
  // `upload`, UploadAndApplyTokenMask, and compares it with the CPU.
  void ExpectMatchesCpu(const testing::MaskCase& c, bool upload) {
    SCOPED_TRACE(testing::CaseName(c) + (upload ? " (upload)" : ""));
    testing::MaskCaseData got(c);
    testing::MaskCaseData want(c);
    ASSERT_TRUE(ApplyTokenMaskCpu(want.logits_view(), want.mask_view()).ok());

    // cudaMalloc aligns to 256 bytes; the offset keeps the case's alignment.
    DeviceBuffer logits(got.offset_bytes() + got.logits_size());
    ASSERT_CUDA(logits.error());
    LogitsView device_logits = got.logits_view();
    device_logits.data = logits.get() + got.offset_bytes();
    ASSERT_CUDA(cudaMemcpy(device_logits.data, got.logits_bytes(),
                           got.logits_size(), cudaMemcpyHostToDevice));

    const TokenMaskView host_mask = got.mask_view();
    const size_t mask_bytes = MaskWords(host_mask) * sizeof(uint32_t);
    const size_t index_bytes = host_mask.rows * sizeof(int32_t);
    if (upload) {
      PinnedBuffer pinned_words(mask_bytes);
      PinnedBuffer pinned_indices(index_bytes);
      ASSERT_CUDA(pinned_words.error());
      ASSERT_CUDA(pinned_indices.error());
      std::memcpy(pinned_words.get(), host_mask.words, mask_bytes);
      TokenMaskView pinned_mask = host_mask;
      pinned_mask.words = reinterpret_cast<const uint32_t*>(pinned_words.get());
      if (host_mask.indices != nullptr) {
        std::memcpy(pinned_indices.get(), host_mask.indices, index_bytes);
        pinned_mask.indices =
            reinterpret_cast<const int32_t*>(pinned_indices.get());
      }
      DeviceBuffer staging_words(mask_bytes);
      DeviceBuffer staging_indices(index_bytes);
      ASSERT_CUDA(staging_words.error());
      ASSERT_CUDA(staging_indices.error());
      DeviceMaskStaging staging;
      staging.words = reinterpret_cast<uint32_t*>(staging_words.get());
      staging.word_capacity = host_mask.rows * host_mask.words_per_row;
      staging.indices = reinterpret_cast<int32_t*>(staging_indices.get());
      staging.index_capacity = host_mask.rows;
      const absl::Status status =
          UploadAndApplyTokenMask(device_logits, pinned_mask, staging, stream_);
      ASSERT_TRUE(status.ok()) << status;
      ASSERT_CUDA(cudaStreamSynchronize(stream_));
    } else {
      DeviceBuffer words(mask_bytes);
      DeviceBuffer indices(index_bytes);
      ASSERT_CUDA(words.error());
      ASSERT_CUDA(indices.error());
      ASSERT_CUDA(cudaMemcpy(words.get(), host_mask.words, mask_bytes,
                             cudaMemcpyHostToDevice));
      TokenMaskView device_mask = host_mask;
      device_mask.words = reinterpret_cast<const uint32_t*>(words.get());
      if (host_mask.indices != nullptr) {
        ASSERT_CUDA(cudaMemcpy(indices.get(), host_mask.indices, index_bytes,
                               cudaMemcpyHostToDevice));
        device_mask.indices = reinterpret_cast<const int32_t*>(indices.get());
      }
      const absl::Status status =
          ApplyTokenMaskInplace(device_logits, device_mask, stream_);
      ASSERT_TRUE(status.ok()) << status;
      ASSERT_CUDA(cudaStreamSynchronize(stream_));
    }
    ASSERT_CUDA(cudaMemcpy(got.logits_bytes(), device_logits.data,
                           got.logits_size(), cudaMemcpyDeviceToHost));
    EXPECT_EQ(testing::FirstDifference(got.logits_bytes(), want.logits_bytes(),
                                       got.logits_size(), got.logits_view()),
              "");
  }

  cudaStream_t stream_ = nullptr;
};

TEST_F(TokenMaskCudaTest, EdgeCasesMatchTheCpuBitForBit) {
  for (const testing::MaskCase& c : testing::EdgeCases()) {
    ExpectMatchesCpu(c, /*upload=*/false);
  }
}

TEST_F(TokenMaskCudaTest, UploadedEdgeCasesMatchTheCpuBitForBit) {
  for (const testing::MaskCase& c : testing::EdgeCases()) {
    ExpectMatchesCpu(c, /*upload=*/true);
  }
}

TEST_F(TokenMaskCudaTest, BenchmarkShapesMatchTheCpu) {
  for (LogitsDtype dtype :
       {LogitsDtype::kFloat32, LogitsDtype::kFloat16, LogitsDtype::kBFloat16}) {
    for (const auto& [rows, vocab] :
         {std::pair<int64_t, int64_t>{64, 128256}, {1024, 151669}}) {
      testing::MaskCase c;
      c.name = absl::StrCat("bench_", rows, "x", vocab);
      c.dtype = dtype;
      c.rows = rows;
      c.vocab = vocab;
      ExpectMatchesCpu(c, /*upload=*/false);
    }
  }
}

TEST_F(TokenMaskCudaTest, OutOfRangeDeviceIndicesAreSkipped) {
  testing::MaskCase c;
  c.name = "bad_indices";
  c.rows = 4;
  c.vocab = 300;
  c.indices = {2, -1, 4, 1 << 30};
  testing::MaskCaseData got(c);
  testing::MaskCaseData want(c);
  TokenMaskView first_row_only = want.mask_view();
  first_row_only.rows = 1;
  ASSERT_TRUE(ApplyTokenMaskCpu(want.logits_view(), first_row_only).ok());

  DeviceBuffer logits(got.logits_size());
  DeviceBuffer words(MaskWords(got.mask_view()) * sizeof(uint32_t));
  DeviceBuffer indices(c.indices.size() * sizeof(int32_t));
  ASSERT_CUDA(cudaMemcpy(logits.get(), got.logits_bytes(), got.logits_size(),
                         cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(words.get(), got.mask_view().words,
                         MaskWords(got.mask_view()) * sizeof(uint32_t),
                         cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(indices.get(), c.indices.data(),
                         c.indices.size() * sizeof(int32_t),
                         cudaMemcpyHostToDevice));
  LogitsView device_logits = got.logits_view();
  device_logits.data = logits.get();
  TokenMaskView device_mask = got.mask_view();
  device_mask.words = reinterpret_cast<const uint32_t*>(words.get());
  device_mask.indices = reinterpret_cast<const int32_t*>(indices.get());
  ASSERT_TRUE(ApplyTokenMaskInplace(device_logits, device_mask, stream_).ok());
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
  ASSERT_CUDA(cudaMemcpy(got.logits_bytes(), logits.get(), got.logits_size(),
                         cudaMemcpyDeviceToHost));
  EXPECT_EQ(testing::FirstDifference(got.logits_bytes(), want.logits_bytes(),
                                     got.logits_size(), got.logits_view()),
            "");
}

TEST_F(TokenMaskCudaTest, PageableHostPointersAreRejected) {
  std::vector<float> host_logits(64, 1.0f);
  std::vector<uint32_t> host_words(2, 0u);
  DeviceBuffer device_logits(64 * sizeof(float));
  DeviceBuffer device_words(2 * sizeof(uint32_t));
  TokenMaskView mask;
  mask.rows = 1;
  mask.words_per_row = 2;
  mask.row_stride = 2;

  mask.words = reinterpret_cast<const uint32_t*>(device_words.get());
  absl::Status status = ApplyTokenMaskInplace(
      MakeLogitsView(host_logits.data(), 1, 64, 64), mask, stream_);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("logits.data cannot be dereferenced"),
            std::string::npos)
      << status;

  mask.words = host_words.data();
  const LogitsView logits =
      MakeLogitsView(reinterpret_cast<float*>(device_logits.get()), 1, 64, 64);
  status = ApplyTokenMaskInplace(logits, mask, stream_);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("mask.words cannot be dereferenced"),
            std::string::npos)
      << status;

  // The upload helper wants pinned host memory and device staging.
  DeviceMaskStaging staging;
  staging.words = reinterpret_cast<uint32_t*>(device_words.get());
  staging.word_capacity = 2;
  status = UploadAndApplyTokenMask(logits, mask, staging, stream_);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("host_mask.words is not pinned"),
            std::string::npos)
      << status;

  PinnedBuffer pinned(2 * sizeof(uint32_t));
  ASSERT_CUDA(pinned.error());
  std::memset(pinned.get(), 0, 2 * sizeof(uint32_t));
  TokenMaskView pinned_mask = mask;
  pinned_mask.words = reinterpret_cast<const uint32_t*>(pinned.get());
  DeviceMaskStaging host_staging = staging;
  host_staging.words = host_words.data();
  status = UploadAndApplyTokenMask(logits, pinned_mask, host_staging, stream_);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("staging.words cannot be dereferenced"),
            std::string::npos)
      << status;

  staging.word_capacity = 1;
  status = UploadAndApplyTokenMask(logits, pinned_mask, staging, stream_);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("staging.word_capacity (1) is smaller"),
            std::string::npos)
      << status;
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
}

TEST_F(TokenMaskCudaTest, UploadChecksHostIndices) {
  DeviceBuffer logits(4 * 64 * sizeof(float));
  PinnedBuffer words(2 * 2 * sizeof(uint32_t));
  PinnedBuffer indices(2 * sizeof(int32_t));
  DeviceBuffer staging_words(2 * 2 * sizeof(uint32_t));
  DeviceBuffer staging_indices(2 * sizeof(int32_t));
  ASSERT_CUDA(words.error());
  ASSERT_CUDA(indices.error());
  const int32_t repeated[2] = {1, 1};
  std::memcpy(indices.get(), repeated, sizeof(repeated));
  TokenMaskView mask;
  mask.words = reinterpret_cast<const uint32_t*>(words.get());
  mask.rows = 2;
  mask.words_per_row = 2;
  mask.row_stride = 2;
  mask.indices = reinterpret_cast<const int32_t*>(indices.get());
  DeviceMaskStaging staging;
  staging.words = reinterpret_cast<uint32_t*>(staging_words.get());
  staging.word_capacity = 4;
  staging.indices = reinterpret_cast<int32_t*>(staging_indices.get());
  staging.index_capacity = 2;
  const absl::Status status = UploadAndApplyTokenMask(
      MakeLogitsView(reinterpret_cast<float*>(logits.get()), 4, 64, 64), mask,
      staging, stream_);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("mask.indices[1] (1) repeats"),
            std::string::npos)
      << status;
}

// Shape errors are found before any CUDA call, so these run everywhere.
TEST(TokenMaskCudaArgumentsTest, ShapeErrorsNeedNoDevice) {
  const std::vector<uint32_t> words(2, 0u);
  TokenMaskView mask;
  mask.words = words.data();
  mask.rows = 1;
  mask.words_per_row = 2;
  mask.row_stride = 2;
  const absl::Status status = ApplyTokenMaskInplace(
      LogitsView{nullptr, LogitsDtype::kFloat16, 1, 64, 64}, mask, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("logits.data is null"), std::string::npos)
      << status;

  mask.row_stride = 1;
  float logit = 0.0f;
  EXPECT_EQ(
      ApplyTokenMaskInplace(MakeLogitsView(&logit, 1, 1, 1), mask, nullptr)
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UploadAndApplyTokenMask(MakeLogitsView(&logit, 1, 1, 1), mask,
                                    DeviceMaskStaging{}, nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TokenMaskCudaArgumentsTest, NothingToDoNeedsNoDevice) {
  TokenMaskView mask;
  mask.row_stride = 1;
  mask.words_per_row = 1;
  EXPECT_TRUE(ApplyTokenMaskInplace(LogitsView{}, mask, nullptr).ok());
  EXPECT_TRUE(
      UploadAndApplyTokenMask(LogitsView{}, mask, DeviceMaskStaging{}, nullptr)
          .ok());
}

// With a device, host memory is rejected as not device-accessible; without
// one, the CUDA error is reported. Either way a Status, never a crash.
TEST(TokenMaskCudaArgumentsTest, HostMemoryIsNeverHandedToTheKernel) {
  std::vector<float> logits(64, 1.0f);
  const std::vector<uint32_t> words(2, 0u);
  TokenMaskView mask;
  mask.words = words.data();
  mask.rows = 1;
  mask.words_per_row = 2;
  mask.row_stride = 2;
  const absl::Status status = ApplyTokenMaskInplace(
      MakeLogitsView(logits.data(), 1, 64, 64), mask, nullptr);
  EXPECT_FALSE(status.ok());
  if (NoDeviceReason().empty()) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  } else {
    EXPECT_NE(status.message().find("cuda"), std::string::npos) << status;
  }
  EXPECT_EQ(logits, std::vector<float>(64, 1.0f));
}

}  // namespace
}  // namespace grammard::gpu
