// Hostile HTTP/2 and HTTP clients (issue items 3, 12 and 17's metrics
// endpoint): rapid reset, a header block that never ends, and idle
// connections to /metrics. The frames come from RawHttp2, since no gRPC
// client sends them. Each against a fresh daemon with a bystander stream
// (hostile_test_base.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grammard.grpc.pb.h"
#include "tests/abuse/hostile_test_base.h"
#include "tests/support/paths.h"
#include "tests/support/raw_http2.h"

namespace grammard::testing {
namespace {

namespace v1 = grammard::v1;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kCancel = 0x8;  // RST_STREAM's CANCEL error code

std::string ErrorCode(uint32_t code) {
  return std::string{static_cast<char>(code >> 24),
                     static_cast<char>(code >> 16),
                     static_cast<char>(code >> 8), static_cast<char>(code)};
}

// A small compile from a new connection, waited for at most 5 s; as a
// real client would, it waits for the connection to be taken (a flood of
// connections has new ones closed until its rate allows more).
grpc::Status CompileSmall(v1::Grammard::Stub* stub) {
  v1::CompileRequest request;
  request.set_tokenizer("llama3");
  request.mutable_constraint()->set_regex("[0-9]{3}");
  request.set_wait(true);
  v1::CompileResponse response;
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  return stub->Compile(&context, request, &response);
}

class TransportAbuseTest : public HostileTest {
 protected:
  // Sends HEADERS then RST_STREAM on Decode in a loop on `conn` for up to
  // 8 s; how long until the daemon closed the connection (-1: it never
  // did) and how many resets were sent.
  static std::pair<double, int64_t> RapidReset(RawHttp2& conn) {
    const std::string headers =
        RawHttp2::GrpcRequestHeaders("/grammard.v1.Grammard/Decode");
    const auto start = Clock::now();
    uint32_t stream = 1;
    int64_t resets = 0;
    while (MsSince(start) < 8000) {
      for (int i = 0; i < 100; ++i, stream += 2, ++resets) {
        conn.Frame(RawHttp2::kHeaders, RawHttp2::kEndHeaders, stream, headers);
        conn.Frame(RawHttp2::kRstStream, 0, stream, ErrorCode(kCancel));
      }
      if (!conn.Flush() || conn.closed()) return {MsSince(start), resets};
    }
    return {-1, resets};
  }

  // Checks the cut, and that new connections are served at once.
  void ExpectCut(const std::string& name, double cut_ms, int64_t resets) {
    EXPECT_GE(cut_ms, 0) << "the connection survived " << resets << " resets";
    auto stub = NewStub();
    const grpc::Status after = CompileSmall(stub.get());
    EXPECT_TRUE(after.ok()) << after.error_message();
    ExpectContained(
        3, name,
        absl::StrCat("connection closed after ", resets,
                     " resets; a new connection: ", Describe(after)),
        cut_ms, DuringBounds{int64_t{512} << 20, 100});
  }
};

// Item 3: HEADERS then RST_STREAM in a loop on one connection for 8 s took
// the daemon from 23 to 32,366 threads and 17.5 GB, stalled the bystander
// 18 s and refused new streams for minutes.
TEST_F(TransportAbuseTest, RapidResetIsCutOff) {
  auto conn = RawHttp2::Connect(daemon_->grpc_port());
  ASSERT_TRUE(conn.ok()) << conn.status();
  const auto [cut_ms, resets] = RapidReset(**conn);
  ExpectCut("HTTP/2 rapid reset on Decode", cut_ms, resets);
}

// The same over the Unix socket (--unix_socket): its connections are
// guarded as the TCP port's.
class UnixSocketTransportTest : public TransportAbuseTest {
 protected:
  bool ServesUnixSocket() const override { return true; }
};

TEST_F(UnixSocketTransportTest, RapidResetIsCutOff) {
  auto conn = RawHttp2::ConnectUnix(daemon_->unix_socket_path());
  ASSERT_TRUE(conn.ok()) << conn.status();
  const auto [cut_ms, resets] = RapidReset(**conn);
  ExpectCut("HTTP/2 rapid reset on Decode over the Unix socket", cut_ms,
            resets);
}

// Item 3, spread over many connections: each is cut, and the threads the
// calls take stay within --max_rpc_threads. Each call is given a thread
// before its reset is read, so how many run at once depends on scheduling
// (23-92 over the baseline in runs alone, 105-110 beside other tests in
// CI, where a bound of 100 failed twice); what bounds them is the
// quota, so this case sets it to 64 and allows as many more for gRPC's own
// pools (timers, event engine), which start threads when theirs are busy.
class ManyConnectionsResetTest : public TransportAbuseTest {
  std::vector<std::string> ExtraFlags() const override {
    return {absl::StrCat("--max_rpc_threads=", kRpcThreads)};
  }

