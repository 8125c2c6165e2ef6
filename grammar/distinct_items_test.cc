// uniqueItems kept at run time (distinct rules, grammar_ir.h): the mask
// against a direct reading, and the matcher's other paths (rollback, fork,
// jump-forward, serialization) over the state it keeps.
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/serialize.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace grammard::grammar {
namespace {

// Single bytes of JSON's punctuation and a few letters, plus tokens that
// end an item and go on (`",`, `"]`) or hold a whole one (`"a"`).
std::shared_ptr<const Vocabulary> TestVocab() {
  std::vector<std::string> tokens;
  for (char c : std::string("[]{}\",:abAc\\u0016 ")) tokens.push_back({c});
  for (const char* t :
       {"\",",      "\"]",   "\"a\"", "\"a", "a\"",   "\",\"", "ab",
        "[\"",      "\"}",   "{\"",   "\":", "\":\"", "],[",   "}]",
        "\"a\",\"", "u0061", "[]",    "{}",  "]]",    "},{"}) {
    tokens.push_back(t);
  }
  tokens.push_back("</s>");
  const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
  return *Vocabulary::FromTokens(tokens, {eos}, {eos}, {"distinct", {}, 0});
}

absl::StatusOr<CompiledGrammar> CompileSchema(const GrammarCompiler& compiler,
                                              const std::string& schema) {
  JsonSchemaOptions options;
  options.whitespace = JsonWhitespace::kCompact;
  auto converted = JsonSchemaToGrammar(schema, options);
  if (!converted.ok()) return converted.status();
  return compiler.Compile(std::move(converted->grammar));
}

constexpr char kUniqueStrings[] =
    R"({"type":"array","items":{"type":"string"},"uniqueItems":true})";

bool Accepts(const CompiledGrammar& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.AcceptString(text).ok() && m.CanTerminate();
}

TEST(DistinctItems, EqualItemsAreRefusedWhateverTheirSpelling) {
  GrammarCompiler compiler(TestVocab());
  auto g = CompileSchema(compiler, kUniqueStrings);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(Accepts(*g, R"(["a","b","ab"])"));
  EXPECT_TRUE(Accepts(*g, R"([])"));
  EXPECT_FALSE(Accepts(*g, R"(["a","b","a"])"));
  EXPECT_FALSE(Accepts(*g, R"(["a","\u0061"])"));
  GrammarMatcher m(*g);
  ASSERT_TRUE(m.AcceptString(R"(["a","ab","a)").ok());
  // "a" again cannot end; "ab" again neither; "abc" can.
  EXPECT_FALSE(m.AcceptString("\"").ok());
  ASSERT_TRUE(m.AcceptString("b").ok());
  EXPECT_FALSE(m.AcceptString("\"").ok());
  EXPECT_TRUE(m.AcceptString("c\"]").ok());
}

TEST(DistinctItems, EachArrayKeepsItsOwnItems) {
  GrammarCompiler compiler(TestVocab());
  auto g = CompileSchema(compiler, R"({"type":"object","properties":{
      "a":{"type":"array","items":{"type":"string"},"uniqueItems":true},
      "b":{"type":"array","items":{"type":"string"},"uniqueItems":true}},
      "required":["a","b"],"additionalProperties":false})");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(Accepts(*g, R"({"a":["x"],"b":["x"]})"));
  EXPECT_FALSE(Accepts(*g, R"({"a":["x","x"],"b":[]})"));
  EXPECT_FALSE(Accepts(*g, R"({"a":[],"b":["y","y"]})"));
  auto nested = CompileSchema(compiler, R"({"type":"array","uniqueItems":true,
      "items":{"type":"array","items":{"type":"string"},"uniqueItems":true}})");
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_TRUE(Accepts(*nested, R"([["a","b"],["b","a"],[]])"));
  EXPECT_FALSE(Accepts(*nested, R"([["a"],["a"]])"));
  EXPECT_FALSE(Accepts(*nested, R"([["a"],["b","b"]])"));
  EXPECT_FALSE(Accepts(*nested, R"([[],[]])"));
}

