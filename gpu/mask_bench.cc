// Benchmarks of ApplyTokenMaskInplace (GPU) and ApplyTokenMaskCpu.
//
//   bazel run //gpu:mask_bench
//
// GPU bandwidth: CUDA events time a batch of launches that cycle through
// enough copies of logits and mask to exceed twice the L2 cache, so each
// launch reads DRAM rather than the previous launch's lines. A benchmark
// iteration is one batch, so its time is the batch's (reporting the time per
// launch instead made the library run hundreds of times more batches than it
// meant to: minutes per case); us_per_launch divides it. Bytes per launch
// are counted as the logits read and written plus the mask read (2 * rows *
// vocab * dtype size + mask bytes) whatever the kernel actually moves:
// "random" masks (each bit 50%) make nearly every 16-byte chunk mixed, so that
// count is what the kernel moves; "sparse" masks (1% allowed, a typical
// grammar step) turn most chunks into stores without loads, and "allowed"
// masks (everything allowed) into no logits traffic, so their rates can
// exceed the peak. of_peak divides by the DRAM peak (memory clock * bus width
// * 2), of_d2d by a measured device-to-device cudaMemcpy.
//
// GPU latency (one row of 128256 logits): host time of the call alone, and of
// the call plus cudaStreamSynchronize, with and without the mask upload.
//
// Without a GPU, prints why and runs the CPU benchmarks only.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpu/token_mask.h"
#include "gpu/token_mask_cuda.h"

