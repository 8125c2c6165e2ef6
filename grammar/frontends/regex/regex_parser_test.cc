#include "grammar/frontends/regex/regex_parser.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

// The parsed pattern as EBNF (without the trailing newline), or the error.
std::string Show(std::string_view pattern) {
  absl::StatusOr<Grammar> g = ParseRegex(pattern);
  if (!g.ok()) return std::string(g.status().message());
  std::string text = g->ToString();
  return text.substr(0, text.size() - 1);
}

void ExpectError(std::string_view pattern, std::string_view fragment,
                 absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  absl::StatusOr<Grammar> g = ParseRegex(pattern);
  ASSERT_FALSE(g.ok()) << "parsed: " << pattern << " as " << g->ToString();
  EXPECT_EQ(g.status().code(), code) << g.status();
  EXPECT_NE(std::string(g.status().message()).find(fragment), std::string::npos)
      << "message: " << g.status().message() << "\nwanted: " << fragment;
}

TEST(RegexParserTest, LiteralsMergeIntoStrings) {
  EXPECT_EQ(Show("abc"), "root ::= \"abc\"");
  EXPECT_EQ(Show("ab*c"), "root ::= \"a\" \"b\"* \"c\"");
  EXPECT_EQ(Show("\xE4\xBD\xA0\xE5\xA5\xBD+"),
            "root ::= \"\xE4\xBD\xA0\" \"\xE5\xA5\xBD\"+");
  EXPECT_EQ(Show(""), "root ::= \"\"");
}

TEST(RegexParserTest, ClassesAndClassEscapes) {
  EXPECT_EQ(Show(R"(\d{3}-\d{4})"), "root ::= [0-9]{3} \"-\" [0-9]{4}");
  EXPECT_EQ(Show("[^abc]"), "root ::= [^a-c]");
  EXPECT_EQ(Show(R"([a-z\d_])"), "root ::= [0-9_a-z]");
  EXPECT_EQ(Show(R"(\w\W)"), "root ::= [0-9A-Z_a-z] [^0-9A-Z_a-z]");
  EXPECT_EQ(Show(R"([\S])"), Show(R"(\S)"));
  EXPECT_EQ(Show(R"(\s)"),
            "root ::= [\\t-\\r \\xa0\xE1\x9A\x80\\u2000-\\u200a\\u2028\\u2029"
            "\\u202f\\u205f\xE3\x80\x80\\ufeff]");
  EXPECT_EQ(Show(R"([^\s\d])"), Show(R"([^\d\s])"));
  EXPECT_EQ(Show(R"([\b])"), "root ::= [\\x08]");
  EXPECT_EQ(Show("[-a][a-][+--]"), "root ::= [\\-a] [\\-a] [+-\\-]");
  EXPECT_EQ(Show("[]"), "root ::= []");
  EXPECT_EQ(Show("[^]"), "root ::= [^]");
  EXPECT_EQ(Show("."), "root ::= [^\\n]");
  EXPECT_EQ(Show(R"([\u0041-\u0043]+)"), "root ::= [A-C]+");
  EXPECT_EQ(Show("[[a]"), "root ::= [\\[a]");
}

TEST(RegexParserTest, Escapes) {
  Grammar g = *ParseRegex(R"(\n\t\r\f\v\0\x41\u0042\u{43}\cJ)");
  EXPECT_EQ(g.exprs[g.rules[0].body].bytes,
            std::string("\n\t\r\f\v\0ABC\n", 10));
  EXPECT_EQ(Show(R"(\u{1F600}\uD83D\uDE00)"),
            "root ::= \"\xF0\x9F\x98\x80\xF0\x9F\x98\x80\"");
  g = *ParseRegex(R"(\.\/\\\(\)\[\]\{\}\|\^\$\*\+\?\-\"\ \_\@)");
  EXPECT_EQ(g.exprs[g.rules[0].body].bytes, R"(./\()[]{}|^$*+?-" _@)");
}

