// Every benchmark workload of ../shared/bench/WORKLOADS.tsv: its grammar
// compiles through the front ends and its input is a complete string of the
// language, so the benchmarks measure real work. JSON Schema workloads belong
// to the schema compiler; here their instance is only checked to be JSON.
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/frontends/ebnf/json_grammar.h"
#include "grammar/testing/oracle_pipeline.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"

namespace grammard::grammar {
namespace {

struct Workload {
  std::string name;
  std::string kind;
  std::string grammar;
  std::string input;
};

std::vector<Workload> ReadWorkloads(const std::string& tsv) {
  std::vector<Workload> out;
  std::istringstream lines(tsv);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Workload w;
    std::getline(fields, w.name, '\t');
    std::getline(fields, w.kind, '\t');
    std::getline(fields, w.grammar, '\t');
    std::getline(fields, w.input, '\t');
    out.push_back(w);
  }
  return out;
}

TEST(BenchWorkloadsTest, InputsAreCompleteStrings) {
  const std::optional<std::string> data = grammard::testing::SharedDataDir();
  if (!data)
    GTEST_SKIP() << grammard::testing::MissingDataMessage("../shared/data");
  const std::string bench = *data + "/../bench/";
  const std::optional<std::string> tsv = ReadFile(bench + "WORKLOADS.tsv");
  if (!tsv)
    GTEST_SKIP() << grammard::testing::MissingDataMessage("../shared/bench");

  int checked = 0;
  for (const Workload& w : ReadWorkloads(*tsv)) {
    SCOPED_TRACE(w.name);
    const std::optional<std::string> input = ReadFile(bench + w.input);
    ASSERT_TRUE(input.has_value()) << w.input;
    absl::StatusOr<EarleyOracle> oracle = absl::UnknownError("unknown kind");
    if (w.kind == "builtin_json" || w.kind == "json_schema") {
      oracle = OracleForEbnf(BuiltinJsonEbnf());
    } else if (w.kind == "ebnf") {
      const std::optional<std::string> text = ReadFile(bench + w.grammar);
      ASSERT_TRUE(text.has_value()) << w.grammar;
      oracle = OracleForEbnf(*text);
    } else if (w.kind == "regex") {
      std::optional<std::string> pattern = ReadFile(bench + w.grammar);
      ASSERT_TRUE(pattern.has_value()) << w.grammar;
      // The file ends with a newline that is not part of the pattern.
      if (!pattern->empty() && pattern->back() == '\n') pattern->pop_back();
      oracle = OracleForRegex(*pattern);
    }
    ASSERT_TRUE(oracle.ok()) << w.kind << ": " << oracle.status();
    EXPECT_EQ(oracle->Check(*input) & EarleyOracle::kComplete,
              EarleyOracle::kComplete);
    // Inputs are used as they are stored: none ends with a newline.
    EXPECT_NE(input->back(), '\n');
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

}  // namespace
}  // namespace grammard::grammar