namespace grammard::gpu {
namespace {

struct Shape {
  int64_t rows;
  int64_t vocab;
};
constexpr Shape kShapes[] = {{1, 128256}, {64, 128256}, {1024, 151669}};

struct Dtype {
  LogitsDtype dtype;
  const char* name;
};
constexpr Dtype kDtypes[] = {{LogitsDtype::kFloat32, "fp32"},
                             {LogitsDtype::kFloat16, "fp16"},
                             {LogitsDtype::kBFloat16, "bf16"}};

struct Density {
  double allowed;
  const char* name;
};
constexpr Density kDensities[] = {
    {0.5, "random"}, {0.01, "sparse"}, {1.0, "allowed"}};

// Each bit set with probability `density`. A comparison of the raw 32-bit
// draw, not std::bernoulli_distribution, since a 1024-row mask takes 155 M
// draws and the setup of every repetition would otherwise dwarf its timing.
std::vector<uint32_t> RandomMask(int64_t rows, int64_t words, double density,
                                 uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(rows * words, density >= 1.0 ? ~uint32_t{0} : 0);
  if (density >= 1.0) return mask;
  const uint64_t threshold = static_cast<uint64_t>(density * 4294967296.0);
  for (uint32_t& word : mask) {
    if (density == 0.5) {
      word = static_cast<uint32_t>(rng());
    } else {
      for (int bit = 0; bit < 32; ++bit) {
        word |= uint32_t{rng() < threshold} << bit;
      }
    }
  }
  return mask;
}

// Empty when a device is usable, else why not.
std::string NoDeviceReason() {
  int count = 0;
  if (const cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    return absl::StrCat("no CUDA device: ", cudaGetErrorString(err));
  }
  return count == 0 ? "no CUDA device: cudaGetDeviceCount found none" : "";
}

bool CudaOk(benchmark::State& state, cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  state.SkipWithError(
      absl::StrCat(what, ": ", cudaGetErrorString(err)).c_str());
  return false;
}

struct DeviceInfo {
  int l2_bytes = 0;
  double peak_bytes_per_s = 0;
  double d2d_bytes_per_s = 0;
};
DeviceInfo g_device;

// Bytes read plus written per second by a device-to-device cudaMemcpy of
// 512 MiB; 0 if the buffers do not fit.
double MeasureCopyBandwidth() {
  constexpr size_t kBytes = size_t{512} << 20;
  constexpr int kCopies = 10;
  void* src = nullptr;
  void* dst = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  double bytes_per_s = 0;
  if (cudaMalloc(&src, kBytes) == cudaSuccess &&
      cudaMalloc(&dst, kBytes) == cudaSuccess &&
      cudaEventCreate(&start) == cudaSuccess &&
      cudaEventCreate(&stop) == cudaSuccess) {
    cudaMemset(src, 0x5A, kBytes);
    cudaMemcpy(dst, src, kBytes, cudaMemcpyDeviceToDevice);  // Warm-up.
    cudaEventRecord(start);
    for (int i = 0; i < kCopies; ++i) {
      cudaMemcpyAsync(dst, src, kBytes, cudaMemcpyDeviceToDevice);
    }
    cudaEventRecord(stop);
    float ms = 0;
    if (cudaEventSynchronize(stop) == cudaSuccess &&
        cudaEventElapsedTime(&ms, start, stop) == cudaSuccess && ms > 0) {
      bytes_per_s = 2.0 * kBytes * kCopies / (ms * 1e-3);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(src);
  cudaFree(dst);
  cudaGetLastError();
  return bytes_per_s;
}

void ReadDeviceInfo() {
  int device = 0;
  cudaGetDevice(&device);
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, device);
  int memory_khz = 0;
  int bus_bits = 0;
  cudaDeviceGetAttribute(&memory_khz, cudaDevAttrMemoryClockRate, device);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device);
  cudaDeviceGetAttribute(&g_device.l2_bytes, cudaDevAttrL2CacheSize, device);
  // Double data rate: two transfers per memory clock.
  g_device.peak_bytes_per_s = 2.0 * memory_khz * 1e3 * bus_bits / 8;
  g_device.d2d_bytes_per_s = MeasureCopyBandwidth();
  const std::string summary = absl::StrCat(
      prop.name, ", ", prop.multiProcessorCount, " SMs, L2 ",
      g_device.l2_bytes >> 20, " MiB, DRAM peak ",
      g_device.peak_bytes_per_s / 1e9, " GB/s (", memory_khz / 1000, " MHz x ",
      bus_bits, " bits x 2), measured device-to-device copy ",
      g_device.d2d_bytes_per_s / 1e9, " GB/s");
  std::printf("%s\n", summary.c_str());
  benchmark::AddCustomContext("gpu", summary);
}

void BM_GpuBandwidth(benchmark::State& state, Shape shape, Dtype dtype,
                     Density density) {
  const int64_t words = (shape.vocab + 31) / 32;
  const int64_t logits_bytes =
      shape.rows * shape.vocab * LogitsDtypeBytes(dtype.dtype);
  const int64_t mask_bytes = shape.rows * words * 4;
  const int64_t copy_bytes = logits_bytes + mask_bytes;
  const int64_t copies = std::max<int64_t>(
      1, (2 * int64_t{g_device.l2_bytes} + copy_bytes - 1) / copy_bytes);
  // Enough launches per timed batch (256 MiB of traffic, 20 launches at
  // least) that the host's time to enqueue the first one is noise.
  const int64_t launches = std::max<int64_t>(
      {copies, 20, (int64_t{256} << 20) / (2 * logits_bytes)});

  char* logits = nullptr;
  uint32_t* masks = nullptr;
  if (!CudaOk(state, cudaMalloc(&logits, copies * logits_bytes),
              "cudaMalloc") ||
      !CudaOk(state, cudaMalloc(&masks, copies * mask_bytes), "cudaMalloc")) {
    cudaFree(logits);
    return;
  }
  cudaMemset(logits, 0x3C, copies * logits_bytes);
  const std::vector<uint32_t> mask =
      RandomMask(shape.rows, words, density.allowed, 1);
  for (int64_t i = 0; i < copies; ++i) {
    cudaMemcpy(masks + i * shape.rows * words, mask.data(), mask_bytes,
               cudaMemcpyHostToDevice);
  }
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  cudaStreamCreate(&stream);
  cudaEventCreate(&start);
  cudaEventCreate(&stop);

  double seconds = 0;
  int64_t total_launches = 0;
  for (auto _ : state) {
    cudaEventRecord(start, stream);
    for (int64_t i = 0; i < launches; ++i) {
      const int64_t copy = i % copies;
      TokenMaskView view;
      view.words = masks + copy * shape.rows * words;
      view.rows = shape.rows;
      view.words_per_row = words;
      view.row_stride = words;
      const absl::Status status = ApplyTokenMaskInplace(
          LogitsView{logits + copy * logits_bytes, dtype.dtype, shape.rows,
                     shape.vocab, shape.vocab},
          view, stream);
      if (!status.ok()) {
        state.SkipWithError(status.ToString().c_str());
        break;
      }
    }
    cudaEventRecord(stop, stream);
    float ms = 0;
    if (!CudaOk(state, cudaEventSynchronize(stop), "kernel") ||
        !CudaOk(state, cudaEventElapsedTime(&ms, start, stop),
                "cudaEventElapsedTime")) {
      break;
    }
    state.SetIterationTime(ms * 1e-3);
    seconds += ms * 1e-3;
    total_launches += launches;
  }
  if (seconds > 0) {
    const double bytes_per_s =
        total_launches * static_cast<double>(2 * logits_bytes + mask_bytes) /
        seconds;
    state.counters["us_per_launch"] = seconds * 1e6 / total_launches;
    state.counters["GB/s"] = bytes_per_s / 1e9;
    state.counters["of_peak"] = bytes_per_s / g_device.peak_bytes_per_s;
    if (g_device.d2d_bytes_per_s > 0) {
      state.counters["of_d2d"] = bytes_per_s / g_device.d2d_bytes_per_s;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  cudaFree(logits);
  cudaFree(masks);
}

// One row of 128256 logits: host time of the call (`sync` false) or of the
// call and the wait for it; with `upload`, the mask comes from pinned memory.
void BM_GpuSingleRowLatency(benchmark::State& state, Dtype dtype, bool sync,
                            bool upload) {
  constexpr int64_t kVocab = 128256;
  constexpr int64_t kWords = (kVocab + 31) / 32;
  char* logits = nullptr;
  uint32_t* device_mask = nullptr;
  uint32_t* pinned_mask = nullptr;
  cudaStream_t stream = nullptr;
  if (!CudaOk(state,
              cudaMalloc(&logits, kVocab * LogitsDtypeBytes(dtype.dtype)),
              "cudaMalloc") ||
      !CudaOk(state, cudaMalloc(&device_mask, kWords * sizeof(uint32_t)),
              "cudaMalloc") ||
      !CudaOk(state,
              cudaHostAlloc(&pinned_mask, kWords * sizeof(uint32_t),
                            cudaHostAllocDefault),
              "cudaHostAlloc") ||
      !CudaOk(state, cudaStreamCreate(&stream), "cudaStreamCreate")) {
    cudaFree(logits);
    cudaFree(device_mask);
    cudaFreeHost(pinned_mask);
    return;
  }
  const std::vector<uint32_t> mask = RandomMask(1, kWords, 0.5, 2);
  std::copy(mask.begin(), mask.end(), pinned_mask);
  cudaMemcpy(device_mask, mask.data(), kWords * sizeof(uint32_t),
             cudaMemcpyHostToDevice);
  const LogitsView view{logits, dtype.dtype, 1, kVocab, kVocab};
  TokenMaskView mask_view;
  mask_view.words = upload ? pinned_mask : device_mask;
  mask_view.rows = 1;
  mask_view.words_per_row = kWords;
  mask_view.row_stride = kWords;
  DeviceMaskStaging staging;
  staging.words = device_mask;
  staging.word_capacity = kWords;

  for (auto _ : state) {
    const auto begin = std::chrono::steady_clock::now();
    const absl::Status status =
        upload ? UploadAndApplyTokenMask(view, mask_view, staging, stream)
               : ApplyTokenMaskInplace(view, mask_view, stream);
    if (sync) cudaStreamSynchronize(stream);
    const auto end = std::chrono::steady_clock::now();
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
    if (!sync) cudaStreamSynchronize(stream);
    state.SetIterationTime(std::chrono::duration<double>(end - begin).count());
  }
  cudaStreamDestroy(stream);
  cudaFree(logits);
  cudaFree(device_mask);
  cudaFreeHost(pinned_mask);
}

void BM_Cpu(benchmark::State& state, Shape shape, Dtype dtype,
            Density density) {
  const int64_t words = (shape.vocab + 31) / 32;
  const int bytes = LogitsDtypeBytes(dtype.dtype);
  std::vector<char> logits(shape.rows * shape.vocab * bytes, 0x3C);
  const std::vector<uint32_t> mask =
      RandomMask(shape.rows, words, density.allowed, 3);
  TokenMaskView view;
  view.words = mask.data();
  view.rows = shape.rows;
  view.words_per_row = words;
  view.row_stride = words;
  for (auto _ : state) {
    const absl::Status status =
        ApplyTokenMaskCpu(LogitsView{logits.data(), dtype.dtype, shape.rows,
                                     shape.vocab, shape.vocab},
                          view);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(logits.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() *
                          (2 * static_cast<int64_t>(logits.size()) +
                           static_cast<int64_t>(mask.size() * 4)));
}

void RegisterGpuBenchmarks() {
  for (const Shape& shape : kShapes) {
    for (const Dtype& dtype : kDtypes) {
      for (const Density& density : kDensities) {
        benchmark::RegisterBenchmark(
            absl::StrCat("gpu/", dtype.name, "/", shape.rows, "x", shape.vocab,
                         "/", density.name)
                .c_str(),
            BM_GpuBandwidth, shape, dtype, density)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  for (const Dtype& dtype : kDtypes) {
    for (const auto& [sync, upload, name] :
         {std::tuple{false, false, "call"},
          std::tuple{true, false, "call_and_sync"},
          std::tuple{true, true, "upload_call_and_sync"}}) {
      benchmark::RegisterBenchmark(
          absl::StrCat("gpu_latency/", dtype.name, "/1x128256/", name).c_str(),
          BM_GpuSingleRowLatency, dtype, sync, upload)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

void RegisterCpuBenchmarks() {
  for (const Shape& shape : kShapes) {
    for (const Dtype& dtype : kDtypes) {
      for (const Density& density : {kDensities[0], kDensities[1]}) {
        benchmark::RegisterBenchmark(
            absl::StrCat("cpu/", dtype.name, "/", shape.rows, "x", shape.vocab,
                         "/", density.name)
                .c_str(),
            BM_Cpu, shape, dtype, density)
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

}  // namespace
}  // namespace grammard::gpu

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (const std::string reason = grammard::gpu::NoDeviceReason();
      reason.empty()) {
    grammard::gpu::ReadDeviceInfo();
    grammard::gpu::RegisterGpuBenchmarks();
  } else {
    std::printf("%s: GPU benchmarks skipped, CPU reference only\n",
                reason.c_str());
  }
  grammard::gpu::RegisterCpuBenchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
