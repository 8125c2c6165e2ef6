#include "grammar/testing/earley_oracle.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "grammar/frontends/ebnf/ebnf_parser.h"
#include "grammar/frontends/ebnf/json_grammar.h"
#include "grammar/ir/grammar_passes.h"
#include "grammar/ir/utf8_lowering.h"
#include "grammar/testing/reference_matcher.h"
#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

constexpr uint8_t kReject = EarleyOracle::kReject;
constexpr uint8_t kPrefix = EarleyOracle::kPrefix;
constexpr uint8_t kComplete = EarleyOracle::kComplete;
constexpr uint8_t kBoth = kPrefix | kComplete;

// Parses, normalises and lowers `text`, then checks each (input, verdict)
// with the oracle and with the reference matcher on the unlowered grammar.
void ExpectVerdicts(const std::string& text,
                    const std::vector<std::pair<std::string, uint8_t>>& cases) {
  absl::StatusOr<Grammar> parsed = ParseEbnf(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<Grammar> normal = Normalize(*parsed);
  ASSERT_TRUE(normal.ok()) << normal.status();
  absl::StatusOr<Grammar> bytes = LowerToBytes(*normal);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<EarleyOracle> oracle = EarleyOracle::Create(*bytes);
  ASSERT_TRUE(oracle.ok()) << oracle.status();
  ReferenceMatcher reference(*normal);
  for (const auto& [input, verdict] : cases) {
    EXPECT_EQ(oracle->Check(input), verdict)
        << "grammar: " << text << "\ninput: \"" << input << "\"";
    if (input.size() > ReferenceMatcher::kMaxInput) continue;
    EXPECT_EQ(reference.Check(input), verdict)
        << "reference; grammar: " << text << "\ninput: \"" << input << "\"";
  }
  EXPECT_FALSE(reference.saw_left_recursion());
}

TEST(EarleyOracleTest, PrefixAndCompleteFlags) {
  ExpectVerdicts("root ::= \"ab\" | \"a\"", {{"", kPrefix},
                                             {"a", kBoth},
                                             {"ab", kComplete},
                                             {"abc", kReject},
                                             {"b", kReject}});
}

TEST(EarleyOracleTest, Epsilon) {
  ExpectVerdicts("root ::= \"\"", {{"", kComplete}, {"a", kReject}});
  ExpectVerdicts("root ::= ()", {{"", kComplete}, {"a", kReject}});
  ExpectVerdicts("root ::= \"a\"*",
                 {{"", kBoth}, {"aaa", kBoth}, {"b", kReject}});
}

TEST(EarleyOracleTest, EmptyLanguages) {
  ExpectVerdicts("root ::= []", {{"", kReject}, {"a", kReject}});
  // `x` never finishes, so nothing can follow "a" (no dead-end prefixes).
  ExpectVerdicts(
      "root ::= \"a\" x | \"b\"\nx ::= \"b\" x",
      {{"", kPrefix}, {"a", kReject}, {"ab", kReject}, {"b", kComplete}});
  ExpectVerdicts("root ::= \"a\" [] | \"ab\"",
                 {{"a", kPrefix}, {"ab", kComplete}});
}

TEST(EarleyOracleTest, NullableRules) {
  ExpectVerdicts("root ::= a b \"c\"\na ::= \"\" | \"x\"\nb ::= a a",
                 {{"", kPrefix},
                  {"c", kComplete},
                  {"xc", kComplete},
                  {"xxxc", kComplete},
                  {"xxx", kPrefix},
                  {"xxxx", kReject},
                  {"xxxxc", kReject}});
  // Repeats of nullable bodies, nested.
  ExpectVerdicts("root ::= (\"\")* \"x\" (\"a\"*)* (\"b\"?){2,3}",
                 {{"", kPrefix},
                  {"x", kBoth},
                  {"xaaab", kBoth},
                  {"xbbb", kComplete},
                  {"xbbbb", kReject},
                  {"xba", kReject}});
}

TEST(EarleyOracleTest, CountedRepeats) {
  ExpectVerdicts("root ::= \"a\"{2,3}", {{"", kPrefix},
                                         {"a", kPrefix},
                                         {"aa", kBoth},
                                         {"aaa", kComplete},
                                         {"aaaa", kReject}});
  ExpectVerdicts("root ::= (\"a\"?){3} \"b\"",
                 {{"b", kComplete}, {"aaab", kComplete}, {"aaaab", kReject}});
  ExpectVerdicts("root ::= \"ab\"{2,} \"c\"{0}", {{"ab", kPrefix},
                                                  {"abab", kBoth},
                                                  {"ababa", kPrefix},
                                                  {"ababc", kReject}});
}

TEST(EarleyOracleTest, RecursionAndRules) {
  ExpectVerdicts("root ::= \"(\" root \")\" root | \"\"", {{"", kBoth},
                                                           {"()", kBoth},
                                                           {"(()())", kBoth},
                                                           {"(()", kPrefix},
                                                           {"())", kReject}});
  std::string deep(200, 'a');
  ExpectVerdicts("root ::= \"a\" root | \"a\"", {{deep, kBoth}, {"", kPrefix}});
}

TEST(EarleyOracleTest, Utf8Classes) {
  ExpectVerdicts("root ::= [\xC3\xA9-\xC3\xAB]+",  // [é-ë]+
                 {{"\xC3\xA9", kBoth},
                  {"\xC3\xAB\xC3\xAA", kBoth},
                  {"\xC3", kPrefix},
                  {"\xC3\xA8", kReject},
                  {"\xC3(", kReject},
                  {"e", kReject}});
  ExpectVerdicts("root ::= [^a]", {{"\xF0\x9F\x98", kPrefix},
                                   {"\xF0\x9F\x98\x80", kComplete},
                                   {"\xED\xA0\x80", kReject},  // A surrogate.
                                   {"\xC0\x80", kReject},      // Overlong NUL.
                                   {"a", kReject}});
}

TEST(EarleyOracleTest, RequiresByteLevelGrammars) {
  absl::StatusOr<Grammar> g = ParseEbnf("root ::= [a-z]");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(EarleyOracle::Create(*g).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EarleyOracleTest, CapsTheDesugaredSize) {
  Grammar g;
  const int32_t a = g.AddBytes("a");
  g.root = g.AddRule("root", g.AddRepeat(g.AddRepeat(a, 0, 5000), 0, 5000));
  EXPECT_EQ(EarleyOracle::Create(g, /*max_symbols=*/1000).status().code(),
            absl::StatusCode::kResourceExhausted);
  absl::StatusOr<EarleyOracle> oracle = EarleyOracle::Create(g);
  ASSERT_TRUE(oracle.ok());
  EXPECT_EQ(oracle->Check(std::string(100, 'a')), kBoth);
}

TEST(EarleyOracleTest, FastEnoughOnJson) {
  absl::StatusOr<Grammar> g = ParseEbnf(BuiltinJsonEbnf());
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Grammar> bytes = LowerToBytes(*Normalize(*g));
  ASSERT_TRUE(bytes.ok());
  absl::StatusOr<EarleyOracle> oracle = EarleyOracle::Create(*bytes);
  ASSERT_TRUE(oracle.ok());
  std::string doc = "{\"items\": [";
  while (doc.size() < 300) {
    doc += "{\"id\": 12345, \"name\": \"caf\xC3\xA9 \\u00e9\", \"ok\": true}, ";
  }
  doc += "null]}";
  EXPECT_EQ(oracle->Check(doc), kComplete);
  EXPECT_EQ(oracle->Check(doc.substr(0, doc.size() - 1)), kPrefix);
  const int kRuns = 50;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRuns; ++i) oracle->Check(doc);
  const double micros = std::chrono::duration<double, std::micro>(
                            std::chrono::steady_clock::now() - start)
                            .count() /
                        kRuns;
  std::printf("EarleyOracle: %.1f us per check of %zu bytes\n", micros,
              doc.size());
  // Generous against slow machines; typically a few hundred microseconds.
  EXPECT_LT(micros, 5000);
}

}  // namespace
}  // namespace grammard::grammar
