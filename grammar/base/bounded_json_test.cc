#include "grammar/base/bounded_json.h"

#include <random>
#include <string>

#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

std::string Nested(int depth) {
  return std::string(static_cast<size_t>(depth), '[') +
         std::string(static_cast<size_t>(depth), ']');
}

TEST(ParseBoundedJson, AcceptsUpToTheBoundAndRefusesPastIt) {
  EXPECT_TRUE(ParseBoundedJson(Nested(8), 8).ok());
  absl::Status s = ParseBoundedJson(Nested(9), 8).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("deeper than 8"), std::string::npos) << s;
  // Brackets inside strings, escaped quotes included, do not count.
  EXPECT_TRUE(ParseBoundedJson(R"(["[[[[\"{{{{", {"a": "]]"}])", 2).ok());
}

TEST(ParseBoundedJson, RefusesObjectsOfTooManyMembers) {
  auto list = [](int n, bool object) {
    std::string s = object ? "{" : "[";
    for (int i = 0; i < n; ++i) {
      if (i > 0) s += ",";
      s += object ? "\"k" + std::to_string(i) + "\":1" : "1";
    }
    return s + (object ? "}" : "]");
  };
  EXPECT_TRUE(ParseBoundedJson(list(kMaxJsonObjectMembers, true), 8).ok());
  absl::Status s =
      ParseBoundedJson(list(kMaxJsonObjectMembers + 1, true), 8).status();
  EXPECT_NE(s.message().find("more than 10000 members"), std::string::npos)
      << s;
  // Arrays have no keys to search; commas in strings do not count.
  EXPECT_TRUE(ParseBoundedJson(list(5 * kMaxJsonObjectMembers, false), 8).ok());
  EXPECT_TRUE(
      ParseBoundedJson("{\"a\": \"" + std::string(20000, ',') + "\"}", 8).ok());
}

TEST(ParseBoundedJson, SaysWhereAndWhyTextIsNotJson) {
  // Where: line and column of the offending byte, counted in the text.
  absl::Status s = ParseBoundedJson("{\n  \"a\": 1,\n}", 8).status();
  EXPECT_NE(s.message().find("not valid JSON at line 3, column 1: "),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("expected string literal"), std::string::npos)
      << s;
  // Why, without echoing the text read (a request may be megabytes).
  s = ParseBoundedJson(R"({"a": nulxyz})", 8).status();
  EXPECT_NE(s.message().find("at line 1, column"), std::string::npos) << s;
  EXPECT_NE(s.message().find("invalid literal"), std::string::npos) << s;
  EXPECT_EQ(s.message().find("nulx"), std::string::npos) << s;
  s = ParseBoundedJson("[\"" + std::string(100000, 'x'), 8).status();
  EXPECT_NE(s.message().find("not valid JSON at line 1, column"),
            std::string::npos)
      << s;
  EXPECT_LT(s.message().size(), 300u) << s;
}

TEST(ParseBoundedJson, RefusesNumbersPastTheRangeOfADouble) {
  // nlohmann throws out_of_range, not parse_error, for these (the fuzzer
  // found one that ended the daemon's compile thread).
  for (const char* text :
       {"222222e2222222222222222222", "[1e999]", "{\"minimum\": -1e400}"}) {
    absl::Status s = ParseBoundedJson(text, 8).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(s.message().find("not valid JSON"), std::string::npos) << s;
    EXPECT_NE(s.message().find("number overflow"), std::string::npos) << s;
  }
}

TEST(ParseBoundedJson, RefusesTextThatIsNotJson) {
  for (const char* text : {"", "{", "[1,]", "nul", "{\"a\" 1}"}) {
    absl::Status s = ParseBoundedJson(text, 8).status();
    EXPECT_NE(s.message().find("not valid JSON"), std::string::npos) << text;
  }
  auto value = ParseBoundedJson(R"({"b": 1, "a": [true]})", 8);
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(value->dump(), R"({"b":1,"a":[true]})");  // order kept
}

TEST(CheckJsonDepth, BoundsParsedValuesAsTheParserDoes) {
  for (int depth = 1; depth < 6; ++depth) {
    const std::string text =
        std::string(depth, '[') + "1" + std::string(depth, ']');
    auto value = ParseBoundedJson(text, 8);
    ASSERT_TRUE(value.ok());
    // The same verdict as parsing with the bound 3.
    EXPECT_EQ(CheckJsonDepth(*value, 3).ok(), ParseBoundedJson(text, 3).ok())
        << text;
  }
  absl::Status s = CheckJsonDepth(nlohmann::ordered_json::parse("[[[]]]"), 2);
  EXPECT_EQ(s.message(), "JSON nested deeper than 2 levels") << s;
}

TEST(JsonHeapBytes, GrowsWithWhatTheValueHolds) {
  using Json = nlohmann::ordered_json;
  EXPECT_EQ(JsonHeapBytes(Json(1)), 0);
  const int64_t empty = JsonHeapBytes(Json::array());
  const int64_t one = JsonHeapBytes(Json::parse("[1]"));
  EXPECT_GE(one - empty, static_cast<int64_t>(sizeof(Json)));
  // A long string counts its characters; a short one lives inline.
  const int64_t long_string = JsonHeapBytes(Json(std::string(1000, 'x')));
  EXPECT_GT(long_string, 1000);
  EXPECT_LT(JsonHeapBytes(Json("x")), 100);
  // Keys too.
  EXPECT_GT(JsonHeapBytes(Json::object({{std::string(500, 'k'), 1}})), 500);
  // A document of 100,000 short strings holds several times its text.
  Json many = Json::array();
  for (int i = 0; i < 100000; ++i) many.push_back("v" + std::to_string(i));
  EXPECT_GT(JsonHeapBytes(many), static_cast<int64_t>(many.dump().size()));
}

// A random JSON value of up to `depth` levels: objects of distinct names,
// arrays, short and long strings, numbers and literals.
nlohmann::ordered_json RandomValue(std::mt19937* rng, int depth) {
  using Json = nlohmann::ordered_json;
  const int kind = static_cast<int>((*rng)() % (depth > 0 ? 6 : 4));
  auto text = [&] {
    return std::string((*rng)() % 40, static_cast<char>('a' + (*rng)() % 26));
  };
  switch (kind) {
    case 0:
      return Json(static_cast<int>((*rng)() % 1000));
    case 1:
      return Json((*rng)() % 2 == 0);
    case 2:
      return Json(text());
    case 3:
      return Json(nullptr);
    case 4: {
      Json a = Json::array();
      for (int i = static_cast<int>((*rng)() % 9); i > 0; --i) {
        a.push_back(RandomValue(rng, depth - 1));
      }
      return a;
    }
    default: {
      Json o = Json::object();
      for (int i = static_cast<int>((*rng)() % 9); i > 0; --i) {
        o[text() + std::to_string(i)] = RandomValue(rng, depth - 1);
      }
      return o;
    }
  }
}

// Read from text, the least size is at most what the parsed value holds,
// and near it (containers parsed grow at most twice their size).
TEST(LeastJsonHeapBytes, BoundsTheParsedValueFromBelow) {
  std::mt19937 rng(42);
  for (int round = 0; round < 300; ++round) {
    const std::string text = RandomValue(&rng, 4).dump();
    const nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(text);
    const int64_t least = LeastJsonHeapBytes(text, 512);
    const int64_t held = JsonHeapBytes(parsed);
    EXPECT_LE(least, held) << text;
    EXPECT_GE(2 * least, held) << text;
  }
  // A flood's shape: an enum of many short strings.
  std::string values = "{\"enum\":[\"v0\"";
  for (int i = 1; i < 100000; ++i) {
    values += ",\"v" + std::to_string(i) + "\"";
  }
  values += "]}";
  const int64_t held = JsonHeapBytes(nlohmann::ordered_json::parse(values));
  EXPECT_LE(LeastJsonHeapBytes(values, 512), held);
  EXPECT_GE(2 * LeastJsonHeapBytes(values, 512), held);
  // Bad text and depth count what came before them.
  EXPECT_EQ(LeastJsonHeapBytes("[1, 2", 512), 0);
  EXPECT_EQ(LeastJsonHeapBytes(Nested(10), 5), 0);
}

}  // namespace
}  // namespace grammard::grammar
