// Members counted at run time (grammar_ir.h's member_bit, required_members
// and member_guard): JsonPropertyOrder::kAnyRepeatable's objects with more
// than six required members, and kAny's objects of more than six members,
// each declared one at most once. The mask against a direct reading, and
// the matcher's other paths (rollback, fork, jump-forward, serialization)
// over the bits it keeps.
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "grammar/base/member_set.h"
#include "grammar/compiler.h"
#include "grammar/engine/grammar_data.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/serialize.h"
#include "grammar/testing/direct_reading_walk.h"
#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

// Single bytes of JSON's punctuation, the member names' letters and a
// digit, plus tokens that end a value and go on (`",`, `"}`, and `xx",`
// after two characters more), close twice (`}}`, `"}]`) or hold a whole
// object (`{}`, `{"a":1}`).
std::shared_ptr<const Vocabulary> TestVocab() {
  std::vector<std::string> tokens;
  for (char c : std::string("[]{}\",:abcdefghilnrstuxyz1 ")) {
    tokens.push_back({c});
  }
  for (const char* t :
       {"\",",      "\"}",       "}}",       "},{",      "{\"",      "\":",
        "\":\"",    "1,",        "1}",       "\"}]",     "{}",       "[]",
        "}]",       "{\"a\":1}", ",\"h",     "\"a\":1",  "\"b\":\"", "\"c\":{}",
        "\"d\":[]", "\"e\":1",   "\"f\":\"", "\"g\":\"", "xx\","}) {
    tokens.push_back(t);
  }
  tokens.push_back("</s>");
  const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
  return *Vocabulary::FromTokens(tokens, {eos}, {eos}, {"members", {}, 0});
}

absl::StatusOr<CompiledGrammar> CompileSchema(
    const GrammarCompiler& compiler, const std::string& schema,
    JsonPropertyOrder order = JsonPropertyOrder::kAnyRepeatable,
    JsonWhitespace whitespace = JsonWhitespace::kCompact) {
  JsonSchemaOptions options;
  options.whitespace = whitespace;
  options.property_order = order;
  auto converted = JsonSchemaToGrammar(schema, options);
  if (!converted.ok()) return converted.status();
  return compiler.Compile(std::move(converted->grammar));
}

// Seven required members of several kinds (a to g), two optional ones.
std::string Counted(bool required, bool closed) {
  std::string s = R"({"type":"object","properties":{
      "a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"object"},
      "d":{"type":"array","items":{"type":"string"}},"e":{"type":"integer"},
      "f":{"type":"string"},"g":{"type":"string"},"h":{"type":"integer"},
      "i":{"type":"string"}})";
  if (required) s += R"(,"required":["a","b","c","d","e","f","g"])";
  if (closed) s += R"(,"additionalProperties":false)";
  return s + "}";
}
const std::set<std::string> kRequired = {"a", "b", "c", "d", "e", "f", "g"};

bool Accepts(const CompiledGrammar& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.AcceptString(text).ok() && m.CanTerminate();
}

bool Bit(const std::vector<uint32_t>& row, int32_t id) {
  return (row[id >> 5] >> (id & 31)) & 1;
}

// Whether every object of `text` at nesting depth `depth` (0: the top
// level) closed so far holds all required names, read directly: a scan of
// strings, brackets and the names before each colon.
bool ClosedObjectsHoldTheRequired(const std::string& text, int depth) {
  struct Open {
    char bracket;
    std::set<std::string> names;
  };
  std::vector<Open> open;
  bool in_string = false, escaped = false;
  std::string last_string;
  size_t string_begin = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
        last_string = text.substr(string_begin, i - string_begin);
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      string_begin = i + 1;
    } else if (c == ':') {
      open.back().names.insert(last_string);
    } else if (c == '{' || c == '[') {
      open.push_back({c, {}});
    } else if (c == '}' || c == ']') {
      const Open closed = open.back();
      open.pop_back();
      if (c == '}' && static_cast<int>(open.size()) == depth) {
        for (const std::string& name : kRequired) {
          if (!closed.names.count(name)) return false;
        }
      }
    }
  }
  return true;
}

// Walks prefer tokens that write whole members, and past `late` steps
// those that close things; a walk ends as soon as it may.
void WalkAgainstADirectReading(
    const CompiledGrammar& counted, const CompiledGrammar& plain, uint32_t seed,
    int steps, int late,
    const std::function<bool(const std::string&)>& can_go_on,
    const std::string& what) {
  const Vocabulary& vocab = counted.vocabulary();
  testing::DirectReadingWalk walk;
  walk.seed = seed;
  walk.steps = steps;
  walk.pick = [&](const std::vector<int32_t>& allowed, int step,
                  std::mt19937& rng) {
    int32_t pick = allowed[rng() % allowed.size()];
    for (int32_t id : allowed) {
      const std::string_view b = vocab.bytes(id);
      if (vocab.is_eos(id)) return id;
      if (step > late ? b[0] == '"' || b[0] == '}' || b[0] == ']'
                      : b.size() > 3 && b.find("\":") != b.npos) {
        if (rng() % 2 == 0) pick = id;
      }
    }
    return pick;
  };
  testing::WalkAgainstADirectReading(counted, plain, walk, can_go_on, what);
}

