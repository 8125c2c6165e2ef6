#include "grammar/base/json_value_key.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace grammard::grammar {
namespace {

std::string Key(std::string_view text) {
  std::string key;
  AppendJsonValueKey(text, &key);
  return key;
}

TEST(JsonValueKey, EqualValuesShareAKey) {
  EXPECT_EQ(Key("1"), Key("1.0"));
  EXPECT_EQ(Key("1"), Key("10e-1"));
  EXPECT_EQ(Key("100"), Key("1E2"));
  EXPECT_EQ(Key("0"), Key("-0.000e5"));
  EXPECT_EQ(Key("\"a\""), Key("\"\\u0061\""));
  EXPECT_EQ(Key("\"\\ud83d\\ude00\""), Key("\"\xf0\x9f\x98\x80\""));
  EXPECT_EQ(Key("{\"a\":1,\"b\":[2]}"), Key("{ \"b\" : [ 2.0 ] , \"a\" : 1 }"));
  EXPECT_EQ(Key("{\"a\":1,\"a\":2}"), Key("{\"a\":2}"));
  // Exact decimals, not doubles.
  EXPECT_NE(Key("0.1"), Key("0.1000000000000000055511151231257827"));
  EXPECT_NE(Key("9007199254740993"), Key("9007199254740992"));
  EXPECT_NE(Key("1"), Key("\"1\""));
  EXPECT_NE(Key("[1,2]"), Key("[2,1]"));
  EXPECT_NE(Key("[[]]"), Key("[]"));
  EXPECT_NE(Key("{\"a\":{}}"), Key("{\"a\":[]}"));
  EXPECT_NE(Key("\"ab\""), Key("\"a\""));
  EXPECT_NE(Key("true"), Key("false"));
  EXPECT_NE(Key("null"), Key("\"null\""));
  // A lone surrogate is a value of its own.
  EXPECT_NE(Key("\"\\ud800\""), Key("\"\\udc00\""));
}

TEST(JsonValueKey, TextThatIsNotOneValueIsKeptAsBytes) {
  EXPECT_EQ(Key("[1,"), "x[1,");
  EXPECT_EQ(Key("1 2"), "x1 2");
  EXPECT_NE(Key("[1, 2]"), Key("[1,2,"));
  std::string deep(kMaxJsonKeyDepth + 5, '[');
  deep.append(kMaxJsonKeyDepth + 5, ']');
  EXPECT_EQ(Key(deep), "x" + deep);
}

// Random values written in random spellings against nlohmann's equality
// (its numbers are doubles, so the pool keeps to values doubles hold).
class Speller {
 public:
  explicit Speller(uint32_t seed) : rng_(seed) {}

  // A value as an index into kinds, written one way.
  std::string Write(int depth) {
    const int kind = Pick(depth < 2 ? 6 : 4);
    switch (kind) {
      case 0: {
        static const char* kNumbers[][3] = {
            {"0", "-0", "0.0e3"},    {"1", "1.0", "10e-1"},
            {"2", "2.00", "0.2E1"},  {"100", "1e2", "1000E-1"},
            {"0.5", "5e-1", "0.50"}, {"-3", "-3.0", "-30e-1"}};
        return kNumbers[Pick(6)][Pick(3)];
      }
      case 1: {
        static const char* kStrings[][2] = {{"\"a\"", "\"\\u0061\""},
                                            {"\"b\"", "\"\\u0062\""},
                                            {"\"\\n\"", "\"\\u000a\""},
                                            {"\"\"", "\"\""},
                                            {"\"/\"", "\"\\/\""}};
        return kStrings[Pick(5)][Pick(2)];
      }
      case 2:
        return Pick(2) ? "true" : "false";
      case 3:
        return "null";
      case 4: {
        std::string out = "[";
        const int n = Pick(3);
        for (int i = 0; i < n; ++i) {
          if (i > 0) out += Pick(2) ? "," : " , ";
          out += Write(depth + 1);
        }
        return out + "]";
      }
      default: {
        static const char* kNames[] = {"\"a\"", "\"b\"", "\"\\u0061\""};
        std::string out = "{";
        const int n = Pick(3);
        for (int i = 0; i < n; ++i) {
          if (i > 0) out += ",";
          out += kNames[Pick(3)];
          out += ":";
          out += Write(depth + 1);
        }
        return out + "}";
      }
    }
  }

 private:
  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::mt19937 rng_;
};

TEST(JsonValueKey, KeysAreEqualExactlyWhenValuesAre) {
  Speller speller(7);
  std::vector<std::string> texts;
  for (int i = 0; i < 400; ++i) texts.push_back(speller.Write(0));
  int equal_pairs = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const nlohmann::json a = nlohmann::json::parse(texts[i]);
    for (size_t j = 0; j < i; ++j) {
      const nlohmann::json b = nlohmann::json::parse(texts[j]);
      const bool equal = a == b;
      equal_pairs += equal;
      ASSERT_EQ(Key(texts[i]) == Key(texts[j]), equal)
          << texts[i] << " vs " << texts[j];
    }
  }
  // Spellings of one value met often enough to test the equal side.
  EXPECT_GT(equal_pairs, 500);
}

}  // namespace
}  // namespace grammard::grammar
