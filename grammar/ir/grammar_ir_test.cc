#include "grammar/ir/grammar_ir.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

using Ranges = std::vector<CharRange>;

TEST(NormalizeRangesTest, SortsMergesAndDropsSurrogates) {
  EXPECT_EQ(NormalizeCodepointRanges({{'x', 'z'}, {'a', 'c'}, {'b', 'd'}}),
            (Ranges{{'a', 'd'}, {'x', 'z'}}));
  EXPECT_EQ(NormalizeCodepointRanges({{'a', 'b'}, {'c', 'd'}}),
            (Ranges{{'a', 'd'}}));
  EXPECT_EQ(NormalizeCodepointRanges({{0xD000, 0xE100}}),
            (Ranges{{0xD000, 0xD7FF}, {0xE000, 0xE100}}));
  EXPECT_EQ(NormalizeCodepointRanges({{0xD800, 0xDFFF}}), Ranges{});
  EXPECT_EQ(NormalizeCodepointRanges({{0x10FFF0, 0x200000}}),
            (Ranges{{0x10FFF0, 0x10FFFF}}));
  EXPECT_EQ(NormalizeCodepointRanges({{5, 4}}), Ranges{});
  EXPECT_EQ(NormalizeByteRanges({{0x80, 0x1FF}, {0, 0}}),
            (Ranges{{0, 0}, {0x80, 0xFF}}));
}

TEST(NormalizeRangesTest, ComplementsAgainstScalarValues) {
  EXPECT_EQ(ComplementCodepointRanges({}),
            (Ranges{{0, 0xD7FF}, {0xE000, 0x10FFFF}}));
  EXPECT_EQ(ComplementCodepointRanges({{0, 0xD7FF}, {0xE000, 0x10FFFF}}),
            Ranges{});
  EXPECT_EQ(ComplementCodepointRanges({{'a', 'a'}}),
            (Ranges{{0, 'a' - 1}, {'a' + 1, 0xD7FF}, {0xE000, 0x10FFFF}}));
  EXPECT_EQ(ComplementByteRanges({{0, 0x7F}}), (Ranges{{0x80, 0xFF}}));
}

TEST(GrammarTest, BuildersAppendAndNormalise) {
  Grammar g;
  const int32_t cls = g.AddCharClass({{'z', 'z'}, {'a', 'c'}}, true);
  EXPECT_EQ(cls, 0);
  EXPECT_EQ(g.exprs[cls].kind, ExprKind::kCharClass);
  EXPECT_EQ(g.exprs[cls].ranges.front(), (CharRange{0, 'a' - 1}));
  const int32_t bytes = g.AddBytes("ab");
  const int32_t seq = g.AddSequence({cls, bytes});
  const int32_t rep = g.AddRepeat(seq, 2, kUnbounded);
  g.root = g.AddRule("root", rep);
  EXPECT_EQ(g.FindRule("root"), 0);
  EXPECT_EQ(g.FindRule("other"), -1);
  EXPECT_TRUE(g.Validate().ok());
}

TEST(GrammarTest, ToStringPrintsEveryKind) {
  Grammar g;
  const int32_t word = g.AddRuleRef(1);
  const int32_t digits = g.AddRepeat(g.AddCharClass({{'0', '9'}}), 1, 3);
  const int32_t alt = g.AddChoice({g.AddBytes("a\"\\\n"), g.AddEpsilon()});
  const int32_t star = g.AddRepeat(alt, 0, kUnbounded);
  const int32_t body = g.AddSequence({word, digits, star});
  g.root = g.AddRule("root", body);
  const int32_t notq = g.AddCharClass({{'"', '"'}}, /*negated=*/true);
  const int32_t bytes = g.AddByteClass({{0x80, 0xBF}, {'-', '-'}});
  g.AddRule("word", g.AddSequence({notq, bytes, g.AddRepeat(notq, 0, 1)}));
  ASSERT_TRUE(g.Validate().ok());
  EXPECT_EQ(g.ToString(),
            "root ::= word [0-9]{1,3} (\"a\\\"\\\\\\n\" | \"\")*\n"
            "word ::= [^\"] %[\\-\\x80-\\xbf] [^\"]?\n");
}

