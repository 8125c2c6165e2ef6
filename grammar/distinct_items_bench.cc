// What keeping items distinct costs a mask (uniqueItems at run time, see
// matcher.h): llama3, an array of strings with and without uniqueItems,
// masks and accepts timed inside the next item after `--items` distinct
// items, one line per variant:
//
//   bazel run -c opt //grammar:distinct_items_bench [-- --items=N]
//   RESULT distinct_items variant=unique items=N mask_p50_us=.. mask_p99_us=..
//       accept_p50_us=..
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "grammar/bench_support.h"
#include "grammar/compiler.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "grammar/greedy_tokens.h"
#include "grammar/matcher.h"

ABSL_FLAG(int, items, 1000, "Distinct items accepted before timing.");
ABSL_FLAG(int, reps, 200, "Masks timed per variant.");

namespace grammard::grammar {
namespace {

using bench::Clock;
using bench::Micros;
using bench::Percentile;

int Run() {
  int exit_code = 0;
  const std::shared_ptr<const Vocabulary> vocab =
      bench::LoadVocabulary("llama3", &exit_code);
  if (vocab == nullptr) return exit_code;
  GrammarCompiler compiler(vocab);
  const int items = absl::GetFlag(FLAGS_items);
  std::string prefix = "[";
  for (int i = 0; i < items; ++i) {
    prefix += (i ? ",\"item " : "\"item ") + std::to_string(i) + "\"";
  }
  // Inside the next item, a few characters in: most tokens may go on, and
  // every one holding a quote may end it.
  prefix += ",\"item 5";
  for (const char* variant : {"plain", "unique"}) {
    const std::string schema =
        std::string(R"({"type":"array","items":{"type":"string"})") +
        (std::string(variant) == "unique" ? R"(,"uniqueItems":true})" : "}");
    JsonSchemaOptions options;
    options.whitespace = JsonWhitespace::kCompact;
    const std::optional<CompiledGrammar> grammar =
        bench::CompileSchema(compiler, schema, options);
    if (!grammar) return 1;
    GrammarMatcher m(*grammar);
    if (!m.AcceptString(prefix).ok()) {
      std::fprintf(stderr, "the prefix was refused\n");
      return 1;
    }
    std::vector<uint32_t> row(grammar->mask_words());
    std::vector<double> mask_us, accept_us;
    for (int rep = 0; rep < absl::GetFlag(FLAGS_reps); ++rep) {
      const auto t0 = Clock::now();
      m.FillNextTokenMask(row.data());
      mask_us.push_back(Micros(Clock::now() - t0));
      // A token that ends the item ("5" is new), then back.
      const int32_t id = LongestAllowedToken(*grammar, row.data(), "0\",");
      const auto t1 = Clock::now();
      if (id < 0 || !m.AcceptToken(id).ok()) {
        std::fprintf(stderr, "no token ends the item\n");
        return 1;
      }
      accept_us.push_back(Micros(Clock::now() - t1));
      if (!m.Rollback(1).ok()) return 1;
    }
    std::printf(
        "RESULT distinct_items variant=%s items=%d mask_p50_us=%.1f "
        "mask_p99_us=%.1f accept_p50_us=%.2f\n",
        variant, items, Percentile(mask_us, 50), Percentile(mask_us, 99),
        Percentile(accept_us, 50));
  }
  return 0;
}

}  // namespace
}  // namespace grammard::grammar

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return grammard::grammar::Run();
}
