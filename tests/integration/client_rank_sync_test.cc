// Rank sync through the real grammard: groups of 4 ranks, as threads with
// a Client each and as separate processes (client_rank_child, through the C
// ABI). A rank whose compile fails makes the sequence failed for all; a
// rank that never reports fails the round, in time, naming it; groups run
// their rounds at the same time without interfering.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/rank_exchange.h"
#include "tests/support/daemon.h"
#include "tests/support/paths.h"

namespace grammard {
namespace {

namespace v1 = grammard::v1;
using client::RankAgreement;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr char kSchema[] =
    R"({"type": "object", "properties": {"x": {"type": "integer"}}})";
constexpr char kBrokenSchema[] = R"({"type": "no-such-type"})";
constexpr milliseconds kMissingRankTimeout(1500);
// How late past its timeout a round may fail on a loaded 2-core machine.
constexpr std::chrono::seconds kSlack(15);

class ClientRankSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::TokenizerDir("llama3")) {
      GTEST_SKIP() << testing::MissingDataMessage("the llama3 tokenizer");
    }
    auto daemon = testing::Daemon::Start({});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
  }

  std::unique_ptr<testing::Daemon> daemon_;
};

struct RankOutcome {
  absl::StatusOr<RankAgreement> agreed = absl::UnknownError("not run");
  Clock::duration took{};  // of the exchange alone
};

// One rank as a thread: a Client of its own serving sequences 1-4, those in
// `broken` with a schema that cannot compile, then one round of `group`.
RankOutcome RunRank(const std::string& target, const std::string& group,
                    int rank, int world, std::vector<uint64_t> broken,
                    milliseconds timeout) {
  RankOutcome out;
  client::ClientOptions options;
  options.target = target;
  options.tokenizer = "llama3";
  options.connect_timeout = milliseconds(60000);
  options.step_timeout = milliseconds(120000);
  auto connected = client::Client::Connect(options);
  if (!connected.ok()) {
    out.agreed = connected.status();
    return out;
  }
  client::Client& c = **connected;
  const std::vector<uint64_t> ids = {1, 2, 3, 4};
  for (uint64_t id : ids) {
    v1::Constraint constraint;
    const bool bad =
        std::find(broken.begin(), broken.end(), id) != broken.end();
    constraint.set_json_schema(bad ? kBrokenSchema : kSchema);
    if (absl::Status s = c.Open(id, constraint); !s.ok()) {
      out.agreed = s;
      return out;
    }
  }
  if (absl::Status s = c.WaitReady(ids); !s.ok()) {
    out.agreed = s;
    return out;
  }
  client::GrammardRankExchange exchange(c.channel(), group, rank, world);
  const auto start = Clock::now();
  out.agreed = client::SyncReadiness(c, exchange, /*round=*/1, ids, timeout);
  out.took = Clock::now() - start;
  return out;
}

TEST_F(ClientRankSyncTest, ThreadRanksAgreeAndAMissingRankFailsTheRound) {
  const std::string target = daemon_->target();
  // Three groups at once. "a": rank 2 fails sequence 3. "b": rank 0 fails 1
  // and rank 3 fails 4. "c": rank 3 never reports.
  std::vector<RankOutcome> a(4), b(4), c(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      a[r] =
          RunRank(target, "a", r, 4,
                  r == 2 ? std::vector<uint64_t>{3} : std::vector<uint64_t>{},
                  milliseconds(60000));
    });
    threads.emplace_back([&, r] {
      std::vector<uint64_t> broken;
      if (r == 0) broken = {1};
      if (r == 3) broken = {4};
      b[r] = RunRank(target, "b", r, 4, broken, milliseconds(60000));
    });
    if (r < 3) {
      threads.emplace_back([&, r] {
        c[r] = RunRank(target, "c", r, 4, {}, kMissingRankTimeout);
      });
    }
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(a[r].agreed.ok()) << a[r].agreed.status();
    EXPECT_EQ(a[r].agreed->ready, (std::vector<uint64_t>{1, 2, 4})) << r;
    EXPECT_EQ(a[r].agreed->failed, std::vector<uint64_t>{3}) << r;
    ASSERT_TRUE(b[r].agreed.ok()) << b[r].agreed.status();
    EXPECT_EQ(b[r].agreed->ready, (std::vector<uint64_t>{2, 3})) << r;
    EXPECT_EQ(b[r].agreed->failed, (std::vector<uint64_t>{1, 4})) << r;
  }
  for (int r = 0; r < 3; ++r) {
    const absl::Status& s = c[r].agreed.status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_NE(s.message().find("group c round 1"), std::string::npos) << s;
    EXPECT_NE(s.message().find("rank(s) 3 did not report in time"),
              std::string::npos)
        << s;
    EXPECT_LT(c[r].took, kMissingRankTimeout + kSlack) << r;
  }
}

// Runs a child rank; its stdout is read later.
FILE* SpawnRank(const std::string& target, const std::string& group, int rank,
                int world, uint64_t fail_id, milliseconds timeout) {
  const std::string binary =
      testing::RunfilePath("tests/integration/client_rank_child");
  const std::string command =
      absl::StrCat(binary, " --target=", target, " --group=", group,
                   " --rank=", rank, " --world=", world, " --fail_id=", fail_id,
                   " --timeout_ms=", timeout.count());
  return popen(command.c_str(), "r");
}

std::string ReadAndClose(FILE* child, int* status) {
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), child)) > 0) {
    out.append(buffer, n);
  }
  *status = pclose(child);
  return out;
}

TEST_F(ClientRankSyncTest, ProcessRanksAgreeThroughTheCAbi) {
  ASSERT_FALSE(
      testing::RunfilePath("tests/integration/client_rank_child").empty());
  const std::string target = daemon_->target();
  std::vector<FILE*> full, missing;
  for (int r = 0; r < 4; ++r) {
    full.push_back(
        SpawnRank(target, "p", r, 4, r == 2 ? 3 : 0, milliseconds(60000)));
    ASSERT_NE(full.back(), nullptr);
  }
  const auto start = Clock::now();
  for (int r = 0; r < 3; ++r) {
    missing.push_back(SpawnRank(target, "pm", r, 4, 0, kMissingRankTimeout));
    ASSERT_NE(missing.back(), nullptr);
  }
  for (int r = 0; r < 4; ++r) {
    int status = 0;
    const std::string out = ReadAndClose(full[r], &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_EQ(out, "ready=1,2,4 failed=3\n") << "rank " << r;
  }
  for (int r = 0; r < 3; ++r) {
    int status = 0;
    const std::string out = ReadAndClose(missing[r], &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_EQ(out.rfind("error=4 ", 0), 0u) << out;  // DEADLINE_EXCEEDED
    EXPECT_NE(out.find("rank(s) 3 did not report in time"), std::string::npos)
        << out;
  }
  // Process start, connect and compiles included.
  EXPECT_LT(Clock::now() - start, kMissingRankTimeout + 2 * kSlack);
}

}  // namespace
}  // namespace grammard
