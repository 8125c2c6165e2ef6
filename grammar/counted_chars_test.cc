// maxLength counted at run time (grammar_ir.h's Rule::max_chars) where a
// pattern or format counted in its automaton would be too large: the mask
// against a direct reading near the bound, and the matcher's other paths
// (rollback, fork, jump-forward, serialization, mask keys) over the count.
#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/serialize.h"
#include "grammar/testing/direct_reading_walk.h"
#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

// Letters, '@', escapes in pieces and whole, a two-byte character, and runs
// of 4, 8 and 16 letters (the long tokens a mask reads near the bound).
std::shared_ptr<const Vocabulary> TestVocab() {
  std::vector<std::string> tokens;
  for (char c : std::string("ab@\"\\nu01")) tokens.push_back({c});
  for (const char* t :
       {"aaaa", "aaaaaaaa", "aaaaaaaaaaaaaaaa", "@a", "a\"", "\\n", "\\u0001",
        "\xc3\xa9", "\xc3", "\xa9", "ab@", "@aaaaaaaaaaa", "\\\"", "b\""}) {
    tokens.push_back(t);
  }
  tokens.push_back("</s>");
  const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
  return *Vocabulary::FromTokens(tokens, {eos}, {eos}, {"chars", {}, 0});
}

absl::StatusOr<CompiledGrammar> CompileSchema(const GrammarCompiler& compiler,
                                              const std::string& schema) {
  auto converted = JsonSchemaToGrammar(schema);
  if (!converted.ok()) return converted.status();
  return compiler.Compile(std::move(converted->grammar));
}

bool Counts(const std::string& schema) {
  auto converted = JsonSchemaToGrammar(schema);
  if (!converted.ok()) return false;
  for (const Rule& r : converted->grammar.rules) {
    if (r.max_chars >= 0) return true;
  }
  return false;
}

// `^[^@]*@[^@]+$` counted to kMax: about 3 x 9,000 automaton states, past
// the 20,000 a product may have.
constexpr int kMax = 9000;
const std::string kPattern = R"("pattern":"^[^@]*@[^@]+$")";
const std::string kCounted = R"({"type":"string",)" + kPattern +
                             R"(,"maxLength":)" + std::to_string(kMax) + "}";
const std::string kPlain = R"({"type":"string",)" + kPattern + "}";

bool Accepts(const CompiledGrammar& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.AcceptString(text).ok() && m.CanTerminate();
}

// The start of a JSON string read directly: its characters (an escape or
// a UTF-8 sequence is one, a character begun counts), whether it closed,
// and what the pattern above still needs ('@' and one more, or one more).
struct Reading {
  int chars = 0;
  bool closed = false;
  int need_at = 2;
};
Reading Read(const std::string& text) {
  Reading r;
  bool at = false, after_at = false;
  for (size_t i = 1; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"') {
      r.closed = true;
      break;
    }
    if (c == '\\') {
      ++r.chars;
      after_at = at;
      i += text.compare(i + 1, 1, "u") == 0 ? 5 : 1;
      continue;
    }
    if ((c & 0xC0) == 0x80) continue;
    ++r.chars;
    if (c == '@') {
      at = true;
    } else {
      after_at = at;
    }
  }
  r.need_at = r.closed ? 0 : !at ? 2 : after_at ? 0 : 1;
  return r;
}

// Whether `text` (the uncounted grammar's language) may still close as a
// string of the pattern of at most kMax characters.
bool PatternCanClose(const std::string& text) {
  const Reading r = Read(text);
  return r.chars + r.need_at <= kMax;
}

// A walk's pick that prefers tokens of 8 bytes or more, so that walks run
// into the bound.
std::function<int32_t(const std::vector<int32_t>&, int, std::mt19937&)>
PreferLongTokens(const Vocabulary& vocab) {
  return [&vocab](const std::vector<int32_t>& allowed, int, std::mt19937& rng) {
    int32_t pick = allowed[rng() % allowed.size()];
    for (int32_t id : allowed) {
      if (vocab.bytes(id).size() >= 8 && rng() % 3 == 0) pick = id;
    }
    return pick;
  };
}

