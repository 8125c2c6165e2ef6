#include "service/metrics/metrics.h"

#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace grammard::metrics {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(CounterTest, IncrementsByOneOrByAmount) {
  Registry registry;
  absl::StatusOr<Counter*> counter =
      registry.AddCounter("requests_total", "Requests.");
  ASSERT_TRUE(counter.ok()) << counter.status();
  EXPECT_EQ((*counter)->Value(), 0);
  (*counter)->Increment();
  (*counter)->Increment(2.5);
  EXPECT_EQ((*counter)->Value(), 3.5);
  EXPECT_EQ(registry.Render(),
            "# HELP requests_total Requests.\n"
            "# TYPE requests_total counter\n"
            "requests_total 3.5\n");
}

TEST(CounterTest, IgnoresNegativeAndNaNAmounts) {
  Registry registry;
  Counter* counter = *registry.AddCounter("x_total", "X.");
  counter->Increment(4);
  counter->Increment(-1);
  counter->Increment(kNaN);
  EXPECT_EQ(counter->Value(), 4);
}

TEST(GaugeTest, SetAndAdd) {
  Registry registry;
  Gauge* gauge = *registry.AddGauge("queue_depth", "Queued requests.");
  gauge->Set(5);
  gauge->Add(-2);
  gauge->Add(0.5);
  EXPECT_EQ(gauge->Value(), 3.5);
  EXPECT_EQ(registry.Render(),
            "# HELP queue_depth Queued requests.\n"
            "# TYPE queue_depth gauge\n"
            "queue_depth 3.5\n");
}

TEST(HistogramTest, BucketsAreCumulativeAndBoundsInclusive) {
  Registry registry;
  absl::StatusOr<Histogram*> histogram =
      registry.AddHistogram("latency_seconds", "Latency.", {0.1, 1, 10});
  ASSERT_TRUE(histogram.ok()) << histogram.status();
  for (double v : {0.05, 0.1, 0.5, 1.0, 20.0, kNaN}) (*histogram)->Observe(v);
  EXPECT_EQ((*histogram)->Count(), 5u);
  EXPECT_DOUBLE_EQ((*histogram)->Sum(), 21.65);
  EXPECT_EQ(registry.Render(),
            "# HELP latency_seconds Latency.\n"
            "# TYPE latency_seconds histogram\n"
            "latency_seconds_bucket{le=\"0.1\"} 2\n"
            "latency_seconds_bucket{le=\"1\"} 4\n"
            "latency_seconds_bucket{le=\"10\"} 4\n"
            "latency_seconds_bucket{le=\"+Inf\"} 5\n"
            "latency_seconds_sum 21.65\n"
            "latency_seconds_count 5\n");
}

TEST(HistogramTest, NoBoundsMeansOnlyTheInfBucket) {
  Registry registry;
  Histogram* histogram = *registry.AddHistogram("size_bytes", "Sizes.", {});
  histogram->Observe(3);
  EXPECT_EQ(registry.Render(),
            "# HELP size_bytes Sizes.\n"
            "# TYPE size_bytes histogram\n"
            "size_bytes_bucket{le=\"+Inf\"} 1\n"
            "size_bytes_sum 3\n"
            "size_bytes_count 1\n");
}

TEST(HistogramTest, RejectsBadBounds) {
  Registry registry;
  for (const std::vector<double>& bounds : std::vector<std::vector<double>>{
           {1, 0.5}, {1, 1}, {0.1, kNaN}, {1, kInf}, {-kInf, 0}}) {
    absl::StatusOr<Histogram*> histogram =
        registry.AddHistogram("h_seconds", "H.", bounds);
    EXPECT_EQ(histogram.status().code(), absl::StatusCode::kInvalidArgument)
        << histogram.status();
  }
  // None of the failures took the name.
  EXPECT_TRUE(registry.AddHistogram("h_seconds", "H.", {1}).ok());
}

