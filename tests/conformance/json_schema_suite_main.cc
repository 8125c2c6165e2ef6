// bazel run -c opt //tests/conformance:json_schema_suite [-- --data=DIR
// --limit=N]: the JSON Schema Test Suite tables (json_schema_suite.h), every
// schema refused at compile with its reason, the comparison with
// llguidance's published baseline and a final TOTAL line. Exits 1 when the
// run has failures.
#include <cstdio>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "tests/conformance/json_schema_suite.h"
#include "tests/support/paths.h"

ABSL_FLAG(std::string, data, "",
          "The json-schema-test-suite folder (default: "
          "../shared/data/json-schema-test-suite).");
ABSL_FLAG(int, limit, 0, "At most this many schemas per file (0: all).");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::string dir = absl::GetFlag(FLAGS_data);
  if (dir.empty()) {
    std::optional<std::string> shared = grammard::testing::SharedDataDir();
    if (!shared) {
      std::printf("%s\n", grammard::testing::MissingDataMessage(
                              "../shared/data/json-schema-test-suite")
                              .c_str());
      return 0;
    }
    dir = *shared + "/json-schema-test-suite";
  }
  grammard::conformance::SuiteOptions options;
  options.limit = absl::GetFlag(FLAGS_limit);
  absl::StatusOr<grammard::conformance::SuiteRun> run =
      grammard::conformance::RunJsonSchemaSuite(dir, options);
  if (!run.ok()) {
    std::fprintf(stderr, "%s\n", std::string(run.status().message()).c_str());
    return 1;
  }
  std::printf("\nRejected at compile (strict mode):\n");
  for (const std::string& r : run->rejections) std::printf("  %s\n", r.c_str());
  std::printf("\nFailures:\n");
  for (const std::string& f : run->failures) std::printf("  %s\n", f.c_str());
  const grammard::conformance::SuiteCounts& b = run->baseline_set;
  std::printf(
      "\nllguidance baseline set (draft2020-12 required + optional/format): "
      "grammard passed %d of %d instances (%d wrong, %d invalid accepted); "
      "llguidance passed %d of %d\n",
      b.passed, b.cases, b.invalid_accepted + b.valid_rejected,
      b.invalid_accepted, run->llguidance_passed, run->llguidance_cases);
  const grammard::conformance::SuiteCounts& t = run->total;
  std::printf(
      "TOTAL cases=%d passed=%d failed=%d compile_error=%d "
      "invalid_accepted=%d\n",
      t.cases, t.passed, t.invalid_accepted + t.valid_rejected, t.compile_error,
      t.invalid_accepted);
  return run->failures.empty() ? 0 : 1;
}
