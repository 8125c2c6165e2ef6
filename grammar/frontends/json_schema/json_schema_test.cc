// Per-keyword tests of JsonSchemaToGrammar: each grammar is lowered to bytes
// and checked with the Earley oracle on texts the schema accepts and
// rejects.
#include "grammar/frontends/json_schema/json_schema.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grammar/ir/utf8_lowering.h"
#include "grammar/testing/earley_oracle.h"
#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

// The Earley oracle of `schema`'s grammar, or nullopt after a failure
// saying why there is none.
std::optional<EarleyOracle> OracleFor(const std::string& schema,
                                      const JsonSchemaOptions& options = {}) {
  absl::StatusOr<JsonSchemaResult> r = JsonSchemaToGrammar(schema, options);
  if (!r.ok()) {
    ADD_FAILURE() << schema << ": " << r.status();
    return std::nullopt;
  }
  absl::StatusOr<Grammar> bytes = LowerToBytes(r->grammar);
  if (!bytes.ok()) {
    ADD_FAILURE() << schema << ": " << bytes.status();
    return std::nullopt;
  }
  absl::StatusOr<EarleyOracle> oracle = EarleyOracle::Create(*bytes);
  if (!oracle.ok()) {
    ADD_FAILURE() << schema << ": " << oracle.status();
    return std::nullopt;
  }
  return *std::move(oracle);
}

// Converts `schema` and expects `good` texts accepted and `bad` rejected.
void Expect(const std::string& schema, const std::vector<std::string>& good,
            const std::vector<std::string>& bad,
            const JsonSchemaOptions& options = {}) {
  absl::StatusOr<JsonSchemaResult> r = JsonSchemaToGrammar(schema, options);
  ASSERT_TRUE(r.ok()) << schema << ": " << r.status();
  absl::StatusOr<Grammar> bytes = LowerToBytes(r->grammar);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<EarleyOracle> oracle = EarleyOracle::Create(*bytes);
  ASSERT_TRUE(oracle.ok()) << oracle.status();
  for (const std::string& t : good) {
    EXPECT_TRUE(oracle->Check(t) & EarleyOracle::kComplete)
        << schema << " should accept " << t << "\n"
        << r->grammar.ToString();
  }
  for (const std::string& t : bad) {
    EXPECT_FALSE(oracle->Check(t) & EarleyOracle::kComplete)
        << schema << " should reject " << t << "\n"
        << r->grammar.ToString();
  }
}

// Expects strict mode to refuse `schema` with a message naming `pointer`.
void ExpectRefused(const std::string& schema, const std::string& pointer) {
  absl::StatusOr<JsonSchemaResult> r = JsonSchemaToGrammar(schema);
  ASSERT_FALSE(r.ok()) << schema;
  EXPECT_NE(r.status().message().find(pointer), std::string::npos)
      << r.status();
}

// A caller who parsed the schema gets the grammar the text gives, under
// the same bounds.
TEST(JsonSchemaTest, AParsedSchemaGivesTheGrammarItsTextGives) {
  for (const char* schema :
       {R"({"type": "object", "properties": {"b": {"enum": [1, "x"]},
            "a": {"type": "string", "pattern": "^[a-z]+$"}},
            "required": ["a"]})",
        R"({"$defs": {"n": {"anyOf": [{"type": "integer"},
            {"type": "array", "items": {"$ref": "#/$defs/n"}}]}},
            "$ref": "#/$defs/n"})",
        "true"}) {
    absl::StatusOr<JsonSchemaResult> text = JsonSchemaToGrammar(schema);
    absl::StatusOr<JsonSchemaResult> parsed =
        ParsedJsonSchemaToGrammar(nlohmann::ordered_json::parse(schema));
    ASSERT_TRUE(text.ok() && parsed.ok()) << schema;
    EXPECT_TRUE(StructurallyEqual(text->grammar, parsed->grammar)) << schema;
  }
  const std::string deep = std::string(600, '[') + std::string(600, ']');
  const std::string schema = R"({"const": )" + deep + "}";
  EXPECT_EQ(JsonSchemaToGrammar(schema).status(),
            ParsedJsonSchemaToGrammar(nlohmann::ordered_json::parse(schema))
                .status());
  EXPECT_FALSE(JsonSchemaToGrammar(schema).ok());
}

TEST(JsonSchemaTest, Types) {
  Expect(R"({"type": "integer"})", {"0", "-12", "1.0", "10"},
         {"1.5", "\"1\"", "01", "-0", "null"});
  Expect(R"({"type": ["string", "null"]})", {"null", "\"a\"", "\"\\u0041\""},
         {"1", "true", "[]"});
  Expect(R"({"type": "number"})", {"1", "-1.5e10", "0.25"}, {"+1", ".5"});
  Expect(R"({"type": "boolean"})", {"true", "false"}, {"null", "1"});
  Expect("true", {"1", "{\"a\":[null]}"}, {"nul"});
  Expect("false", {}, {"1", "null", "{}"});
}

TEST(JsonSchemaTest, EnumAndConst) {
  Expect(R"({"enum": [1, "a", null, {"k": [true]}]})",
         {"1", "1.0", "\"a\"", "null", "{\"k\":[true]}"},
         {"2", "\"b\"", "{}", "true"});
  Expect(R"({"const": 5, "type": "integer"})", {"5"}, {"6"});
  Expect(R"({"enum": [1, "a"], "type": "string"})", {"\"a\""}, {"1"});
}

TEST(JsonSchemaTest, NumericBounds) {
  Expect(R"({"type": "integer", "minimum": -5, "exclusiveMaximum": 100})",
         {"-5", "0", "99"}, {"-6", "100", "1000"});
  Expect(R"({"type": "integer", "minimum": 1000000000000000000000})",
         {"1000000000000000000000", "99999999999999999999999"},
         {"999999999999999999999", "5"});
  Expect(R"({"type": "number", "maximum": 2.5})", {"2.5", "-3", "2.49"},
         {"2.51", "3"});
  Expect(R"({"type": "integer", "multipleOf": 3, "minimum": 0})",
         {"0", "3", "300"}, {"1", "-3", "4"});
}

TEST(JsonSchemaTest, Strings) {
  Expect(R"({"type": "string", "minLength": 2, "maxLength": 3})",
         {"\"ab\"", "\"abc\"", "\"\\u00e9a\""}, {"\"a\"", "\"abcd\""});
  Expect(R"({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3})",
         {"\"abc\""}, {"\"abcd\"", "\"aB\"", "\"\""});
  Expect(R"({"type": "string", "pattern": "b+"})", {"\"abba\"", "\"b\""},
         {"\"ac\""});
  // Anchors inside a group that is a whole alternative.
  Expect(R"js({"type": "string", "pattern": "^$|(^[0-9]+$)|(?:x)"})js",
         {"\"\"", "\"12\"", "\"axb\""}, {"\"1a\"", "\"a\""});
}