TEST(FamilyTest, WithLabelsReturnsOneStableSeriesPerLabelSet) {
  Registry registry;
  absl::StatusOr<CounterFamily*> family = registry.AddCounterFamily(
      "rpcs_total", "RPCs by method and code.", {"method", "code"});
  ASSERT_TRUE(family.ok()) << family.status();
  absl::StatusOr<Counter*> ok = (*family)->WithLabels({"Decode", "OK"});
  absl::StatusOr<Counter*> invalid =
      (*family)->WithLabels({"Decode", "INVALID_ARGUMENT"});
  ASSERT_TRUE(ok.ok() && invalid.ok());
  EXPECT_NE(*ok, *invalid);
  EXPECT_EQ(*(*family)->WithLabels({"Decode", "OK"}), *ok);
  (*ok)->Increment(3);
  (*invalid)->Increment();
  EXPECT_EQ(registry.Render(),
            "# HELP rpcs_total RPCs by method and code.\n"
            "# TYPE rpcs_total counter\n"
            "rpcs_total{method=\"Decode\",code=\"INVALID_ARGUMENT\"} 1\n"
            "rpcs_total{method=\"Decode\",code=\"OK\"} 3\n");
}

TEST(FamilyTest, RejectsWrongLabelCountAndInvalidUtf8) {
  Registry registry;
  CounterFamily* family =
      *registry.AddCounterFamily("rpcs_total", "RPCs.", {"code"});
  EXPECT_EQ(family->WithLabels({}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(family->WithLabels({"a", "b"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (const char* bad : {"\xff", "\xc0\xaf", "\xe2\x82", "\xed\xa0\x80"}) {
    EXPECT_EQ(family->WithLabels({bad}).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_TRUE(family->WithLabels({"caf\xc3\xa9 \xf0\x9f\x98\x80"}).ok());
}

TEST(FamilyTest, EmptyFamilyRendersNothingUntilItHasASeries) {
  Registry registry;
  GaugeFamily* family =
      *registry.AddGaugeFamily("cache_bytes", "Cache size.", {"tier"});
  EXPECT_EQ(registry.Render(), "");
  (*family->WithLabels({"local"}))->Set(2048);
  EXPECT_EQ(registry.Render(),
            "# HELP cache_bytes Cache size.\n"
            "# TYPE cache_bytes gauge\n"
            "cache_bytes{tier=\"local\"} 2048\n");
}

TEST(FamilyTest, HistogramFamilyPutsLeAfterItsLabels) {
  Registry registry;
  HistogramFamily* family = *registry.AddHistogramFamily(
      "step_seconds", "Step time.", {"engine"}, {1e-05, 0.001});
  (*family->WithLabels({"pda"}))->Observe(0.0005);
  EXPECT_EQ(registry.Render(),
            "# HELP step_seconds Step time.\n"
            "# TYPE step_seconds histogram\n"
            "step_seconds_bucket{engine=\"pda\",le=\"1e-05\"} 0\n"
            "step_seconds_bucket{engine=\"pda\",le=\"0.001\"} 1\n"
            "step_seconds_bucket{engine=\"pda\",le=\"+Inf\"} 1\n"
            "step_seconds_sum{engine=\"pda\"} 0.0005\n"
            "step_seconds_count{engine=\"pda\"} 1\n");
}

TEST(RenderTest, EscapesLabelValuesAndHelp) {
  Registry registry;
  CounterFamily* family = *registry.AddCounterFamily(
      "errors_total", "Errors; see C:\\logs\nfor \"details\".", {"message"});
  (*family->WithLabels({"a \"quoted\" back\\slash\nnewline"}))->Increment();
  EXPECT_EQ(registry.Render(),
            "# HELP errors_total Errors; see C:\\\\logs\\nfor \"details\".\n"
            "# TYPE errors_total counter\n"
            "errors_total{message=\"a \\\"quoted\\\" back\\\\slash\\nnewline\"}"
            " 1\n");
}

TEST(RenderTest, FormatsFloatsAsPrometheusParsesThem) {
  Registry registry;
  GaugeFamily* family = *registry.AddGaugeFamily("value", "Values.", {"case"});
  // Labels sort as the cases are listed, so the rendered lines line up.
  const std::vector<std::pair<double, std::string>> cases = {
      {1e-05, "1e-05"},
      {5e-324, "5e-324"},
      {0.0001, "0.0001"},
      {0.0005, "0.0005"},
      {0.1, "0.1"},
      {1.0 / 3, "0.3333333333333333"},
      {42, "42"},
      {1e6, "1000000"},
      {9007199254740992, "9007199254740992"},
      {1e20, "100000000000000000000"},
      {1e21, "1e+21"},
      {1.5e300, "1.5e+300"},
      {-2.5, "-2.5"},
      {0, "0"},
      {kInf, "+Inf"},
      {-kInf, "-Inf"},
      {kNaN, "NaN"},
  };
  std::string expected = "# HELP value Values.\n# TYPE value gauge\n";
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string label = std::string(1, static_cast<char>('a' + i));
    (*family->WithLabels({label}))->Set(cases[i].first);
    expected += "value{case=\"" + label + "\"} " + cases[i].second + "\n";
  }
  EXPECT_EQ(registry.Render(), expected);
}

TEST(RenderTest, SmallRegistryExactText) {
  Registry registry;
  Counter* decodes =
      *registry.AddCounter("grammard_decodes_total", "Decode steps served.");
  Gauge* sessions =
      *registry.AddGauge("grammard_sessions", "Open decode sessions.");
  Histogram* compile = *registry.AddHistogram(
      "grammard_compile_seconds", "Grammar compile time.", {0.01, 0.1});
  CounterFamily* rpcs = *registry.AddCounterFamily("grammard_rpcs_total",
                                                   "Finished RPCs.", {"code"});
  decodes->Increment(7);
  sessions->Set(2);
  compile->Observe(0.05);
  compile->Observe(0.5);
  (*rpcs->WithLabels({"OK"}))->Increment();
  EXPECT_EQ(registry.Render(),
            "# HELP grammard_compile_seconds Grammar compile time.\n"
            "# TYPE grammard_compile_seconds histogram\n"
            "grammard_compile_seconds_bucket{le=\"0.01\"} 0\n"
            "grammard_compile_seconds_bucket{le=\"0.1\"} 1\n"
            "grammard_compile_seconds_bucket{le=\"+Inf\"} 2\n"
            "grammard_compile_seconds_sum 0.55\n"
            "grammard_compile_seconds_count 2\n"
            "# HELP grammard_decodes_total Decode steps served.\n"
            "# TYPE grammard_decodes_total counter\n"
            "grammard_decodes_total 7\n"
            "# HELP grammard_rpcs_total Finished RPCs.\n"
            "# TYPE grammard_rpcs_total counter\n"
            "grammard_rpcs_total{code=\"OK\"} 1\n"
            "# HELP grammard_sessions Open decode sessions.\n"
            "# TYPE grammard_sessions gauge\n"
            "grammard_sessions 2\n");
}

TEST(RegistrationTest, RejectsInvalidMetricNames) {
  Registry registry;
  for (const char* name : {"", "1abc", "a-b", "a b", "caf\xc3\xa9", "a.b"}) {
    EXPECT_EQ(registry.AddCounter(name, "Help.").status().code(),
              absl::StatusCode::kInvalidArgument)
        << name;
  }
  for (const char* name : {"a", "_a", ":a", "a:b_c9", "__a"}) {
    EXPECT_TRUE(registry.AddGauge(name, "Help.").ok()) << name;
  }
}

TEST(RegistrationTest, RejectsInvalidLabelNames) {
  Registry registry;
  for (const char* label : {"", "1a", "a:b", "a-b", "__reserved"}) {
    EXPECT_EQ(
        registry.AddCounterFamily("c_total", "Help.", {label}).status().code(),
        absl::StatusCode::kInvalidArgument)
        << label;
  }
  EXPECT_EQ(
      registry.AddCounterFamily("c_total", "Help.", {"a", "a"}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogramFamily("h_seconds", "Help.", {"le"}, {1})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(registry.AddGaugeFamily("g", "Help.", {"le", "_x", "a9"}).ok());
}

TEST(RegistrationTest, RequiresUtf8Help) {
  Registry registry;
  EXPECT_EQ(registry.AddCounter("a_total", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddCounter("a_total", "bad \xff").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RegistrationTest, RejectsDuplicateAndClashingNames) {
  Registry registry;
  ASSERT_TRUE(registry.AddCounter("a_total", "A.").ok());
  EXPECT_EQ(registry.AddCounter("a_total", "A.").status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddGaugeFamily("a_total", "A.", {"x"}).status().code(),
            absl::StatusCode::kAlreadyExists);

  // A histogram's samples are name_bucket, name_sum and name_count.
  ASSERT_TRUE(registry.AddHistogram("h_seconds", "H.", {1}).ok());
  EXPECT_EQ(registry.AddGauge("h_seconds_count", "C.").status().code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(registry.AddGauge("g_sum", "G.").ok());
  absl::Status clash = registry.AddHistogram("g", "G.", {1}).status();
  EXPECT_EQ(clash.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(clash.message().find("g_sum"), std::string::npos) << clash;
}

TEST(ConcurrencyTest, IncrementsFromManyThreadsSumExactly) {
  Registry registry;
  Counter* counter = *registry.AddCounter("ops_total", "Ops.");
  Gauge* gauge = *registry.AddGauge("level", "Level.");
  Histogram* histogram =
      *registry.AddHistogram("op_seconds", "Op time.", {0.5, 1.5});
  CounterFamily* family =
      *registry.AddCounterFamily("labelled_total", "Ops.", {"worker"});
  constexpr int kThreads = 8;
  constexpr int kPerThread = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Counter* mine = *family->WithLabels({t % 2 == 0 ? "even" : "odd"});
      for (int i = 0; i < kPerThread; ++i) {
        counter->Increment();
        gauge->Add(i % 2 == 0 ? 2 : -1);
        histogram->Observe(i % 2);
        mine->Increment(0.5);
        // Scrapes race with the updates.
        if (i % 20000 == 0) {
          EXPECT_FALSE(registry.Render().empty());
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  constexpr double kTotal = double{kThreads} * kPerThread;
  EXPECT_EQ(counter->Value(), kTotal);
  EXPECT_EQ(gauge->Value(), kTotal / 2);
  EXPECT_EQ(histogram->Count(), static_cast<uint64_t>(kTotal));
  EXPECT_EQ(histogram->Sum(), kTotal / 2);
  EXPECT_EQ((*family->WithLabels({"even"}))->Value(), kTotal / 4);
  EXPECT_EQ((*family->WithLabels({"odd"}))->Value(), kTotal / 4);
  const std::string text = registry.Render();
  EXPECT_NE(text.find("op_seconds_bucket{le=\"0.5\"} 400000\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("op_seconds_count 800000\n"), std::string::npos);
}

TEST(ConcurrencyTest, RacingWithLabelsCreatesOneSeries) {
  Registry registry;
  CounterFamily* family =
      *registry.AddCounterFamily("races_total", "Races.", {"key"});
  constexpr int kThreads = 8;
  std::vector<Counter*> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) {
        Counter* counter = *family->WithLabels({std::to_string(i)});
        counter->Increment();
        if (i == 999) seen[t] = counter;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (Counter* counter : seen) EXPECT_EQ(counter, seen[0]);
  EXPECT_EQ(seen[0]->Value(), kThreads);
}

}  // namespace
}  // namespace grammard::metrics
