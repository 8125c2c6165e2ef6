#include "grammar/json_schema/internal/char_dfa.h"

#include <string>
#include <vector>

#include "grammar/syntax/regex_parser.h"
#include "gtest/gtest.h"

namespace grammard::grammar::json_schema_internal {
namespace {

CharDfa FromRegex(const std::string& pattern) {
  absl::StatusOr<Grammar> g = ParseRegex(pattern);
  EXPECT_TRUE(g.ok()) << g.status();
  CharNfa nfa;
  absl::StatusOr<CharNfa::Fragment> f =
      nfa.AddExpr(*g, g->rules[g->root].body, DfaLimits{});
  EXPECT_TRUE(f.ok()) << f.status();
  absl::StatusOr<CharDfa> dfa = Determinize(nfa, *f, DfaLimits{});
  EXPECT_TRUE(dfa.ok()) << dfa.status();
  return *dfa;
}

TEST(CharDfaTest, RegexMatches) {
  CharDfa d = FromRegex("[a-c]+x|y{2,3}");
  EXPECT_TRUE(Matches(d, "abx"));
  EXPECT_TRUE(Matches(d, "yy"));
  EXPECT_TRUE(Matches(d, "yyy"));
  EXPECT_FALSE(Matches(d, "yyyy"));
  EXPECT_FALSE(Matches(d, "x"));
  EXPECT_FALSE(Matches(d, ""));
}

TEST(CharDfaTest, MinimizedSizes) {
  // (a|b)*abb has a 4-state minimal DFA.
  EXPECT_EQ(FromRegex("(a|b)*abb").num_states(), 4);
  EXPECT_EQ(FromRegex("[^x]").num_states(), 2);
  EXPECT_TRUE(FromRegex("[]").IsEmpty());
}

TEST(CharDfaTest, UnicodeAndLength) {
  CharDfa d = FromRegex("é.");
  EXPECT_TRUE(Matches(d, "éa"));
  EXPECT_TRUE(Matches(d, "é😀"));
  EXPECT_FALSE(Matches(d, "é\n"));
  absl::StatusOr<CharDfa> len =
      LimitLength(FromRegex("[a-z]*"), 2, 3, DfaLimits{});
  ASSERT_TRUE(len.ok());
  EXPECT_FALSE(Matches(*len, "a"));
  EXPECT_TRUE(Matches(*len, "ab"));
  EXPECT_TRUE(Matches(*len, "abc"));
  EXPECT_FALSE(Matches(*len, "abcd"));
  CharDfa l = LengthDfa(1, -1);
  EXPECT_FALSE(Matches(l, ""));
  EXPECT_TRUE(Matches(l, "ü"));
  EXPECT_TRUE(Matches(l, "long enough"));
}

TEST(CharDfaTest, SetOperations) {
  CharDfa a = FromRegex("[a-z]+");
  absl::StatusOr<CharDfa> keys = LiteralsDfa({"id", "name", "ü"});
  ASSERT_TRUE(keys.ok());
  absl::StatusOr<CharDfa> other = Subtract(a, *keys, DfaLimits{});
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(Matches(*other, "id"));
  EXPECT_TRUE(Matches(*other, "i"));
  EXPECT_TRUE(Matches(*other, "idx"));
  EXPECT_FALSE(Matches(*other, "name"));
  CharDfa not_a = Complement(a);
  EXPECT_TRUE(Matches(not_a, ""));
  EXPECT_TRUE(Matches(not_a, "A"));
  EXPECT_FALSE(Matches(not_a, "abc"));
  absl::StatusOr<CharDfa> u = Union(a, *keys, DfaLimits{});
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(Matches(*u, "ü"));
  EXPECT_TRUE(Matches(*u, "zz"));
  absl::StatusOr<CharDfa> none =
      Intersect(FromRegex("a+"), FromRegex("b+"), DfaLimits{});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->IsEmpty());
  std::string example;
  EXPECT_TRUE(Example(*other, &example));
  EXPECT_TRUE(Matches(*other, example)) << example;
}

TEST(CharDfaTest, LimitsAreErrors) {
  absl::StatusOr<Grammar> g = ParseRegex("(a|b)*a(a|b){12}");
  ASSERT_TRUE(g.ok());
  CharNfa nfa;
  DfaLimits limits;
  limits.max_states = 1000;
  absl::StatusOr<CharNfa::Fragment> f =
      nfa.AddExpr(*g, g->rules[g->root].body, limits);
  ASSERT_TRUE(f.ok());
  absl::StatusOr<CharDfa> d = Determinize(nfa, *f, limits);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted);
  limits.max_states = 100000;
  limits.deadline = std::chrono::steady_clock::now();
  d = Determinize(nfa, *f, limits);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(CharDfaTest, Utf8Helpers) {
  EXPECT_EQ(CodepointCount("aé😀"), 3);
  EXPECT_EQ(CodepointCount("\xff"), -1);
  EXPECT_EQ(CodepointCount("\xed\xa0\x80"), -1);  // a surrogate
  std::string s;
  AppendUtf8(0x1F600, &s);
  EXPECT_EQ(s, "😀");
}

}  // namespace
}  // namespace grammard::grammar::json_schema_internal
