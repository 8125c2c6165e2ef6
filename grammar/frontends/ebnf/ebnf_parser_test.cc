#include "grammar/frontends/ebnf/ebnf_parser.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

// The parsed grammar printed back, or the error message.
std::string Reprint(std::string_view text, std::string_view root = "root") {
  absl::StatusOr<Grammar> g = ParseEbnf(text, root);
  if (!g.ok()) return std::string(g.status().message());
  return g->ToString();
}

// The one expression of `root ::= <body>`.
Expr Body(std::string_view body) {
  absl::StatusOr<Grammar> g = ParseEbnf("root ::= " + std::string(body));
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return Expr();
  return g->exprs[g->rules[g->root].body];
}

void ExpectError(std::string_view text, std::string_view fragment,
                 absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  absl::StatusOr<Grammar> g = ParseEbnf(text);
  ASSERT_FALSE(g.ok()) << "parsed: " << text;
  EXPECT_EQ(g.status().code(), code) << g.status();
  EXPECT_NE(std::string(g.status().message()).find(fragment), std::string::npos)
      << "message: " << g.status().message() << "\nwanted: " << fragment;
}

TEST(EbnfParserTest, Literals) {
  EXPECT_EQ(Body("\"hello\"").bytes, "hello");
  EXPECT_EQ(Body("\"\"").bytes, "");
  EXPECT_EQ(Body("\"\xE4\xBD\xA0\xE5\xA5\xBD\"").bytes,
            "\xE4\xBD\xA0\xE5\xA5\xBD");
  EXPECT_EQ(Body(R"("\n\r\t\"\'\\\/\?\[\]\a\b\f\v\0\e")").bytes,
            std::string("\n\r\t\"'\\/?[]\a\b\f\v\0\x1B", 16));
  EXPECT_EQ(Body(R"("\x41\u00e9\U0001F600\xff")").bytes,
            "A\xC3\xA9\xF0\x9F\x98\x80\xC3\xBF");
}

TEST(EbnfParserTest, CharacterClasses) {
  EXPECT_EQ(Body("[a-z0-9_]").ranges,
            (std::vector<CharRange>{{'0', '9'}, {'_', '_'}, {'a', 'z'}}));
  EXPECT_EQ(Body("[--]").ranges, (std::vector<CharRange>{{'-', '-'}}));
  EXPECT_EQ(Body("[-A-C]").ranges,
            (std::vector<CharRange>{{'-', '-'}, {'A', 'C'}}));
  EXPECT_EQ(Body("[a-]").ranges,
            (std::vector<CharRange>{{'-', '-'}, {'a', 'a'}}));
  EXPECT_EQ(Body(R"([\--\]])").ranges, (std::vector<CharRange>{{'-', ']'}}));
  EXPECT_EQ(Body(R"([\^\-\]\\])").ranges,
            (std::vector<CharRange>{{'-', '-'}, {'\\', '^'}}));
  EXPECT_EQ(Body("[\xE4\xB8\x80-\xE9\xBE\xA5]").ranges,
            (std::vector<CharRange>{{0x4E00, 0x9FA5}}));
  EXPECT_EQ(Body(R"([\u0234-\U00000345])").ranges,
            (std::vector<CharRange>{{0x234, 0x345}}));
  // Negation is applied against scalar values.
  EXPECT_EQ(Body(R"([^"\\\x7F\x00-\x1F])").ranges,
            (std::vector<CharRange>{{0x20, 0x21},
                                    {0x23, 0x5B},
                                    {0x5D, 0x7E},
                                    {0x80, 0xD7FF},
                                    {0xE000, 0x10FFFF}}));
  EXPECT_TRUE(Body("[]").ranges.empty());
  EXPECT_EQ(Body("[^]").ranges,
            (std::vector<CharRange>{{0, 0xD7FF}, {0xE000, 0x10FFFF}}));
  EXPECT_EQ(Body(".").ranges, Body("[^]").ranges);
  EXPECT_EQ(Body(".").kind, ExprKind::kCharClass);
  // llama.cpp's english.gbnf: '[' raw, ',-.' a range, '\\' and '\]' escaped.
  EXPECT_EQ(
      Body(R"([!"#$%&'()*+,-./:;<=>?@[\\\]^_`{|}~])").ranges,
      (std::vector<CharRange>{{'!', '/'}, {':', '@'}, {'[', '`'}, {'{', '~'}}));
}

