// The JSON Schema Test Suite in CI: the whole suite (about a second) must
// run without a failure as json_schema_suite.h defines them.
#include "tests/conformance/json_schema_suite.h"

#include <cstdio>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/paths.h"

namespace grammard::conformance {
namespace {

TEST(JsonSchemaSuiteTest, StrictGrammarsAgreeWithTheSuite) {
  std::optional<std::string> data = testing::SharedDataDir();
  if (!data) {
    GTEST_SKIP() << testing::MissingDataMessage(
        "../shared/data/json-schema-test-suite");
  }
  absl::StatusOr<SuiteRun> run =
      RunJsonSchemaSuite(*data + "/json-schema-test-suite", {});
  if (absl::IsNotFound(run.status())) {
    GTEST_SKIP() << testing::MissingDataMessage(
        "../shared/data/json-schema-test-suite");
  }
  ASSERT_TRUE(run.ok()) << run.status();
  std::printf("\nRejected at compile (strict mode):\n");
  for (const std::string& r : run->rejections) std::printf("  %s\n", r.c_str());
  EXPECT_GT(run->total.passed, 0);
  for (const std::string& f : run->failures) ADD_FAILURE() << f;
}

}  // namespace
}  // namespace grammard::conformance