TEST(DistinctItems, ObjectsAreEqualInAnyMemberOrder) {
  GrammarCompiler compiler(TestVocab());
  auto g = CompileSchema(
      compiler,
      R"({"type":"array","items":{"type":"object"},"uniqueItems":true})");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(Accepts(*g, R"([{"a":"b"},{"a":"c"},{}])"));
  EXPECT_FALSE(Accepts(*g, R"([{"a":"b","c":1},{"c":1.0,"a":"b"}])"));
  EXPECT_FALSE(Accepts(*g, R"([{},{}])"));
}

TEST(DistinctItems, ItemsThatMayRunOutAreRefused) {
  for (const char* items :
       {R"({"type":"integer"})", R"({"type":"number"})",
        R"({"type":"string","maxLength":3})", R"({"type":"boolean"})",
        R"({"type":"string","pattern":"^(ab|cd)$"})",
        R"({"type":"string","format":"date"})",
        R"({"type":"object","additionalProperties":false,
            "properties":{"a":{"type":"string"}}})",
        R"({"type":"array","maxItems":2})"}) {
    const std::string schema = std::string(R"({"type":"array","items":)") +
                               items + R"(,"uniqueItems":true})";
    auto converted = JsonSchemaToGrammar(schema);
    if (std::string(items).find("boolean") != std::string::npos) {
      EXPECT_TRUE(converted.ok()) << "listed values stay exact: " << items;
      continue;
    }
    ASSERT_FALSE(converted.ok()) << items;
    EXPECT_NE(converted.status().message().find("uniqueItems"),
              std::string::npos)
        << converted.status();
  }
}

TEST(DistinctItems, TheCompilerRefusesValuesThatMayRunOut) {
  GrammarCompiler compiler(TestVocab());
  Grammar g;
  const int32_t item = g.AddRule(
      "item", g.AddChoice({g.AddBytes("\"a\""), g.AddBytes("\"b\"")}));
  g.rules[item].distinct = true;
  g.root = g.AddRule(
      "root",
      g.AddSequence(
          {g.AddBytes("["), g.AddRuleRef(item),
           g.AddRepeat(g.AddSequence({g.AddBytes(","), g.AddRuleRef(item)}), 0,
                       kUnbounded),
           g.AddBytes("]")}));
  auto compiled = compiler.Compile(g);
  ASSERT_FALSE(compiled.ok());
  EXPECT_NE(compiled.status().message().find("distinct rule 'item'"),
            std::string::npos)
      << compiled.status();
}

// A state that calls a plain rule and a distinct one, both returning to one
// state, shares their frame: it must still know where the value began (it
// did not when the plain call made the frame first).
TEST(DistinctItems, AFrameSharedWithAPlainCallKeepsItsValues) {
  GrammarCompiler compiler(TestVocab());
  Grammar g;
  const int32_t plain = g.AddRule("plain");
  g.rules[plain].body =
      g.AddSequence({g.AddBytes("{"), g.AddRepeat(g.AddRuleRef(plain), 0, 1),
                     g.AddBytes("}")});
  const int32_t item = g.AddRule(
      "item",
      g.AddSequence({g.AddBytes("\""),
                     g.AddRepeat(g.AddCharClass({{'a', 'c'}}), 1, kUnbounded),
                     g.AddBytes("\"")}));
  g.rules[item].distinct = true;
  const int32_t either = g.AddChoice({g.AddRuleRef(plain), g.AddRuleRef(item)});
  g.root = g.AddRule(
      "root",
      g.AddSequence(
          {g.AddBytes("["), either,
           g.AddRepeat(g.AddSequence({g.AddBytes(","), either}), 0, kUnbounded),
           g.AddBytes("]")}));
  auto compiled = compiler.Compile(g);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_TRUE(Accepts(*compiled, R"(["a","b",{},"ab"])"));
  EXPECT_FALSE(Accepts(*compiled, R"(["a",{},"a"])"));
}

// The items an array text has completed so far: top-level items closed by
// their last byte (strings, objects and arrays close with one).
std::vector<std::string> CompletedItems(const std::string& text) {
  std::vector<std::string> items;
  int depth = 0;
  bool in_string = false, escaped = false;
  size_t begin = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
        if (depth == 1) items.push_back(text.substr(begin, i + 1 - begin));
      }
      continue;
    }
    if (c == '"') {
      if (depth == 1) begin = i;
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (depth == 1) begin = i;
      ++depth;
    } else if (c == ']' || c == '}') {
      --depth;
      if (depth == 1) items.push_back(text.substr(begin, i + 1 - begin));
    }
  }
  return items;
}

