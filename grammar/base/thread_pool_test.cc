#include "grammar/base/thread_pool.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

TEST(ThreadPoolTest, EveryIndexRunsExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](int64_t i) { hits[i].fetch_add(1); });
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[i].load(), 1) << threads << " " << n;
    }
  }
}

TEST(ThreadPoolTest, ManyRoundsInARow) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int round = 0; round < 2000; ++round) {
    pool.ParallelFor(5, [&](int64_t i) { sum.fetch_add(i); });
  }
  EXPECT_EQ(sum.load(), 2000 * 10);
}

// Rounds far enough apart that the workers fall asleep: a round may end
// before they wake, and a worker waking late must not run the old round's
// function (it lives on the caller's stack) nor miss the next round.
TEST(ThreadPoolTest, WorkersWakingLateTouchNoEndedRound) {
  ThreadPool pool(3);
  for (int round = 0; round < 300; ++round) {
    std::vector<int> hits(4, 0);  // plain ints: a stale run would show
    std::atomic<int> calls{0};
    pool.ParallelFor(4, [&hits, &calls](int64_t i) {
      ++hits[static_cast<size_t>(i)];
      calls.fetch_add(1);
    });
    ASSERT_EQ(calls.load(), 4) << round;
    ASSERT_EQ(hits, std::vector<int>(4, 1)) << round;
    if (round % 3 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
}

}  // namespace
}  // namespace grammard::grammar