TEST(GrammarTest, ToStringParenthesisesNestedStructure) {
  Grammar g;
  const int32_t a = g.AddBytes("a");
  const int32_t b = g.AddBytes("b");
  const int32_t seq = g.AddSequence({a, b});
  const int32_t choice = g.AddChoice({a, b});
  const int32_t nested =
      g.AddSequence({seq, choice, g.AddChoice({choice, seq})});
  const int32_t rep = g.AddRepeat(g.AddRepeat(nested, 0, 1), 2, 2);
  g.root = g.AddRule("root", g.AddChoice({rep, seq}));
  ASSERT_TRUE(g.Validate().ok());
  EXPECT_EQ(g.ToString(),
            "root ::= (((\"a\" \"b\") (\"a\" | \"b\") ((\"a\" | \"b\") | \"a\" "
            "\"b\"))?){2} | \"a\" \"b\"\n");
}

TEST(GrammarTest, ExprToStringPrintsOneExpression) {
  Grammar g;
  const int32_t a = g.AddBytes("a");
  const int32_t choice = g.AddChoice({a, g.AddCharClass({{'0', '9'}})});
  const int32_t seq = g.AddSequence({choice, g.AddRepeat(a, 2, 5)});
  g.root = g.AddRule("root", seq);
  EXPECT_EQ(g.ExprToString(seq), "(\"a\" | [0-9]) \"a\"{2,5}");
  EXPECT_EQ(g.ExprToString(choice), "\"a\" | [0-9]");
}

TEST(GrammarTest, ToStringQuantifiers) {
  Grammar g;
  const int32_t a = g.AddBytes("a");
  g.root = g.AddRule(
      "root",
      g.AddSequence({g.AddRepeat(a, 0, kUnbounded),
                     g.AddRepeat(a, 1, kUnbounded), g.AddRepeat(a, 0, 1),
                     g.AddRepeat(a, 3, 3), g.AddRepeat(a, 3, kUnbounded),
                     g.AddRepeat(a, 0, 7), g.AddRepeat(a, 0, 0)}));
  EXPECT_EQ(g.ToString(),
            "root ::= \"a\"* \"a\"+ \"a\"? \"a\"{3} \"a\"{3,} "
            "\"a\"{0,7} \"a\"{0}\n");
}

TEST(GrammarTest, ToStringClassesAndEscapes) {
  Grammar g;
  std::vector<int32_t> items = {
      g.AddCharClass({}),                                    // nothing
      g.AddCharClass({}, /*negated=*/true),                  // everything
      g.AddCharClass({{']', ']'}, {'-', '-'}, {'^', '^'}}),  // specials
      g.AddCharClass({{0x4E00, 0x9FA5}}),                    // printable CJK
      g.AddCharClass({{0, 0x1F}, {0x7F, 0x7F}}),             // controls
      g.AddCharClass({{0x2028, 0x2028}, {0x1F600, 0x1F64F}}),
      g.AddBytes("\xE4\xBD\xA0\t\x01"),  // "你" tab U+0001
      g.AddByteClass({}),
      g.AddByteClass({}, /*negated=*/true),
  };
  g.root = g.AddRule("root", g.AddSequence(items));
  EXPECT_EQ(g.ToString(),
            "root ::= [] [^] [\\-\\]\\^] [\xE4\xB8\x80-\xE9\xBE\xA5] "
            "[\\x00-\\x1f\\x7f] [\\u2028\xF0\x9F\x98\x80-\xF0\x9F\x99\x8F] "
            "\"\xE4\xBD\xA0\\t\\x01\" %[] %[^]\n");
}

TEST(GrammarTest, ToStringPrintsInvalidUtf8AsByteClasses) {
  Grammar g;
  g.root = g.AddRule("root", g.AddRepeat(g.AddBytes("a\xFF\xFE"
                                                    "b"),
                                         0, 1));
  EXPECT_EQ(g.ToString(), "root ::= (\"a\" %[\\xff] %[\\xfe] \"b\")?\n");
}