TEST(CountedChars, LongProductsAreCountedAtRunTime) {
  EXPECT_TRUE(Counts(kCounted));
  EXPECT_TRUE(Counts(R"({"type":"string","format":"email","maxLength":1024})"));
  // A product that fits stays in the automaton.
  EXPECT_FALSE(
      Counts(R"({"type":"string",)" + kPattern + R"(,"maxLength":8})"));
  GrammarCompiler compiler(TestVocab());
  // Strings the pattern makes longer than maxLength: none at all.
  const std::string too_long =
      R"({"type":"string","pattern":"^a{3000}b*$","maxLength":10})";
  EXPECT_FALSE(Counts(too_long));
  EXPECT_FALSE(CompileSchema(compiler, too_long).ok());
  auto g = CompileSchema(compiler, kCounted);
  ASSERT_TRUE(g.ok()) << g.status();
  const std::string full = "\"" + std::string(kMax - 2, 'a') + "@b\"";
  EXPECT_TRUE(Accepts(*g, full));
  EXPECT_FALSE(Accepts(*g, "\"a" + full.substr(1)));
  // An escape and a two-byte character count one each.
  EXPECT_TRUE(Accepts(
      *g, "\"\\n\\u0001\xc3\xa9" + std::string(kMax - 5, 'a') + "@b\""));
  EXPECT_FALSE(Accepts(
      *g, "\"\\n\\u0001\xc3\xa9" + std::string(kMax - 4, 'a') + "@b\""));
  // The byte that leaves too few characters for '@' and one more is refused
  // as it comes, not at the closing quote.
  GrammarMatcher m(*g);
  ASSERT_TRUE(m.AcceptString("\"" + std::string(kMax - 2, 'a')).ok());
  EXPECT_FALSE(m.AcceptString("a").ok());
  EXPECT_TRUE(m.AcceptString("@").ok());
  EXPECT_FALSE(m.AcceptString("\"").ok());
  EXPECT_TRUE(m.AcceptString("b\"").ok());
  EXPECT_TRUE(m.CanTerminate());
}

// MaskBench's words pattern up to 300 characters: a product of 16K states
// and 347K edges the automaton held, but three of them written out passed
// the grammar's size limit (3.2M expressions against 1M): counted at run
// time now, while up to 20 characters it stays in the automaton.
TEST(CountedChars, ProductsTooLargeToWriteOutAreCounted) {
  const std::string words = R"("pattern":"^(?:\\S+\\s+){0,29}\\S+$")";
  const std::string counted =
      R"({"type":"string",)" + words + R"(,"maxLength":300})";
  EXPECT_TRUE(Counts(counted));
  EXPECT_FALSE(Counts(R"({"type":"string",)" + words + R"(,"maxLength":20})"));
  GrammarCompiler compiler(TestVocab());
  auto g = CompileSchema(compiler, R"({"type":"object","properties":{"a":)" +
                                       counted + R"(,"b":)" + counted +
                                       R"(,"c":)" + counted + "}}");
  ASSERT_TRUE(g.ok()) << g.status();
  // 29 words of 9 letters and a space each, then one of 10: 300 characters.
  std::string text;
  for (int i = 0; i < 29; ++i) text += "aaaaaaaaa ";
  text += "aaaaaaaaaa";
  EXPECT_TRUE(Accepts(*g, R"({"b":")" + text + "\"}"));
  EXPECT_FALSE(Accepts(*g, R"({"b":")" + text + "a\"}"));
  // 31 words, in 300 characters.
  EXPECT_FALSE(Accepts(*g, R"({"b":"a )" + text.substr(2) + "\"}"));
}

// Random walks from close to the bound: the mask against the uncounted
// pattern's, narrowed by counting directly.
TEST(CountedChars, MasksMatchADirectReading) {
  GrammarCompiler compiler(TestVocab());
  const Vocabulary& vocab = compiler.vocabulary();
  auto counted = CompileSchema(compiler, kCounted);
  auto plain = CompileSchema(compiler, kPlain);
  ASSERT_TRUE(counted.ok() && plain.ok()) << counted.status();
  for (int before : {kMax - 40, kMax - 12}) {
    for (bool with_at : {false, true}) {
      const std::string start = "\"" +
                                std::string(before - (with_at ? 2 : 0), 'a') +
                                (with_at ? "@a" : "");
      testing::DirectReadingWalk walk;
      walk.seed = static_cast<uint32_t>(before + with_at);
      walk.walks = 20;
      walk.steps = 30;
      walk.start = start;
      walk.pick = PreferLongTokens(vocab);
      testing::WalkAgainstADirectReading(*counted, *plain, walk,
                                         PatternCanClose, start.substr(0, 3));
    }
  }
}

