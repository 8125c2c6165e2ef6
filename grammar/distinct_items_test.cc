// uniqueItems kept at run time (distinct rules, grammar_ir.h): the mask
// against a direct reading, and the matcher's other paths (rollback, fork,
// jump-forward, serialization) over the state it keeps.
#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/engine/grammar_data.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/serialize.h"
#include "grammar/testing/direct_reading_walk.h"
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

// An array of `items`, after the keywords in `prefix` (each with its
// comma), with or without uniqueItems.
std::string ArraySchema(const std::string& items, bool unique,
                        const std::string& prefix = "") {
  return R"({"type":"array",)" + prefix + R"("items":)" + items +
         (unique ? R"(,"uniqueItems":true})" : "}");
}

// Walks the unique array of `items` against the plain one
// (testing/direct_reading_walk.h).
void WalkUniqueArray(const GrammarCompiler& compiler, const std::string& items,
                     const std::string& prefix,
                     const testing::DirectReadingWalk& walk,
                     const std::function<bool(const std::string&)>& can_go_on) {
  const std::string schema = ArraySchema(items, true, prefix);
  auto plain = CompileSchema(compiler, ArraySchema(items, false, prefix));
  auto unique = CompileSchema(compiler, schema);
  ASSERT_TRUE(plain.ok() && unique.ok()) << schema;
  testing::WalkAgainstADirectReading(*unique, *plain, walk, can_go_on, schema);
}

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
       {R"({"type":"integer","minimum":0})", R"({"type":"number","maximum":5})",
        R"({"type":"integer","multipleOf":2})",
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
// Before any item is seen only a token that ends two can be refused, so
// the first item's masks read only those: `"a","`, not `",` or `"]`. One
// ending two equal items is still refused there.
TEST(DistinctItems, TheFirstItemReadsOnlyTokensThatEndTwo) {
  std::vector<std::string> tokens;
  for (char c : std::string("[]\",ab")) tokens.push_back({c});
  for (const char* t : {"\",", "\"]", "\"a\",\"", "a\",\"a\"", "a\",\"b\""}) {
    tokens.push_back(t);
  }
  tokens.push_back("</s>");
  const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
  GrammarCompiler compiler(
      *Vocabulary::FromTokens(tokens, {eos}, {eos}, {"first", {}, 0}));
  auto g = CompileSchema(compiler, kUniqueStrings);
  ASSERT_TRUE(g.ok()) << g.status();
  const Vocabulary& vocab = compiler.vocabulary();
  std::set<std::string> twice;
  for (int32_t id : g->data().value_ending_tokens.twice) {
    twice.insert(std::string(vocab.bytes(id)));
  }
  EXPECT_EQ(twice,
            (std::set<std::string>{"\"a\",\"", "a\",\"a\"", "a\",\"b\""}));
  GrammarMatcher m(*g);
  ASSERT_TRUE(m.AcceptString("[\"").ok());
  std::vector<uint32_t> row(g->mask_words());
  m.FillNextTokenMask(row.data());
  const auto allowed = [&](const std::string& token) {
    for (int32_t id = 0; id < vocab.size(); ++id) {
      if (vocab.bytes(id) == token) return (row[id >> 5] >> (id & 31) & 1) != 0;
    }
    ADD_FAILURE() << "no token " << token;
    return false;
  };
  EXPECT_TRUE(allowed("a\",\"b\""));
  EXPECT_FALSE(allowed("a\",\"a\""));
  EXPECT_TRUE(allowed("\","));
}

TEST(DistinctItems, MasksMatchADirectReading) {
  GrammarCompiler compiler(TestVocab());
  const Vocabulary& vocab = compiler.vocabulary();
  testing::DirectReadingWalk walk;
  walk.seed = 11;
  walk.walks = 40;
  // Late in a walk, prefer tokens that close things.
  walk.pick = [&](const std::vector<int32_t>& allowed, int step,
                  std::mt19937& rng) {
    int32_t pick = allowed[rng() % allowed.size()];
    if (step > 25) {
      for (int32_t id : allowed) {
        const std::string_view b = vocab.bytes(id);
        if (vocab.is_eos(id) || b.find_first_of("]}\"") != b.npos) {
          if (rng() % 2) pick = id;
        }
      }
    }
    return pick;
  };
  for (const char* items :
       {R"({"type":"string"})", R"({"type":"string","minLength":2})",
        R"({"type":"string","pattern":"^a[bc]+$"})", R"({"type":"object"})",
        R"({"type":"array"})",
        R"({"anyOf":[{"type":"string"},{"type":"array"}]})"}) {
    WalkUniqueArray(compiler, items, "", walk, [](const std::string& text) {
      return Distinct(CompletedItems(text));
    });
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

// Digits, JSON's literals and thirteen letters a-m, each byte alone and
// in a few tokens that end an item and go on.
std::shared_ptr<const Vocabulary> ScalarVocab() {
  std::vector<std::string> tokens;
  for (char c : std::string("[]{}\",:-.0123456789abcdefghijklmnrstuE")) {
    tokens.push_back({c});
  }
  for (const char* t :
       {"true",  "false", "null", ",\"", "\",",   "\"]",   "0,",     "1,",
        ",0",    ",1",    "0]",   "1]",  ",true", "true,", "false]", "\"a\"",
        "\"b\"", "1.0",   "10",   "-1",  "[]",    "{}",    ",-"}) {
    tokens.push_back(t);
  }
  tokens.push_back("</s>");
  const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
  return *Vocabulary::FromTokens(tokens, {eos}, {eos}, {"scalars", {}, 0});
}

// What one position of the arrays below may hold.
enum class Items { kAny, kBoolOrString, kInteger, kNumber, kLetters };

// The values an item that begins with `p` may still become, when finitely
// many (read directly for the kinds above; nullopt when endless), or an
// empty list when no value may: the spellings the grammar keeps for a
// unique array's numbers are -?(0|[1-9][0-9]*)(\.[0-9]+)? with zero only
// as 0(\.0+)?, and integers without a fraction unless zero.
std::optional<std::vector<nlohmann::json>> Completions(const std::string& p,
                                                       Items kind) {
  using Out = std::optional<std::vector<nlohmann::json>>;
  const std::vector<nlohmann::json> none;
  if (p.empty()) {
    if (kind != Items::kLetters) return Out();
    std::vector<nlohmann::json> all;
    for (char c = 'a'; c <= 'm'; ++c) all.push_back(std::string(1, c));
    return all;
  }
  for (const char* literal : {"true", "false", "null"}) {
    if (std::string(literal).rfind(p, 0) == 0) {
      return std::vector<nlohmann::json>{nlohmann::json::parse(literal)};
    }
  }
  if (p[0] == '-' || (p[0] >= '0' && p[0] <= '9')) {
    if (p.find_first_of("eE") != std::string::npos) return none;
    const bool zero = p.find_first_of("123456789") == std::string::npos;
    const bool dot = p.find('.') != std::string::npos;
    if (kind == Items::kInteger) {
      if (!zero) return dot ? none : Out();
      if (p == "-") return Out();
      if (p[0] == '-') return none;
      return std::vector<nlohmann::json>{0};
    }
    // A number: 0 and 0.0... may still grow a digit other than zero,
    // which a negative zero must.
    return Out();
  }
  if (kind == Items::kLetters) {
    std::vector<nlohmann::json> letters;
    for (char c = 'a'; c <= 'm'; ++c) {
      const std::string text = std::string("\"") + c + "\"";
      if (text.rfind(p, 0) == 0) letters.push_back(std::string(1, c));
    }
    return letters;
  }
  // A string, object or array: endless until it closes.
  auto value = nlohmann::json::parse(p, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return Out();
  return std::vector<nlohmann::json>{value};
}

// Whether a completed top-level item's spelling is one the grammar keeps.
bool KeptSpelling(const std::string& item, Items kind) {
  const nlohmann::json v = nlohmann::json::parse(item);
  if (!v.is_number()) return true;
  if (item.find_first_of("eE") != std::string::npos) return false;
  if (v == 0) return item[0] == '0';
  return kind != Items::kInteger || item.find('.') == std::string::npos;
}

// Whether `text`, the start of an array (the plain grammar's language),
// may still end as one of distinct items that `kind` allows at each
// position, its first two booleans when `two_booleans`.
bool Viable(const std::string& text, Items kind, bool two_booleans) {
  std::vector<std::string> items;
  std::string current;
  bool closed = false, in_string = false, escaped = false, after_comma = false;
  int depth = 0;
  for (char c : text) {
    if (depth >= 1 && !(depth == 1 && !in_string && (c == ',' || c == ']'))) {
      current += c;
    }
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      if (--depth == 0) {
        closed = true;
        if (!current.empty()) items.push_back(current);
        current.clear();
      }
    } else if (c == ',' && depth == 1) {
      items.push_back(current);
      current.clear();
      after_comma = true;
    }
  }
  std::vector<nlohmann::json> seen;
  for (size_t i = 0; i < items.size(); ++i) {
    const Items at = two_booleans && i < 2 ? Items::kBoolOrString : kind;
    if (!KeptSpelling(items[i], at)) return false;
    const nlohmann::json v = nlohmann::json::parse(items[i]);
    if (two_booleans && i < 2 && !v.is_boolean()) return false;
    for (const nlohmann::json& w : seen) {
      if (v == w) return false;
    }
    seen.push_back(v);
  }
  if (closed || depth == 0 || (current.empty() && !after_comma)) return true;
  const size_t index = items.size();
  std::optional<std::vector<nlohmann::json>> next;
  if (two_booleans && index < 2) {
    std::vector<nlohmann::json> both;
    for (bool b : {true, false}) {
      if (current.empty() ||
          std::string(b ? "true" : "false").rfind(current, 0) == 0) {
        both.push_back(b);
      }
    }
    next = both;
  } else {
    next = Completions(current, kind);
  }
  if (!next) return true;
  for (const nlohmann::json& v : *next) {
    if (std::find(seen.begin(), seen.end(), v) == seen.end()) return true;
  }
  return false;
}

// Random walks over unique arrays of values few of which are listed (null,
// booleans, a number's zero, letters) among others that always grow: the
// mask against the plain array's, narrowed by the direct reading above.
TEST(DistinctItems, ListedValuesAndNumbersMatchADirectReading) {
  GrammarCompiler compiler(ScalarVocab());
  const Vocabulary& vocab = compiler.vocabulary();
  struct Case {
    const char* items;
    Items kind;
    bool two_booleans = false;
  };
  const std::string letters =
      R"({"enum":["a","b","c","d","e","f","g","h","i","j","k","l","m"]})";
  testing::DirectReadingWalk walk;
  walk.seed = 5;
  walk.walks = 60;
  // Prefer few tokens per item, so that listed values run out.
  walk.pick = [&](const std::vector<int32_t>& allowed, int step,
                  std::mt19937& rng) {
    int32_t pick = allowed[rng() % allowed.size()];
    for (int32_t id : allowed) {
      const std::string_view b = vocab.bytes(id);
      const bool ends = vocab.is_eos(id) || b.find_first_of(",]") != b.npos;
      if (ends && rng() % (step > 25 ? 2 : 4) == 0) pick = id;
    }
    return pick;
  };
  for (const Case& c : std::vector<Case>{
           {"true", Items::kAny},
           {R"({"type":["boolean","string","null"]})", Items::kBoolOrString},
           {R"({"type":"integer"})", Items::kInteger},
           {R"({"type":"number"})", Items::kNumber},
           {letters.c_str(), Items::kLetters},
           {"true", Items::kAny, true}}) {
    const std::string prefix =
        c.two_booleans
            ? R"("prefixItems":[{"type":"boolean"},{"type":"boolean"}],)"
            : "";
    WalkUniqueArray(compiler, c.items, prefix, walk,
                    [&](const std::string& text) {
                      return Viable(text, c.kind, c.two_booleans);
                    });
  }
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
  // Any value at all, 10,000 items of every kind: the listed ones refused
  // again at once, the others as they end.
  auto any = CompileSchema(compiler, R"({"type":"array","uniqueItems":true})");
  ASSERT_TRUE(any.ok()) << any.status();
  GrammarMatcher a(*any);
  ASSERT_TRUE(a.AcceptString("[true,false,null,0").ok());
  for (int i = 1; i < 10000; ++i) {
    const std::string n = std::to_string(i);
    const std::string item = i % 3 == 0   ? n
                             : i % 3 == 1 ? "\"" + n + "\""
                                          : "[" + n + "]";
    ASSERT_TRUE(a.AcceptString("," + item).ok()) << i;
  }
  for (const char* again : {",t", ",n", ",0,", ",3,", ",\"1\"", ",[2]"}) {
    GrammarMatcher fork = a.Fork();
    EXPECT_FALSE(fork.AcceptString(again).ok()) << again;
  }
  EXPECT_TRUE(a.AcceptString(",0.5,{}]").ok());
  // Listed values past a frame's 64 bits are refused, naming the bound.
  auto listed = [](int count) {
    std::string schema =
        R"({"type":"array","uniqueItems":true,"items":{"anyOf":[{"type":"object"},{"enum":[)";
    for (int i = 0; i < count; ++i) {
      schema += (i ? ",\"" : "\"") + std::to_string(i) + "\"";
    }
    return schema + "]}]}}";
  };
  EXPECT_TRUE(JsonSchemaToGrammar(listed(64)).ok());
  for (int count : {65, 100000}) {
    auto refused = JsonSchemaToGrammar(listed(count));
    ASSERT_FALSE(refused.ok()) << count;
    EXPECT_NE(refused.status().message().find("up to 64 listed scalars"),
              std::string::npos)
        << refused.status();
  }
  // Unique arrays of any values, 150 deep.
  std::string nested = R"({"type":"array","uniqueItems":true})";
  for (int i = 0; i < 149; ++i) {
    nested = R"({"type":"array","uniqueItems":true,"items":)" + nested + "}";
  }
  auto deep_any = CompileSchema(compiler, nested);
  ASSERT_TRUE(deep_any.ok()) << deep_any.status();
  const std::string inner = std::string(150, '[') + "true,null";
  EXPECT_TRUE(Accepts(*deep_any, inner + std::string(150, ']')));
  EXPECT_FALSE(Accepts(*deep_any, inner + ",true" + std::string(150, ']')));
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  EXPECT_LT(total, 40.0);
}

}  // namespace
}  // namespace grammard::grammar
