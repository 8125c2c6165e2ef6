#include "grammar/frontends/structural_tag/structural_tag.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"
#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

constexpr char kWeatherSpec[] = R"({
  "type": "structural_tag",
  "structures": [
    {"begin": "<function=get_weather>",
     "schema": {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"], "additionalProperties": false},
     "end": "</function>"},
    {"begin": "<function=get_time>",
     "schema": {"type": "object", "properties": {"tz": {"type": "string"}},
                "required": ["tz"], "additionalProperties": false},
     "end": "</function>"}
  ],
  "triggers": ["<function="]
})";

// The printable ASCII characters one by one, a few longer pieces, then EOS.
std::shared_ptr<const Vocabulary> TestVocabulary() {
  std::vector<std::string> tokens;
  for (char c = ' '; c <= '~'; ++c) tokens.push_back(std::string(1, c));
  for (const char* t : {"\n", "<function=", "<function=get_weather>",
                        "<function=other>", "</function>", "{\"city\": ",
                        "\"Paris\"", "}", "lo <fun", "\xc3\xa9"}) {
    tokens.push_back(t);
  }
  tokens.push_back("</s>");
  const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
  return *Vocabulary::FromTokens(tokens, {eos}, {eos}, {});
}

class StructuralTagTest : public testing::Test {
 protected:
  CompiledGrammar Compile(const std::string& spec,
                          const JsonSchemaOptions& options = {}) {
    absl::StatusOr<StructuralTagResult> r = StructuralTagGrammar(spec, options);
    EXPECT_TRUE(r.ok()) << r.status();
    absl::StatusOr<CompiledGrammar> compiled = compiler_.Compile(r->grammar);
    EXPECT_TRUE(compiled.ok()) << compiled.status() << "\n"
                               << r->grammar.ToString();
    return *compiled;
  }

  static bool Complete(const CompiledGrammar& g, const std::string& text) {
    GrammarMatcher m(g);
    return m.AcceptString(text).ok() && m.CanTerminate();
  }
  static bool Prefix(const CompiledGrammar& g, const std::string& text) {
    GrammarMatcher m(g);
    return m.AcceptString(text).ok();
  }

  GrammarCompiler compiler_{TestVocabulary()};
};

TEST_F(StructuralTagTest, AcceptsFreeTextAndTags) {
  CompiledGrammar g = Compile(kWeatherSpec);
  const std::string weather =
      R"(<function=get_weather>{"city": "Paris"}</function>)";
  const std::string time = R"(<function=get_time>{"tz":"UTC"}</function>)";
  for (const std::string& text : {
           std::string(""),
           std::string("Hello, world!\n"),
           std::string("caf\xc3\xa9 \xe2\x98\x95 <fun <function <<func=x>"),
           std::string("a <function\n=b function= </function>"),
           weather,
           "Let me check. " + weather,
           weather + " Done.",
           "First " + weather + " then " + time + " and done.",
           weather + time,
           "<" + weather,
       }) {
    EXPECT_TRUE(Complete(g, text)) << text;
  }
}

TEST_F(StructuralTagTest, RejectsBrokenTags) {
  CompiledGrammar g = Compile(kWeatherSpec);
  for (const char* text : {
           R"(<function=get_wind>{"city": "Paris"}</function>)",
           R"(<function=get_weather>{"city": 1}</function>)",
           R"(<function=get_weather>{"town": "Paris"}</function>)",
           R"(<function=get_weather>{"city": "Paris"}</func>)",
           R"(<function=get_weather>{"city": "Paris"} </function>x<function=)",
       }) {
    EXPECT_FALSE(Prefix(g, text)) << text;
  }
  // Unfinished tags are prefixes, never complete texts.
  for (const char* text : {
           "<function=",
           "x <function=get_",
           R"(<function=get_weather>{"city": "Paris"})",
           R"(<function=get_weather>{"city": "Paris"}</function)",
       }) {
    EXPECT_TRUE(Prefix(g, text)) << text;
    EXPECT_FALSE(Complete(g, text)) << text;
  }
}

// A tool's uniqueItems kept at run time (distinct rules) stays kept once
// its schema's rules are copied into the tag grammar.
TEST_F(StructuralTagTest, UniqueItemsHoldInsideATag) {
  CompiledGrammar g = Compile(R"({
    "structures": [{"begin": "<function=tag>",
      "schema": {"type": "array", "items": {"type": "string"},
                 "uniqueItems": true},
      "end": "</function>"}],
    "triggers": ["<function="]})");
  EXPECT_TRUE(Complete(g, R"(<function=tag>["a", "b"]</function>)"));
  EXPECT_FALSE(Prefix(g, R"(<function=tag>["a", "a"])"));
  // Each call is an array of its own.
  EXPECT_TRUE(Complete(
      g, R"(<function=tag>["a"]</function><function=tag>["a"]</function>)"));
}