TEST(EbnfParserTest, ByteClasses) {
  const Expr e = Body(R"(%[\x80-\xbfA])");
  EXPECT_EQ(e.kind, ExprKind::kByteClass);
  EXPECT_EQ(e.ranges, (std::vector<CharRange>{{'A', 'A'}, {0x80, 0xBF}}));
  EXPECT_EQ(Body("%[^\\x00-\\x7f]").ranges,
            (std::vector<CharRange>{{0x80, 0xFF}}));
}

TEST(EbnfParserTest, SequencesChoicesAndGroups) {
  EXPECT_EQ(Reprint("root ::= \"a\" \"b\" | \"c\""),
            "root ::= \"a\" \"b\" | \"c\"\n");
  // Groups flatten into the enclosing sequence or choice.
  EXPECT_EQ(Reprint("root ::= \"a\" (\"b\" (\"c\" \"d\")) | ((\"e\" | \"f\"))"),
            "root ::= \"a\" \"b\" \"c\" \"d\" | \"e\" | \"f\"\n");
  EXPECT_EQ(Reprint("root ::= \"a\" (\"b\" | \"c\")"),
            "root ::= \"a\" (\"b\" | \"c\")\n");
  // Empty alternatives and groups are epsilon (llama.cpp's `ws ::= | " "`).
  EXPECT_EQ(Reprint("root ::= | \" \" |"), "root ::= \"\" | \" \" | \"\"\n");
  EXPECT_EQ(Reprint("root ::= \"a\" ( )"), "root ::= \"a\" \"\"\n");
  EXPECT_EQ(Reprint("root ::="), "root ::= \"\"\n");
}

TEST(EbnfParserTest, Quantifiers) {
  EXPECT_EQ(Reprint("root ::= \"a\"* [b]+ c? (\"d\" e){2}\nc ::= \"c\"\n"
                    "e ::= \"e\"{2,} \"f\"{0 , 2} \"g\" {3, } \"h\"{0} "
                    "\"i\"{1, -1} \"j\"{0,1}"),
            "root ::= \"a\"* [b]+ c? (\"d\" e){2}\nc ::= \"c\"\n"
            "e ::= \"e\"{2,} \"f\"{0,2} \"g\"{3,} \"h\"{0} \"i\"+ \"j\"?\n");
  const Expr e = Body("\"a\"{2,4}");
  EXPECT_EQ(e.kind, ExprKind::kRepeat);
  EXPECT_EQ(e.min, 2);
  EXPECT_EQ(e.max, 4);
  EXPECT_EQ(Body("\"a\"{3,}").max, kUnbounded);
  EXPECT_EQ(Body("\"a\"{10000}").min, 10000);
}

TEST(EbnfParserTest, RulesCommentsAndLayout) {
  // XGrammar's test_space: bodies span lines, spaces are optional.
  EXPECT_EQ(Reprint("\n\nroot::=\"a\"  \"b\" (\"c\"\"d\"\n\"e\") |\n\n\"f\" | "
                    "\"g\"\n"),
            "root ::= \"a\" \"b\" \"c\" \"d\" \"e\" | \"f\" | \"g\"\n");
  EXPECT_EQ(Reprint("# top comment\nroot ::= a b # inline comment\n"
                    "a ::= \"a\"\r\nb ::= \"b\"\n# bottom comment"),
            "root ::= a b\na ::= \"a\"\nb ::= \"b\"\n");
  EXPECT_EQ(Reprint("root ::= en-char x.y _z9\nen-char ::= [a]\nx.y ::= "
                    "\"#\"\n_z9 ::= \"\""),
            "root ::= en-char x.y _z9\nen-char ::= [a]\nx.y ::= \"#\"\n"
            "_z9 ::= \"\"\n");
  // Forward and recursive references.
  EXPECT_EQ(Reprint("root ::= item root | item\nitem ::= \"x\""),
            "root ::= item root | item\nitem ::= \"x\"\n");
  // llama.cpp's c.gbnf writes a reference right before a group.
  EXPECT_EQ(Reprint("root ::= f(\"*\" f)*\nf ::= \"x\""),
            "root ::= f (\"*\" f)*\nf ::= \"x\"\n");
}