TEST(JsonSchemaTest, LongLengths) {
  // A minLength past the regex parsers' repeat bound (10000) is counted in
  // the grammar (the oracle is too slow for such strings, so the bound is
  // read off the grammar); past what a grammar unrolls, refused.
  absl::StatusOr<JsonSchemaResult> r =
      JsonSchemaToGrammar(R"({"type": "string", "minLength": 32767})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->grammar.ToString().find("{32767,}"), std::string::npos)
      << r->grammar.ToString();
  ExpectRefused(R"({"type": "string", "minLength": 1000000})", "#/minLength");
  // A maxLength up to 256 is counted in the grammar, a longer one at run
  // time (a rule with max_chars), up to any bound.
  auto counted_to = [](const JsonSchemaResult& result) {
    int32_t bound = -1;
    for (const Rule& rule : result.grammar.rules) {
      bound = std::max(bound, rule.max_chars);
    }
    return bound;
  };
  r = JsonSchemaToGrammar(R"({"type": "string", "maxLength": 256})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(counted_to(*r), -1);
  EXPECT_NE(r->grammar.ToString().find("{0,256}"), std::string::npos);
  for (int64_t bound : {257, 32767, 1000000}) {
    r = JsonSchemaToGrammar(absl::StrCat(
        R"({"type": "string", "minLength": 3, "maxLength": )", bound, "}"));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(counted_to(*r), bound);
  }
}

TEST(JsonSchemaTest, PatternDotsFollowEcmaScript) {
  // `.` matches no line terminator in ECMAScript.
  Expect(R"({"type": "string", "pattern": "^a.b$"})", {"\"axb\"", "\"a\\tb\""},
         {"\"a\\nb\"", "\"a\\rb\"", "\"a\u2028b\""});
}

TEST(JsonSchemaTest, Formats) {
  Expect(R"({"type": "string", "format": "date"})", {"\"2024-02-29\""},
         {"\"2023-02-29\"", "\"2024-13-01\""});
  Expect(R"({"type": "string", "format": "ipv4"})", {"\"192.168.0.1\""},
         {"\"256.1.1.1\"", "\"1.2.3\""});
  Expect(R"({"type": "string", "format": "uuid"})",
         {"\"123e4567-e89b-12d3-a456-426614174000\""}, {"\"123e4567\""});
}

TEST(JsonSchemaTest, Objects) {
  const std::string schema = R"({
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
    "required": ["a"],
    "additionalProperties": false})";
  Expect(schema, {"{\"a\":1}", "{\"a\":1,\"b\":\"x\"}"},
         {"{}", "{\"b\":\"x\"}", "{\"a\":1,\"c\":2}", "{\"a\":\"1\"}",
          "{\"b\":\"x\",\"a\":1}"});
  JsonSchemaOptions required_first;
  required_first.property_order = JsonPropertyOrder::kRequiredFirst;
  Expect(R"({"properties": {"a": {}, "b": {}}, "required": ["b"]})",
         {"{\"b\":1,\"a\":2}", "{\"b\":1}"}, {"{\"a\":2,\"b\":1}"},
         required_first);
  JsonSchemaOptions any_order;
  any_order.property_order = JsonPropertyOrder::kAny;
  Expect(schema, {"{\"b\":\"x\",\"a\":1}"}, {"{\"a\":1,\"a\":1}"}, any_order);
  // Any order up to six declared properties; as written past them.
  JsonSchemaOptions when_small;
  when_small.property_order = JsonPropertyOrder::kAnyWhenSmall;
  Expect(schema, {"{\"b\":\"x\",\"a\":1}", "{\"a\":1,\"b\":\"x\"}"},
         {"{\"a\":1,\"a\":1}", "{\"b\":\"x\"}"}, when_small);
  Expect(R"({"properties": {"p1": {}, "p2": {}, "p3": {}, "p4": {},
                            "p5": {}, "p6": {}, "p7": {}},
             "additionalProperties": false})",
         {"{\"p1\":1,\"p7\":2}"}, {"{\"p7\":2,\"p1\":1}"}, when_small);
  // Larger objects in any order too, declared members repeatable; required
  // ones still required, every occurrence checked.
  JsonSchemaOptions repeatable;
  repeatable.property_order = JsonPropertyOrder::kAnyRepeatable;
  const std::string seven = R"({"properties": {"p1": {}, "p2": {}, "p3": {},
      "p4": {}, "p5": {}, "p6": {}, "p7": {"type": "integer"}},
      "required": ["p7", "p2"], "additionalProperties": false)";
  Expect(seven + "}",
         {"{\"p7\":2,\"p2\":1}", "{\"p2\":1,\"p1\":0,\"p7\":2}",
          "{\"p7\":2,\"p2\":1,\"p7\":3}"},
         {"{\"p7\":2}", "{\"p2\":1,\"p1\":0}",
          "{\"p7\":2,\"p2\":1,\"p7\":\"x\"}", "{\"p7\":2,\"p2\":1,\"q\":1}"},
         repeatable);
  Expect(schema, {"{\"b\":\"x\",\"a\":1}"}, {"{\"a\":1,\"a\":1}"}, repeatable);
  // Counting members needs each name once: as written.
  Expect(seven + R"(, "maxProperties": 3})", {"{\"p2\":1,\"p7\":2}"},
         {"{\"p7\":2,\"p2\":1}", "{\"p2\":1,\"p2\":1,\"p7\":2}"}, repeatable);
  Expect(R"({"patternProperties": {"^x": {"type": "integer"}},
             "additionalProperties": {"type": "string"}})",
         {"{\"x1\":1,\"y\":\"s\"}", "{}"}, {"{\"x1\":\"s\"}", "{\"y\":1}"});
  // Many patterns, some overlapping: each name gets every schema whose
  // pattern it matches (there were once at most six).
  std::string many = R"({"patternProperties": {)";
  for (int i = 0; i < 10; ++i) {
    absl::StrAppend(&many, R"("^p)", i, R"(_": {"type": "integer"}, )");
  }
  many += R"("_$": {"minimum": 5}}, "additionalProperties": false})";
  Expect(many, {"{\"p3_x\":1}", "{\"p9_\":5,\"p0_a\":-1}", "{\"q_\":6}", "{}"},
         {"{\"p3_x\":\"s\"}", "{\"p9_\":4}", "{\"q\":1}", "{\"q_\":4}"});
  Expect(R"({"propertyNames": {"maxLength": 2}, "minProperties": 1,
             "maxProperties": 2})",
         {"{\"ab\":1}", "{\"a\":1,\"b\":2}"},
         {"{}", "{\"abc\":1}", "{\"a\":1,\"b\":2,\"c\":3}"});
  Expect(R"({"dependentRequired": {"a": ["b"]}})",
         {"{\"b\":1}", "{\"a\":1,\"b\":2}", "{\"b\":2,\"a\":1}"}, {"{\"a\":1}"},
         any_order);
}

TEST(JsonSchemaTest, ObjectStatesShareTheirPieces) {
  // Six members in any order: 64 states, each choosing among the members
  // left, and a key that is none of the six names. References to a rule,
  // separators, brackets and the escaped and multi-byte forms of a key's
  // characters are one expression each, not one per use.
  JsonSchemaOptions any_order;
  any_order.property_order = JsonPropertyOrder::kAny;
  absl::StatusOr<JsonSchemaResult> r = JsonSchemaToGrammar(
      R"({"properties": {"alpha": {}, "bravo": {}, "charlie": {},
                         "delta": {}, "echo": {}, "foxtrot": {}}})",
      any_order);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(r->grammar.exprs.size(), 1000u);  // 1,762 with copies
}

