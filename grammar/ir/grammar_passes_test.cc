#include "grammar/ir/grammar_passes.h"

#include <string>
#include <vector>

#include "grammar/frontends/ebnf/ebnf_parser.h"
#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

Grammar Parse(std::string_view text, std::string_view root = "root") {
  absl::StatusOr<Grammar> g = ParseEbnf(text, root);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : Grammar();
}

std::string LeftRecursionMessage(std::string_view text) {
  const absl::Status status = CheckNoLeftRecursion(Parse(text));
  return status.ok() ? "ok" : std::string(status.message());
}

TEST(RemoveUnreachableRulesTest, DropsRulesAndTheirExpressions) {
  // XGrammar's test_dead_code_eliminator.
  Grammar g = Parse(
      "root ::= rule1 | rule2\nunused1 ::= unused2 | \"x\"\n"
      "unused2 ::= unused1 | \"y\"\nrule1 ::= \"a\" rule2 | \"b\"\n"
      "rule2 ::= \"c\" rule1 | \"d\"\n");
  Grammar out = RemoveUnreachableRules(g);
  ASSERT_TRUE(out.Validate().ok());
  EXPECT_EQ(out.ToString(),
            "root ::= rule1 | rule2\nrule1 ::= \"a\" rule2 | \"b\"\n"
            "rule2 ::= \"c\" rule1 | \"d\"\n");
  EXPECT_LT(out.exprs.size(), g.exprs.size());
  for (size_t i = 0; i < out.exprs.size(); ++i) {
    bool used = false;
    for (const Rule& r : out.rules)
      used = used || r.body == static_cast<int32_t>(i);
    for (const Expr& e : out.exprs) {
      for (int32_t c : e.children) used = used || c == static_cast<int32_t>(i);
    }
    EXPECT_TRUE(used) << "expression " << i << " is garbage";
  }
}

TEST(RemoveUnreachableRulesTest, RenumbersTheRoot) {
  Grammar g = Parse("a ::= \"a\"\nb ::= c \"b\"\nc ::= \"c\"\nd ::= a", "b");
  Grammar out = RemoveUnreachableRules(g);
  ASSERT_TRUE(out.Validate().ok());
  EXPECT_EQ(out.rules[out.root].name, "b");
  EXPECT_EQ(out.ToString(), "b ::= c \"b\"\nc ::= \"c\"\n");
}

TEST(StructuralIdsTest, EqualExactlyWhenStructurallyEqual) {
  Grammar g = Parse(
      "root ::= (\"a\" [b-c]* x) | (\"a\" [b-c]* x) | (\"a\" [b-c]+ x) | "
      "(\"a\" [b-c]* y)\nx ::= \"x\"\ny ::= \"x\"\n");
  const std::vector<int32_t> ids = StructuralIds(g);
  const std::vector<int32_t>& branches = g.exprs[g.rules[g.root].body].children;
  ASSERT_EQ(branches.size(), 4u);
  EXPECT_NE(branches[0], branches[1]);  // two copies in the arena
  EXPECT_EQ(ids[branches[0]], ids[branches[1]]);
  EXPECT_NE(ids[branches[0]], ids[branches[2]]);  // * against +
  EXPECT_NE(ids[branches[0]], ids[branches[3]]);  // another rule
  // With x and y in one class, the last branch equals the first.
  const std::vector<int32_t> with_classes = StructuralIds(g, {0, 1, 1});
  EXPECT_EQ(with_classes[branches[0]], with_classes[branches[3]]);
}

TEST(MergeEqualRulesTest, MergesCopiesOfARuleChain) {
  const std::string chain =
      "a ::= \"x\" b | \"q\"\nb ::= \"y\" a | \"z\"\n"
      "a2 ::= \"x\" b2 | \"q\"\nb2 ::= \"y\" a2 | \"z\"\n";
  Grammar merged = MergeEqualRules(Parse("root ::= a \",\" a2\n" + chain));
  ASSERT_TRUE(merged.Validate().ok());
  EXPECT_EQ(merged.ToString(),
            "root ::= a \",\" a\na ::= \"x\" b | \"q\"\n"
            "b ::= \"y\" a | \"z\"\n");
}

TEST(MergeEqualRulesTest, KeepsApartWhatDiffersDownTheChain) {
  // a and a2 have equal bodies, yet b2 ends differently.
  const std::string text =
      "root ::= a \",\" a2\n"
      "a ::= \"x\" b | \"q\"\nb ::= \"y\" a | \"z\"\n"
      "a2 ::= \"x\" b2 | \"q\"\nb2 ::= \"y\" a2 | \"w\"\n";
  Grammar g = Parse(text);
  EXPECT_EQ(MergeEqualRules(g).ToString(), g.ToString());
}

TEST(MergeEqualRulesTest, TheRootKeepsItsPlace) {
  Grammar merged =
      MergeEqualRules(Parse("r ::= \"x\" root | \"y\"\nroot ::= \"x\" r | "
                            "\"y\"\n"));
  ASSERT_EQ(merged.rules.size(), 1u);
  EXPECT_EQ(merged.rules[merged.root].name, "root");
  EXPECT_EQ(merged.ToString(), "root ::= \"x\" root | \"y\"\n");
}

