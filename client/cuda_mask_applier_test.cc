// The CUDA path against the CPU one, bit for bit, on device logits; skips
// without a device.
#include "client/cuda_mask_applier.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "client/client.h"
#include "client/testing/fake_grammard.h"

namespace grammard::client {
namespace {

using testing::FakeGrammard;

TEST(CudaMaskApplierTest, MatchesTheCpuPathBitForBit) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    GTEST_SKIP() << "no CUDA device";
  }
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  ClientOptions options;
  options.target = fake->target();
  options.tokenizer = FakeGrammard::kTokenizer;
  auto connected = Client::Connect(options);
  ASSERT_TRUE(connected.ok()) << connected.status();
  Client& client = **connected;
  for (uint64_t id : {1, 2, 3}) {
    grammard::v1::Constraint c;
    c.set_regex("x");
    ASSERT_TRUE(client.Open(id, c).ok());
  }
  ASSERT_TRUE(client.WaitReady({1, 2, 3}).ok());

  // Four logits rows (one unconstrained), padded past the vocabulary.
  constexpr int64_t kRows = 4, kCols = 1056;
  std::vector<float> host(kRows * kCols);
  std::mt19937 rng(3);
  for (float& x : host) x = static_cast<float>(rng() % 1000) / 10.0f;
  void* allocated = nullptr;
  ASSERT_EQ(cudaMalloc(&allocated, host.size() * sizeof(float)), cudaSuccess);
  float* device = static_cast<float*>(allocated);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const int32_t indices[] = {3, 0, 2};
  std::vector<SequenceMasks> results;
  CudaMaskApplier applier(&client);
  // Several steps, so both pinned buffers and their reuse are exercised.
  std::vector<int32_t> accepted[3];  // to report at the next step
  std::vector<int32_t> history[3];   // what the server has accepted
  for (int step = 0; step < 5; ++step) {
    std::vector<StepInput> batch;
    for (uint64_t i = 0; i < 3; ++i) {
      batch.push_back({i + 1, 0, accepted[i], {}});
      history[i].insert(history[i].end(), accepted[i].begin(),
                        accepted[i].end());
    }
    ASSERT_TRUE(client.SubmitStep(batch).ok());
    ASSERT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_TRUE(
        applier
            .WaitAndApply(gpu::MakeLogitsView(device, kRows, kCols, kCols),
                          indices, stream, &results)
            .ok());
    std::vector<float> gpu_out(host.size());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(gpu_out.data(), device, host.size() * sizeof(float),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    // The CPU reference over the same rows.
    std::vector<float> cpu_out = host;
    std::vector<uint32_t> words;
    for (int i = 0; i < 3; ++i) {
      const std::vector<uint32_t> row = FakeGrammard::Mask(history[i]);
      words.insert(words.end(), row.begin(), row.end());
    }
    gpu::TokenMaskView mask;
    mask.words = words.data();
    mask.rows = 3;
    mask.words_per_row = client.words_per_row();
    mask.row_stride = client.words_per_row();
    mask.vocab = client.vocab_size();
    mask.indices = indices;
    ASSERT_TRUE(
        gpu::ApplyTokenMaskCpu(
            gpu::MakeLogitsView(cpu_out.data(), kRows, kCols, kCols), mask)
            .ok());
    ASSERT_EQ(std::memcmp(gpu_out.data(), cpu_out.data(),
                          host.size() * sizeof(float)),
              0)
        << "step " << step;
    // Each sequence accepts the first token its mask allows.
    for (int i = 0; i < 3; ++i) {
      const uint32_t* row =
          &words[static_cast<size_t>(i * client.words_per_row())];
      int32_t t = 0;
      while (((row[t / 32] >> (t % 32)) & 1) == 0) ++t;
      accepted[i] = {t};
    }
  }
  cudaStreamDestroy(stream);
  cudaFree(device);
}

}  // namespace
}  // namespace grammard::client