// Random walks: the mask of the object with its required members against
// the same object's mask without them, narrowed by reading the objects
// closed directly. Every walk must be able to end, and every text it ends
// must hold the required members.
TEST(RequiredMembers, MasksMatchADirectReading) {
  GrammarCompiler compiler(TestVocab());
  for (bool closed : {false, true}) {
    // The object itself, an array of them, and one as the value of the only
    // member of an object (so that objects at depth 1 are counted ones).
    const std::string with = Counted(true, closed);
    const std::string without = Counted(false, closed);
    const std::vector<std::pair<std::string, std::string>> shapes = {
        {with, without},
        {R"({"type":"array","items":)" + with + "}",
         R"({"type":"array","items":)" + without + "}"},
        {R"({"type":"object","additionalProperties":false,"properties":{"x":)" +
             with + "}}",
         R"({"type":"object","additionalProperties":false,"properties":{"x":)" +
             without + "}}"}};
    for (size_t shape = 0; shape < shapes.size(); ++shape) {
      auto counted = CompileSchema(compiler, shapes[shape].first);
      auto plain = CompileSchema(compiler, shapes[shape].second);
      ASSERT_TRUE(counted.ok()) << counted.status();
      ASSERT_TRUE(plain.ok()) << plain.status();
      const int depth = shape == 0 ? 0 : 1;
      WalkAgainstADirectReading(
          *counted, *plain, 7 + shape, 400, 150,
          [&](const std::string& text) {
            return ClosedObjectsHoldTheRequired(text, depth);
          },
          shapes[shape].first);
    }
  }
}

constexpr char kAll[] = R"("a":1,"b":"","c":{},"d":[],"e":1,"f":"","g":"")";

TEST(RequiredMembers, AnObjectClosesOnlyWithAllOfThem) {
  GrammarCompiler compiler(TestVocab());
  auto g = CompileSchema(compiler, Counted(true, false));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(Accepts(*g, std::string("{") + kAll + "}"));
  // Any order, repeats, other names.
  EXPECT_TRUE(Accepts(
      *g,
      R"({"g":"","x":1,"f":"","e":1,"a":1,"d":[],"c":{},"b":"","a":1,"h":1})"));
  EXPECT_FALSE(Accepts(*g, R"({"a":1,"b":"","c":{},"d":[],"e":1,"f":""})"));
  EXPECT_FALSE(Accepts(*g, R"({"a":1,"a":1,"b":"","c":{},"d":[],"e":1})"));
  EXPECT_FALSE(Accepts(*g, "{}"));
  // Each object of an array counts its own.
  auto array = CompileSchema(
      compiler, R"({"type":"array","items":)" + Counted(true, false) + "}");
  ASSERT_TRUE(array.ok()) << array.status();
  const std::string full = std::string("{") + kAll + "}";
  EXPECT_TRUE(Accepts(*array, "[" + full + "," + full + "]"));
  EXPECT_FALSE(Accepts(*array, "[" + full + R"(,{"a":1}])"));
  EXPECT_FALSE(Accepts(*array, R"([{"a":1},)" + full + "]"));
}

TEST(RequiredMembers, RollbackForkJumpForwardAndSerializationKeepTheBits) {
  GrammarCompiler compiler(TestVocab());
  auto g = CompileSchema(compiler, Counted(true, true));
  ASSERT_TRUE(g.ok()) << g.status();
  const Vocabulary& vocab = compiler.vocabulary();
  auto id_of = [&](std::string_view bytes) {
    for (int32_t id = 0; id < vocab.size(); ++id) {
      if (vocab.bytes(id) == bytes && !vocab.is_eos(id)) return id;
    }
    return -1;
  };
  const int32_t close = id_of("}");
  std::vector<uint32_t> row(g->mask_words());
  GrammarMatcher m(*g);
  ASSERT_TRUE(
      m.AcceptString(R"({"a":1,"b":"","c":{},"d":[],"e":1,"f":"")").ok());
  m.FillNextTokenMask(row.data());
  EXPECT_FALSE(Bit(row, close));
  EXPECT_FALSE(Bit(row, id_of("\"}")));
  // The last one, in tokens; the mask then allows the brace.
  for (const char* t : {",", "\"g\":\"", "x", "\""}) {
    ASSERT_TRUE(m.AcceptToken(id_of(t)).ok()) << t;
  }
  m.FillNextTokenMask(row.data());
  EXPECT_TRUE(Bit(row, close));
  // Rolled back into g's value: a string ending there ends g, so closes.
  ASSERT_TRUE(m.Rollback(1).ok());
  m.FillNextTokenMask(row.data());
  EXPECT_TRUE(Bit(row, id_of("\"}")));
  // Rolled back to before g: the brace may not come.
  ASSERT_TRUE(m.Rollback(3).ok());
  m.FillNextTokenMask(row.data());
  EXPECT_FALSE(Bit(row, close));
  // A fork goes on alone: one writes g, the other does not.
  GrammarMatcher fork = m.Fork();
  EXPECT_TRUE(m.AcceptString(",\"g\":\"x\"}").ok());
  EXPECT_FALSE(fork.AcceptString("}").ok());
  EXPECT_FALSE(fork.AcceptString(",\"h\":1}").ok());
  EXPECT_TRUE(fork.AcceptString(",\"h\":1,\"g\":\"\"}").ok());
  // Jump-forward never forces a brace the object may not take yet.
  GrammarMatcher j(*g);
  ASSERT_TRUE(j.AcceptString(R"({"a":1)").ok());
  const ForcedContinuation forced = j.JumpForward();
  EXPECT_TRUE(j.AcceptString(forced.bytes).ok()) << forced.bytes;
  // A grammar read back keeps its counted members.
  auto loaded = compiler.Deserialize(SerializeGrammar(*g));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(Accepts(*loaded, R"({"a":1})"));
  EXPECT_TRUE(Accepts(*loaded, std::string("{") + kAll + "}"));
  // Masks in a frame lacking members have no key: they depend on them.
  GrammarMatcher k(*g);
  std::vector<uintptr_t> key;
  ASSERT_TRUE(k.AcceptString(R"({"a":1,"b":"x)").ok());
  EXPECT_FALSE(k.NextMaskKey(&key));
  // Inside a string once all are there, the tables hold: it has one.
  ASSERT_TRUE(k.AcceptString(std::string("\",") + kAll + ",\"i\":\"x").ok());
  EXPECT_TRUE(k.NextMaskKey(&key));
}

// The bad-input catalogue: each of 150 nested objects counts its own
// members, in both forms.
TEST(CountedMembers, DeepNestingKeepsEachFrameApart) {
  GrammarCompiler compiler(TestVocab());
  const std::string schema = R"({"type":"object","properties":{
      "a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"object"},
      "d":{"type":"array"},"e":{"type":"integer"},"f":{"type":"string"},
      "g":{"type":"string"},"h":{"$ref":"#"}},
      "required":["a","b","c","d","e","f","g"]})";
  auto nested = [](int depth, int lacking_at) {
    std::string text;
    for (int level = 0; level < depth; ++level) {
      text +=
          std::string("{") + (level == lacking_at
                                  ? R"("a":1,"b":"","c":{},"d":[],"e":1,"f":"")"
                                  : kAll);
      if (level + 1 < depth) text += ",\"h\":";
    }
    return text + std::string(static_cast<size_t>(depth), '}');
  };
  for (auto order :
       {JsonPropertyOrder::kAnyRepeatable, JsonPropertyOrder::kAny}) {
    auto g = CompileSchema(compiler, schema, order);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_TRUE(Accepts(*g, nested(150, -1)));
    EXPECT_FALSE(Accepts(*g, nested(150, 100)));
    EXPECT_FALSE(Accepts(*g, nested(150, 149)));
  }
}