TEST(MergeEqualRulesTest, MergesRulesWhoseTreesAreFarLargerThanTheirDags) {
  // Each body shares one choice 24 levels deep (16M nodes as a tree, 48 as
  // a DAG) with no reference in it: only the references need walking.
  Grammar g;
  int32_t deep = g.AddBytes("a");
  for (int level = 0; level < 24; ++level) {
    deep = g.AddChoice({g.AddSequence({deep, g.AddBytes("b")}), deep});
  }
  const int32_t x = g.AddRule("x", g.AddBytes("x"));
  const int32_t y = g.AddRule("y", g.AddBytes("x"));
  const int32_t a = g.AddRule("a", g.AddSequence({deep, g.AddRuleRef(x)}));
  const int32_t b = g.AddRule("b", g.AddSequence({deep, g.AddRuleRef(y)}));
  g.root = g.AddRule("root", g.AddSequence({g.AddRuleRef(a), g.AddRuleRef(b)}));
  ASSERT_TRUE(g.Validate().ok());
  Grammar merged = MergeEqualRules(g);
  ASSERT_TRUE(merged.Validate().ok());
  EXPECT_EQ(merged.rules.size(), 3u);  // root, a, x
}

TEST(NullableTest, RulesAndExpressions) {
  Grammar g = Parse(
      "root ::= a b c d e f\n"
      "a ::= \"\"\n"
      "b ::= \"x\" | a\n"
      "c ::= b b [x]*\n"
      "d ::= \"x\"{0,3} (\"y\" | \"\")\n"
      "e ::= \"x\"+ | [^x]\n"
      "f ::= g\n"
      "g ::= h\n"
      "h ::= \"\"? \"z\"");
  const std::vector<bool> rules = NullableRules(g);
  const std::vector<bool> expected = {false, true,  true,  true, true,
                                      false, false, false, false};
  EXPECT_EQ(rules, expected);
  // Defined in reverse order, so a single forward sweep cannot converge.
  Grammar chain = Parse("root ::= a\na ::= b\nb ::= c\nc ::= d\nd ::= \"\"");
  EXPECT_EQ(NullableRules(chain), std::vector<bool>(5, true));
}

TEST(LeftRecursionTest, FindsEveryForm) {
  EXPECT_EQ(LeftRecursionMessage("root ::= root \"x\" | \"y\""),
            "left recursion: root -> root");
  EXPECT_EQ(LeftRecursionMessage("root ::= expr\nexpr ::= term \"+\" | \"x\"\n"
                                 "term ::= expr"),
            "left recursion: expr -> term -> expr");
  // Through a nullable prefix: a literal, a rule and an optional.
  EXPECT_EQ(LeftRecursionMessage("root ::= \"\" \"x\"? e root \"y\" | \"z\"\n"
                                 "e ::= \"\" | \"e\""),
            "left recursion: root -> root");
  // Through repetitions that may repeat zero times, or repeat a nullable body.
  EXPECT_EQ(LeftRecursionMessage("root ::= b* root | \"x\"\nb ::= \"b\""),
            "left recursion: root -> root");
  EXPECT_EQ(LeftRecursionMessage("root ::= b{0,3} root | \"x\"\nb ::= \"b\""),
            "left recursion: root -> root");
  EXPECT_EQ(LeftRecursionMessage("root ::= (b? \"\"){2} root | \"x\"\n"
                                 "b ::= \"b\""),
            "left recursion: root -> root");
  // Inside a repetition's body.
  EXPECT_EQ(
      LeftRecursionMessage("root ::= x\nx ::= (y \"a\")+\ny ::= x | \"b\""),
      "left recursion: x -> y -> x");
  // Reported for unreachable rules too.
  EXPECT_EQ(LeftRecursionMessage("root ::= \"x\"\nbad ::= \"\"* bad"),
            "left recursion: bad -> bad");
}

TEST(LeftRecursionTest, AcceptsRecursionAfterInput) {
  EXPECT_EQ(LeftRecursionMessage("root ::= \"x\" root | \"\""), "ok");
  EXPECT_EQ(LeftRecursionMessage("root ::= \"(\" root \")\" root | \"\""),
            "ok");
  EXPECT_EQ(LeftRecursionMessage("root ::= b{1,3} root | \"x\"\nb ::= \"b\""),
            "ok");
  EXPECT_EQ(LeftRecursionMessage("root ::= root{0} \"x\""), "ok");
  EXPECT_EQ(LeftRecursionMessage("root ::= [] root | \"x\""), "ok");
  EXPECT_EQ(LeftRecursionMessage("root ::= expr\nexpr ::= term (\"+\" term)*\n"
                                 "term ::= factor (\"*\" factor)*\n"
                                 "factor ::= [0-9]+ | \"(\" expr \")\""),
            "ok");
}

TEST(NormalizeTest, DropsUnreachableBeforeCheckingRecursion) {
  absl::StatusOr<Grammar> g = Normalize(Parse("root ::= \"x\"\nbad ::= bad"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->ToString(), "root ::= \"x\"\n");
  g = Normalize(Parse("root ::= a\na ::= \"\" a"));
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(), "left recursion: a -> a");
  EXPECT_FALSE(Normalize(Grammar()).ok());
}

}  // namespace
}  // namespace grammard::grammar