TEST(RegexParserTest, GroupsAlternationQuantifiers) {
  EXPECT_EQ(Show("a|b|"), "root ::= \"a\" | \"b\" | \"\"");
  EXPECT_EQ(Show("(a|b)c"), "root ::= (\"a\" | \"b\") \"c\"");
  EXPECT_EQ(Show("(?:ab)+(?<year>x)(?P<y>y)"), "root ::= \"ab\"+ \"x\" \"y\"");
  EXPECT_EQ(Show("a()b(())"), "root ::= \"a\" \"\" \"b\" \"\"");
  EXPECT_EQ(Show("a??b*?c+?d{2,3}?e{2}?f{2,}"),
            "root ::= \"a\"? \"b\"* \"c\"+ \"d\"{2,3} \"e\"{2} \"f\"{2,}");
  EXPECT_EQ(Show("(a*)*"), "root ::= (\"a\"*)*");
  EXPECT_EQ(Show("((a|b)|c)"), "root ::= \"a\" | \"b\" | \"c\"");
}

TEST(RegexParserTest, BracesThatAreNotQuantifiersAreLiterals) {
  EXPECT_EQ(Show("a{"), "root ::= \"a{\"");
  EXPECT_EQ(Show("{abc}"), "root ::= \"{abc}\"");
  EXPECT_EQ(Show("x{1,2"), "root ::= \"x{1,2\"");
  EXPECT_EQ(Show("a{,}"), "root ::= \"a{,}\"");
  EXPECT_EQ(Show("]}"), "root ::= \"]}\"");
}

TEST(RegexParserTest, AnchorsWhereTheyAreNoOps) {
  EXPECT_EQ(Show("^abc$"), "root ::= \"abc\"");
  EXPECT_EQ(Show("^a$|^b$"), "root ::= \"a\" | \"b\"");
  EXPECT_EQ(Show("(^a|b)c"), "root ::= (\"a\" | \"b\") \"c\"");
  EXPECT_EQ(Show("(?:a$)"), "root ::= \"a\"");
  EXPECT_EQ(Show("(^a)?b"), "root ::= \"a\"? \"b\"");
  EXPECT_EQ(Show("^$"), "root ::= \"\"");
  EXPECT_EQ(Show("^"), "root ::= \"\"");
  EXPECT_EQ(Show("^^a$$"), "root ::= \"a\"");
}

TEST(RegexParserTest, AnchorsElsewhereAreRefused) {
  ExpectError("a^b", "offset 1: ^ is only supported at the start");
  ExpectError("a$b", "offset 1: $ is only supported at the end");
  ExpectError("(a$|b)c", "$ is only supported at the end");
  ExpectError("a(^b)", "offset 2: ^ is only supported at the start");
  ExpectError("(^a)*", "offset 0: anchors (^, $) inside a repeated group");
  ExpectError("^*a", "offset 1: the anchor ^ cannot be repeated");
}

TEST(RegexParserTest, AnchorsCanBeKeptWhereverTheyStand) {
  absl::StatusOr<Grammar> g = ParseRegexKeepingAnchors("(a$|b)^c(^d)*$");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->ToString(),
            "end_anchor ::= \"\"\n"
            "start_anchor ::= \"\"\n"
            "root ::= (\"a\" end_anchor | \"b\") start_anchor \"c\" "
            "(start_anchor \"d\")* end_anchor\n");
  EXPECT_NE(ParseRegexKeepingAnchors("^*a").status().message().find(
                "offset 1: the anchor ^ cannot be repeated"),
            std::string::npos);
}