TEST(JsonSchemaTest, NamesWhoseValuesShareASchemaShareOneKey) {
  // A pattern whose value is what additionalProperties allows anyway
  // constrains nothing: the object is any object, with no key automaton
  // counting to 255 (a first mask's walk of the vocabulary per count).
  const std::string counted =
      R"({"type": "object", "patternProperties": {"^.{1,255}$": {}}})";
  absl::StatusOr<JsonSchemaResult> plain =
      JsonSchemaToGrammar(R"({"type": "object"})");
  absl::StatusOr<JsonSchemaResult> patterned = JsonSchemaToGrammar(counted);
  ASSERT_TRUE(plain.ok() && patterned.ok());
  EXPECT_LE(patterned->grammar.exprs.size(),
            plain->grammar.exprs.size() + 40);  // 1,678 apart
  Expect(counted,
         {"{}", "{\"\":1}", "{\"" + std::string(300, 'k') + "\":[1]}",
          "{\"a\":{},\"b\":2}"},
         {"{\"a\"}", "[]"});
  // Two patterns and the other names, all integers: one key for all three,
  // still typed.
  Expect(R"({"patternProperties": {"^x": {"type": "integer"},
                                   "^y": {"type": "integer"}},
             "additionalProperties": {"type": "integer"}})",
         {"{\"x1\":1,\"y\":2,\"z\":3}", "{}"},
         {"{\"x1\":\"s\"}", "{\"z\":\"s\"}"});
}

TEST(JsonSchemaTest, Unevaluated) {
  Expect(R"({"properties": {"a": true}, "unevaluatedProperties": false})",
         {"{\"a\":1}", "{}"}, {"{\"b\":1}"});
  Expect(R"({"prefixItems": [true], "unevaluatedItems": {"type": "null"}})",
         {"[1,null]"}, {"[1,2]"});
  // allOf and $ref always apply, so what they evaluate is known.
  Expect(R"({"allOf": [{"properties": {"a": true}}],
             "$ref": "#/$defs/b", "$defs": {"b": {"patternProperties":
                                                   {"^x": true}}},
             "unevaluatedProperties": false})",
         {"{\"a\":1}", "{\"x1\":1}"}, {"{\"b\":1}"});
  // anyOf evaluates what its passing branches do: not known statically.
  ExpectRefused(R"({"anyOf": [{"properties": {"a": true}}],
                    "unevaluatedProperties": false})",
                "#/unevaluatedProperties");
}

TEST(JsonSchemaTest, Arrays) {
  Expect(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1,
             "maxItems": 3})",
         {"[1]", "[1,2,3]"}, {"[]", "[1,2,3,4]", "[\"a\"]"});
  Expect(R"({"prefixItems": [{"type": "string"}], "items": false})",
         {"[]", "[\"a\"]"}, {"[\"a\",1]", "[1]"});
  Expect(R"({"contains": {"type": "string"}, "minContains": 2,
             "maxContains": 2})",
         {"[\"a\",1,\"b\"]"}, {"[\"a\"]", "[\"a\",\"b\",\"c\"]", "[]"});
  Expect(R"({"items": {"enum": [1, 2, 3]}, "uniqueItems": true})",
         {"[]", "[1,2]", "[3,1,2]"}, {"[1,1]", "[1,2,1]", "[4]"});
  Expect(R"({"$schema": "http://json-schema.org/draft-07/schema#",
             "items": [{"type": "integer"}], "additionalItems": false})",
         {"[1]"}, {"[1,2]"});
}

// Several contains on one array, each with its own bounds, against a
// direct count over every array of up to 4 items from a small alphabet.
TEST(JsonSchemaTest, SeveralContainsAreCountedTogether) {
  struct Contains {
    const char* schema;
    int min;
    int max;  // -1: none
    bool (*matches)(const std::string& item);
  };
  auto integer = [](const std::string& v) { return v == "1" || v == "2"; };
  // minimum constrains numbers only: every other value passes.
  auto big = [](const std::string& v) { return v != "1"; };
  auto string = [](const std::string& v) { return v[0] == '"'; };
  const std::vector<std::vector<Contains>> cases = {
      {{R"({"type": "integer"})", 1, -1, integer},
       {R"({"type": "string"})", 1, -1, string}},
      {{R"({"type": "integer"})", 2, 3, integer},
       {R"({"minimum": 2})", 1, 1, big}},
      {{R"({"type": "integer"})", 0, 1, integer},
       {R"({"type": "string"})", 2, -1, string},
       {R"({"minimum": 2})", 1, -1, big}},
  };
  const std::vector<std::string> alphabet = {"1", "2", "\"a\"", "true"};
  for (const std::vector<Contains>& contains : cases) {
    std::string schema = R"({"allOf": [)";
    for (size_t i = 0; i < contains.size(); ++i) {
      const Contains& c = contains[i];
      absl::StrAppend(
          &schema, i ? "," : "", R"({"contains": )", c.schema,
          R"(, "minContains": )", c.min,
          c.max >= 0 ? absl::StrCat(R"(, "maxContains": )", c.max) : "", "}");
    }
    schema += "]}";
    std::optional<EarleyOracle> oracle = OracleFor(schema);
    ASSERT_TRUE(oracle.has_value());
    std::vector<std::vector<std::string>> arrays = {{}};
    for (size_t n = 0; n < arrays.size(); ++n) {
      const std::vector<std::string> items = arrays[n];
      if (items.size() < 4) {
        for (const std::string& v : alphabet) {
          arrays.push_back(items);
          arrays.back().push_back(v);
        }
      }
      bool valid = true;
      for (const Contains& c : contains) {
        int count = 0;
        for (const std::string& v : items) count += c.matches(v);
        valid = valid && count >= c.min && (c.max < 0 || count <= c.max);
      }
      const std::string text = "[" + absl::StrJoin(items, ",") + "]";
      EXPECT_EQ(bool(oracle->Check(text) & EarleyOracle::kComplete), valid)
          << schema << " on " << text;
    }
  }
  // Past kMaxContains, strict mode refuses; lenient mode counts the first
  // ones (accepting more, never less).
  std::string five = R"({"allOf": [)";
  for (int i = 0; i < 5; ++i) {
    absl::StrAppend(&five, i ? "," : "", R"({"contains": {"const": )", i, "}}");
  }
  five += "]}";
  ExpectRefused(five, "#/allOf/4/contains");
  JsonSchemaOptions lenient;
  lenient.strict = false;
  Expect(five, {"[0,1,2,3,4]", "[3,2,1,0]"}, {"[0,1,2]"}, lenient);
}

// Patterns with ^ or $ inside groups or alternatives, read exactly: the
// strings they accept are those std::regex_search (ECMAScript, the dialect
// JSON Schema names) finds them in, over every string of up to 4
// characters from a small alphabet. Alone, and beside a length (the two
// ways a pattern reaches the grammar).
TEST(JsonSchemaTest, AnchorsAnywhereInAPatternAreReadAsSearchesDo) {
  const std::vector<std::string> patterns = {
      "^([^,]|$)", "(^a|b$)", "a^b", "b$a", "(a$)*b?", "x(^|y)", "(^|,)a($|,)",
      "^(/?((\\.{2})|([a-z0-9\\-]*))($|/))*$", "((^))a",
      // Lookaheads right after a leading ^.
      "^(?!ab)[ab,]*$", "^(?=a)(?!a,)", "^(?!a$).*$", "^(?!b|,)..?$",
      "^(?=[^,]+$)(?![.]+$)(.|/)+$",
      // An escaped ] does not end a class: its | is no alternation.
      "^(?!a)[\\]|,a]+$"};
  const std::string alphabet = "ab,/.";
  std::vector<std::string> texts = {""};
  for (size_t n = 0; n < texts.size(); ++n) {
    if (texts[n].size() < 4) {
      for (char c : alphabet) texts.push_back(texts[n] + c);
    }
  }
  for (const std::string& pattern : patterns) {
    const std::regex re(pattern, std::regex::ECMAScript);
    for (const char* length : {"", R"(, "maxLength": 3)"}) {
      const std::string schema = R"({"type": "string", "pattern": )" +
                                 nlohmann::ordered_json(pattern).dump() +
                                 length + "}";
      std::optional<EarleyOracle> oracle = OracleFor(schema);
      ASSERT_TRUE(oracle.has_value());
      for (const std::string& t : texts) {
        const bool valid =
            std::regex_search(t, re) && (*length == '\0' || t.size() <= 3);
        EXPECT_EQ(
            bool(oracle->Check("\"" + t + "\"") & EarleyOracle::kComplete),
            valid)
            << schema << " on \"" << t << "\"";
      }
    }
  }
}