TEST_F(StructuralTagTest, CanTerminateOnlyOutsideTags) {
  CompiledGrammar g = Compile(kWeatherSpec);
  const std::string text = R"(ab<function=get_time>{"tz": "UTC"}</function>cd)";
  const size_t tag_open = text.find('=') + 1;  // the trigger is complete
  const size_t tag_close = text.rfind('>') + 1;
  GrammarMatcher m(g);
  EXPECT_TRUE(m.CanTerminate());
  for (size_t i = 0; i < text.size(); ++i) {
    ASSERT_TRUE(m.AcceptString(text.substr(i, 1)).ok()) << i;
    const size_t read = i + 1;
    EXPECT_EQ(m.CanTerminate(), read < tag_open || read >= tag_close)
        << text.substr(0, read);
  }
}

TEST_F(StructuralTagTest, MaskFollowsTags) {
  CompiledGrammar g = Compile(kWeatherSpec);
  const Vocabulary& vocab = compiler_.vocabulary();
  auto allowed = [&](const GrammarMatcher& m, std::string_view token) {
    std::vector<uint32_t> row(g.mask_words());
    const_cast<GrammarMatcher&>(m).FillNextTokenMask(row.data());
    for (int32_t id = 0; id < vocab.size(); ++id) {
      if ((token == "EOS" ? vocab.is_eos(id) : vocab.bytes(id) == token)) {
        return ((row[id / 32] >> (id % 32)) & 1) != 0;
      }
    }
    ADD_FAILURE() << "no token " << token;
    return false;
  };
  GrammarMatcher m(g);
  EXPECT_TRUE(allowed(m, "<function="));
  EXPECT_TRUE(allowed(m, "<function=get_weather>"));
  EXPECT_FALSE(allowed(m, "<function=other>"));
  EXPECT_TRUE(allowed(m, "lo <fun"));
  EXPECT_TRUE(allowed(m, "EOS"));
  ASSERT_TRUE(m.AcceptString("<function=get_weather>").ok());
  EXPECT_FALSE(allowed(m, "EOS"));
  EXPECT_FALSE(allowed(m, "lo <fun"));
  EXPECT_TRUE(allowed(m, "{\"city\": "));
  ASSERT_TRUE(m.AcceptString("{\"city\": \"Paris\"}").ok());
  EXPECT_TRUE(allowed(m, "</function>"));
  EXPECT_FALSE(allowed(m, "EOS"));
  ASSERT_TRUE(m.AcceptString("</function>").ok());
  EXPECT_TRUE(allowed(m, "EOS"));
  EXPECT_TRUE(allowed(m, "<function=get_weather>"));
}

// Free text is a loop, not a growing stack: a long text stays cheap to
// match, and a tag after it still works.
TEST_F(StructuralTagTest, LongFreeText) {
  CompiledGrammar g = Compile(kWeatherSpec);
  std::string text;
  while (text.size() < 200000) text += "lorem <fun ipsum <\xc3\xa9 function= ";
  GrammarMatcher m(g);
  for (size_t i = 0; i < text.size(); i += 7) {
    ASSERT_TRUE(m.AcceptString(text.substr(i, 7)).ok()) << i;
  }
  EXPECT_TRUE(m.CanTerminate());
  ASSERT_TRUE(
      m.AcceptString(R"(<function=get_weather>{"city":"x"}</function>)").ok());
  EXPECT_TRUE(m.CanTerminate());
}

TEST_F(StructuralTagTest, TriggersThatArePrefixesOrSuffixesOfOthers) {
  // "<f" is seen before "<fun": structures of both start right after it.
  CompiledGrammar prefixes = Compile(R"({
    "structures": [{"begin": "<fun=a>", "schema": {"type": "integer"},
                    "end": "</fun>"},
                   {"begin": "<fx>", "schema": {"type": "integer"},
                    "end": ";"}],
    "triggers": ["<fun", "<f"]})");
  EXPECT_TRUE(Complete(prefixes, "a <fun=a>12</fun> <fx>3; <g"));
  EXPECT_FALSE(Prefix(prefixes, "a <fo"));
  EXPECT_FALSE(Prefix(prefixes, "<fun=b"));
  // "ab" and its suffix "b" end together: either may start the tag.
  CompiledGrammar suffixes = Compile(R"({
    "structures": [{"begin": "ab[", "schema": {"type": "integer"},
                    "end": ";"},
                   {"begin": "b]", "schema": {"type": "integer"},
                    "end": ";"}],
    "triggers": ["ab", "b"]})");
  for (const char* text : {"ab[1;", "ab]1;", "xab[1;", "c b]2;a"}) {
    EXPECT_TRUE(Complete(suffixes, text)) << text;
  }
  EXPECT_FALSE(Prefix(suffixes, "xb["));
  EXPECT_FALSE(Prefix(suffixes, "bb"));
}

