#include "grammar/frontends/json_schema/internal/json_values.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace grammard::grammar::json_schema_internal {
namespace {

// The oracle: a text equal values share, built another way than JsonEqual
// compares (numbers as exact decimals, members sorted by name).
std::string Canonical(const Json& v) {
  if (v.is_number()) return "n" + NumberOf(v)->ToString();
  if (v.is_array()) {
    std::string s = "[";
    for (const Json& x : v) s += Canonical(x) + ",";
    return s + "]";
  }
  if (v.is_object()) {
    std::map<std::string, std::string> members;
    for (auto it = v.begin(); it != v.end(); ++it) {
      members[it.key()] = Canonical(it.value());
    }
    std::string s = "{";
    for (const auto& [k, x] : members) s += Json(k).dump() + ":" + x + ",";
    return s + "}";
  }
  return v.dump();
}

// Random values from a small domain, so that equal ones come up often, in
// several spellings (1, 1.0, 10e-1; members in any order).
Json RandomValue(std::mt19937* rng, int depth) {
  const int kind = static_cast<int>((*rng)() % (depth > 2 ? 5 : 7));
  switch (kind) {
    case 0:
      return nullptr;
    case 1:
      return (*rng)() % 2 == 0;
    case 2: {
      static const char* const kNumbers[] = {"1",   "1.0", "10e-1", "2",
                                             "0",   "-0",  "0.5",   "5e-1",
                                             "100", "1e2", "-1"};
      return Json::parse(kNumbers[(*rng)() % 11]);
    }
    case 3:
    case 4:
      return std::string(1 + (*rng)() % 2,
                         static_cast<char>('a' + (*rng)() % 2));
    case 5: {
      Json a = Json::array();
      for (int i = (*rng)() % 3; i > 0; --i)
        a.push_back(RandomValue(rng, depth + 1));
      return a;
    }
    default: {
      std::vector<std::string> names = {"x", "y", "z"};
      std::shuffle(names.begin(), names.end(), *rng);
      Json o = Json::object();
      for (int i = (*rng)() % 3; i > 0; --i) {
        o[names[static_cast<size_t>(i)]] = RandomValue(rng, depth + 1);
      }
      return o;
    }
  }
}

TEST(JsonValuesTest, EqualityAndHashAgreeWithTheOracle) {
  std::mt19937 rng(11);
  std::vector<Json> values;
  for (int i = 0; i < 400; ++i) values.push_back(RandomValue(&rng, 0));
  int equal_pairs = 0;
  for (const Json& a : values) {
    for (const Json& b : values) {
      const bool same = Canonical(a) == Canonical(b);
      ASSERT_EQ(JsonEqual(a, b), same) << a.dump() << " vs " << b.dump();
      if (same) {
        ++equal_pairs;
        ASSERT_EQ(JsonHash(a), JsonHash(b)) << a.dump() << " vs " << b.dump();
      }
    }
  }
  EXPECT_GT(equal_pairs, 2000);  // the domain is small enough to matter
}

// A ValueList holds exactly one of each class of equal values, the first
// added, whichever its size (the index starts at 8 values).
TEST(JsonValuesTest, ValueListKeepsTheFirstOfEachValue) {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<Json> values;
    for (int i = 0; i < 60; ++i) values.push_back(RandomValue(&rng, 0));
    ValueList list;
    std::map<std::string, const Json*> first;
    for (const Json& v : values) {
      const bool fresh = first.emplace(Canonical(v), &v).second;
      ASSERT_EQ(list.Add(&v), fresh) << v.dump();
    }
    ASSERT_EQ(list.size(), first.size());
    for (const Json& v : values) {
      ASSERT_EQ(list.Find(v), first.at(Canonical(v))) << v.dump();
    }
    EXPECT_EQ(list.Find(Json("not listed")), nullptr);
  }
}

}  // namespace
}  // namespace grammard::grammar::json_schema_internal