TEST(JsonSchemaTest, LookaheadsElsewhereAreRefused) {
  ExpectRefused(R"j({"pattern": "a(?!b)"})j", "#/pattern");
  ExpectRefused(R"j({"pattern": "^((?!a).)*$"})j", "#/pattern");
  // The lookahead would guard only the first alternative.
  ExpectRefused(R"({"pattern": "^(?!a)b|c"})", "#/pattern");
}

TEST(JsonSchemaTest, Combinators) {
  Expect(R"({"anyOf": [{"type": "integer"}, {"type": "string"}]})",
         {"1", "\"a\""}, {"null"});
  Expect(R"({"oneOf": [{"type": "integer"}, {"minimum": 2}]})", {"1", "2.5"},
         {"2", "3"});
  Expect(R"({"allOf": [{"type": "integer"}, {"maximum": 3}]})", {"3"},
         {"4", "\"a\""});
  Expect(R"({"not": {"type": "string"}})", {"1", "null"}, {"\"a\""});
  Expect(R"({"if": {"type": "integer"}, "then": {"minimum": 5},
             "else": {"type": "string"}})",
         {"5", "\"a\""}, {"4", "null"});
}

TEST(JsonSchemaTest, NegatedAdditionalProperties) {
  JsonSchemaOptions any_order;
  any_order.property_order = JsonPropertyOrder::kAny;
  // Some member other than "a" must exist.
  Expect(R"({"type": "object",
             "not": {"properties": {"a": {}}, "additionalProperties": false}})",
         {"{\"b\":1}", "{\"a\":1,\"b\":2}", "{\"b\":2,\"a\":1}"},
         {"{}", "{\"a\":1}"}, any_order);
  // ... or one whose value is not a string; or "a" breaking its schema.
  Expect(R"({"type": "object",
             "not": {"properties": {"a": {"type": "integer"}},
                     "additionalProperties": {"type": "string"}}})",
         {"{\"b\":1}", "{\"a\":\"x\"}", "{\"c\":\"s\",\"b\":null}"},
         {"{}", "{\"a\":1}", "{\"b\":\"s\",\"a\":2}"}, any_order);
  // oneOf branches that overlap, one closed to other members.
  Expect(R"({"oneOf": [
               {"properties": {"a": {}}, "required": ["a"],
                "additionalProperties": false},
               {"required": ["b"]}]})",
         {"{\"a\":1}", "{\"b\":1}", "{\"a\":1,\"c\":2,\"b\":3}"},
         {"{}", "{\"c\":1}"}, any_order);
}

// kAny's objects of more than 6 declared members that a matcher cannot
// count (here minProperties past 1) stay as written, each member once, as
// kAnyRepeatable's do: no state per subset of members.
TEST(JsonSchemaTest, AnyOrderObjectsThatCannotBeCountedStayAsWritten) {
  JsonSchemaOptions any_order;
  any_order.property_order = JsonPropertyOrder::kAny;
  Expect(R"({"type": "object", "minProperties": 2,
             "properties": {"a": {}, "b": {}, "c": {}, "d": {}, "e": {},
                            "f": {}, "g": {}},
             "additionalProperties": false})",
         {R"({"a":1,"c":2})", R"({"b":1,"c":2,"g":3})",
          R"({"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1})"},
         {R"({"a":1})", R"({"c":1,"a":2})", R"({"a":1,"a":2})",
          R"({"a":1,"h":2})"},
         any_order);
}

// Several negated additionalProperties on one object (from allOf): each
// asks for a member outside its declared names whose value breaks its
// schema, and one member may answer several. Checked against a direct
// reading over every object of distinct keys from {a, b, c} with values 1
// or "s", in every order.
TEST(JsonSchemaTest, SeveralNegatedAdditionalPropertiesEachFindAMember) {
  JsonSchemaOptions any_order;
  any_order.property_order = JsonPropertyOrder::kAny;
  struct Witness {
    std::string declared;  // the one name its properties declare
    bool integer;          // additionalProperties is integer (else string)
  };
  const std::vector<std::vector<Witness>> cases = {
      {{"a", true}, {"b", false}},
      {{"a", true}, {"b", false}, {"c", false}},
      {{"a", false}, {"b", false}, {"a", true}},
  };
  std::vector<std::vector<std::pair<std::string, std::string>>> objects = {{}};
  for (size_t n = 0; n < objects.size(); ++n) {
    for (const char* key : {"a", "b", "c"}) {
      bool used = false;
      for (const auto& [k, v] : objects[n]) used = used || k == key;
      if (used) continue;
      for (const char* value : {"1", "\"s\""}) {
        objects.push_back(objects[n]);
        objects.back().emplace_back(key, value);
      }
    }
  }
  for (const std::vector<Witness>& witnesses : cases) {
    std::string schema = R"({"type": "object", "allOf": [)";
    for (size_t i = 0; i < witnesses.size(); ++i) {
      absl::StrAppend(&schema, i ? "," : "", R"({"not": {"properties": {")",
                      witnesses[i].declared,
                      R"(": {}}, "additionalProperties": {"type": ")",
                      witnesses[i].integer ? "integer" : "string", R"("}}})");
    }
    schema += "]}";
    std::optional<EarleyOracle> oracle = OracleFor(schema, any_order);
    ASSERT_TRUE(oracle.has_value());
    for (const auto& object : objects) {
      bool valid = true;
      for (const Witness& w : witnesses) {
        bool found = false;
        for (const auto& [k, v] : object) {
          const bool is_integer = v == "1";
          found = found || (k != w.declared && is_integer != w.integer);
        }
        valid = valid && found;
      }
      std::string text = "{";
      for (const auto& [k, v] : object) {
        absl::StrAppend(&text, text.size() > 1 ? "," : "", "\"", k, "\":", v);
      }
      text += "}";
      EXPECT_EQ(bool(oracle->Check(text) & EarleyOracle::kComplete), valid)
          << schema << " on " << text;
    }
  }
}

