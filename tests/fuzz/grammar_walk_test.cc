// Inputs the fuzzers once failed on, kept in regressions/ (named after the
// fuzzer and the cause), replayed through the same harness: each must run
// to its end.
#include "tests/fuzz/grammar_walk.h"

#include <string>

#include "grammar/compiler.h"
#include "gtest/gtest.h"
#include "tests/fuzz/fuzz_vocab.h"
#include "tests/support/paths.h"

namespace grammard::fuzz {
namespace {

// The EBNF fuzzer's walk aborted when an allowed token was refused as too
// ambiguous (more than kMaxScanNodes parse stacks), a refusal by design.
TEST(GrammarWalkTest, EbnfTooAmbiguousStopsTheWalk) {
  const std::string input = testing::ReadFileOrEmpty(
      testing::RunfilePath("tests/fuzz/regressions/ebnf_too_ambiguous"));
  ASSERT_FALSE(input.empty());
  const grammar::GrammarCompiler compiler(FuzzVocabulary());
  CompileAndWalk(
      reinterpret_cast<const uint8_t*>(input.data()), input.size(),
      [&](std::string_view text, const grammar::CompileOptions& options) {
        return compiler.CompileEbnf(text, "root", options);
      });
}

}  // namespace
}  // namespace grammard::fuzz