bool Distinct(const std::vector<std::string>& items) {
  std::vector<nlohmann::json> values;
  for (const std::string& item : items) {
    values.push_back(nlohmann::json::parse(item));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (values[i] == values[j]) return false;
    }
  }
  return true;
}

bool Bit(const std::vector<uint32_t>& row, int32_t id) {
  return (row[id >> 5] >> (id & 31)) & 1;
}

// Random walks: the mask of the unique array against the same array's mask
// without uniqueItems, narrowed by reading the completed items directly.
// Every walk must be able to end, and every text it ends must be distinct.
TEST(DistinctItems, MasksMatchADirectReading) {
  GrammarCompiler compiler(TestVocab());
  const Vocabulary& vocab = compiler.vocabulary();
  for (const char* items :
       {R"({"type":"string"})", R"({"type":"string","minLength":2})",
        R"({"type":"string","pattern":"^a[bc]+$"})", R"({"type":"object"})",
        R"({"type":"array"})",
        R"({"anyOf":[{"type":"string"},{"type":"array"}]})"}) {
    const std::string plain_schema =
        std::string(R"({"type":"array","items":)") + items + "}";
    const std::string schema = std::string(R"({"type":"array","items":)") +
                               items + R"(,"uniqueItems":true})";
    auto plain = CompileSchema(compiler, plain_schema);
    auto unique = CompileSchema(compiler, schema);
    ASSERT_TRUE(plain.ok()) << plain.status();
    ASSERT_TRUE(unique.ok()) << schema << ": " << unique.status();
    std::mt19937 rng(11);
    int ended = 0, narrowed = 0;
    for (int walk = 0; walk < 40; ++walk) {
      GrammarMatcher p(*plain), u(*unique);
      std::vector<uint32_t> prow(plain->mask_words()),
          urow(unique->mask_words());
      std::string text;
      for (int step = 0; step < 40 && !u.IsTerminated(); ++step) {
        p.FillNextTokenMask(prow.data());
        u.FillNextTokenMask(urow.data());
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < vocab.size(); ++id) {
          bool want = Bit(prow, id);
          if (want && !vocab.is_eos(id)) {
            want =
                Distinct(CompletedItems(text + std::string(vocab.bytes(id))));
            narrowed += !want;
          }
          ASSERT_EQ(Bit(urow, id), want)
              << schema << " after '" << text << "' token '" << vocab.bytes(id)
              << "'";
          if (want) allowed.push_back(id);
        }
        ASSERT_FALSE(allowed.empty()) << schema << " after '" << text << "'";
        // Late in a walk, prefer tokens that close things.
        int32_t pick = allowed[rng() % allowed.size()];
        if (step > 25) {
          for (int32_t id : allowed) {
            const std::string_view b = vocab.bytes(id);
            if (vocab.is_eos(id) || b.find_first_of("]}\"") != b.npos) {
              if (rng() % 2) pick = id;
            }
          }
        }
        ASSERT_TRUE(u.AcceptToken(pick).ok());
        ASSERT_TRUE(p.AcceptToken(pick).ok());
        if (!vocab.is_eos(pick)) text += vocab.bytes(pick);
      }
      if (u.IsTerminated()) {
        ++ended;
        EXPECT_TRUE(Distinct(CompletedItems(text))) << text;
      }
    }
    EXPECT_GT(ended, 0) << schema;
    EXPECT_GT(narrowed, 0) << schema;
  }
}