// Negated member keywords with patternProperties: some member breaks the
// schema its name selects (its property's if declared, every matching
// pattern's, additionalProperties' if neither). Random groups over names
// {a, b, ab, ba} and values 1, "s" or true, checked against a direct
// reading over every object of at most two distinct members, in every
// order; some groups sit beside a positive one under allOf.
TEST(JsonSchemaTest, NegatedPatternPropertiesFindTheMemberThatBreaksThem) {
  JsonSchemaOptions any_order;
  any_order.property_order = JsonPropertyOrder::kAny;
  const std::vector<std::string> names = {"a", "b", "ab", "ba"};
  const std::vector<std::string> values = {"1", "\"s\"", "true"};
  // A value schema: its JSON and which of `values` it accepts.
  struct Value {
    std::string json;
    std::vector<bool> accepts;
  };
  const std::vector<Value> schemas = {
      {R"({"type": "integer"})", {true, false, false}},
      {R"({"type": "string"})", {false, true, false}},
      {R"({"type": ["integer", "boolean"]})", {true, false, true}},
      {"false", {false, false, false}},
  };
  struct Pattern {
    std::string regex;
    bool (*matches)(const std::string&);
  };
  const std::vector<Pattern> patterns = {
      {"^a", [](const std::string& k) { return k[0] == 'a'; }},
      {"b$", [](const std::string& k) { return k.back() == 'b'; }},
      {"^ba$", [](const std::string& k) { return k == "ba"; }},
  };
  std::vector<std::vector<std::pair<int, int>>> objects = {{}};
  for (size_t n = 0; n < objects.size(); ++n) {
    if (objects[n].size() == 2) continue;
    for (int k = 0; k < static_cast<int>(names.size()); ++k) {
      if (!objects[n].empty() && objects[n][0].first == k) continue;
      for (int v = 0; v < static_cast<int>(values.size()); ++v) {
        objects.push_back(objects[n]);
        objects.back().emplace_back(k, v);
      }
    }
  }
  std::mt19937 rng(35);
  for (int round = 0; round < 24; ++round) {
    // The group: at most one declared property, one or two patterns and
    // maybe additionalProperties, each with a value schema.
    auto pick = [&](size_t n) { return static_cast<int>(rng() % n); };
    const int declared = pick(names.size() + 1) - 1;  // -1: none
    const int declared_value = pick(schemas.size());
    std::vector<std::pair<int, int>> used;  // (pattern, value schema)
    for (int i = 0; i < static_cast<int>(patterns.size()); ++i) {
      if (rng() % 2) used.emplace_back(i, pick(schemas.size()));
    }
    if (used.empty()) used.emplace_back(pick(patterns.size()), 0);
    const int additional = pick(schemas.size() + 1) - 1;  // -1: absent
    const bool beside = rng() % 2;  // allOf with {"required": ["a"]}
    std::string group = "{";
    if (declared >= 0) {
      absl::StrAppend(&group, R"("properties": {")", names[declared],
                      "\": ", schemas[declared_value].json, "}, ");
    }
    group += R"("patternProperties": {)";
    for (size_t i = 0; i < used.size(); ++i) {
      absl::StrAppend(&group, i ? ", " : "", "\"",
                      patterns[used[i].first].regex,
                      "\": ", schemas[used[i].second].json);
    }
    group += "}";
    if (additional >= 0) {
      absl::StrAppend(&group, R"(, "additionalProperties": )",
                      schemas[additional].json);
    }
    group += "}";
    const std::string negated = R"({"not": )" + group + "}";
    const std::string schema =
        beside ? R"({"type": "object", "allOf": [{"required": ["a"]}, )" +
                     negated + "]}"
               : R"({"type": "object", "allOf": [)" + negated + "]}";
    std::optional<EarleyOracle> oracle = OracleFor(schema, any_order);
    ASSERT_TRUE(oracle.has_value());
    // Whether member (k, v) satisfies the group.
    auto member_ok = [&](int k, int v) {
      bool selected = false;
      bool ok = true;
      if (k == declared) {
        selected = true;
        ok = ok && schemas[declared_value].accepts[v];
      }
      for (const auto& [i, value] : used) {
        if (!patterns[i].matches(names[k])) continue;
        selected = true;
        ok = ok && schemas[value].accepts[v];
      }
      if (!selected && additional >= 0) ok = schemas[additional].accepts[v];
      return ok;
    };
    for (const auto& object : objects) {
      bool group_ok = true;
      bool has_a = false;
      for (const auto& [k, v] : object) {
        group_ok = group_ok && member_ok(k, v);
        has_a = has_a || names[k] == "a";
      }
      const bool valid = !group_ok && (!beside || has_a);
      std::string text = "{";
      for (const auto& [k, v] : object) {
        absl::StrAppend(&text, text.size() > 1 ? "," : "", "\"", names[k],
                        "\":", values[v]);
      }
      text += "}";
      EXPECT_EQ(bool(oracle->Check(text) & EarleyOracle::kComplete), valid)
          << schema << " on " << text;
    }
  }
}

// A negated propertyNames asks for a member whose name the schema rejects,
// alone or beside a positive propertyNames, a declared property or a
// required member. Checked against a direct reading over every object of
// at most two distinct members named from {a, b, ab, ba}, in every order.
TEST(JsonSchemaTest, NegatedPropertyNamesFindANameItRejects) {
  JsonSchemaOptions any_order;
  any_order.property_order = JsonPropertyOrder::kAny;
  const std::vector<std::string> names = {"a", "b", "ab", "ba"};
  struct NameSchema {
    std::string json;
    bool (*accepts)(const std::string&);
  };
  const std::vector<NameSchema> negated = {
      {R"({"maxLength": 1})",
       [](const std::string& k) { return k.size() <= 1; }},
      {R"({"pattern": "^a"})",
       [](const std::string& k) { return k[0] == 'a'; }},
      {R"({"enum": ["a", "ab"]})",
       [](const std::string& k) { return k == "a" || k == "ab"; }},
      {R"({"type": "integer"})", [](const std::string&) { return false; }},
  };
  struct Beside {
    std::string json;
    bool (*accepts)(const std::vector<std::string>&);
  };
  const std::vector<Beside> besides = {
      {"{}", [](const std::vector<std::string>&) { return true; }},
      {R"({"propertyNames": {"pattern": "b"}})",
       [](const std::vector<std::string>& keys) {
         for (const std::string& k : keys) {
           if (k.find('b') == std::string::npos) return false;
         }
         return true;
       }},
      {R"({"required": ["a"]})",
       [](const std::vector<std::string>& keys) {
         return std::find(keys.begin(), keys.end(), "a") != keys.end();
       }},
      {R"({"properties": {"ab": false}})",
       [](const std::vector<std::string>& keys) {
         return std::find(keys.begin(), keys.end(), "ab") == keys.end();
       }},
  };
  std::vector<std::vector<std::string>> objects = {{}};
  for (size_t n = 0; n < objects.size(); ++n) {
    if (objects[n].size() == 2) continue;
    for (const std::string& k : names) {
      if (!objects[n].empty() && objects[n][0] == k) continue;
      objects.push_back(objects[n]);
      objects.back().push_back(k);
    }
  }
  for (const NameSchema& not_names : negated) {
    for (const Beside& beside : besides) {
      const std::string schema =
          R"({"type": "object", "allOf": [)" + beside.json +
          R"(, {"not": {"propertyNames": )" + not_names.json + "}}]}";
      std::optional<EarleyOracle> oracle = OracleFor(schema, any_order);
      ASSERT_TRUE(oracle.has_value());
      for (const std::vector<std::string>& keys : objects) {
        bool rejected = false;
        std::string text = "{";
        for (const std::string& k : keys) {
          rejected = rejected || !not_names.accepts(k);
          absl::StrAppend(&text, text.size() > 1 ? "," : "", "\"", k, "\":0");
        }
        text += "}";
        const bool valid = rejected && beside.accepts(keys);
        EXPECT_EQ(bool(oracle->Check(text) & EarleyOracle::kComplete), valid)
            << schema << " on " << text;
      }
    }
  }
}

