// What a mask costs along a string whose maxLength is counted at run time
// (grammar_ir.h's Rule::max_chars): llama3, `{"type":"string","pattern":
// "^[^@]*@[^@]+$","maxLength":N}` written one character a token up to its
// bound, each mask timed, in three bands: far from the bound (slack at
// least the longest token: a table's mask), near it (the longer tokens
// read for real) and at it (every token that adds a character refused by
// a real read: the slowest step of such a string):
//
//   bazel run -c opt //grammar:counted_chars_bench [-- --max_length=N]
//   RESULT counted_chars max_length=N compile_ms=.. far_p50_us=..
//       near_p50_us=.. near_max_us=.. bound_us=..
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "grammar/bench_support.h"
#include "grammar/compiler.h"
#include "grammar/greedy_tokens.h"
#include "grammar/matcher.h"

ABSL_FLAG(
    int, max_length, 20000,
    "The string's maxLength: from about 10,000 it is counted at run time, "
    "below it is unrolled into the automaton.");
ABSL_FLAG(int, reps, 5, "Strings written; the median per band is reported.");

namespace grammard::grammar {
namespace {

using bench::Clock;
using bench::Micros;

double Median(const std::vector<double>& v) { return bench::Percentile(v, 50); }

int Run() {
  int exit_code = 0;
  const std::shared_ptr<const Vocabulary> vocab =
      bench::LoadVocabulary("llama3", &exit_code);
  if (vocab == nullptr) return exit_code;
  GrammarCompiler compiler(vocab);
  const int max_length = std::max(2, absl::GetFlag(FLAGS_max_length));
  const std::string schema =
      R"({"type":"string","pattern":"^[^@]*@[^@]+$","maxLength":)" +
      std::to_string(max_length) + "}";
  const auto c0 = Clock::now();
  const std::optional<CompiledGrammar> grammar =
      bench::CompileSchema(compiler, schema);
  if (!grammar) return 1;
  const double compile_ms = Micros(Clock::now() - c0) / 1000;
  // One character a token, so that every slack is met.
  const std::string text =
      "\"" + std::string(static_cast<size_t>(max_length) - 2, 'a') + "@b";
  int32_t longest = 0;
  for (int32_t id = 0; id < vocab->size(); ++id) {
    longest = std::max(longest, static_cast<int32_t>(vocab->bytes(id).size()));
  }
  std::vector<uint32_t> row(grammar->mask_words());
  std::vector<double> far, near, near_max, bound;
  for (int rep = 0; rep < absl::GetFlag(FLAGS_reps); ++rep) {
    GrammarMatcher m(*grammar);
    double slowest_near = 0;
    for (size_t at = 0; at <= text.size(); ++at) {
      const auto t0 = Clock::now();
      m.FillNextTokenMask(row.data());
      const double us = Micros(Clock::now() - t0);
      // Characters still allowed past the opening quote.
      const int32_t slack = max_length - static_cast<int32_t>(at) + 1;
      if (at == text.size()) {
        bound.push_back(us);
      } else if (slack >= longest) {
        far.push_back(us);
      } else {
        slowest_near = std::max(slowest_near, us);
        near.push_back(us);
      }
      if (at == text.size()) break;
      const int32_t id =
          LongestAllowedToken(*grammar, row.data(), text.substr(at, 1));
      if (id < 0 || !m.AcceptToken(id).ok()) {
        std::fprintf(stderr, "the string was refused at byte %zu\n", at);
        return 1;
      }
    }
    near_max.push_back(slowest_near);
  }
  std::printf(
      "RESULT counted_chars max_length=%d compile_ms=%.1f far_p50_us=%.1f "
      "near_p50_us=%.1f near_max_us=%.1f bound_us=%.1f\n",
      max_length, compile_ms, Median(far), Median(near), Median(near_max),
      Median(bound));
  return 0;
}

}  // namespace
}  // namespace grammard::grammar

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return grammard::grammar::Run();
}
