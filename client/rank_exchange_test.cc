// The merge and a custom RankExchange (an all-gather among threads, as an
// engine's own collective would be) over clients of a FakeGrammard; the
// SyncGroup exchange against the real daemon is in
// tests/integration/client_rank_sync_test.cc.
#include "client/rank_exchange.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/testing/fake_grammard.h"

namespace grammard::client {
namespace {

using std::chrono::milliseconds;
using testing::FakeGrammard;

TEST(MergeRankReportsTest, ReadyIsTheIntersectionMinusTheUnionOfFailed) {
  const RankAgreement agreed = MergeRankReports({
      {{1, 2, 3, 5, 5}, {}},
      {{5, 3, 2, 1}, {7}},
      {{1, 2, 3, 5}, {3, 7}},
  });
  EXPECT_EQ(agreed.ready, (std::vector<uint64_t>{1, 2, 5}));
  EXPECT_EQ(agreed.failed, (std::vector<uint64_t>{3, 7}));
  // Ready on two ranks of three is not ready.
  EXPECT_EQ(MergeRankReports({{{1, 2}, {}}, {{1}, {}}, {{1, 2}, {}}}).ready,
            std::vector<uint64_t>{1});
  EXPECT_TRUE(MergeRankReports({}).ready.empty());
}

// All-gather among threads of one process: each rank posts its report and
// waits for the others, then merges.
class ThreadAllGather {
 public:
  explicit ThreadAllGather(int world_size) : world_size_(world_size) {}

  class Rank : public RankExchange {
   public:
    Rank(ThreadAllGather* all, int rank) : all_(all), rank_(rank) {}
    absl::StatusOr<RankAgreement> Exchange(
        uint64_t round, const RankReport& mine,
        std::chrono::milliseconds timeout) override {
      return all_->Exchange(round, rank_, mine, timeout);
    }

   private:
    ThreadAllGather* const all_;
    const int rank_;
  };

 private:
  absl::StatusOr<RankAgreement> Exchange(uint64_t round, int rank,
                                         const RankReport& mine,
                                         std::chrono::milliseconds timeout) {
    absl::MutexLock lock(&mu_);
    std::map<int, RankReport>& reports = rounds_[round];
    reports[rank] = mine;
    const auto all_in = [&] {
      return static_cast<int>(reports.size()) == world_size_;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&all_in),
                              absl::FromChrono(timeout))) {
      std::vector<int> missing;
      for (int r = 0; r < world_size_; ++r) {
        if (reports.count(r) == 0) missing.push_back(r);
      }
      return absl::DeadlineExceededError(absl::StrCat(
          "rank(s) ", absl::StrJoin(missing, ", "), " did not report"));
    }
    std::vector<RankReport> all;
    for (const auto& [r, report] : reports) all.push_back(report);
    return MergeRankReports(all);
  }

  const int world_size_;
  absl::Mutex mu_;
  std::map<uint64_t, std::map<int, RankReport>> rounds_ ABSL_GUARDED_BY(mu_);
};

TEST(RankExchangeTest, ACustomCollectiveAgreesOnClientReadiness) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  constexpr int kRanks = 4;
  ThreadAllGather gather(kRanks);
  std::vector<absl::StatusOr<RankAgreement>> outcomes(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      ClientOptions options;
      options.target = fake->target();
      options.tokenizer = FakeGrammard::kTokenizer;
      auto client = Client::Connect(options);
      ASSERT_TRUE(client.ok()) << client.status();
      // Every rank serves sequences 1-4; rank 2's compile of 3 fails and
      // rank 1's of 4 never finishes.
      for (uint64_t id = 1; id <= 4; ++id) {
        grammard::v1::Constraint c;
        c.set_regex(rank == 2 && id == 3   ? "fail"
                    : rank == 1 && id == 4 ? "hold"
                                           : "x");
        ASSERT_TRUE((*client)->Open(id, c).ok());
      }
      ASSERT_TRUE((*client)->WaitReady({1, 2, 3}).ok());
      ThreadAllGather::Rank exchange(&gather, rank);
      outcomes[static_cast<size_t>(rank)] = SyncReadiness(
          **client, exchange, /*round=*/1, {1, 2, 3, 4}, milliseconds(20000));
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < kRanks; ++rank) {
    const auto& outcome = outcomes[static_cast<size_t>(rank)];
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_EQ(outcome->ready, (std::vector<uint64_t>{1, 2})) << rank;
    EXPECT_EQ(outcome->failed, std::vector<uint64_t>{3}) << rank;
  }
}

TEST(RankExchangeTest, SyncGroupErrorsNameTheGroupRoundAndRank) {
  auto fake = FakeGrammard::Start();  // serves no SyncGroup
  ASSERT_NE(fake, nullptr);
  GrammardRankExchange exchange(
      grpc::CreateChannel(fake->target(), grpc::InsecureChannelCredentials()),
      "tp0", 2, 4);
  auto outcome = exchange.Exchange(9, {{1}, {}}, milliseconds(1000));
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(outcome.status().message().find(
                "rank sync of group tp0 round 9 (rank 2 of 4)"),
            std::string::npos)
      << outcome.status();
}

}  // namespace
}  // namespace grammard::client
