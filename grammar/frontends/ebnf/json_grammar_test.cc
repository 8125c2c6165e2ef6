#include "grammar/frontends/ebnf/json_grammar.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "grammar/frontends/ebnf/ebnf_parser.h"
#include "grammar/ir/grammar_passes.h"
#include "grammar/testing/oracle_pipeline.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/paths.h"

namespace grammard::grammar {
namespace {

class JsonGrammarTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<EarleyOracle> oracle = OracleForEbnf(BuiltinJsonEbnf());
    ASSERT_TRUE(oracle.ok()) << oracle.status();
    oracle_ = new EarleyOracle(*std::move(oracle));
  }
  static void TearDownTestSuite() {
    delete oracle_;
    oracle_ = nullptr;
  }

  static bool Complete(const std::string& text) {
    return (oracle_->Check(text) & EarleyOracle::kComplete) != 0;
  }
  static bool Viable(const std::string& text) {
    return oracle_->Check(text) != EarleyOracle::kReject;
  }

  static EarleyOracle* oracle_;
};

EarleyOracle* JsonGrammarTest::oracle_ = nullptr;

TEST_F(JsonGrammarTest, IsAValidNormalGrammar) {
  absl::StatusOr<Grammar> g = ParseEbnf(BuiltinJsonEbnf());
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Grammar> normal = Normalize(*g);
  ASSERT_TRUE(normal.ok()) << normal.status();
  EXPECT_EQ(normal->rules.size(), g->rules.size());  // Every rule is used.
  EXPECT_EQ(g->rules[g->root].name, "root");
}

TEST_F(JsonGrammarTest, AcceptsJsonValues) {
  const std::vector<std::string> valid = {
      "0",
      "-0",
      "-12.5e+10",
      "1E-7",
      "3.14159",
      "true",
      "false",
      "null",
      "\"\"",
      "\"caf\xC3\xA9 \xF0\x9F\x98\x80 \\u00e9\\\" \\\\ \\/ \\b\\f\\n\\r\\t\"",
      "\"\x7F\"",
      "[]",
      "{}",
      "[ ]",
      "{ \t\n\r}",
      "[1, \"two\", [3], {\"four\": 4}, null]",
      "{\"a\" : {\"b\" :[ true ,false ] } , \"c\":-1}",
      "[[[[[[[[[[[]]]]]]]]]]]",
  };
  for (const std::string& text : valid) {
    EXPECT_EQ(oracle_->Check(text) & EarleyOracle::kComplete,
              EarleyOracle::kComplete)
        << text;
  }
  // A number may go on; a closed container may not.
  EXPECT_EQ(oracle_->Check("12"),
            EarleyOracle::kPrefix | EarleyOracle::kComplete);
  EXPECT_EQ(oracle_->Check("[12]"), EarleyOracle::kComplete);
  EXPECT_EQ(oracle_->Check("{\"a\": "), EarleyOracle::kPrefix);
}

TEST_F(JsonGrammarTest, RejectsMalformedJson) {
  const std::vector<std::string> invalid = {
      "",           "01",        "1.",           ".5",          "-",
      "+1",         "1e",        "0x10",         "[1,]",        "[,1]",
      "{\"a\":1,}", "{a:1}",     "{'a':1}",      "'a'",         "\"abc",
      "\"a\nb\"",   "\"\\x41\"", "\"\\u12\"",    "\"\\u12G4\"", "tru",
      "nul",        "True",      "[1 2]",        "{\"a\" 1}",   "{\"a\":}",
      "[1]]",       "{}}",       " 1",           "1 ",          "\"\t\"",
      "NaN",        "Infinity",  "[\"a\"\"b\"]",
  };
  for (const std::string& text : invalid) {
    EXPECT_FALSE(Complete(text)) << text;
  }
  // Dead ends are rejected at the first wrong byte, not just at the end.
  EXPECT_FALSE(Viable("01"));
  EXPECT_FALSE(Viable("[1,]"));
  EXPECT_FALSE(Viable("{a"));
  EXPECT_FALSE(Viable("\"\x01"));
  EXPECT_FALSE(Viable("\"\xC3("));  // Invalid UTF-8 inside a string.
  EXPECT_TRUE(Viable("\"\xC3"));    // A character still being written.
}

TEST_F(JsonGrammarTest, BenchDocumentIsComplete) {
  const std::optional<std::string> data = grammard::testing::SharedDataDir();
  if (!data)
    GTEST_SKIP() << grammard::testing::MissingDataMessage("../shared/data");
  const std::optional<std::string> doc =
      ReadFile(*data + "/../bench/json_doc.json");
  if (!doc)
    GTEST_SKIP() << grammard::testing::MissingDataMessage("../shared/bench");
  EXPECT_EQ(oracle_->Check(*doc), EarleyOracle::kComplete);
  // Every proper prefix can still be completed.
  for (size_t len = 0; len < doc->size(); len += 97) {
    EXPECT_TRUE(oracle_->Check(doc->substr(0, len)) & EarleyOracle::kPrefix)
        << len;
  }
}

TEST_F(JsonGrammarTest, XGrammarJsonCases) {
  const std::optional<std::string> data = grammard::testing::SharedDataDir();
  if (!data)
    GTEST_SKIP() << grammard::testing::MissingDataMessage("../shared/data");
  const std::optional<std::string> text =
      ReadFile(*data + "/grammars/xgrammar/xgrammar_tests_extracted.json");
  ASSERT_TRUE(text.has_value());
  const nlohmann::json tests = nlohmann::json::parse(*text, nullptr, false);
  ASSERT_FALSE(tests.is_discarded());
  int accepted = 0;
  int refused = 0;
  for (const nlohmann::json& fn : tests["test_grammar_matcher_json.py"]) {
    if (!fn.contains("module_values")) continue;
    const nlohmann::json& values = fn["module_values"];
    for (const char* key : {"json_input_accepted", "json_input_pressure"}) {
      if (!values.contains(key)) continue;
      for (const nlohmann::json& input : values[key]) {
        EXPECT_TRUE(Complete(input.get<std::string>())) << input;
        ++accepted;
      }
    }
    if (values.contains("json_input_refused")) {
      for (const nlohmann::json& input : values["json_input_refused"]) {
        EXPECT_FALSE(Complete(input.get<std::string>())) << input;
        ++refused;
      }
    }
  }
  EXPECT_GE(accepted, 10);
  EXPECT_GE(refused, 5);
}

}  // namespace
}  // namespace grammard::grammar
