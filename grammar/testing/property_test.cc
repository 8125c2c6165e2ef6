// Property tests: random grammars and regexes, every short string over a
// small alphabet, and three independent answers that must agree:
//   - EarleyOracle on the normalised, byte-lowered grammar;
//   - ReferenceMatcher on the code-point grammar (no lowering, no Earley);
//   - for regexes, std::regex (ECMAScript) on the pattern itself.
// Every generated grammar must also survive a trip through ToString and
// ParseEbnf unchanged.
#include <cstdint>
#include <cstdio>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar/frontends/ebnf/ebnf_parser.h"
#include "grammar/frontends/regex/regex_parser.h"
#include "grammar/ir/grammar_passes.h"
#include "grammar/ir/utf8_lowering.h"
#include "grammar/testing/earley_oracle.h"
#include "grammar/testing/reference_matcher.h"
#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

// Every concatenation of up to `max_tokens` tokens.
std::vector<std::string> AllStrings(const std::vector<std::string>& tokens,
                                    int max_tokens) {
  std::vector<std::string> out = {""};
  size_t begin = 0;
  for (int len = 1; len <= max_tokens; ++len) {
    const size_t end = out.size();
    for (size_t i = begin; i < end; ++i) {
      for (const std::string& t : tokens) out.push_back(out[i] + t);
    }
    begin = end;
  }
  return out;
}

class EbnfGenerator {
 public:
  explicit EbnfGenerator(uint32_t seed) : rng_(seed) {}

  std::string Grammar() {
    num_rules_ = 1 + Pick(3);
    std::string text;
    for (current_ = 0; current_ < num_rules_; ++current_) {
      text += RuleName(current_) + " ::= " + Choice(0) + "\n";
    }
    return text;
  }

 private:
  int Pick(int n) { return static_cast<int>(rng_() % n); }
  static std::string RuleName(int r) {
    return r == 0 ? "root" : "r" + std::to_string(r);
  }

  std::string Choice(int depth) {
    std::string out = Sequence(depth);
    for (int n = Pick(3); n > 0; --n) out += " | " + Sequence(depth);
    return out;
  }

  std::string Sequence(int depth) {
    std::string out = Element(depth);
    for (int n = Pick(3); n > 0; --n) out += " " + Element(depth);
    return out;
  }

  std::string Element(int depth) {
    std::string atom;
    const int kind = depth >= 2 ? Pick(3) : Pick(5);
    switch (kind) {
      case 0: {
        static const char* kLiterals[] = {"\"\"",         "\"a\"",
                                          "\"b\"",        "\"ab\"",
                                          "\"\xC3\xA9\"", "\"a\xE2\x82\xAC\"",
                                          "\"ba\""};
        atom = kLiterals[Pick(7)];
        break;
      }
      case 1: {
        static const char* kClasses[] = {
            "[ab]",          "[^a]",    "[a-c]", "[\xC3\xA9-\xC3\xAB]",
            "[^\xC3\xA9]",   ".",       "[]",    "[b\xE2\x82\xAC]",
            "[^ab\xC3\xA9]", "%[\\xc3]"};
        atom = kClasses[Pick(10)];
        break;
      }
      case 2:
        // Mostly later rules, so that fewer grammars are left-recursive.
        if (current_ + 1 < num_rules_ && Pick(4) != 0) {
          atom = RuleName(current_ + 1 + Pick(num_rules_ - current_ - 1));
        } else {
          atom = RuleName(Pick(num_rules_));
        }
        break;
      default:
        atom = "(" + Choice(depth + 1) + ")";
        break;
    }
    static const char* kQuantifiers[] = {
        "", "", "", "?", "*", "+", "{2}", "{0,2}", "{1,}", "{0}", "{1,3}"};
    return atom + kQuantifiers[Pick(11)];
  }

  std::mt19937 rng_;
  int num_rules_ = 1;
  int current_ = 0;
};