TEST(GrammarTest, ValidateRejectsBrokenInvariants) {
  auto expect_invalid = [](const Grammar& g, const std::string& fragment) {
    const absl::Status status = g.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << fragment;
    EXPECT_NE(status.message().find(fragment), std::string::npos)
        << status.message();
  };
  {
    Grammar g;
    expect_invalid(g, "no rules");
  }
  {
    Grammar g;
    g.AddRule("root", g.AddBytes("a"));
    expect_invalid(g, "root rule -1");
  }
  {
    Grammar g;
    g.root = g.AddRule("1bad", g.AddBytes("a"));
    expect_invalid(g, "bad rule name");
  }
  {
    Grammar g;
    g.root = g.AddRule("root", g.AddBytes("a"));
    g.AddRule("root", g.AddBytes("b"));
    expect_invalid(g, "defined twice");
  }
  {
    Grammar g;
    g.root = g.AddRule("root");
    expect_invalid(g, "no valid body");
  }
  {
    Grammar g;
    g.AddBytes("a");
    g.exprs[0].children = {0};
    g.root = g.AddRule("root", 0);
    expect_invalid(g, "does not precede");
  }
  {
    Grammar g;
    g.root = g.AddRule("root", g.AddSequence({}));
    expect_invalid(g, "no children");
  }
  {
    Grammar g;
    g.root = g.AddRule("root", g.AddRepeat(g.AddBytes("a"), 3, 2));
    expect_invalid(g, "bad bounds");
  }
  {
    Grammar g;
    g.root = g.AddRule("root", g.AddRuleRef(5));
    expect_invalid(g, "rule 5 is out of range");
  }
  {
    Grammar g;
    g.root = g.AddRule("root", g.AddCharClass({{'a', 'z'}}));
    g.exprs[0].ranges = {{'m', 'z'}, {'a', 'n'}};
    expect_invalid(g, "not sorted");
  }
  {
    Grammar g;
    g.root = g.AddRule("root", g.AddCharClass({}));
    g.exprs[0].ranges = {{0xD800, 0xD800}};
    expect_invalid(g, "not sorted");
  }
  {
    Grammar g;
    g.root = g.AddRule("root", g.AddByteClass({}));
    g.exprs[0].ranges = {{0, 0x100}};
    expect_invalid(g, "merged bytes");
  }
  {
    Grammar g;
    int32_t e = g.AddBytes("a");
    for (int i = 0; i < kMaxExprDepth; ++i) e = g.AddRepeat(e, 0, 1);
    g.root = g.AddRule("root", e);
    expect_invalid(g, "nest deeper");
  }
}

TEST(GrammarTest, StructurallyEqualIgnoresArenaLayout) {
  Grammar a;
  const int32_t x = a.AddBytes("x");
  const int32_t y = a.AddBytes("y");
  a.root = a.AddRule("root", a.AddSequence({x, y}));
  Grammar b;
  const int32_t y2 = b.AddBytes("y");
  b.AddBytes("unused");
  const int32_t x2 = b.AddBytes("x");
  b.root = b.AddRule("root", b.AddSequence({x2, y2}));
  EXPECT_TRUE(StructurallyEqual(a, b));
  b.exprs[y2].bytes = "z";
  EXPECT_FALSE(StructurallyEqual(a, b));
}

TEST(GrammarTest, ExpandedSizeUnrollsRepeats) {
  Grammar g;
  const int32_t a = g.AddBytes("a");
  const int32_t inner = g.AddRepeat(a, 0, 1000);            // 1 + 1000
  const int32_t outer = g.AddRepeat(inner, 3, kUnbounded);  // 1 + 4 * 1001
  g.root = g.AddRule("root", g.AddSequence({outer, g.AddRuleRef(0)}));
  EXPECT_EQ(ExpandedSize(g), 1 + (1 + 4 * 1001) + 1);

  GrammarLimits limits;
  limits.max_exprs = 1000;
  const absl::Status status = CheckSizeLimit(g, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("GrammarLimits::max_exprs"),
            std::string::npos);
  limits.max_exprs = 5000;
  EXPECT_TRUE(CheckSizeLimit(g, limits).ok());
}

TEST(GrammarTest, ExpandedSizeSaturates) {
  Grammar g;
  int32_t e = g.AddBytes("a");
  for (int i = 0; i < 10; ++i) e = g.AddRepeat(e, 10000, 10000);
  g.root = g.AddRule("root", e);
  EXPECT_EQ(ExpandedSize(g), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(CheckSizeLimit(g, GrammarLimits()).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(RuleNameTest, FollowsTheDialect) {
  EXPECT_TRUE(IsValidRuleName("root"));
  EXPECT_TRUE(IsValidRuleName("_x.y-z9"));
  EXPECT_TRUE(IsValidRuleName("en-char"));
  EXPECT_FALSE(IsValidRuleName(""));
  EXPECT_FALSE(IsValidRuleName("9a"));
  EXPECT_FALSE(IsValidRuleName("-a"));
  EXPECT_FALSE(IsValidRuleName("a b"));
}

}  // namespace
}  // namespace grammard::grammar