TEST(RequiredMembers, TheCompilerRefusesARuleThatMayEndAfterACall) {
  GrammarCompiler compiler(TestVocab());
  Grammar g;
  const int32_t member = g.AddRule("member", g.AddBytes("a"));
  g.rules[member].member_bit = 0;
  // {a...a with no closing byte after the last member.
  g.root = g.AddRule(
      "root", g.AddSequence({g.AddBytes("{"), g.AddRepeat(g.AddRuleRef(member),
                                                          1, kUnbounded)}));
  g.rules[g.root].required_members.Add(0);
  auto compiled = compiler.Compile(g);
  ASSERT_FALSE(compiled.ok());
  EXPECT_NE(compiled.status().message().find("requires members"),
            std::string::npos)
      << compiled.status();
}

// Names each a prefix of the next ("a", "aa", ... forty of them) nest the
// dispatches forty deep: each name once, whichever order, and once all but
// one are written, the separator and every prefix lead to that one only.
TEST(OnceMembers, NamesNestedAsPrefixesCountEachOnce) {
  GrammarCompiler compiler(TestVocab());
  std::string properties;
  for (int k = 1; k <= 40; ++k) {
    properties += (k > 1 ? ",\"" : "\"") + std::string(k, 'a') +
                  "\":{\"type\":\"integer\"}";
  }
  auto g = CompileSchema(
      compiler,
      R"({"type":"object","additionalProperties":false,"properties":{)" +
          properties + "}}",
      JsonPropertyOrder::kAny);
  ASSERT_TRUE(g.ok()) << g.status();
  std::string text = "{";
  for (int k = 40; k >= 1; --k) {
    if (k == 17) continue;
    text += (k < 40 ? ",\"" : "\"") + std::string(k, 'a') + "\":1";
  }
  GrammarMatcher m(*g);
  ASSERT_TRUE(m.AcceptString(text).ok());
  for (int k = 1; k <= 40; ++k) {
    GrammarMatcher fork = m.Fork();
    EXPECT_EQ(fork.AcceptString(",\"" + std::string(k, 'a') + "\"").ok(),
              k == 17)
        << k;
  }
  EXPECT_TRUE(m.AcceptString(",\"" + std::string(17, 'a')).ok());
  EXPECT_FALSE(m.Fork().AcceptString("a").ok());
  EXPECT_TRUE(m.AcceptString("\":1").ok());
  EXPECT_FALSE(m.Fork().AcceptString(",").ok());
  EXPECT_TRUE(m.AcceptString("}").ok());
}

// A dispatch's calls must end it (what it calls counts in its caller's
// frame), and outside a dispatch a guarded call needs a state with a byte
// of its own (here the closing brace), or a refusal would strand it.
TEST(OnceMembers, TheCompilerRefusesDispatchesThatCouldLoseOrStrand) {
  GrammarCompiler compiler(TestVocab());
  auto build = [](bool call_at_end, bool optional) {
    Grammar g;
    const int32_t member = g.AddRule("member", g.AddBytes("a"));
    g.rules[member].member_bit = 0;
    g.rules[member].member_guard.Add(0);
    const int32_t names = g.AddRule(
        "names", call_at_end
                     ? g.AddSequence({g.AddBytes("\""), g.AddRuleRef(member)})
                     : g.AddSequence({g.AddRuleRef(member), g.AddBytes("\"")}));
    g.rules[names].member_dispatch = true;
    g.rules[names].member_guard.Add(0);
    const int32_t call = g.AddRuleRef(names);
    g.root = g.AddRule("root",
                       g.AddSequence({g.AddBytes("{"),
                                      optional ? g.AddRepeat(call, 0, 1) : call,
                                      g.AddBytes("}")}));
    return g;
  };
  EXPECT_TRUE(compiler.Compile(build(true, true)).ok());
  auto lost = compiler.Compile(build(false, true));
  ASSERT_FALSE(lost.ok());
  EXPECT_NE(lost.status().message().find("other than at its end"),
            std::string::npos)
      << lost.status();
  auto stranded = compiler.Compile(build(true, false));
  ASSERT_FALSE(stranded.ok());
  EXPECT_NE(stranded.status().message().find("no byte of its own"),
            std::string::npos)
      << stranded.status();
}