// The same for a string of lengths alone (any character, minLength 3 in
// its automaton, maxLength 300 counted at run time).
TEST(CountedChars, LengthsAloneMatchADirectReading) {
  GrammarCompiler compiler(TestVocab());
  const Vocabulary& vocab = compiler.vocabulary();
  auto counted = CompileSchema(
      compiler, R"({"type":"string","minLength":3,"maxLength":300})");
  auto plain = CompileSchema(compiler, R"({"type":"string","minLength":3})");
  ASSERT_TRUE(counted.ok() && plain.ok()) << counted.status();
  for (int before : {0, 260, 290}) {
    testing::DirectReadingWalk walk;
    walk.seed = static_cast<uint32_t>(before);
    walk.walks = 20;
    walk.steps = 40;
    walk.start = "\"" + std::string(before, 'a');
    walk.pick = PreferLongTokens(vocab);
    testing::WalkAgainstADirectReading(
        *counted, *plain, walk,
        [](const std::string& text) {
          const Reading r = Read(text);
          return r.chars + (r.closed ? 0 : std::max(0, 3 - r.chars)) <= 300;
        },
        walk.start.substr(0, 3));
  }
}

TEST(CountedChars, RollbackForkJumpForwardSerializationAndKeys) {
  GrammarCompiler compiler(TestVocab());
  auto g = CompileSchema(compiler, kCounted);
  ASSERT_TRUE(g.ok()) << g.status();
  GrammarMatcher m(*g);
  std::vector<uintptr_t> key;
  ASSERT_TRUE(m.AcceptString("\"" + std::string(100, 'a')).ok());
  EXPECT_TRUE(m.NextMaskKey(&key));  // far from the bound: the tables hold
  ASSERT_TRUE(m.AcceptString(std::string(kMax - 110, 'a')).ok());
  EXPECT_FALSE(m.NextMaskKey(&key));  // near it: tokens read for real
  // Rolled back, the count is the one before.
  std::vector<uint32_t> before(g->mask_words()), after(g->mask_words());
  m.FillNextTokenMask(before.data());
  // Four times two more leave just enough for '@' and one more.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(m.AcceptString("aa").ok());
  EXPECT_FALSE(m.AcceptString("a").ok());
  ASSERT_TRUE(m.Rollback(4).ok());
  m.FillNextTokenMask(after.data());
  EXPECT_EQ(before, after);
  // A fork counts on alone.
  GrammarMatcher fork = m.Fork();
  ASSERT_TRUE(fork.AcceptString(std::string(6, 'a')).ok());
  EXPECT_FALSE(fork.AcceptString("aaa").ok());
  EXPECT_TRUE(m.AcceptString(std::string(8, 'a') + "@b\"").ok());
  // Jump-forward: with one character left after '@', nothing is forced but
  // the closing quote once it is written.
  GrammarMatcher j(*g);
  ASSERT_TRUE(j.AcceptString("\"" + std::string(kMax - 2, 'a') + "@b").ok());
  EXPECT_EQ(j.JumpForward().bytes, "\"");
  // A grammar read back counts the same.
  auto loaded = compiler.Deserialize(SerializeGrammar(*g));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::string full = "\"" + std::string(kMax - 2, 'a') + "@b\"";
  EXPECT_TRUE(Accepts(*loaded, full));
  EXPECT_FALSE(Accepts(*loaded, "\"a" + full.substr(1)));
}

// The bad-input catalogue: a bound of a hundred million, a string of a
// million characters read in one piece.
TEST(CountedChars, HostileLengthsStayBounded) {
  const auto begin = std::chrono::steady_clock::now();
  GrammarCompiler compiler(TestVocab());
  auto g = CompileSchema(
      compiler, R"({"type":"string","format":"email","maxLength":100000000})");
  ASSERT_TRUE(g.ok()) << g.status();
  auto m = CompileSchema(compiler, R"({"type":"string","maxLength":1000000})");
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string text(1000000, 'a');
  EXPECT_TRUE(Accepts(*m, "\"" + text + "\""));
  EXPECT_FALSE(Accepts(*m, "\"a" + text + "\""));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  EXPECT_LT(seconds, 20.0);
}

}  // namespace
}  // namespace grammard::grammar
