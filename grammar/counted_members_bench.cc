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
#include "grammar/compiler.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "grammar/greedy_tokens.h"
#include "grammar/matcher.h"
#include "tests/support/paths.h"

ABSL_FLAG(int, members, 40, "Declared members of the object (7 to 64).");
ABSL_FLAG(int, reps, 5, "Documents written per variant.");

namespace grammard::grammar {
namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100 * v.size()))];
}

int Run() {
  auto dir = testing::TokenizerDir("llama3");
  if (!dir) {
    std::fprintf(stderr, "%s\n",
                 testing::MissingDataMessage("tokenizer llama3").c_str());
    return 0;
  }
  auto vocab = Vocabulary::FromDirectory(*dir, {"llama3", {}, 0});
  if (!vocab.ok()) {
    std::fprintf(stderr, "%s\n", vocab.status().ToString().c_str());
    return 1;
  }
  GrammarCompiler compiler(*vocab);
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
    auto converted = JsonSchemaToGrammar(schema, options);
    if (!converted.ok()) {
      std::fprintf(stderr, "%s\n", converted.status().ToString().c_str());
      return 1;
    }
    auto grammar = compiler.Compile(std::move(converted->grammar));
    if (!grammar.ok()) {
      std::fprintf(stderr, "%s\n", grammar.status().ToString().c_str());
      return 1;
    }
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
        at += vocab->get()->bytes(id).size();
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