// `n` integer members m0, m1, ..., the first `required` of them required,
// `extra` more listed in `also_required`.
std::string ManyMembers(int n, int required,
                        const std::vector<int>& also_required = {},
                        bool closed = false) {
  std::string props, names;
  for (int i = 0; i < n; ++i) {
    const std::string name = "m" + std::to_string(i);
    props += (i ? "," : "") + ("\"" + name + "\":{\"type\":\"integer\"}");
  }
  std::vector<int> listed;
  for (int i = 0; i < required; ++i) listed.push_back(i);
  listed.insert(listed.end(), also_required.begin(), also_required.end());
  for (size_t k = 0; k < listed.size(); ++k) {
    names += (k ? ",\"m" : "\"m") + std::to_string(listed[k]) + "\"";
  }
  return R"({"type":"object","properties":{)" + props + R"(},"required":[)" +
         names + "]" + (closed ? R"(,"additionalProperties":false)" : "") + "}";
}

// The members m_i for each i of `order`, each with the value 1.
std::string Members(const std::vector<int>& order) {
  std::string text = "{";
  for (size_t k = 0; k < order.size(); ++k) {
    text += (k ? ",\"m" : "\"m") + std::to_string(order[k]) + "\":1";
  }
  return text + "}";
}

TEST(RequiredMembers, AsManyAsAFrameHoldsAreCountedAndMoreStayAsWritten) {
  GrammarCompiler compiler(TestVocab());
  for (int required : {MemberSet::kMax, MemberSet::kMax + 1}) {
    auto g =
        CompileSchema(compiler, ManyMembers(MemberSet::kMax + 6, required));
    ASSERT_TRUE(g.ok()) << g.status();
    // The last required member first: any order only when counted.
    std::vector<int> order = {required - 1};
    for (int i = 0; i + 1 < required; ++i) order.push_back(i);
    EXPECT_EQ(Accepts(*g, Members(order)), required == MemberSet::kMax)
        << required;
    if (required == MemberSet::kMax) {
      order.erase(order.begin() + 70);  // m69, a bit of the second word
      EXPECT_FALSE(Accepts(*g, Members(order)));
    }
  }
}

// What a prefix of objects whose declared members come at most once may
// hold, read directly: no declared name twice in a counted object (at
// nesting depth `depth`), a name in the making that can still become one
// not written yet (or, unless `closed`, an undeclared one), no separator
// left with nothing to follow it, and closed objects holding the required
// (names compared as written: the walks' vocabularies have no escapes).
bool OnceObjectsCanGoOn(const std::string& text, int depth, bool closed,
                        const std::set<std::string>& declared = {"a", "b", "c",
                                                                 "d", "e", "f",
                                                                 "g", "h", "i"},
                        const std::set<std::string>& required = kRequired) {
  struct Open {
    char bracket;
    bool expect_key = true;
    std::set<std::string> names;
  };
  std::vector<Open> open;
  bool in_string = false, in_key = false, escaped = false;
  std::string last_string;
  size_t string_begin = 0;
  auto counted = [&] {
    return static_cast<int>(open.size()) == depth + 1 &&
           open.back().bracket == '{';
  };
  // Whether `prefix` can still become a name the object may take.
  auto can_name = [&](const std::string& prefix, bool complete) {
    for (const std::string& name : declared) {
      if (open.back().names.count(name)) continue;
      if (complete ? name == prefix
                   : name.compare(0, prefix.size(), prefix) == 0)
        return true;
    }
    if (closed) return false;
    return !complete || !declared.count(prefix);
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
        last_string = text.substr(string_begin, i - string_begin);
        if (in_key && counted() && !can_name(last_string, true)) return false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      in_key =
          !open.empty() && open.back().bracket == '{' && open.back().expect_key;
      string_begin = i + 1;
    } else if (c == ':') {
      open.back().names.insert(last_string);
      open.back().expect_key = false;
    } else if (c == ',') {
      if (open.back().bracket == '{') open.back().expect_key = true;
    } else if (c == '{' || c == '[') {
      open.push_back({c, true, {}});
    } else if (c == '}' || c == ']') {
      if (c == '}' && counted()) {
        for (const std::string& name : required) {
          if (!open.back().names.count(name)) return false;
        }
      }
      open.pop_back();
    }
  }
  if (!counted()) return true;
  if (in_string && in_key) {
    return can_name(text.substr(string_begin), false);
  }
  // A separator (or an opening brace) waiting for a name.
  if (!in_string && open.back().expect_key) return can_name("", false);
  return true;
}