TEST(EbnfParserTest, SkipsAByteOrderMark) {
  EXPECT_EQ(Reprint("\xEF\xBB\xBFroot ::= \"a\""), "root ::= \"a\"\n");
}

TEST(EbnfParserTest, CustomRootRule) {
  absl::StatusOr<Grammar> g = ParseEbnf("a ::= b\nb ::= \"x\"", "b");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->rules[g->root].name, "b");
  EXPECT_EQ(g->rules.size(), 2u);
}

TEST(EbnfParserTest, LookaheadAssertionsAreDropped) {
  EXPECT_EQ(Reprint("root ::= \"a\" (=\"b\")"), "root ::= \"a\"\n");
  EXPECT_EQ(Reprint("root ::= \"start\" r\nr ::= [a-z]{1,3} (= \":\" r2)\n"
                    "r2 ::= \"x\""),
            "root ::= \"start\" r\nr ::= [a-z]{1,3}\nr2 ::= \"x\"\n");
  absl::StatusOr<Grammar> g = ParseEbnf("root ::= \"a\" (= \"b\" [0-9]*)");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->exprs.size(), 1u);  // Nothing of the assertion is kept.
  ExpectError("root ::= \"a\" (= b)",
              "line 1, column 17: rule \"b\" is not "
              "defined");
  ExpectError("root ::= \"a\" (=\"a\") (=\"b\")",
              "line 1, column 21: a lookahead assertion (= ...) must end its "
              "rule");
  ExpectError("root ::= \"a\" (=\"a\") \"b\"", "must end its rule");
  ExpectError("root ::= (\"a\" (=\"b\"))",
              "line 1, column 15: a lookahead assertion (= ...) may only come "
              "last in a rule");
  ExpectError("root ::= (=\"b\") \"a\"", "must end its rule");
  ExpectError("root ::= \"a\" (=\"b\"", "expected ) to close the lookahead");
}

TEST(EbnfParserTest, LexicalErrors) {
  // The messages of XGrammar's test_lexer_parser_errors, in our words.
  ExpectError("root ::= \"a\" \"", "line 1, column 14: unterminated string");
  ExpectError("root ::= [a\n]", "line 1, column 12: newline in a character");
  ExpectError("root ::= \"a\nb\"", "line 1, column 12: newline in a string");
  ExpectError("root ::= \"\\@\"",
              "line 1, column 11: invalid escape sequence \\@");
  ExpectError(
      "root ::= \"\\uFF\"",
      "line 1, column 11: invalid escape sequence: \\u needs exactly 4");
  ExpectError("root ::= \"\\x4\"", "\\x needs exactly 2 hexadecimal digits");
  ExpectError("root ::= \"\\uD800\"", "\\uD800 is a surrogate code point");
  ExpectError("root ::= [\\U00110000]", "beyond the last code point U+10FFFF");
  ExpectError("root ::= [abc", "line 1, column 10: unterminated character");
  ExpectError("root ::= [\\d]",
              "line 1, column 11: the class escape \\d is "
              "not supported");
  ExpectError("root ::= \"\\d\"", "invalid escape sequence \\d");
  ExpectError("root ::= \"\xE4\xBD\" \n", "line 1, column 11: invalid UTF-8");
  ExpectError("root ::= %[\xC3\xA9]", "ASCII characters and \\xHH escapes");
  ExpectError("root ::= %[\\u0100]", "values up to \\xff");
  ExpectError("root ::= 'a'", "single-quoted strings are not supported");
}

TEST(EbnfParserTest, StructuralErrors) {
  ExpectError("::= \"a\"", "line 1, column 1: expected a rule name before ::=");
  ExpectError("\"a\"", "line 1, column 1: expected a rule definition");
  ExpectError("root ::= a b", "line 1, column 10: rule \"a\" is not defined");
  ExpectError("root ::= [Z-A]",
              "line 1, column 11: invalid character class range");
  ExpectError(
      "root ::= \"a\"\nroot ::= \"b\"",
      "line 2, column 1: rule \"root\" is defined more than once (first "
      "definition at line 1, column 1)");
  ExpectError("a ::= \"a\"", "the root rule \"root\" is not defined");
  ExpectError("root ::= \"a\" b ::= \"c\"",
              "line 1, column 14: a rule definition must start on a new line");
  ExpectError("root ::= \"a\")", "line 1, column 13: unmatched )");
  ExpectError("root ::= (\"a\"\nb ::= \"c\"",
              "line 2, column 1: expected ) to close the group opened at "
              "line 1, column 10");
  ExpectError("root ::= \"a\" ::=", "line 1, column 14: unexpected ':'");
  ExpectError("root\n::= \"a\"", "expected ::= after the rule name \"root\"");
  ExpectError("root ::= * \"a\"", "quantifier '*' has nothing to repeat");
}