// A trigger no structure starts with is simply forbidden; triggers may
// repeat.
TEST_F(StructuralTagTest, TriggerWithoutStructure) {
  CompiledGrammar g = Compile(R"({
    "structures": [{"begin": "<a>", "schema": true, "end": "</a>"}],
    "triggers": ["<a>", "<a>", "STOP"]})");
  EXPECT_TRUE(Complete(g, "<a>[1, \"x\"]</a> STO P"));
  EXPECT_FALSE(Prefix(g, "xSTOP"));
}

TEST_F(StructuralTagTest, LenientDropsArePrefixedWithTheStructure) {
  const std::string spec = R"({
    "structures": [{"begin": "<a>", "schema": {"type": "integer"}, "end": ""},
                   {"begin": "<b>", "end": "",
                    "schema": {"type": "array", "uniqueItems": true,
                               "items": {"maximum": 3}}}],
    "triggers": ["<"]})";
  JsonSchemaOptions lenient;
  lenient.strict = false;
  absl::StatusOr<StructuralTagResult> r = StructuralTagGrammar(spec, lenient);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->dropped.size(), 1u);
  EXPECT_EQ(r->dropped[0].keyword, "uniqueItems");
  EXPECT_EQ(r->dropped[0].pointer, "/structures/1/schema#/uniqueItems");
  // Strict mode refuses the same spec, naming the structure.
  absl::StatusOr<StructuralTagResult> strict = StructuralTagGrammar(spec, {});
  EXPECT_EQ(strict.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(strict.status().message().find("/structures/1/schema: "),
            std::string::npos)
      << strict.status();
}

TEST(StructuralTagErrorsTest, NameTheProblemAndWhere) {
  struct Case {
    const char* spec;
    absl::StatusCode code;
    const char* message;
  };
  constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  const Case cases[] = {
      {"{", kInvalid, "not valid JSON"},
      {"[]", kInvalid, "must be a JSON object"},
      {R"({"structures": []})", kInvalid, "/triggers: missing"},
      {R"({"structures": [], "triggers": []})", kInvalid, "/triggers: must"},
      {R"({"structures": [], "triggers": ["<a>", ""]})", kInvalid,
       "/triggers/1: must be a non-empty string"},
      {R"({"triggers": ["<"]})", kInvalid, "/structures: missing"},
      {R"({"type": "regex", "structures": [], "triggers": ["<"]})", kInvalid,
       "/type: must be \"structural_tag\""},
      {R"({"format": {}, "structures": [], "triggers": ["<"]})", kInvalid,
       "/format: unknown key"},
      {R"({"structures": [{"begin": "<a>", "schema": {}, "end": "",
                           "extra": 1}], "triggers": ["<"]})",
       kInvalid, "/structures/0/extra: unknown key"},
      {R"({"structures": [{"begin": "", "schema": {}, "end": ""}],
           "triggers": ["<"]})",
       kInvalid, "/structures/0/begin: must not be empty"},
      {R"({"structures": [{"begin": "<a>", "schema": {}, "end": ""},
                          {"begin": "[b]", "schema": {}, "end": ""}],
           "triggers": ["<"]})",
       kInvalid, "/structures/1/begin: starts with none of the triggers"},
      {R"({"structures": [{"begin": "<a>", "schema": {}}],
           "triggers": ["<"]})",
       kInvalid, "/structures/0/end: missing"},
      {R"({"structures": [{"begin": "<a>", "end": ""}], "triggers": ["<"]})",
       kInvalid, "/structures/0/schema: missing"},
      {R"({"structures": [{"begin": "<a>", "schema": 3, "end": ""}],
           "triggers": ["<"]})",
       kInvalid, "/structures/0/schema: must be a JSON schema"},
      {R"({"structures": [{"begin": "<a>", "schema": {"type": 5},
                           "end": ""}], "triggers": ["<"]})",
       kInvalid, "/structures/0/schema: "},
      {R"({"structures": [{"begin": "<a>", "end": "",
                           "schema": {"$ref": "https://x.test/s.json"}}],
           "triggers": ["<"]})",
       absl::StatusCode::kNotFound, "/structures/0/schema: "},
  };
  // A schema is bounded as deep as one sent on its own, well inside the
  // spec's own bound.
  const std::string deep_schema =
      R"({"structures": [{"begin": "<a>", "end": "", "schema": {"const": )" +
      std::string(600, '[') + std::string(600, ']') +
      R"(}}], "triggers": ["<"]})";
  absl::StatusOr<StructuralTagResult> deep = StructuralTagGrammar(deep_schema);
  EXPECT_NE(deep.status().message().find(
                "/structures/0/schema: JSON nested deeper than 512 levels"),
            std::string::npos)
      << deep.status();
  for (const Case& c : cases) {
    absl::StatusOr<StructuralTagResult> r = StructuralTagGrammar(c.spec);
    EXPECT_EQ(r.status().code(), c.code) << c.spec << "\n" << r.status();
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << c.spec << "\n"
        << r.status();
  }
}