// Random walks as above: kAny's object (each declared member once) against
// kAnyRepeatable's without required members, narrowed by reading directly.
TEST(OnceMembers, MasksMatchADirectReading) {
  GrammarCompiler compiler(TestVocab());
  for (bool closed : {false, true}) {
    const std::string with = Counted(true, closed);
    const std::string without = Counted(false, closed);
    const std::vector<std::pair<std::string, std::string>> shapes = {
        {with, without},
        {R"({"type":"array","items":)" + with + "}",
         R"({"type":"array","items":)" + without + "}"}};
    for (size_t shape = 0; shape < shapes.size(); ++shape) {
      auto once =
          CompileSchema(compiler, shapes[shape].first, JsonPropertyOrder::kAny);
      auto plain = CompileSchema(compiler, shapes[shape].second);
      ASSERT_TRUE(once.ok()) << once.status();
      ASSERT_TRUE(plain.ok()) << plain.status();
      const int depth = static_cast<int>(shape);
      WalkAgainstADirectReading(
          *once, *plain, 3 + shape, 300, 100,
          [&](const std::string& text) {
            return OnceObjectsCanGoOn(text, depth, closed);
          },
          shapes[shape].first);
    }
  }
}

// Alternatives of one object that differ in one member's value: until
// that member is written every alternative keeps a stack (`count` of
// them).
std::string CountedAlternatives(int count) {
  std::string s = R"({"anyOf":[)";
  for (int k = 0; k < count; ++k) {
    std::string one = Counted(true, false);
    const std::string h = R"("h":{"type":"integer"})";
    one.replace(one.find(h), h.size(),
                R"("h":{"const":)" + std::to_string(k) + "}");
    s += (k > 0 ? "," : "") + one;
  }
  return s + "]}";
}

