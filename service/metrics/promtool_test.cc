// Feeds a rendered registry to `promtool check metrics`, Prometheus' own
// parser and linter, so the exposition is checked by what will scrape it.
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "service/metrics/metrics.h"

namespace grammard::metrics {
namespace {

constexpr char kPromtool[] = "/usr/bin/promtool";

// Writes `text` to a file and runs promtool on it as stdin; returns its exit
// status and appends everything it printed to `output`.
int RunPromtool(const std::string& text, std::string* output) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/metrics.prom";
  std::ofstream(path) << text;
  const std::string command =
      std::string(kPromtool) + " check metrics < '" + path + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    output->append(buffer, n);
  }
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class PromtoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kPromtool, X_OK) != 0) {
      GTEST_SKIP() << kPromtool << " not found: install Debian's prometheus "
                   << "package to lint the exposition format";
    }
  }
};

TEST_F(PromtoolTest, AcceptsEveryKindOfMetric) {
  Registry registry;
  (*registry.AddCounter("grammard_decode_steps_total", "Decode steps."))
      ->Increment(12345);
  (*registry.AddGauge("grammard_cache_bytes", "Bytes held by the cache."))
      ->Set(1.5e9);
  Histogram* step = *registry.AddHistogram(
      "grammard_step_duration_seconds", "Time to fill one token mask.",
      {1e-05, 2.5e-05, 5e-05, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
       0.01, 0.025, 0.05});
  for (double v : {3e-06, 4e-05, 0.0002, 0.07}) step->Observe(v);
  CounterFamily* rpcs = *registry.AddCounterFamily(
      "grammard_rpcs_total", "Finished RPCs by method and status code.",
      {"method", "code"});
  (*rpcs->WithLabels({"Decode", "OK"}))->Increment();
  (*rpcs->WithLabels({"Compile", "INVALID_ARGUMENT"}))->Increment(2);
  GaugeFamily* info =
      *registry.AddGaugeFamily("grammard_odd_values",
                               "Label values and values that need care:\n"
                               "back\\slash \"quotes\".",
                               {"value"});
  (*info->WithLabels({"quote \" backslash \\ newline \n end"}))->Set(1);
  (*info->WithLabels({"nan"}))->Set(std::numeric_limits<double>::quiet_NaN());
  (*info->WithLabels({"inf"}))->Set(std::numeric_limits<double>::infinity());
  (*info->WithLabels({"-inf"}))->Set(-std::numeric_limits<double>::infinity());
  (*info->WithLabels({"utf8 caf\xc3\xa9"}))->Set(-0.0);
  HistogramFamily* compile = *registry.AddHistogramFamily(
      "grammard_compile_duration_seconds", "Grammar compile time by kind.",
      {"kind"}, {0.001, 0.01, 0.1, 1, 10});
  (*compile->WithLabels({"json_schema"}))->Observe(0.02);
  (*compile->WithLabels({"regex"}))->Observe(20);

  const std::string text = registry.Render();
  std::string output;
  EXPECT_EQ(RunPromtool(text, &output), 0) << output << "\n" << text;
  EXPECT_EQ(output, "") << text;
}

// Guards the test above: promtool must really reject what it should.
TEST_F(PromtoolTest, ComplainsAboutACounterWithoutTotal) {
  Registry registry;
  (*registry.AddCounter("grammard_decode_steps", "Decode steps."))->Increment();
  std::string output;
  EXPECT_NE(RunPromtool(registry.Render(), &output), 0);
  EXPECT_NE(output.find("_total"), std::string::npos) << output;
}

}  // namespace
}  // namespace grammard::metrics
