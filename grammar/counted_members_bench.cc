// What counting members at run time costs (grammar_ir.h's member_bit,
// required_members and member_guard; JsonPropertyOrder in json_schema.h):
// llama3, an object of `--members` declared string members written in
// reverse order, each mask and accept timed along the whole document, one
// line per variant:
//
//   bazel run -c opt //grammar:counted_members_bench [-- --members=N]
//   RESULT counted_members variant=V members=N compile_ms=.. mask_mean_us=..
//       mask_p50_us=.. mask_p99_us=.. accept_p50_us=..
//
// Variants: `repeatable` (kAnyRepeatable, nothing required: the grammar
// alone), `required` (kAnyRepeatable, every member required: counted at run
// time past six) and `once` (kAny, every member required, each at most
// once).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "grammar/bench_support.h"
#include "grammar/compiler.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "grammar/greedy_tokens.h"
#include "grammar/matcher.h"

ABSL_FLAG(int, members, 40, "Declared members of the object (7 to 64).");
ABSL_FLAG(int, reps, 5, "Documents written per variant.");

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
  const int members = absl::GetFlag(FLAGS_members);
  std::string properties, required, document = "{";
  for (int i = 0; i < members; ++i) {
    const std::string name = "member_" + std::to_string(i);
    properties += (i ? ",\"" : "\"") + name + R"(":{"type":"string"})";
    required += (i ? ",\"" : "\"") + name + "\"";
    const int back = members - 1 - i;
    document += (i ? ",\"member_" : "\"member_") + std::to_string(back) +
                "\":\"value " + std::to_string(back) + "\"";
  }
  document += "}";
  struct Variant {
    const char* name;
    JsonPropertyOrder order;
    bool required;
  };
  for (const Variant& v :
       {Variant{"repeatable", JsonPropertyOrder::kAnyRepeatable, false},
        Variant{"required", JsonPropertyOrder::kAnyRepeatable, true},
        Variant{"once", JsonPropertyOrder::kAny, true}}) {
    const std::string schema =
        R"({"type":"object","properties":{)" + properties + "}" +
        (v.required ? R"(,"required":[)" + required + "]" : "") + "}";
    JsonSchemaOptions options;
    options.whitespace = JsonWhitespace::kCompact;
    options.property_order = v.order;
    const auto c0 = Clock::now();
    const std::optional<CompiledGrammar> grammar =
        bench::CompileSchema(compiler, schema, options);
    if (!grammar) return 1;
    const double compile_ms = Micros(Clock::now() - c0) / 1000;
    std::vector<uint32_t> row(grammar->mask_words());
    std::vector<double> mask_us, accept_us;
    for (int rep = 0; rep < absl::GetFlag(FLAGS_reps); ++rep) {
      GrammarMatcher m(*grammar);
      for (size_t at = 0; at < document.size();) {
        const auto t0 = Clock::now();
        m.FillNextTokenMask(row.data());
        mask_us.push_back(Micros(Clock::now() - t0));
        const int32_t id = LongestAllowedToken(
            *grammar, row.data(), std::string_view(document).substr(at));
        const auto t1 = Clock::now();
        if (id < 0 || !m.AcceptToken(id).ok()) {
          std::fprintf(stderr, "%s: the document was refused at byte %zu\n",
                       v.name, at);
          return 1;
        }
        accept_us.push_back(Micros(Clock::now() - t1));
        at += vocab->bytes(id).size();
      }
      if (!m.CanTerminate()) {
        std::fprintf(stderr, "%s: the document did not end\n", v.name);
        return 1;
      }
    }
    std::printf(
        "RESULT counted_members variant=%s members=%d compile_ms=%.1f "
        "mask_mean_us=%.1f mask_p50_us=%.1f mask_p99_us=%.1f "
        "accept_p50_us=%.2f\n",
        v.name, members, compile_ms,
        std::accumulate(mask_us.begin(), mask_us.end(), 0.0) / mask_us.size(),
        Percentile(mask_us, 50), Percentile(mask_us, 99),
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
