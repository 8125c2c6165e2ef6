#include "service/fill_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace grammard::service {
namespace {

TEST(FillPoolTest, RunsEveryItemOnce) {
  FillPool pool(3);
  for (size_t n : {0, 1, 2, 7, 100, 1000}) {
    for (size_t min_shared : {0, 8, 5000}) {
      std::vector<std::atomic<int>> runs(n);
      pool.ForEach(n, min_shared, [&](size_t i) { ++runs[i]; });
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(runs[i], 1) << n << " " << i;
    }
  }
}

TEST(FillPoolTest, ShortLoopsStayOnTheCallingThread) {
  FillPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  pool.ForEach(50, 64, [&](size_t) {
    if (std::this_thread::get_id() != caller) ++elsewhere;
  });
  EXPECT_EQ(elsewhere, 0);
}

// Loops from many threads at once: one has the helpers, the others run
// alone; every item runs once all the same.
TEST(FillPoolTest, ConcurrentLoops) {
  FillPool pool(2);
  std::vector<std::thread> threads;
  std::atomic<int64_t> total{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 200; ++round) {
        std::atomic<int64_t> sum{0};
        pool.ForEach(64, 2, [&](size_t i) { sum += static_cast<int64_t>(i); });
        EXPECT_EQ(sum, 64 * 63 / 2);
        total += sum;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(total, int64_t{4} * 200 * 64 * 63 / 2);
}

TEST(FillPoolTest, OneThreadHasNoHelper) {
  FillPool pool(1);
  int runs = 0;  // no other thread touches it
  pool.ForEach(100, 0, [&](size_t) { ++runs; });
  EXPECT_EQ(runs, 100);
}

}  // namespace
}  // namespace grammard::service