// not enum/const of arrays and objects: every value but those, by JSON
// equality (numbers by value, members in any order). Random exclusions
// from a pool of values, checked against nlohmann's equality over texts
// that include other spellings of the excluded values.
TEST(JsonSchemaTest, NegatedEnumOfArraysAndObjectsExcludesExactlyThem) {
  JsonSchemaOptions any_order;
  any_order.property_order = JsonPropertyOrder::kAny;
  const std::vector<std::string> pool = {"[]",
                                         "[1]",
                                         "[1,\"s\"]",
                                         "[[1]]",
                                         "{}",
                                         "{\"a\":1}",
                                         "{\"a\":1,\"b\":\"s\"}",
                                         "{\"a\":[1]}",
                                         "{\"a\":{\"a\":1}}",
                                         "1",
                                         "\"s\""};
  const std::vector<std::string> texts = {"[]",
                                          "[1]",
                                          "[1.0]",
                                          "[2]",
                                          "[1,\"s\"]",
                                          "[\"s\",1]",
                                          "[1,\"s\",1]",
                                          "[[1]]",
                                          "[[1.0]]",
                                          "[[]]",
                                          "{}",
                                          "{\"a\":1}",
                                          "{\"a\":1.0}",
                                          "{\"a\":2}",
                                          "{\"b\":1}",
                                          "{\"a\":1,\"b\":\"s\"}",
                                          "{\"b\":\"s\",\"a\":1}",
                                          "{\"a\":1,\"b\":\"t\"}",
                                          "{\"a\":1,\"c\":1}",
                                          "{\"a\":[1]}",
                                          "{\"a\":[1,1]}",
                                          "{\"a\":{\"a\":1}}",
                                          "{\"a\":{\"a\":2}}",
                                          "{\"a\":{}}",
                                          "1",
                                          "1.0",
                                          "2",
                                          "\"s\"",
                                          "true",
                                          "null"};
  std::mt19937 rng(20);
  for (int round = 0; round < 20; ++round) {
    // At most three objects: each asks for a member it lacks, and an object
    // may have at most three such witnesses.
    std::vector<std::string> excluded;
    int objects = 0;
    for (const std::string& v : pool) {
      if (rng() % 3 != 0 || (v[0] == '{' && objects == 3)) continue;
      objects += v[0] == '{';
      excluded.push_back(v);
    }
    if (excluded.empty()) excluded.push_back(pool[rng() % 9]);
    const std::string schema =
        excluded.size() == 1 && rng() % 2
            ? R"({"not": {"const": )" + excluded[0] + "}}"
            : R"({"not": {"enum": [)" + absl::StrJoin(excluded, ",") + "]}}";
    std::optional<EarleyOracle> oracle = OracleFor(schema, any_order);
    ASSERT_TRUE(oracle.has_value());
    for (const std::string& text : texts) {
      const nlohmann::json value = nlohmann::json::parse(text);
      bool valid = true;
      for (const std::string& x : excluded) {
        valid = valid && !(value == nlohmann::json::parse(x));
      }
      EXPECT_EQ(bool(oracle->Check(text) & EarleyOracle::kComplete), valid)
          << schema << " on " << text;
    }
  }
}

// Excluding four objects of one member name asks, in one alternative, for
// a member other than it four times: one member answers all four, so the
// object needs one witness, not four (it may hold at most three).
TEST(JsonSchemaTest, EqualWitnessesAreFoundByOneMember) {
  Expect(R"({"not": {"enum": [{"a": 1}, {"a": 2}, {"a": 3}, {"a": 4}]}})",
         {"{}", R"({"a":5})", R"({"b":1})", R"({"a":1,"b":1})", "1"},
         {R"({"a":1})", R"({"a":4})", R"({"a":2.0})"});
}

// The number a text of one digit or more starts with; -1 for other texts.
int LeadingNumber(const std::string& t) {
  return !t.empty() && t[0] >= '0' && t[0] <= '9' ? std::stoi(t) : -1;
}

// oneOf: exactly one branch holds. Branches that provably meet no other
// need no exclusion, and an alternative that cannot meet a branch is kept
// without its negation; random mixes of overlapping and disjoint branches
// are checked against a direct reading over small values.
TEST(JsonSchemaTest, OneOfExcludesOnlyTheBranchesThatMayOverlap) {
  struct Branch {
    std::string json;
    bool (*accepts)(const std::string&);
  };
  const std::vector<Branch> pool = {
      {R"({"type": "integer", "minimum": 2, "maximum": 5})",
       [](const std::string& t) {
         const int n = LeadingNumber(t);
         return n >= 2 && n <= 5;
       }},
      {R"({"type": "integer", "minimum": 4})",
       [](const std::string& t) { return LeadingNumber(t) >= 4; }},
      {R"({"const": 3})", [](const std::string& t) { return t == "3"; }},
      {R"({"enum": [1, "a"]})",
       [](const std::string& t) { return t == "1" || t == "\"a\""; }},
      {R"({"type": "string", "maxLength": 1})",
       [](const std::string& t) { return t[0] == '"' && t.size() <= 3; }},
      {R"({"type": "string", "minLength": 1})",
       [](const std::string& t) { return t[0] == '"' && t.size() >= 3; }},
      {R"({"type": "boolean"})",
       [](const std::string& t) { return t == "true" || t == "false"; }},
      {R"({"anyOf": [{"const": true}, {"type": "null"}]})",
       [](const std::string& t) { return t == "true" || t == "null"; }},
  };
  const std::vector<std::string> texts = {
      "0",    "1",     "2",     "3",      "4",    "5",     "6",    "9",
      "\"\"", "\"a\"", "\"b\"", "\"ab\"", "true", "false", "null", "[]"};
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    std::vector<const Branch*> branches;
    for (const Branch& b : pool) {
      if (rng() % 2) branches.push_back(&b);
    }
    if (branches.size() < 2) continue;
    std::string schema = R"({"oneOf": [)";
    for (size_t i = 0; i < branches.size(); ++i) {
      absl::StrAppend(&schema, i ? ", " : "", branches[i]->json);
    }
    schema += "]}";
    std::optional<EarleyOracle> oracle = OracleFor(schema);
    ASSERT_TRUE(oracle.has_value());
    for (const std::string& text : texts) {
      int holding = 0;
      for (const Branch* b : branches) holding += b->accepts(text);
      EXPECT_EQ(bool(oracle->Check(text) & EarleyOracle::kComplete),
                holding == 1)
          << schema << " on " << text;
    }
  }
}

// Two anyOf of 30 values each make 900 pairs, over the budget of 512
// alternatives; all but the 30 equal pairs are provably disjoint, and
// those are dropped before the budget is applied.
TEST(JsonSchemaTest, DisjointPairsDoNotCountAgainstTheAlternatives) {
  std::string values = R"({"anyOf": [)";
  for (int i = 0; i < 30; ++i) {
    absl::StrAppend(&values, i ? ", " : "", R"({"const": )", i, "}");
  }
  values += "]}";
  Expect(R"({"allOf": [)" + values + ", " + values + "]}", {"0", "17", "29"},
         {"30", "-1", "\"0\""});
}

TEST(JsonSchemaTest, References) {
  Expect(R"({"$defs": {"node": {"type": "object",
               "properties": {"next": {"$ref": "#/$defs/node"}},
               "additionalProperties": false}},
             "$ref": "#/$defs/node"})",
         {"{}", "{\"next\":{\"next\":{}}}"}, {"{\"next\":1}"});
  Expect(R"({"$defs": {"a": {"$anchor": "pos", "minimum": 0}},
             "type": "integer", "$ref": "#pos"})",
         {"3"}, {"-1"});
}

