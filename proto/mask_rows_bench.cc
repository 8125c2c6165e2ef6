// Encoding and decoding one mask row of the llama3 vocabulary (128,256
// tokens) at the densities decoding meets: a few allowed tokens (a number or
// a keyword), a few forbidden (free string content), half of each (a
// bitmap), and everything allowed.
//
//   bazel run -c opt //proto:mask_rows_bench
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "proto/mask_rows.h"

namespace grammard::proto {
namespace {

constexpr int32_t kVocab = 128256;

std::vector<uint32_t> Row(double density) {
  std::mt19937 rng(1);
  std::bernoulli_distribution bit(density);
  std::vector<uint32_t> words((kVocab + 31) / 32, 0);
  for (int32_t i = 0; i < kVocab; ++i) {
    if (bit(rng)) words[i / 32] |= uint32_t{1} << (i % 32);
  }
  return words;
}

// Densities: 0.04 and 0.96 give about 5,000 listed ids.
void BM_Encode(benchmark::State& state) {
  const std::vector<uint32_t> words = Row(state.range(0) / 100.0);
  grammard::v1::MaskRow row;
  for (auto _ : state) {
    row.Clear();
    EncodeMaskRow(words.data(), kVocab, &row);
    benchmark::DoNotOptimize(row);
  }
  state.SetLabel(MaskEncodingName(EncodingOf(row)));
  state.counters["wire_bytes"] = static_cast<double>(row.ByteSizeLong());
}
BENCHMARK(BM_Encode)->Arg(4)->Arg(50)->Arg(96)->Arg(100);

void BM_Decode(benchmark::State& state) {
  const std::vector<uint32_t> words = Row(state.range(0) / 100.0);
  grammard::v1::MaskRow row;
  EncodeMaskRow(words.data(), kVocab, &row);
  std::vector<uint32_t> out(words.size());
  for (auto _ : state) {
    benchmark::DoNotOptimize(DecodeMaskRow(row, kVocab, out.data()));
  }
  state.SetLabel(MaskEncodingName(EncodingOf(row)));
}
BENCHMARK(BM_Decode)->Arg(4)->Arg(50)->Arg(96)->Arg(100);

}  // namespace
}  // namespace grammard::proto

BENCHMARK_MAIN();