TEST(DistinctItems, RollbackForkJumpForwardAndSerializationKeepTheItems) {
  GrammarCompiler compiler(TestVocab());
  auto g = CompileSchema(compiler, kUniqueStrings);
  ASSERT_TRUE(g.ok()) << g.status();
  const Vocabulary& vocab = compiler.vocabulary();
  auto id_of = [&](std::string_view bytes) {
    for (int32_t id = 0; id < vocab.size(); ++id) {
      if (vocab.bytes(id) == bytes && !vocab.is_eos(id)) return id;
    }
    return -1;
  };
  GrammarMatcher m(*g);
  for (const char* t : {"[\"", "a", "\",\"", "b", "\",\""}) {
    ASSERT_TRUE(m.AcceptToken(id_of(t)).ok()) << t;
  }
  std::vector<uint32_t> before(g->mask_words()), after(g->mask_words());
  m.FillNextTokenMask(before.data());
  EXPECT_FALSE(Bit(before, id_of("a\"")));  // "a" again
  // Roll back over "b", take "a" there instead: refused; "c" is fine.
  ASSERT_TRUE(m.Rollback(2).ok());
  EXPECT_FALSE(m.AcceptToken(id_of("a\"")).ok());
  ASSERT_TRUE(m.AcceptToken(id_of("b")).ok());
  ASSERT_TRUE(m.AcceptToken(id_of("\",\"")).ok());
  m.FillNextTokenMask(after.data());
  EXPECT_EQ(before, after);
  // A fork goes on alone; each refuses what it has seen.
  GrammarMatcher fork = m.Fork();
  ASSERT_TRUE(fork.AcceptToken(id_of("c")).ok());
  ASSERT_TRUE(m.AcceptToken(id_of("ab")).ok());
  EXPECT_FALSE(fork.AcceptString("\",\"c\"").ok());
  EXPECT_TRUE(m.AcceptString("\",\"c\"]").ok());
  EXPECT_FALSE(fork.AcceptString("\",\"a\"").ok());
  EXPECT_TRUE(fork.AcceptString("\",\"ab\"]").ok());
  // Jump-forward never forces a byte that ends a value seen.
  GrammarMatcher j(*g);
  ASSERT_TRUE(j.AcceptString("[\"a\",\"a").ok());
  EXPECT_EQ(j.JumpForward().bytes, "");
  // A grammar read back keeps its distinct rules.
  auto loaded = compiler.Deserialize(SerializeGrammar(*g));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(Accepts(*loaded, R"(["a","a"])"));
  EXPECT_TRUE(Accepts(*loaded, R"(["a","b"])"));
  // Masks inside a value have no key: they depend on the values seen.
  GrammarMatcher k(*g);
  std::vector<uintptr_t> key;
  EXPECT_TRUE(k.NextMaskKey(&key));
  ASSERT_TRUE(k.AcceptString("[\"a").ok());
  EXPECT_FALSE(k.NextMaskKey(&key));
}

// The bad-input catalogue: many items, deep nesting.
TEST(DistinctItems, HostileSizesStayBounded) {
  GrammarCompiler compiler(TestVocab());
  auto g = CompileSchema(compiler, kUniqueStrings);
  ASSERT_TRUE(g.ok()) << g.status();
  GrammarMatcher m(*g);
  const auto begin = std::chrono::steady_clock::now();
  ASSERT_TRUE(m.AcceptString("[\"0\"").ok());
  for (int i = 1; i < 10000; ++i) {
    ASSERT_TRUE(m.AcceptString(",\"" + std::to_string(i) + "\"").ok()) << i;
  }
  EXPECT_FALSE(m.AcceptString(",\"5000\"").ok());
  ASSERT_TRUE(m.AcceptString(",\"50").ok());
  std::vector<uint32_t> row(g->mask_words());
  m.FillNextTokenMask(row.data());
  EXPECT_TRUE(m.AcceptString("00a\"]").ok());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  EXPECT_LT(seconds, 20.0);
  // Unique arrays of unique arrays, 150 deep.
  std::string schema = R"({"type":"string"})";
  for (int i = 0; i < 150; ++i) {
    schema = R"({"type":"array","uniqueItems":true,"items":)" + schema + "}";
  }
  auto deep = CompileSchema(compiler, schema);
  ASSERT_TRUE(deep.ok()) << deep.status();
  std::string text(150, '[');
  text += "\"a\"";
  text += std::string(149, ']');
  EXPECT_TRUE(Accepts(*deep, text + "]"));
  EXPECT_FALSE(Accepts(*deep, text + ",[[" + std::string(147, '[') + "\"a\"" +
                                  std::string(149, ']') + "]"));
}

}  // namespace
}  // namespace grammard::grammar