// A matcher reuses its last real read of the tokens that may check members
// while its stacks stay the same (a string's steps): along random walks
// biased to stay in strings and rolled back now and then, every mask must
// equal that of a fresh matcher that read the same text, in objects
// counting members in both forms, beside a string counted to its maxLength
// near the bound, and in 320 alternatives at once (stacks of about 1,000
// nodes, whose key is thousands of words).
TEST(CountedMembers, MasksAlongAWalkEqualAFreshMatchersAtTheSamePlace) {
  GrammarCompiler compiler(TestVocab());
  std::string near_bound = Counted(true, false);
  near_bound.replace(near_bound.find(R"("i":{"type":"string"})"),
                     std::string(R"("i":{"type":"string"})").size(),
                     R"("i":{"type":"string","maxLength":300})");
  struct Case {
    std::string schema;
    JsonPropertyOrder order;
    std::string start;
    int walks;
  };
  const std::vector<Case> cases = {
      {Counted(true, true), JsonPropertyOrder::kAnyRepeatable, "{", 20},
      {Counted(true, false), JsonPropertyOrder::kAny, "{", 20},
      {near_bound, JsonPropertyOrder::kAny,
       R"({"a":1,"i":")" + std::string(290, 'x'), 20},
      {CountedAlternatives(320), JsonPropertyOrder::kAny, R"({"a":1,"b":")", 4},
  };
  const Vocabulary& vocab = compiler.vocabulary();
  int compared = 0;
  for (const Case& c : cases) {
    auto g = CompileSchema(compiler, c.schema, c.order);
    ASSERT_TRUE(g.ok()) << g.status();
    std::mt19937 rng(7);
    std::vector<uint32_t> row(g->mask_words()), fresh_row(g->mask_words());
    for (int walk = 0; walk < c.walks; ++walk) {
      GrammarMatcher m(*g);
      std::string text = c.start;
      ASSERT_TRUE(m.AcceptString(text).ok());
      std::vector<size_t> sizes;  // of the tokens accepted since
      for (int step = 0; step < 60 && !m.IsTerminated(); ++step) {
        m.FillNextTokenMask(row.data());
        GrammarMatcher fresh(*g);
        ASSERT_TRUE(fresh.AcceptString(text).ok());
        fresh.FillNextTokenMask(fresh_row.data());
        ASSERT_EQ(row, fresh_row) << c.schema << " after " << text;
        ++compared;
        std::vector<int32_t> letters, others;
        for (int32_t id = 0; id < vocab.size(); ++id) {
          if (!Bit(row, id) || vocab.is_eos(id)) continue;
          const std::string_view b = vocab.bytes(id);
          (b.size() == 1 && b[0] >= 'a' && b[0] <= 'z' ? letters : others)
              .push_back(id);
        }
        if (letters.empty() && others.empty()) break;
        const std::vector<int32_t>& from =
            others.empty() || (!letters.empty() && rng() % 4 != 0) ? letters
                                                                   : others;
        const int32_t pick = from[rng() % from.size()];
        ASSERT_TRUE(m.AcceptToken(pick).ok());
        text += vocab.bytes(pick);
        sizes.push_back(vocab.bytes(pick).size());
        // Back into a place masked before, with other members counted.
        if (rng() % 5 == 0 && sizes.size() >= 3) {
          const int back = 1 + static_cast<int>(rng() % 3);
          ASSERT_TRUE(m.Rollback(back).ok());
          for (int k = 0; k < back; ++k) {
            text.resize(text.size() - sizes.back());
            sizes.pop_back();
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 2000);
}

TEST(OnceMembers, EachDeclaredMemberComesOnce) {
  GrammarCompiler compiler(TestVocab());
  auto g =
      CompileSchema(compiler, Counted(true, true), JsonPropertyOrder::kAny);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(Accepts(*g, std::string("{") + kAll + "}"));
  EXPECT_TRUE(Accepts(
      *g, R"({"g":"","h":1,"f":"","e":1,"a":1,"d":[],"c":{},"b":"","i":""})"));
  EXPECT_FALSE(Accepts(*g, std::string("{") + kAll + R"(,"a":1})"));
  EXPECT_FALSE(Accepts(*g, R"({"h":1,"h":1})"));
  // Once all nine are written, no separator may follow.
  GrammarMatcher m(*g);
  ASSERT_TRUE(
      m.AcceptString(std::string("{") + kAll + R"(,"h":1,"i":"")").ok());
  EXPECT_FALSE(m.AcceptString(",").ok());
  EXPECT_TRUE(m.AcceptString("}").ok());
  // Undeclared names, where allowed, may come again (as in every order).
  auto open =
      CompileSchema(compiler, Counted(true, false), JsonPropertyOrder::kAny);
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_TRUE(Accepts(*open, std::string("{") + kAll + R"(,"x":1,"x":2})"));
  EXPECT_FALSE(Accepts(*open, std::string("{") + kAll + R"(,"b":""})"));
  // An empty one is fine when nothing is required, unless minProperties 1.
  auto none =
      CompileSchema(compiler, Counted(false, true), JsonPropertyOrder::kAny);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(Accepts(*none, "{}"));
  EXPECT_FALSE(Accepts(*none, R"({"a":1,"a":1})"));
  std::string one = Counted(false, true);
  one.insert(one.size() - 1, R"(,"minProperties":1)");
  auto nonempty = CompileSchema(compiler, one, JsonPropertyOrder::kAny);
  ASSERT_TRUE(nonempty.ok()) << nonempty.status();
  EXPECT_FALSE(Accepts(*nonempty, "{}"));
  EXPECT_TRUE(Accepts(*nonempty, R"({"i":""})"));
}

// A vocabulary of `tokens` and an end-of-sequence token.
std::shared_ptr<const Vocabulary> VocabWithEos(std::vector<std::string> tokens,
                                               const std::string& name) {
  tokens.push_back("</s>");
  const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
  auto vocab = Vocabulary::FromTokens(tokens, {eos}, {eos}, {name, {}, 0});
  EXPECT_TRUE(vocab.ok()) << vocab.status();
  return vocab.ok() ? *vocab : nullptr;
}

// A closed object of integer members named `declared`, "b" required when
// `required_b`.
std::string ClosedIntegers(const std::set<std::string>& declared,
                           bool required_b) {
  std::string properties;
  for (const std::string& name : declared) {
    properties += (properties.empty() ? "\"" : ",\"") + name +
                  "\":{\"type\":\"integer\"}";
  }
  return std::string(R"({"type":"object","additionalProperties":false,)") +
         (required_b ? R"("required":["b"],)" : "") + R"("properties":{)" +
         properties + "}}";
}

// The vocabulary of `tokens` and an end-of-sequence token, and with it
// ClosedIntegers(declared) with "b" required, in any order and each once,
// and without, as kAnyRepeatable reads it: what
// UniformWalksAgainstADirectReading compares. Fails the test when one is
// missing.
struct ClosedIntegersGrammars {
  std::shared_ptr<const Vocabulary> vocab;
  absl::StatusOr<CompiledGrammar> once = absl::UnknownError("not compiled");
  absl::StatusOr<CompiledGrammar> plain = absl::UnknownError("not compiled");
};
void CompileClosedIntegers(std::vector<std::string> tokens,
                           const std::string& vocab_name,
                           const std::set<std::string>& declared,
                           JsonWhitespace whitespace,
                           ClosedIntegersGrammars* out) {
  out->vocab = VocabWithEos(std::move(tokens), vocab_name);
  ASSERT_NE(out->vocab, nullptr);
  GrammarCompiler compiler(out->vocab);
  out->once = CompileSchema(compiler, ClosedIntegers(declared, true),
                            JsonPropertyOrder::kAny, whitespace);
  out->plain = CompileSchema(compiler, ClosedIntegers(declared, false),
                             JsonPropertyOrder::kAnyRepeatable, whitespace);
  ASSERT_TRUE(out->once.ok()) << out->once.status();
  ASSERT_TRUE(out->plain.ok()) << out->plain.status();
}

// Uniform random walks over `once` (ClosedIntegers with "b" required, in
// any order, each once) against `plain` narrowed by reading directly.
void UniformWalksAgainstADirectReading(const CompiledGrammar& once,
                                       const CompiledGrammar& plain,
                                       const std::set<std::string>& declared,
                                       uint32_t seed) {
  testing::DirectReadingWalk walk;
  walk.seed = seed;
  walk.walks = 200;
  walk.steps = 60;
  walk.pick = [&](const std::vector<int32_t>& allowed, int, std::mt19937& rng) {
    return allowed[rng() % allowed.size()];
  };
  testing::WalkAgainstADirectReading(
      once, plain, walk,
      [&](const std::string& text) {
        return OnceObjectsCanGoOn(text, 0, true, declared, {"b"});
      },
      ClosedIntegers(declared, true));
}

// Names sharing prefixes are read by a trie of dispatches: a prefix is
// refused as soon as every name it can still become is written (`"ab`
// once ab, abc, abd and abe are), whole tokens or a byte at a time, across
// one-byte and multi-byte characters and a character JSON may escape.
TEST(OnceMembers, APrefixOfWrittenNamesOnlyIsRefused) {
  const std::set<std::string> declared = {
      "ab", "abc", "abd", "abe", "b", "ba", "bb", "a/", "\xC3\xA9", "\xC3\xA8"};
  std::vector<std::string> tokens;
  for (char c : std::string("{}[]\",:abcde/1 ")) tokens.push_back({c});
  for (const char* t : {"\xC3",
                        "\xA9",
                        "\xA8",
                        "\xC3\xA9",
                        "\xC3\xA8",
                        ",\"",
                        ",\"a",
                        ",\"ab",
                        ",\"abc\":",
                        "\"ab",
                        "ab",
                        "abc",
                        "\":",
                        "\":1",
                        "1,",
                        "1}",
                        ",\"b",
                        "\"b\":1",
                        ",\"\xC3\xA9\":1",
                        "\"a/\":1",
                        "a/",
                        "\"\xC3"}) {
    tokens.push_back(t);
  }
  ClosedIntegersGrammars grammars;
  ASSERT_NO_FATAL_FAILURE(
      CompileClosedIntegers(std::move(tokens), "trie", declared,
                            JsonWhitespace::kCompact, &grammars));
  const auto& [vocab, once, plain] = grammars;
  GrammarMatcher m(*once);
  ASSERT_TRUE(m.AcceptString(R"({"ab":1,"abc":1,"abd":1,"abe":1)").ok());
  EXPECT_FALSE(m.AcceptString(",\"ab").ok());
  EXPECT_TRUE(m.AcceptString(",\"a").ok());
  EXPECT_FALSE(m.AcceptString("b").ok());
  EXPECT_TRUE(m.AcceptString("/\":1").ok());
  UniformWalksAgainstADirectReading(*once, *plain, declared, 11);
}

// kAny's objects as large as a frame counts: each declared member once,
// whichever word of the frame's bits it has, the required ones required,
// in any order; a grammar read back and a fork keep the bits.
// One member more is refused, naming the limit.
TEST(OnceMembers, EveryBitOfAFrameCountsOnce) {
  GrammarCompiler compiler(TestVocab());
  const int n = MemberSet::kMax;
  const std::vector<int> edges = {0, 1, 63, 64, 65, 127, 128, 191, 192, 255};
  auto g = CompileSchema(compiler, ManyMembers(n, 0, {64, 255}, true),
                         JsonPropertyOrder::kAny);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<int> all;
  for (int i = n - 1; i >= 0; --i) all.push_back(i);
  EXPECT_TRUE(Accepts(*g, Members(all)));
  EXPECT_TRUE(Accepts(*g, Members({255, 3, 64})));
  EXPECT_FALSE(Accepts(*g, Members({255, 3})));
  EXPECT_FALSE(Accepts(*g, Members({64, 3})));
  for (int b : edges) {
    // Written twice, with others between; refused at the second name.
    GrammarMatcher m(*g);
    std::vector<int> written = {b};
    for (int r : {64, 255}) {
      if (r != b) written.push_back(r);
    }
    const std::string head = Members(written);
    ASSERT_TRUE(m.AcceptString(head.substr(0, head.size() - 1)).ok()) << b;
    const std::string again = ",\"m" + std::to_string(b) + "\":";
    EXPECT_FALSE(m.AcceptString(again).ok()) << b;
    EXPECT_TRUE(m.AcceptString(R"(,"m2":1})").ok()) << b;
  }
  auto loaded = compiler.Deserialize(SerializeGrammar(*g));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(Accepts(*loaded, Members(all)));
  EXPECT_FALSE(Accepts(*loaded, Members({255, 64, 200, 200})));
  GrammarMatcher m(*loaded);
  ASSERT_TRUE(m.AcceptString(R"({"m200":1,"m64":1)").ok());
  GrammarMatcher fork = m.Fork();
  EXPECT_TRUE(m.AcceptString(R"(,"m255":1})").ok());
  EXPECT_FALSE(fork.AcceptString(R"(,"m200":)").ok());
  EXPECT_TRUE(fork.AcceptString(R"(,"m199":1,"m255":1})").ok());
  auto over = CompileSchema(compiler, ManyMembers(n + 1, 0, {}, true),
                            JsonPropertyOrder::kAny);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("counts at most " + std::to_string(n) +
                                         " declared"),
            std::string::npos)
      << over.status();
}

// Whitespace and the colon after a name are read from the tables: no
// guarded rule begins with them (a name others extend is called at its
// closing quote) and no stack they lead to can be stranded by what a frame
// counted, so a token holding only them is never read for real. A string's
// closing quote and a name's letters are read for real only from a stack
// inside a dispatch (a token from outside enters one through a separator,
// which is read for real, or into an empty frame). A separator itself is
// read for real only where some frame may refuse it. Masks stay exact along
// random walks in any JSON layout, with names that extend others.
TEST(OnceMembers, WhitespaceAndColonsAreReadFromTheTables) {
  const std::set<std::string> declared = {"ab", "abc", "abd", "b",
                                          "ba", "bb",  "cd",  "d"};
  std::vector<std::string> tokens;
  for (char c : std::string("{}[]\",:abcd1 \n")) tokens.push_back({c});
  for (const char* t : {"  ", "\n  ", " :", "\" :", "\":", "1,", "1 ", "1\n",
                        ",\"", ", \"", ",\n  \"", "\"ab", "ab", "abc", ",\"a",
                        "\"\n", "1}", " }", "\"b\" : 1"}) {
    tokens.push_back(t);
  }
  ClosedIntegersGrammars grammars;
  ASSERT_NO_FATAL_FAILURE(CompileClosedIntegers(
      std::move(tokens), "ws", declared, JsonWhitespace::kAny, &grammars));
  const auto& [vocab, once, plain] = grammars;
  // Tokens read for real from a stack whose top is outside a dispatch, and
  // from one inside.
  const std::vector<uint32_t>& outside =
      once->data().member_checked.outside_dispatch;
  const std::vector<uint32_t>& inside = once->data().member_checked.in_dispatch;
  const std::vector<uint32_t>& with_slack =
      once->data().member_checked.outside_with_slack;
  ASSERT_FALSE(outside.empty()) << "members are not counted at run time";
  ASSERT_FALSE(with_slack.empty()) << "no separator";
  const Vocabulary& v = *vocab;
  for (int32_t id = 0; id < v.size(); ++id) {
    const std::string_view b = v.bytes(id);
    if (v.is_eos(id)) continue;
    if (b.find_first_not_of(" \n:") == b.npos) {
      EXPECT_FALSE(Bit(outside, id) || Bit(inside, id)) << "'" << b << "'";
    }
    if (b == "\"" || b == "a" || b == "b" || b == "c" || b == "d") {
      EXPECT_FALSE(Bit(outside, id)) << "'" << b << "'";
      EXPECT_TRUE(Bit(inside, id)) << "'" << b << "'";
    }
    if (b == "," || b == "}") {
      EXPECT_TRUE(Bit(outside, id) && Bit(inside, id)) << "'" << b << "'";
    }
    // Where every frame has slack, a separator is read for real only with
    // a byte of a dispatch after it; the closing brace always (a required
    // member).
    if (b == "," || b == "1,") {
      EXPECT_FALSE(Bit(with_slack, id)) << "'" << b << "'";
    }
    if (b == ",\"" || b == ",\"a" || b == "}" || b == "1}") {
      EXPECT_TRUE(Bit(with_slack, id)) << "'" << b << "'";
    }
  }
  GrammarMatcher m(*once);
  ASSERT_TRUE(m.AcceptString("{ \"ab\" : 1 ,\n  \"abc\":1, \"abd\" :1").ok());
  EXPECT_FALSE(m.AcceptString(" , \"ab").ok());
  EXPECT_TRUE(m.AcceptString(" , \"b\" :1 }").ok());
  UniformWalksAgainstADirectReading(*once, *plain, declared, 5);
}

// What a matcher keeps between masks counts in MemoryBytes, by which the
// daemon charges a sequence's memory: in 320 alternatives of one object a
// mask keeps the stacks' key (960 nodes, six words or more each) and the
// tokens it read.
TEST(CountedMembers, MemoryBytesCountsWhatAMaskKeeps) {
  GrammarCompiler compiler(TestVocab());
  auto g = CompileSchema(compiler, CountedAlternatives(320),
                         JsonPropertyOrder::kAny);
  ASSERT_TRUE(g.ok()) << g.status();
  GrammarMatcher m(*g);
  ASSERT_TRUE(m.AcceptString(R"({"a":1,"b":")").ok());
  const size_t before = m.MemoryBytes();
  std::vector<uint32_t> row(g->mask_words());
  m.FillNextTokenMask(row.data());
  EXPECT_GE(m.MemoryBytes(), before + 960 * 6 * sizeof(int64_t));
}

// At the root of the names trie, where a frame counted every name beginning
// with "a", the tokens that spell toward such a name only are refused by
// their fates, without a real read, and none is read by key; those toward
// "b", "cd" and "d" are read from the tables. Masks stay exact along random
// walks.
TEST(OnceMembers, TokensTowardUnwrittenNamesAreReadFromTheTables) {
  const std::set<std::string> declared = {"ab", "abc", "abd", "b",
                                          "ba", "bb",  "cd",  "d"};
  std::vector<std::string> tokens;
  for (char c : std::string("{}[]\",:abcd1 \n")) tokens.push_back({c});
  for (const char* t : {"ab", "abc", "ba", "bb", "cd", "\":", "\":1", "1,\"",
                        ",\"", "b\":", "c"}) {
    tokens.push_back(t);
  }
  ClosedIntegersGrammars grammars;
  ASSERT_NO_FATAL_FAILURE(CompileClosedIntegers(
      std::move(tokens), "ws", declared, JsonWhitespace::kAny, &grammars));
  const auto& [vocab, once, plain] = grammars;
  const internal::GrammarData& data = once->data();
  const internal::Pda& pda = data.pda;
  // The root: the dispatch state every name's first letter leaves.
  int32_t root = -1;
  for (const auto& [state, reach] : data.member_checked.reach) {
    bool all = true;
    for (char c : std::string("abcd")) {
      all = all &&
            pda.Next(state, static_cast<uint8_t>(c)) != internal::Pda::kDead;
    }
    if (all) root = state;
  }
  ASSERT_GE(root, 0) << "no names trie";
  const int32_t after_a = pda.Next(root, 'a');
  MemberSet written;
  for (const auto& [state, reach] : data.member_checked.reach) {
    if (state == after_a) written = reach;
  }
  ASSERT_FALSE(written.empty());
  const internal::MemberCheckedTokens::Filter filter =
      data.member_checked.For(pda, *data.index, root, written, false);
  ASSERT_NE(filter.keyed, nullptr);
  std::set<std::string> by_key, refused;
  for (const auto& group : filter.keyed->groups) {
    if (!group.always && !group.key.Intersects(written)) continue;
    for (int32_t id : group.tokens)
      by_key.insert(std::string(vocab->bytes(id)));
  }
  for (const auto& fate : filter.keyed->fates) {
    if (!fate.Refused(written)) continue;
    for (int32_t id : fate.tokens)
      refused.insert(std::string(vocab->bytes(id)));
  }
  EXPECT_TRUE(by_key.empty()) << *by_key.begin();
  EXPECT_EQ(refused, (std::set<std::string>{"a", "ab", "abc"}));
  UniformWalksAgainstADirectReading(*once, *plain, declared, 5);
}

}  // namespace
}  // namespace grammard::grammar