// Brute force over a small alphabet full of trigger characters: the matcher
// must agree, byte by byte, with a direct reading of the semantics. No text
// here can hold a whole tag (the schemas want digits), so a text is complete
// iff no trigger occurs in it, and a prefix iff it has no trigger or, where
// the first trigger occurrence ends, it continues as (a prefix of) the begin
// of a structure that starts with a trigger ending there.
class FreeTextOracle {
 public:
  FreeTextOracle(std::vector<std::string> triggers,
                 std::vector<std::string> begins)
      : triggers_(std::move(triggers)), begins_(std::move(begins)) {}

  bool Complete(const std::string& text) const {
    return FirstEnd(text) == std::string::npos;
  }
  bool Prefix(const std::string& text) const {
    const size_t end = FirstEnd(text);
    if (end == std::string::npos) return true;
    for (const std::string& t : triggers_) {
      if (!EndsAt(text, t, end)) continue;
      const std::string rest = text.substr(end - t.size());
      for (const std::string& b : begins_) {
        if (b.rfind(t, 0) == 0 && b.compare(0, rest.size(), rest) == 0 &&
            rest.size() <= b.size()) {
          return true;
        }
      }
    }
    return false;
  }

 private:
  static bool EndsAt(const std::string& text, const std::string& t,
                     size_t end) {
    return end >= t.size() && text.compare(end - t.size(), t.size(), t) == 0;
  }
  // Where the first trigger occurrence to end ends, or npos.
  size_t FirstEnd(const std::string& text) const {
    for (size_t end = 1; end <= text.size(); ++end) {
      for (const std::string& t : triggers_) {
        if (EndsAt(text, t, end)) return end;
      }
    }
    return std::string::npos;
  }

  std::vector<std::string> triggers_;
  std::vector<std::string> begins_;
};

TEST_F(StructuralTagTest, FreeTextAgreesWithSubstringOracle) {
  // "<f" prefixes "<fun"; "nnu<" and "unu" overlap themselves and each
  // other (so the automaton falls back to states other than its start);
  // "u<" ends where "nnu<" does; "xx" starts no structure.
  CompiledGrammar g = Compile(R"({
    "structures": [
      {"begin": "<funx", "schema": {"type": "integer"}, "end": ";"},
      {"begin": "<fx", "schema": {"type": "integer"}, "end": ";"},
      {"begin": "nnu<n", "schema": {"type": "integer"}, "end": ";"},
      {"begin": "unu<", "schema": {"type": "integer"}, "end": ";"},
      {"begin": "u<x", "schema": {"type": "integer"}, "end": ";"}],
    "triggers": ["<fun", "<f", "nnu<", "unu", "u<", "xx"]})");
  const FreeTextOracle oracle({"<fun", "<f", "nnu<", "unu", "u<", "xx"},
                              {"<funx", "<fx", "nnu<n", "unu<", "u<x"});
  const std::string alphabet = "<funx";

  int checked = 0;
  auto check = [&](const std::string& text) {
    GrammarMatcher m(g);
    for (size_t i = 0; i < text.size(); ++i) {
      const std::string prefix = text.substr(0, i + 1);
      const bool ok = m.AcceptString(text.substr(i, 1)).ok();
      ASSERT_EQ(ok, oracle.Prefix(prefix)) << prefix;
      if (!ok) return;
      ASSERT_EQ(m.CanTerminate(), oracle.Complete(prefix)) << prefix;
      ++checked;
    }
  };
  // Every text of 7 characters (and so every shorter one, as a prefix) ...
  std::string text(7, alphabet[0]);
  for (int n = 0; n < 78125; ++n) {  // 5^7
    for (int i = 0, v = n; i < 7; ++i, v /= 5) text[i] = alphabet[v % 5];
    check(text);
    if (HasFatalFailure()) return;
  }
  // ... and random longer ones.
  std::mt19937 rng(42);
  for (int n = 0; n < 3000; ++n) {
    std::string t(8 + rng() % 17, ' ');
    for (char& c : t) c = alphabet[rng() % alphabet.size()];
    check(t);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(checked, 100000);
}

}  // namespace
}  // namespace grammard::grammar
