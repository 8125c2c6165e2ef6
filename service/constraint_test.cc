#include "service/constraint.h"

#include <string>

#include "grammar/base/bounded_json.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"
#include "gtest/gtest.h"

namespace grammard::service {
namespace {

using grammard::v1::Constraint;

Constraint Schema(const std::string& schema) {
  Constraint c;
  c.set_json_schema(schema);
  return c;
}

TEST(ParseConstraintTest, KeysEqualConstraintsAlikeAndKeepsNoText) {
  const std::string text =
      R"({"type": "object", "properties": {"b": {}, "a": {}}})";
  absl::StatusOr<ParsedConstraint> a = ParseConstraint(Schema(text));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->spec.has_json_schema());
  EXPECT_TRUE(a->spec.json_schema().empty());
  EXPECT_EQ(a->json, nlohmann::ordered_json::parse(text));
  EXPECT_GE(a->bytes, grammar::JsonHeapBytes(a->json));
  // Other key order and spacing: the same key. Another property order: not.
  EXPECT_EQ(ParseConstraint(Schema(R"({"properties":{"b":{},"a":{}},
                                      "type":"object"})"))
                ->canonical,
            a->canonical);
  EXPECT_NE(ParseConstraint(
                Schema(R"({"type":"object","properties":{"a":{},"b":{}}})"))
                ->canonical,
            a->canonical);
  Constraint regex;
  regex.set_regex("a+");
  EXPECT_EQ(ParseConstraint(regex)->spec.regex(), "a+");
}

TEST(ParseConstraintTest, RefusesWhatCannotBeRead) {
  EXPECT_NE(ParseConstraint(Schema("{"))
                .status()
                .message()
                .find("json_schema: not valid JSON"),
            std::string::npos);
  Constraint tag;
  tag.set_structural_tag("[");
  EXPECT_NE(ParseConstraint(tag).status().message().find(
                "structural_tag: not valid JSON"),
            std::string::npos);
  EXPECT_EQ(ParseConstraint(Constraint()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The parsed document compiles to the grammar its text does.
TEST(CompileConstraintTest, ThePartsReadAtSubmissionCompile) {
  auto vocab = grammar::Vocabulary::FromTokens(
      {"{", "}", "\"", "a", ":", "1", ",", "x", "<eos>"}, {8}, {8}, {});
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  grammar::GrammarCompiler compiler(*vocab);
  Constraint tag;
  tag.set_structural_tag(
      R"({"structures": [{"begin": "x", "schema": {"type": "integer"},
                          "end": "x"}], "triggers": ["x"]})");
  for (const Constraint& c :
       {Schema(R"({"type": "object", "properties": {"a": {"const": 1}},
                   "required": ["a"], "additionalProperties": false})"),
        tag}) {
    absl::StatusOr<ParsedConstraint> parsed = ParseConstraint(c);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    absl::StatusOr<CompiledConstraint> compiled =
        CompileConstraint(compiler, *std::move(parsed), {});
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    grammar::GrammarMatcher matcher(compiled->grammar);
    const std::string good = c.has_json_schema() ? R"({"a":1})" : "x1x";
    EXPECT_TRUE(matcher.AcceptString(good).ok()) << good;
    EXPECT_TRUE(matcher.CanTerminate()) << good;
  }
}

}  // namespace
}  // namespace grammard::service