TEST(JsonSchemaTest, DynamicRefWithOneAnchorIsARef) {
  Expect(R"({"$defs": {"n": {"$dynamicAnchor": "n", "type": "integer"}},
             "items": {"$dynamicRef": "#n"}})",
         {"[1,2]"}, {"[\"a\"]"});
  // Two anchors of the name: the target depends on the dynamic scope.
  ExpectRefused(R"({"$id": "https://x/a", "$dynamicAnchor": "n",
                    "$defs": {"b": {"$id": "https://x/b",
                                    "$dynamicAnchor": "n"}},
                    "items": {"$dynamicRef": "#n"}})",
                "$dynamicRef");
}

TEST(JsonSchemaTest, Layouts) {
  const std::string schema =
      R"({"type": "object", "properties": {"a": {"type": "array"}}})";
  JsonSchemaOptions compact;
  compact.whitespace = JsonWhitespace::kCompact;
  Expect(schema, {"{\"a\":[1,2]}"}, {"{\"a\": [1,2]}", " {\"a\":[]}"}, compact);
  JsonSchemaOptions indented;
  indented.whitespace = JsonWhitespace::kIndented;
  indented.key_separator = ": ";
  Expect(schema, {"{\n  \"a\": [\n    1\n  ]\n}", "{}"}, {"{\"a\":[1]}"},
         indented);
  JsonSchemaOptions capped;
  capped.max_whitespace_run = 1;
  Expect(schema, {"{ \"a\" : [ ] }"}, {"{  \"a\":[]}"}, capped);
}

// An object of more properties than its automaton may have blames
// "properties", not a minProperties/maxProperties it does not have.
TEST(JsonSchemaTest, TooManyPropertiesBlameProperties) {
  std::string schema = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 5000; ++i) {
    schema += (i > 0 ? ", \"p" : "\"p") + std::to_string(i) +
              "\": {\"type\": \"integer\"}";
  }
  schema += "}}";
  absl::StatusOr<JsonSchemaResult> r = JsonSchemaToGrammar(schema);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"properties\" at #/properties"),
            std::string::npos)
      << r.status();
  EXPECT_EQ(r.status().message().find("maxProperties"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("5000 properties"), std::string::npos)
      << r.status();
}

// Whenever the deadline passes, the conversion stops with DeadlineExceeded:
// never a refusal of the keyword being converted (strict) nor a drop
// (lenient), which a cache would keep as the schema's verdict. (CI once saw
// `cannot enforce "pattern" ...: the schema took longer to convert than its
// deadline allows`, cached.) Deadlines sweep across the conversion, so
// some land inside every keyword's work.
TEST(JsonSchemaTest, ADeadlineIsNeverAKeywordsFault) {
  const std::string schema = R"({"type": "object", "properties": {
      "id": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4,8}$"},
      "at": {"type": "string", "format": "date-time"},
      "n": {"type": "integer", "multipleOf": 7, "minimum": 3},
      "s": {"type": "string", "maxLength": 20, "pattern": "b+"}},
      "propertyNames": {"pattern": "^[a-z]+$"},
      "additionalProperties": {"not": {"type": "string"}}})";
  for (bool strict : {true, false}) {
    for (int us = 0; us < 3000; us += 15) {
      JsonSchemaOptions options;
      options.strict = strict;
      options.deadline =
          std::chrono::steady_clock::now() + std::chrono::microseconds(us);
      absl::StatusOr<JsonSchemaResult> r = JsonSchemaToGrammar(schema, options);
      if (!r.ok()) {
        if (r.status().message().find("deadline") != std::string::npos) {
          EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded)
              << r.status();
        }
        continue;
      }
      for (const DroppedKeyword& d : r->dropped) {
        EXPECT_EQ(d.reason.find("deadline"), std::string::npos)
            << d.keyword << " at " << d.pointer << ": " << d.reason;
      }
    }
  }
}

TEST(JsonSchemaTest, StrictModeNamesTheKeyword) {
  ExpectRefused(
      R"({"properties": {"a": {"items": {"maximum": 3}, "uniqueItems": true}}})",
      "#/properties/a/uniqueItems");
  ExpectRefused(R"js({"type": "string", "pattern": "(?=a)"})js", "#/pattern");
  ExpectRefused(R"({"$ref": "http://example.com/x.json"})", "$ref");
}

TEST(JsonSchemaTest, NarrowedFormatsAreNeverComplemented) {
  // The time grammar refuses leap seconds outside UTC, so "not time" would
  // accept "15:59:60-08:00", which is a valid time.
  ExpectRefused(R"({"not": {"format": "time"}})", "#/not/format");
  // Nor may they prove oneOf branches disjoint: the const is a valid time,
  // so it matches both branches, which only the exact check would see.
  ExpectRefused(
      R"({"oneOf": [{"format": "time"}, {"const": "15:59:60-08:00"}]})",
      "#/oneOf");
  Expect(R"({"oneOf": [{"format": "date"}, {"const": "2024-01-01"}]})",
         {"\"2024-01-02\""}, {"\"2024-01-01\""});
}

// Draft 7 lets validators assert contentEncoding and contentMediaType;
// 2019-09 and later make them annotations.
TEST(JsonSchemaTest, ContentKeywordsAreAssertedInDraft7Only) {
  const std::string draft7 =
      R"("$schema": "http://json-schema.org/draft-07/schema#", )";
  Expect("{" + draft7 + R"("contentEncoding": "base64", "maxLength": 8})",
         {"\"eyJmb28i\"", "\"\"", "\"YQ==\"", "\"YWI=\"", "1"},
         {"\"eyJmb28iOi%i\"", "\"YR==\"", "\"YWJ=\"", "\"YQ\"",
          "\"eyJmb28iOiAi\""});
  Expect(R"({"contentEncoding": "base64"})", {"\"%\""}, {});
  Expect("{" + draft7 + R"("contentEncoding": "7bit"})", {"\"%\""}, {});
  ExpectRefused("{" + draft7 + R"("contentMediaType": "Application/JSON"})",
                "#/contentMediaType");
  ExpectRefused("{" + draft7 + R"("not": {"contentEncoding": "base64"}})",
                "#/not/contentEncoding");
  Expect("{" + draft7 + R"("contentMediaType": "text/html"})", {"\"<\""}, {});
  Expect(R"({"contentMediaType": "application/json"})", {"\"{:}\""}, {});

  JsonSchemaOptions lenient;
  lenient.strict = false;
  absl::StatusOr<JsonSchemaResult> r = JsonSchemaToGrammar(
      "{" + draft7 +
          R"("contentMediaType": "application/json", "contentEncoding": "base64"})",
      lenient);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->dropped.size(), 1u);
  EXPECT_EQ(r->dropped[0].keyword, "contentMediaType");
  EXPECT_EQ(r->dropped[0].pointer, "#/contentMediaType");
}

TEST(JsonSchemaTest, LenientModeListsDroppedKeywords) {
  JsonSchemaOptions lenient;
  lenient.strict = false;
  absl::StatusOr<JsonSchemaResult> r =
      JsonSchemaToGrammar(R"({"type": "array", "uniqueItems": true,
                              "items": {"type": "string", "maxLength": 3}})",
                          lenient);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->dropped.size(), 1u);
  EXPECT_EQ(r->dropped[0].keyword, "uniqueItems");
  EXPECT_EQ(r->dropped[0].pointer, "#/uniqueItems");
}

