#include "grammar/base/lazy_array.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace grammard::grammar::internal {
namespace {

TEST(LazyArrayTest, MakesOnlyTheChunksOfElementsAskedFor) {
  LazyArray<int, 4> a(10);  // chunks [0, 4), [4, 8), [8, 10)
  EXPECT_EQ(a.size(), 10u);
  EXPECT_EQ(a.Find(5), nullptr);
  const size_t empty = a.MemoryBytes();
  bool made = false;
  a.At(5, &made) = 7;
  EXPECT_TRUE(made);
  EXPECT_EQ(a.MemoryBytes(), empty + 4 * sizeof(int));
  a.At(6, &made) = 8;
  EXPECT_FALSE(made);
  ASSERT_NE(a.Find(4), nullptr);
  EXPECT_EQ(*a.Find(4), 0);  // default-constructed with its chunk
  EXPECT_EQ(*a.Find(5), 7);
  EXPECT_EQ(a.At(6), 8);
  EXPECT_EQ(a.Find(0), nullptr);
  EXPECT_EQ(a.Find(9), nullptr);
  a.At(9) = 1;  // the last, partial chunk
  EXPECT_EQ(a.MemoryBytes(), empty + 8 * sizeof(int));
}

TEST(LazyArrayTest, ThreadsRacingForAChunkShareOne) {
  for (int round = 0; round < 50; ++round) {
    LazyArray<std::atomic<int>, 64> a(256);
    std::vector<std::thread> threads;
    std::vector<std::atomic<int>*> seen(8);
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        seen[t] = &a.At(70);
        a.At(64 + t).fetch_add(1);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int t = 0; t < 8; ++t) {
      EXPECT_EQ(seen[t], seen[0]);
      EXPECT_EQ(a.At(64 + t).load(), 1) << "a write went to a dropped chunk";
    }
    EXPECT_EQ(a.MemoryBytes(), 4 * sizeof(std::atomic<std::atomic<int>*>) +
                                   64 * sizeof(std::atomic<int>));
  }
}

}  // namespace
}  // namespace grammard::grammar::internal
