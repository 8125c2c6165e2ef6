#include "tests/abuse/hostile_test_base.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "tests/support/paths.h"

namespace grammard::testing {

namespace {

// Past these the watch kills the daemon: far above any case's bounds, well
// below what would hurt the machine (24 GB, a pid limit of 32,768).
constexpr int64_t kHardCapBytes = int64_t{6} << 30;
constexpr int kHardCapThreads = 3000;

std::string Cut(std::string s) {
  if (s.size() > 100) s = s.substr(0, 100) + "...";
  for (char& c : s) {
    if (c == '\n' || c == '"') c = '\'';
  }
  return s;
}

}  // namespace

std::string Describe(const grpc::Status& status) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int code = status.error_code();
  const std::string name =
      code >= 0 && code <= 16 ? kNames[code] : absl::StrCat(code);
  if (status.ok()) return name;
  return absl::StrCat(name, ": ", Cut(status.error_message()));
}

std::string Describe(const grammard::v1::Error& error) {
  return Describe(grpc::Status(static_cast<grpc::StatusCode>(error.code()),
                               error.message()));
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

void HostileTest::SetUp() {
  if (!TokenizerDir("llama3")) {
    GTEST_SKIP() << MissingDataMessage("the llama3 tokenizer");
  }
  DaemonOptions options;
  options.flags = ExtraFlags();
  options.unix_socket = ServesUnixSocket();
  auto daemon = Daemon::Start(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  daemon_ = *std::move(daemon);
  auto bystander = Bystander::Start(daemon_->target());
  ASSERT_TRUE(bystander.ok()) << bystander.status();
  bystander_ = *std::move(bystander);
  // The baseline once the bystander has stepped a while.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  baseline_ = SampleProcess(daemon_->pid());
  watch_ = std::make_unique<ProcessWatch>(
      daemon_->pid(), ProcessWatch::Caps{kHardCapBytes, kHardCapThreads});
  bystander_->Mark();
}

void HostileTest::TearDown() {
  bystander_.reset();
  watch_.reset();
  daemon_.reset();
}

std::unique_ptr<grammard::v1::Grammard::Stub> HostileTest::NewStub() const {
  grpc::ChannelArguments args;
  // A channel of its own: a new connection, not one shared with the others.
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  args.SetMaxReceiveMessageSize(-1);
  return grammard::v1::Grammard::NewStub(grpc::CreateCustomChannel(
      daemon_->target(), grpc::InsecureChannelCredentials(), args));
}

void HostileTest::ExpectContained(int item, const std::string& name,
                                  const std::string& answer, double answer_ms,
                                  const DuringBounds& bounds) {
  const double p99 = bystander_->QuantileMs(0.99);
  const int64_t steps = bystander_->steps();
  const ProcessSample peak = watch_->Peak();
  const ProcessSample after = SettleBelow(
      daemon_->pid(), baseline_.rss_bytes + kAfterSlackBytes,
      baseline_.threads + kAfterSlackThreads,
      std::chrono::duration_cast<std::chrono::milliseconds>(kSettleWithin));
  std::printf(
      "HOSTILE item=%d case=\"%s\" answer=\"%s\" answer_ms=%.1f "
      "baseline_rss_mb=%lld baseline_threads=%d rss_during_mb=%lld "
      "threads_during=%d rss_after_mb=%lld threads_after=%d "
      "bystander_p99_ms=%.2f bystander_steps=%lld\n",
      item, name.c_str(), answer.c_str(), answer_ms,
      static_cast<long long>(baseline_.rss_bytes >> 20), baseline_.threads,
      static_cast<long long>(peak.rss_bytes >> 20), peak.threads,
      static_cast<long long>(after.rss_bytes >> 20), after.threads, p99,
      static_cast<long long>(steps));
  std::fflush(stdout);
  EXPECT_FALSE(watch_->killed()) << watch_->why_killed();
  ASSERT_GT(after.rss_bytes, 0) << "the daemon died:\n"
                                << ReadFileOrEmpty(daemon_->log_path());
  EXPECT_TRUE(bystander_->status().ok()) << bystander_->status();
  EXPECT_LE(p99, kBystanderP99Ms) << "the bystander stalled";
  EXPECT_LE(peak.rss_bytes - baseline_.rss_bytes, bounds.rss_bytes)
      << "resident memory during the attack";
  EXPECT_LE(peak.threads - baseline_.threads, bounds.threads)
      << "threads during the attack";
  EXPECT_LE(after.rss_bytes, baseline_.rss_bytes + kAfterSlackBytes)
      << "resident memory after the attack";
  EXPECT_LE(after.threads, baseline_.threads + kAfterSlackThreads)
      << "threads after the attack";
}

}  // namespace grammard::testing