TEST(PropertyTest, RandomEbnfGrammarsOracleMatchesReference) {
  // Whole characters, and the first bytes of multi-byte ones.
  const std::vector<std::string> tokens = {
      "a", "b", "c", "\xC3\xA9", "\xC3", "\xE2\x82\xAC", "\xE2\x82"};
  const std::vector<std::string> inputs = AllStrings(tokens, 3);
  int tested = 0;
  int left_recursive = 0;
  for (uint32_t seed = 1; tested < 400; ++seed) {
    const std::string text = EbnfGenerator(seed).Grammar();
    absl::StatusOr<Grammar> parsed = ParseEbnf(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;

    absl::StatusOr<Grammar> again = ParseEbnf(parsed->ToString());
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << parsed->ToString();
    ASSERT_TRUE(StructurallyEqual(*parsed, *again)) << parsed->ToString();

    absl::StatusOr<Grammar> normal = Normalize(*parsed);
    if (!normal.ok()) {
      ASSERT_NE(std::string(normal.status().message()).find("left recursion"),
                std::string::npos)
          << normal.status();
      ++left_recursive;
      continue;
    }
    absl::StatusOr<Grammar> bytes = LowerToBytes(*normal);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    absl::StatusOr<Grammar> bytes_again = ParseEbnf(bytes->ToString());
    ASSERT_TRUE(bytes_again.ok()) << bytes_again.status();
    ASSERT_TRUE(StructurallyEqual(*bytes, *bytes_again)) << bytes->ToString();
    absl::StatusOr<EarleyOracle> oracle = EarleyOracle::Create(*bytes);
    ASSERT_TRUE(oracle.ok()) << oracle.status();
    ReferenceMatcher reference(*normal);
    for (const std::string& input : inputs) {
      ASSERT_EQ(oracle->Check(input), reference.Check(input))
          << "grammar:\n"
          << normal->ToString() << "input: \"" << input << "\"";
    }
    ASSERT_FALSE(reference.saw_left_recursion()) << normal->ToString();
    const bool nullable = NullableRules(*normal)[normal->root];
    EXPECT_EQ(nullable, (oracle->Check("") & EarleyOracle::kComplete) != 0)
        << normal->ToString();
    ++tested;
  }
  std::printf("%d grammars checked, %d left-recursive ones skipped\n", tested,
              left_recursive);
}

class RegexGenerator {
 public:
  explicit RegexGenerator(uint32_t seed) : rng_(seed) {}

  std::string Pattern() {
    std::string body = Disjunction(0);
    if (Pick(4) == 0) body = "^" + body;
    if (Pick(4) == 0) body += "$";
    return body;
  }

 private:
  int Pick(int n) { return static_cast<int>(rng_() % n); }

  std::string Disjunction(int depth) {
    std::string out = Alternative(depth);
    for (int n = Pick(4) == 0 ? 1 + Pick(2) : 0; n > 0; --n) {
      out += "|" + Alternative(depth);
    }
    return out;
  }

  std::string Alternative(int depth) {
    std::string out;
    for (int n = Pick(4); n > 0; --n) out += Term(depth);
    return out;
  }

  // Unbounded quantifiers apply to single atoms only: std::regex backtracks,
  // and nested unbounded groups make it take exponential time. (The EBNF
  // test covers nested stars against the reference matcher.)
  std::string Term(int depth) {
    static const char* kAtoms[] = {"a",    "b",   ".",       "[ab]",
                                   "[^a]", "\\w", "[a-b\\d]"};
    static const char* kQuantifiers[] = {"",     "",   "",    "?",
                                         "*",    "+",  "{2}", "{0,2}",
                                         "{1,}", "??", "*?",  "{1,2}?"};
    static const char* kBounded[] = {"",      "",   "?",     "{2}",
                                     "{0,2}", "??", "{1,2}?"};
    if ((depth >= 2 ? Pick(6) : Pick(8)) < 6) {
      return std::string(kAtoms[Pick(7)]) + kQuantifiers[Pick(12)];
    }
    return std::string(Pick(2) ? "(" : "(?:") + Disjunction(depth + 1) + ")" +
           kBounded[Pick(7)];
  }

  std::mt19937 rng_;
};

TEST(PropertyTest, RandomRegexesMatchStdRegex) {
  const std::vector<std::string> inputs = AllStrings({"a", "b", "c"}, 4);
  for (uint32_t seed = 1; seed <= 1000; ++seed) {
    const std::string pattern = RegexGenerator(seed).Pattern();
    absl::StatusOr<Grammar> parsed = ParseRegex(pattern);
    ASSERT_TRUE(parsed.ok()) << parsed.status() << "\npattern: " << pattern;
    absl::StatusOr<Grammar> again = ParseEbnf(parsed->ToString());
    ASSERT_TRUE(again.ok()) << again.status();
    ASSERT_TRUE(StructurallyEqual(*parsed, *again)) << parsed->ToString();

    absl::StatusOr<Grammar> normal = Normalize(*parsed);
    ASSERT_TRUE(normal.ok()) << normal.status();
    absl::StatusOr<Grammar> bytes = LowerToBytes(*normal);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    absl::StatusOr<EarleyOracle> oracle = EarleyOracle::Create(*bytes);
    ASSERT_TRUE(oracle.ok()) << oracle.status();
    ReferenceMatcher reference(*normal);
    const std::regex re(pattern, std::regex::ECMAScript);
    for (const std::string& input : inputs) {
      const uint8_t verdict = oracle->Check(input);
      ASSERT_EQ((verdict & EarleyOracle::kComplete) != 0,
                std::regex_match(input, re))
          << "pattern: " << pattern << "\ninput: \"" << input << "\"\n"
          << normal->ToString();
      ASSERT_EQ(verdict, reference.Check(input))
          << "pattern: " << pattern << "\ninput: \"" << input << "\"";
    }
  }
}

}  // namespace
}  // namespace grammard::grammar
