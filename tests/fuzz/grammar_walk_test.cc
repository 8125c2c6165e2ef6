// Inputs the fuzzers once failed on, kept in regressions/ (named after the
// fuzzer and the cause), replayed through the same harness: each must run
// to its end.
#include "tests/fuzz/grammar_walk.h"

#include <random>
#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/frontends/json_schema/json_schema.h"
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

// 200 walks of `length` random choices, one in eight a rollback (0xff) or
// a fork and jump-forward (0xfe).
void WalkRandomly(const grammar::CompiledGrammar& compiled, uint32_t seed,
                  size_t length) {
  std::mt19937 rng(seed);
  for (int walk = 0; walk < 200; ++walk) {
    std::vector<uint8_t> choices(length);
    for (uint8_t& c : choices) {
      const uint32_t r = rng() % 16;
      c = r == 0 ? 0xff : r == 1 ? 0xfe : static_cast<uint8_t>(rng() % 0xfd);
    }
    WalkGrammar(compiled, choices.data(), choices.size());
  }
}

// The walk's forks, jump-forwards and rollbacks over the state a matcher
// keeps for uniqueItems (grammar/distinct_items_test.cc checks the masks).
TEST(GrammarWalkTest, UniqueItemsForkJumpAndRollBack) {
  const grammar::GrammarCompiler compiler(FuzzVocabulary());
  auto converted = grammar::JsonSchemaToGrammar(
      R"({"type":"array","uniqueItems":true,"items":{"anyOf":[
          {"type":"string"},{"type":"object"},
          {"type":"array","uniqueItems":true,"items":{"type":"string"}}]}})");
  ASSERT_TRUE(converted.ok()) << converted.status();
  auto compiled = compiler.Compile(std::move(converted->grammar));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  WalkRandomly(*compiled, 3, 60);
}

// The same over the members an object counts at run time (required ones
// past six in any order, or every member once: grammar/counted_members_test.cc
// checks the masks).
TEST(GrammarWalkTest, RequiredMembersForkJumpAndRollBack) {
  const grammar::GrammarCompiler compiler(FuzzVocabulary());
  std::string properties, required;
  for (char name = 'a'; name <= 'i'; ++name) {
    properties += std::string(name == 'a' ? "" : ",") + "\"" + name +
                  "\":{\"type\":\"" + (name % 2 ? "string" : "integer") + "\"}";
    if (name <= 'g')
      required += std::string(name == 'a' ? "" : ",") + "\"" + name + "\"";
  }
  // Repeatable members with the required ones counted; each member once.
  for (auto order : {grammar::JsonPropertyOrder::kAnyRepeatable,
                     grammar::JsonPropertyOrder::kAny}) {
    grammar::JsonSchemaOptions options;
    options.property_order = order;
    auto converted = grammar::JsonSchemaToGrammar(
        R"({"type":"array","items":{"type":"object","properties":{)" +
            properties + R"(},"required":[)" + required + "]}}",
        options);
    ASSERT_TRUE(converted.ok()) << converted.status();
    auto compiled = compiler.Compile(std::move(converted->grammar));
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    WalkRandomly(*compiled, 5, 120);
  }
}

// The same over strings whose maxLength is counted at run time (a pattern
// of 3,000 states counted to 12 is past what an automaton may hold:
// grammar/counted_chars_test.cc checks the masks), among other items.
TEST(GrammarWalkTest, CountedStringsForkJumpAndRollBack) {
  const grammar::GrammarCompiler compiler(FuzzVocabulary());
  auto converted = grammar::JsonSchemaToGrammar(
      R"({"type":"array","items":{"anyOf":[
          {"type":"string","pattern":"^[a-c]{0,3000}@[a-c]+$","maxLength":12},
          {"type":["number","boolean","null"]}]}})");
  ASSERT_TRUE(converted.ok()) << converted.status();
  auto compiled = compiler.Compile(std::move(converted->grammar));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  WalkRandomly(*compiled, 7, 80);
}

}  // namespace
}  // namespace grammard::fuzz