TEST(EbnfParserTest, RepetitionErrors) {
  ExpectError("root ::= \"a\"{3,2}",
              "line 1, column 13: repetition lower bound 3 is larger than "
              "upper bound 2");
  ExpectError("root ::= \"a\"{,3}", "needs a lower bound: write {0,m}");
  ExpectError("root ::= \"a\"{10001}",
              "line 1, column 14: repetition bound 10001 exceeds the limit of "
              "10000",
              absl::StatusCode::kResourceExhausted);
  ExpectError("root ::= \"a\"{1,99999999999999999999}", "exceeds the limit",
              absl::StatusCode::kResourceExhausted);
  ExpectError("root ::= \"a\"{x}", "expected a non-negative integer");
  ExpectError("root ::= \"a\"{2", "expected } to close");
  ExpectError("root ::= \"a\"??", "line 1, column 14: consecutive quantifiers");
  ExpectError("root ::= \"a\"*{2}", "consecutive quantifiers");
}

TEST(EbnfParserTest, UnsupportedExtensionsAreNamed) {
  ExpectError("root ::= Regex(\"[0-9]+\")",
              "line 1, column 10: the XGrammar macro Regex(...) is not "
              "supported");
  ExpectError("root ::= TagDispatch((\"<a>\", r))",
              "XGrammar macro TagDispatch(...)");
  ExpectError("root ::= \"<\" r \">\"\nr[max_tokens=3, lazy] ::= [a-z]",
              "line 2, column 2: rule attributes (r[...] ::=) are an XGrammar "
              "extension");
  ExpectError("root ::= <think> \"x\"", "token references (<...>, !<...>)");
  ExpectError("root ::= !<[1000]>*", "token references");
  // A rule that happens to be called Regex is still a rule.
  EXPECT_EQ(Reprint("root ::= Regex\nRegex ::= \"r\""),
            "root ::= Regex\nRegex ::= \"r\"\n");
}

TEST(EbnfParserTest, Limits) {
  std::string deep = "root ::= ";
  for (int i = 0; i < 201; ++i) deep += "(";
  deep += "\"a\"";
  for (int i = 0; i < 201; ++i) deep += ")";
  ExpectError(deep, "groups nest deeper than 200 levels",
              absl::StatusCode::kResourceExhausted);
  ExpectError("root ::= (\"a\"{2000}){2000}", "GrammarLimits::max_exprs",
              absl::StatusCode::kResourceExhausted);

  GrammarLimits limits;
  limits.max_repeat = 5;
  absl::StatusOr<Grammar> g = ParseEbnf("root ::= \"a\"{6}", "root", limits);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kResourceExhausted);
  g = ParseEbnf("root ::= \"a\"{5}", "root", limits);
  EXPECT_TRUE(g.ok());
}

TEST(EbnfParserTest, RoundTripsThroughToString) {
  const char* grammars[] = {
      "root ::= \"a\" (\"b\" | \"c\")* [^\\n]+ .? %[\\x80-\\xbf]{2,3} x\n"
      "x ::= | \"\" | [\\\\\\]\\-\\^] \"\\\"\\u2028\\U0001f600\\x00\"",
      "root ::= ((\"a\"*)? | \"b\"){0,} ((\"c\")) ()\n",
      "root ::= [\xE4\xB8\x80-\xE9\xBE\xA5\\u0000-\\u001f] [^\xE4\xB8\x80] "
      "[\\t\\r\\n -~]",
  };
  for (const char* text : grammars) {
    absl::StatusOr<Grammar> g = ParseEbnf(text);
    ASSERT_TRUE(g.ok()) << g.status();
    const std::string printed = g->ToString();
    absl::StatusOr<Grammar> again = ParseEbnf(printed);
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << printed;
    EXPECT_TRUE(StructurallyEqual(*g, *again)) << printed;
    EXPECT_EQ(again->ToString(), printed);
  }
}

}  // namespace
}  // namespace grammard::grammar