TEST(RegexParserTest, UnsupportedConstructsAreNamed) {
  ExpectError("(a)\\1", "offset 3: backreference \\1 is not supported");
  ExpectError("(?<n>a)\\k<n>", "offset 7: backreference \\k<name>");
  ExpectError("(?P<n>a)(?P=n)", "offset 8: backreference (?P=name)");
  ExpectError("a(?=b)",
              "offset 1: lookahead assertion (?=...) is not supported");
  ExpectError("(?!a)", "offset 0: lookahead assertion (?!...)");
  ExpectError("(?<=a)b", "offset 0: lookbehind assertion (?<=...)");
  ExpectError("(?<!a)b", "lookbehind assertion (?<!...)");
  ExpectError("a\\b", "offset 1: word boundary assertion \\b is not supported");
  ExpectError("\\B", "word boundary assertion \\B");
  ExpectError("x\\p{L}", "offset 1: Unicode property escape \\p{...}");
  ExpectError("\\P{Lu}", "Unicode property escape \\P{...}");
  ExpectError("(?i)abc", "offset 0: inline flags (?i) are not supported");
  ExpectError("(?#note)", "unsupported group syntax (?#");
  ExpectError("\\07", "octal escapes are not supported");
  ExpectError("\\a", "unknown escape \\a");
  ExpectError("\\e", "unknown escape \\e");
  ExpectError("[\\z]", "unknown escape \\z");
  ExpectError("[\\B]", "word boundary assertion \\B");
}

TEST(RegexParserTest, SyntaxErrors) {
  // XGrammar's test_regex_refuse.
  ExpectError("a{,3}", "offset 1: a quantifier needs a lower bound");
  ExpectError("a{3,2}",
              "offset 1: numbers out of order in the quantifier {3,2}");
  ExpectError("[z-a]", "offset 1: range out of order");
  ExpectError("a++", "offset 2: consecutive quantifiers");
  ExpectError("(?=a)", "lookahead");
  ExpectError("a**", "consecutive quantifiers");
  ExpectError("a{2}{3}", "consecutive quantifiers");
  ExpectError("a*?+", "consecutive quantifiers");
  ExpectError("*a", "offset 0: the quantifier * has nothing to repeat");
  ExpectError("a|?", "offset 2: the quantifier ? has nothing to repeat");
  ExpectError("{2}", "the quantifier {2} has nothing to repeat");
  ExpectError("(abc", "offset 0: missing ) for the group");
  ExpectError("abc)", "offset 3: unmatched )");
  ExpectError("[abc", "offset 0: unterminated character class");
  ExpectError("[a-\\d]", "offset 3: a class escape such as \\d cannot bound");
  ExpectError("abc\\", "offset 3: the pattern ends with a lone \\");
  ExpectError("\\x4", "\\x must be followed by two hexadecimal digits");
  ExpectError("\\uZZ", "\\u must be followed by four hexadecimal digits");
  ExpectError("\\u{110000}", "beyond the Unicode range");
  ExpectError("\\u{FFFFFFFFFF}", "beyond the Unicode range");
  ExpectError("\\u{}", "\\u{ must be followed by hexadecimal digits");
  ExpectError("\\uD800", "a lone surrogate cannot be matched");
  ExpectError("[\\uDC00]", "a lone surrogate");
  ExpectError("\\c1", "\\c must be followed by a letter");
  ExpectError("(?<1a>x)", "invalid group name");
  ExpectError("a\xFF", "offset 1: invalid UTF-8");
}

TEST(RegexParserTest, Limits) {
  ExpectError("a{10001}",
              "offset 2: quantifier bound exceeds the limit of "
              "10000",
              absl::StatusCode::kResourceExhausted);
  ExpectError("a{1,99999999999999999999}", "exceeds the limit",
              absl::StatusCode::kResourceExhausted);
  ExpectError("((a{1000}){1000}){1000}", "GrammarLimits::max_exprs",
              absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(ParseRegex("(a{1000}){1000}").ok());
  EXPECT_TRUE(ParseRegex("[a-z]{0,10000}").ok());
  std::string deep(201, '(');
  deep += std::string(201, ')');
  ExpectError(deep, "groups nest deeper than 200 levels",
              absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace grammard::grammar