 protected:
  static constexpr int kRpcThreads = 64;
};

TEST_F(ManyConnectionsResetTest, RapidResetOnManyConnectionsIsCutOff) {
  const std::string headers =
      RawHttp2::GrpcRequestHeaders("/grammard.v1.Grammard/Decode");
  const auto start = Clock::now();
  int connections = 0;
  int64_t resets = 0;
  while (MsSince(start) < 8000) {
    auto conn = RawHttp2::Connect(daemon_->grpc_port());
    if (!conn.ok()) continue;
    ++connections;
    for (uint32_t stream = 1; !(*conn)->closed() && stream < 20000;
         stream += 2, ++resets) {
      (*conn)->Frame(RawHttp2::kHeaders, RawHttp2::kEndHeaders, stream,
                     headers);
      (*conn)->Frame(RawHttp2::kRstStream, 0, stream, ErrorCode(kCancel));
      if (stream % 200 == 1 && !(*conn)->Flush()) break;
    }
  }
  auto stub = NewStub();
  const auto after_start = Clock::now();
  const grpc::Status after = CompileSmall(stub.get());
  const double after_ms = MsSince(after_start);
  EXPECT_TRUE(after.ok()) << after.error_message();
  ExpectContained(
      3, "rapid reset over many connections",
      absl::StrCat(connections, " connections cut, ", resets,
                   " resets; a new connection after it: ", Describe(after),
                   " in ", static_cast<int>(after_ms), " ms"),
      MsSince(start) / std::max(1, connections),
      DuringBounds{int64_t{512} << 20, 2 * kRpcThreads});
}

// Item 12: a header block that never ends (CONTINUATION after
// CONTINUATION) grew the daemon 1.18 GB in 45 s, and the connection stayed
// open (Debian's gRPC 1.51 is in the class of CVE-2023-33953). Three kinds:
// a field name whose length never ends (an HPACK integer padded with 0x80
// bytes, which gRPC 1.51 keeps buffering), one field whose value never ends,
// and small fields that keep coming.
TEST_F(TransportAbuseTest, EndlessHeaderBlocksAreCutOff) {
  struct Kind {
    const char* name;
    std::string first, more;
  };
  const std::string request =
      RawHttp2::GrpcRequestHeaders("/grammard.v1.Grammard/Decode");
  const std::vector<Kind> kinds = {
      {"endless length", request + std::string("\x00\x7f", 2),
       std::string(16000, '\x80')},
      // A literal field named x-big whose value says 1,000,000,000 bytes
      // (an HPACK integer, 7-bit prefix), then its bytes, 16 KB a frame.
      {"endless value",
       request + std::string("\x00\x05x-big\x7f\x81\x93\xeb\xdc\x03", 13),
       std::string(16000, 'a')},
      // Each frame a field small enough for gRPC's per-frame check.
      {"endless fields", request,
       RawHttp2::HeaderBlock({{"x-filler", std::string(2000, 'a')}})},
  };
  std::string answer;
  double cut_ms = 0;
  for (const Kind& kind : kinds) {
    SCOPED_TRACE(kind.name);
    auto conn = RawHttp2::Connect(daemon_->grpc_port());
    ASSERT_TRUE(conn.ok()) << conn.status();
    const auto start = Clock::now();
    (*conn)->Frame(RawHttp2::kHeaders, 0, 1, kind.first);
    int64_t frames = 0;
    double ms = -1;
    while (MsSince(start) < 15000) {
      for (int i = 0; i < 16; ++i, ++frames) {
        (*conn)->Frame(RawHttp2::kContinuation, 0, 1, kind.more);
      }
      if (!(*conn)->Flush() || (*conn)->closed()) {
        ms = MsSince(start);
        break;
      }
    }
    EXPECT_GE(ms, 0) << "the connection survived " << frames
                     << " CONTINUATION frames";
    cut_ms = std::max(cut_ms, ms);
    absl::StrAppend(&answer, answer.empty() ? "" : "; ", kind.name,
                    ": closed after ", frames, " frames sent");
  }
  // gRPC 1.51 alone closed these after 7-12 MB each, and kept 90 MB.
  ExpectContained(12, "header blocks that never end", answer, cut_ms,
                  DuringBounds{int64_t{32} << 20, 20});
}

// Item 17: /metrics had two workers, so two idle TCP connections made every
// scrape fail.
TEST_F(TransportAbuseTest, IdleConnectionsDoNotBlockScrapes) {
  std::vector<int> idle;
  for (int i = 0; i < 16; ++i) {
    absl::StatusOr<int> fd = ConnectLoopback(daemon_->metrics_port());
    ASSERT_TRUE(fd.ok()) << fd.status();
    idle.push_back(*fd);
  }
  const auto start = Clock::now();
  absl::StatusOr<std::string> page =
      HttpGet(daemon_->metrics_port(), "/metrics");
  const double ms = MsSince(start);
  for (int fd : idle) close(fd);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_NE(page->find("grammard_"), std::string::npos);
  EXPECT_LT(ms, 5000) << "a scrape waited behind idle connections";
  ExpectContained(17, "16 idle connections to /metrics, then a scrape",
                  "200 OK", ms);
}

// Item 5: gRPC's Shutdown waits until its deadline for clients to close
// their connections, and one that never reads the GOAWAY (or, as a gRPC
// client between calls, reads it only at its next poll, seconds later) held
// the stop past the 5 s grace: the watchdog ended it with exit 1.
TEST_F(TransportAbuseTest, AConnectionLeftOpenDoesNotHoldTheShutdown) {
  auto conn = RawHttp2::Connect(daemon_->grpc_port());
  ASSERT_TRUE(conn.ok()) << conn.status();
  bystander_.reset();
  watch_.reset();
  const auto start = Clock::now();
  const int exit_code = daemon_->Terminate();
  const double ms = MsSince(start);
  EXPECT_EQ(exit_code, 0) << ReadFileOrEmpty(daemon_->log_path());
  EXPECT_LT(ms, 5000) << "the default --shutdown_grace_ms is 5000";
  std::printf(
      "HOSTILE item=5 case=\"SIGTERM with a connection that never closes\" "
      "answer=\"exit %d\" answer_ms=%.1f\n",
      exit_code, ms);
}

}  // namespace
}  // namespace grammard::testing
