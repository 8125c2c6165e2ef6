#include "grammar/base/member_set.h"

#include <algorithm>
#include <iterator>
#include <random>
#include <set>

#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

MemberSet Of(const std::set<int>& bits) {
  MemberSet s;
  for (int b : bits) s.Add(b);
  return s;
}

// Against std::set on random sets over every word, the last bits included.
TEST(MemberSetTest, AgreesWithAnOrderedSet) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> bit(0, MemberSet::kMax - 1);
  std::uniform_int_distribution<int> size(0, 6);
  for (int round = 0; round < 2000; ++round) {
    std::set<int> a, b;
    for (int k = size(rng); k > 0; --k) a.insert(bit(rng));
    for (int k = size(rng); k > 0; --k) b.insert(rng() % 2 ? bit(rng) : 255);
    if (round % 3 == 0) a.insert(b.begin(), b.end());
    const MemberSet sa = Of(a), sb = Of(b);
    for (int k = 0; k < MemberSet::kMax; ++k) {
      ASSERT_EQ(sa.Has(k), a.count(k) == 1) << k;
    }
    EXPECT_EQ(sa.Contains(sb),
              std::includes(a.begin(), a.end(), b.begin(), b.end()));
    std::set<int> both, either = a;
    either.insert(b.begin(), b.end());
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(),
                          std::inserter(both, both.begin()));
    EXPECT_EQ(sa.Intersects(sb), !both.empty());
    MemberSet united = sa;
    united.AddAll(sb);
    EXPECT_EQ(united, Of(either));
    EXPECT_EQ(sa.empty(), a.empty());
    EXPECT_EQ(sa == sb, a == b);
    EXPECT_EQ(sa < sb || sb < sa, a != b);
  }
}

}  // namespace
}  // namespace grammard::grammar
