// Loading each real tokenizer from its folder (read + parse + decode +
// fingerprint), the cost a daemon pays per tokenizer at start.
//   bazel run -c opt //grammar:vocabulary_bench
#include <string>

#include "benchmark/benchmark.h"
#include "grammar/vocabulary.h"
#include "tests/support/paths.h"

namespace grammard::grammar {
namespace {

void BM_LoadTokenizer(benchmark::State& state, const std::string& name) {
  auto dir = testing::TokenizerDir(name);
  if (!dir) {
    state.SkipWithError(
        testing::MissingDataMessage("tokenizer " + name).c_str());
    return;
  }
  for (auto _ : state) {
    auto v = Vocabulary::FromDirectory(*dir, {name, {}, 0});
    if (!v.ok()) {
      state.SkipWithError(std::string(v.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(v);
  }
}

BENCHMARK_CAPTURE(BM_LoadTokenizer, llama2, std::string("llama2"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_LoadTokenizer, llama3, std::string("llama3"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_LoadTokenizer, qwen3, std::string("qwen3"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_LoadTokenizer, gemma3, std::string("gemma3"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_LoadTokenizer, deepseek_v3, std::string("deepseek_v3"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_LoadTokenizer, gptoss, std::string("gptoss"))
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace grammard::grammar