TEST(JsonSchemaTest, HostileSchemasFailCleanly) {
  EXPECT_EQ(JsonSchemaToGrammar(R"({"$ref": "#"})").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(
      JsonSchemaToGrammar(R"({"allOf": [{"$ref": "#/allOf/0"}]})").ok());
  std::string deep;
  for (int i = 0; i < 400; ++i) deep += R"({"items": )";
  deep += "true" + std::string(400, '}');
  absl::StatusOr<JsonSchemaResult> r = JsonSchemaToGrammar(deep);
  EXPECT_TRUE(r.ok()) << r.status();
  std::string tuple = R"({"prefixItems": [)";
  for (int i = 0; i < 20000; ++i) tuple += i ? ",{}" : "{}";
  tuple += "]}";
  r = JsonSchemaToGrammar(tuple);
  EXPECT_TRUE(r.ok()) << r.status();
  std::string alternatives = R"({"allOf": [)";
  for (int i = 0; i < 12; ++i) {
    alternatives += std::string(i ? "," : "") +
                    R"({"anyOf": [{"minimum": 1}, {"maximum": 0}]})";
  }
  alternatives += "]}";
  EXPECT_EQ(JsonSchemaToGrammar(alternatives).status().code(),
            absl::StatusCode::kResourceExhausted);
}

// Hostile uses of what this front end reads exactly since issue 35: each is
// refused by its own bound, naming the keyword, or converted; none runs into
// the (generous) deadline, which would mean an unbounded construction.
TEST(JsonSchemaTest, HostileUsesOfTheExactKeywordsStayBounded) {
  JsonSchemaOptions options;
  options.deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto convert = [&](const std::string& schema) {
    return JsonSchemaToGrammar(schema, options).status();
  };
  // Four contains, each counted to 1,000.
  std::string counted = R"({"allOf": [)";
  for (int i = 0; i < 4; ++i) {
    absl::StrAppend(&counted, i ? "," : "", R"({"contains": {"const": )", i,
                    R"(}, "minContains": 1000})");
  }
  counted += "]}";
  absl::Status s = convert(counted);
  EXPECT_NE(s.message().find("needs more than 4096 rules"), std::string::npos)
      << s;
  // 64 patterns that all overlap: their names would split 2^64 ways.
  std::string overlapping = R"({"patternProperties": {)";
  for (int i = 0; i < 64; ++i) {
    absl::StrAppend(&overlapping, i ? "," : "", "\"",
                    std::string(1, 'a' + i % 26), i / 26,
                    "\": {\"type\": \"integer\"}");
  }
  overlapping += "}}";
  s = convert(overlapping);
  EXPECT_NE(s.message().find("more than 64 classes"), std::string::npos) << s;
  // Three witnesses on an object of 20 members in any order: kept as
  // written (a state per subset of members would take 2^20 rules).
  JsonSchemaOptions any_order = options;
  any_order.property_order = JsonPropertyOrder::kAny;
  std::string members = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 20; ++i) {
    absl::StrAppend(&members, i ? "," : "", "\"p", i, "\": {}");
  }
  members += R"(}, "allOf": [)";
  for (int i = 0; i < 3; ++i) {
    absl::StrAppend(&members, i ? "," : "",
                    R"({"not": {"additionalProperties": {"const": )", i, "}}}");
  }
  members += "]}";
  EXPECT_TRUE(JsonSchemaToGrammar(members, any_order).ok());
  // 5,000 members in any order: past what a matcher counts at run time,
  // refused with the bound named; counted as 256 at run time, each once.
  auto wide = [](int count) {
    std::string schema = R"({"type": "object", "properties": {)";
    for (int i = 0; i < count; ++i) {
      absl::StrAppend(&schema, i ? "," : "", "\"p", i, "\": {}");
    }
    return schema + "}}";
  };
  s = JsonSchemaToGrammar(wide(5000), any_order).status();
  EXPECT_NE(s.message().find("counts at most 256 declared properties"),
            std::string::npos)
      << s;
  EXPECT_TRUE(JsonSchemaToGrammar(wide(256), any_order).ok());
  EXPECT_FALSE(JsonSchemaToGrammar(wide(257), any_order).ok());
  // Six distinct witnesses: one more than an object may look for.
  std::string six = R"({"type": "object", "allOf": [)";
  for (int i = 0; i < 6; ++i) {
    absl::StrAppend(&six, i ? "," : "",
                    R"({"not": {"propertyNames": {"not": {"const": "w)", i,
                    R"("}}}})");
  }
  six += "]}";
  s = convert(six);
  EXPECT_NE(s.message().find("more than 5 distinct members"), std::string::npos)
      << s;
  // Excluding 200 objects of five members each: the conjunction of their
  // "differs" unions is bounded by the alternatives' budget.
  std::string excluded = R"({"not": {"enum": [)";
  for (int i = 0; i < 200; ++i) {
    absl::StrAppend(&excluded, i ? "," : "", "{");
    for (int m = 0; m < 5; ++m) {
      absl::StrAppend(&excluded, m ? "," : "", "\"m", m, "\": ", i);
    }
    excluded += "}";
  }
  excluded += "]}}";
  s = convert(excluded);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  // A oneOf of 400 string branches that all overlap: proving pairs apart
  // has a budget, past which pairs are taken to overlap; excluding every
  // other branch from each is slow (15 s here) but stops at the deadline.
  std::string strings = R"({"oneOf": [)";
  for (int i = 0; i < 400; ++i) {
    absl::StrAppend(&strings, i ? "," : "",
                    R"({"type": "string", "pattern": "^[a-z]{1,)", 1 + i % 40,
                    R"(}x)", i, R"(|b"})");
  }
  strings += "]}";
  JsonSchemaOptions short_deadline = options;
  const auto start = std::chrono::steady_clock::now();
  short_deadline.deadline = start + std::chrono::seconds(2);
  s = JsonSchemaToGrammar(strings, short_deadline).status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4))
      << s;
  EXPECT_TRUE(s.ok() || absl::IsDeadlineExceeded(s)) << s;
  // A pattern of 2,000 anchored alternatives inside a group, repeated.
  std::string anchors = "^(";
  for (int i = 0; i < 2000; ++i) {
    absl::StrAppend(&anchors, i ? "|" : "", "x", i, "$");
  }
  anchors += ")*$";
  s = convert(R"({"type": "string", "pattern": ")" + anchors + "\"}");
  EXPECT_TRUE(s.ok()) << s;
  // Leading lookaheads, one per word of a long list.
  std::string lookaheads = "^";
  for (int i = 0; i < 200; ++i) absl::StrAppend(&lookaheads, "(?!w", i, "$)");
  lookaheads += ".*";
  s = convert(R"({"type": "string", "pattern": ")" + lookaheads + "\"}");
  EXPECT_TRUE(s.ok()) << s;
}

TEST(JsonSchemaTest, LimitsGiveClearErrors) {
  JsonSchemaOptions tiny;
  tiny.max_grammar_exprs = 10;
  absl::StatusOr<JsonSchemaResult> r =
      JsonSchemaToGrammar(R"({"type": "string", "format": "date-time"})", tiny);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted)
      << r.status();
  JsonSchemaOptions late;
  late.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  r = JsonSchemaToGrammar(R"({"type": "string", "pattern": "a+b"})", late);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded)
      << r.status();
  EXPECT_EQ(JsonSchemaToGrammar("{").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace grammard::grammar
