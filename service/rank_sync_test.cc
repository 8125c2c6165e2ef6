#include "service/rank_sync.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace grammard::service {
namespace {

using Clock = RankSync::Clock;
using Ids = std::vector<uint64_t>;

RankSync::Report Make(std::string group, uint64_t round, int rank, int world,
                      Ids ready, Ids failed = {}) {
  return {std::move(group), round, rank, world, std::move(ready),
          std::move(failed)};
}

TEST(RankSyncTest, ReadyIsTheIntersectionAndFailedTheUnion) {
  RankSync sync;
  std::vector<absl::StatusOr<RankSync::Agreement>> out(4);
  std::vector<std::thread> ranks;
  const std::vector<Ids> ready = {
      {1, 2, 3, 4}, {1, 2, 3}, {2, 3, 4}, {1, 2, 3}};
  for (int r = 0; r < 4; ++r) {
    ranks.emplace_back([&, r] {
      out[r] = sync.Join(Make("tp", 7, r, 4, ready[r], r == 2 ? Ids{3} : Ids{}),
                         Clock::now() + std::chrono::seconds(10));
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(out[r].ok()) << out[r].status();
    EXPECT_EQ(out[r]->ready, Ids({2}));  // 3 failed on rank 2
    EXPECT_EQ(out[r]->failed, Ids({3}));
  }
}

TEST(RankSyncTest, AMissingRankFailsTheRoundForEveryoneInTime) {
  RankSync sync;
  std::vector<absl::StatusOr<RankSync::Agreement>> out(3);
  std::vector<std::thread> ranks;
  const auto start = Clock::now();
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      out[r] = sync.Join(Make("tp", 1, r, 4, {1}),
                         Clock::now() + std::chrono::milliseconds(200));
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  for (const auto& o : out) {
    EXPECT_EQ(o.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_NE(o.status().message().find("rank(s) 3 did not report"),
              std::string::npos)
        << o.status();
  }
  // The latecomer gets the same outcome, not a new round.
  auto late = sync.Join(Make("tp", 1, 3, 4, {1}), Clock::now());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(RankSyncTest, GroupsAndRoundsAreIndependentAndBadReportsRefused) {
  RankSync sync;
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<RankSync::Agreement>> out(8);
  for (int g = 0; g < 4; ++g) {
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, g, r] {
        out[g * 2 + r] = sync.Join(Make("group" + std::to_string(g), 3, r, 2,
                                        {static_cast<uint64_t>(g)}),
                                   Clock::now() + std::chrono::seconds(10));
      });
    }
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(out[i].ok());
    EXPECT_EQ(out[i]->ready, Ids({static_cast<uint64_t>(i / 2)}));
  }
  EXPECT_EQ(sync.Join(Make("x", 1, 4, 4, {}), Clock::now()).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::thread first([&] {
    sync.Join(Make("y", 1, 0, 2, {}), Clock::now() + std::chrono::seconds(1))
        .IgnoreError();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(sync.Join(Make("y", 1, 1, 3, {}), Clock::now()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sync.Join(Make("y", 1, 0, 2, {}), Clock::now()).status().code(),
            absl::StatusCode::kAlreadyExists);
  first.join();
}

// A waiting call whose caller went away returns within one wait slice.
TEST(RankSyncTest, ACancelledCallerStopsWaiting) {
  RankSync sync;
  std::atomic<bool> gone{false};
  std::thread leave([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    gone = true;
  });
  const auto start = Clock::now();
  auto out =
      sync.Join(Make("g", 1, 0, 2, {1}), Clock::now() + std::chrono::hours(24),
                [&] { return gone.load(); });
  leave.join();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
}

// The ranks a timed-out round names are at most 16, then a count.
TEST(RankSyncTest, MissingRanksAreNamedBoundedly) {
  RankSync sync;
  auto out = sync.Join(Make("g", 1, 0, 1000, {1}),
                       Clock::now() + std::chrono::milliseconds(10));
  ASSERT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(out.status().message().find("rank(s) 1, 2, 3"), std::string::npos)
      << out.status();
  EXPECT_NE(out.status().message().find("and 983 more"), std::string::npos)
      << out.status();
  EXPECT_LT(out.status().message().size(), 200u);
}

// At most max_rounds rounds are kept: finished ones are forgotten oldest
// first, and a new round is refused while all are waiting.
TEST(RankSyncTest, RoundsAreBounded) {
  RankSync sync(std::chrono::seconds(60), /*max_rounds=*/4);
  for (uint64_t round = 0; round < 10; ++round) {
    EXPECT_TRUE(sync.Join(Make("done", round, 0, 1, {1}),
                          Clock::now() + std::chrono::seconds(1))
                    .ok());
  }
  std::vector<std::thread> waiting;
  std::atomic<int> released{0};
  for (uint64_t round = 0; round < 4; ++round) {
    waiting.emplace_back([&, round] {
      auto timed_out = sync.Join(Make("wait", round, 0, 2, {1}),
                                 Clock::now() + std::chrono::seconds(1));
      EXPECT_EQ(timed_out.status().code(), absl::StatusCode::kDeadlineExceeded);
      ++released;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto refused = sync.Join(Make("wait", 99, 0, 2, {1}),
                           Clock::now() + std::chrono::seconds(1));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted)
      << refused.status();
  for (auto& t : waiting) t.join();
  EXPECT_EQ(released.load(), 4);
}

}  // namespace
}  // namespace grammard::service
