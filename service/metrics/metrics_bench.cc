// Costs of the metric update paths and of a scrape's Render().
#include <cmath>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "service/metrics/metrics.h"

namespace grammard::metrics {
namespace {

// Twelve latency buckets from 10 us to 50 ms, as a decode-step histogram has.
const std::vector<double> kStepBounds = {1e-05,   2.5e-05, 5e-05, 0.0001,
                                         0.00025, 0.0005,  0.001, 0.0025,
                                         0.005,   0.01,    0.025, 0.05};

void BM_CounterIncrement(benchmark::State& state) {
  static Registry* registry = new Registry();
  static Counter* counter =
      *registry->AddCounter("bench_increments_total", "Increments.");
  for (auto _ : state) counter->Increment();
  benchmark::DoNotOptimize(counter->Value());
}
BENCHMARK(BM_CounterIncrement)->ThreadRange(1, 2);

void BM_GaugeAdd(benchmark::State& state) {
  Registry registry;
  Gauge* gauge = *registry.AddGauge("bench_level", "Level.");
  for (auto _ : state) gauge->Add(1);
  benchmark::DoNotOptimize(gauge->Value());
}
BENCHMARK(BM_GaugeAdd);

void BM_HistogramObserve(benchmark::State& state) {
  Registry registry;
  Histogram* histogram =
      *registry.AddHistogram("bench_step_seconds", "Step time.", kStepBounds);
  // Log-uniform from 10 us to 100 ms, shuffled: every bucket gets hits, so the
  // bucket search branches as unpredictably as on real latencies.
  std::vector<double> values;
  for (int i = 0; i < 1024; ++i) {
    values.push_back(1e-05 * std::pow(10, 4.0 * (i * 389 % 1024) / 1024));
  }
  size_t i = 0;
  for (auto _ : state) {
    histogram->Observe(values[i]);
    i = (i + 1) & 1023;
  }
  benchmark::DoNotOptimize(histogram->Count());
}
BENCHMARK(BM_HistogramObserve);

// The lookup a caller pays when it does not keep the pointer.
void BM_WithLabelsLookup(benchmark::State& state) {
  Registry registry;
  CounterFamily* family = *registry.AddCounterFamily(
      "bench_rpcs_total", "RPCs.", {"method", "code"});
  const std::vector<std::string> codes = {"OK",
                                          "CANCELLED",
                                          "INVALID_ARGUMENT",
                                          "DEADLINE_EXCEEDED",
                                          "NOT_FOUND",
                                          "RESOURCE_EXHAUSTED",
                                          "UNAVAILABLE",
                                          "INTERNAL"};
  for (const char* method : {"Compile", "Decode", "Health"}) {
    for (const std::string& code : codes) {
      (void)family->WithLabels({method, code});
    }
  }
  for (auto _ : state) {
    (*family->WithLabels({"Decode", "INVALID_ARGUMENT"}))->Increment();
  }
}
BENCHMARK(BM_WithLabelsLookup);

// 50 metrics: 20 counters, 20 gauges, 10 twelve-bucket histograms.
void BM_Render50(benchmark::State& state) {
  Registry registry;
  for (int i = 0; i < 20; ++i) {
    (*registry.AddCounter("bench_counter_" + std::to_string(i) + "_total",
                          "A counter."))
        ->Increment(i * 1000);
    (*registry.AddGauge("bench_gauge_" + std::to_string(i), "A gauge."))
        ->Set(i * 0.25);
  }
  for (int i = 0; i < 10; ++i) {
    Histogram* histogram = *registry.AddHistogram(
        "bench_histogram_" + std::to_string(i) + "_seconds", "A histogram.",
        kStepBounds);
    for (int k = 0; k < 100; ++k) histogram->Observe(k * 1e-04);
  }
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = registry.Render();
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Render50);

}  // namespace
}  // namespace grammard::metrics
