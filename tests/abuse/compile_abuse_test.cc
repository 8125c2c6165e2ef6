// Hostile compiles (issue items 2, 4, 5, 9 and 15): constraints that crashed
// the compile thread or ran past its deadline, queues filled with huge
// texts, one client's flood starving another's compiles, and SIGTERM while
// compiles run. Each against a fresh daemon with a bystander stream
// (hostile_test_base.h).
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grammard.grpc.pb.h"
#include "tests/abuse/hostile_test_base.h"
#include "tests/support/deep_inputs.h"
#include "tests/support/paths.h"

namespace grammard::testing {
namespace {

namespace v1 = grammard::v1;
using Clock = std::chrono::steady_clock;

// Compiles `constraint`, waiting for the grammar (up to `deadline`) or, with
// wait false, only for it to be taken on; the RPC status and the reply.
grpc::Status Compile(v1::Grammard::Stub* stub, const v1::Constraint& constraint,
                     v1::CompileResponse* response, bool wait = true,
                     std::chrono::seconds deadline = std::chrono::seconds(60)) {
  v1::CompileRequest request;
  request.set_tokenizer("llama3");
  *request.mutable_constraint() = constraint;
  request.set_wait(wait);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  return stub->Compile(&context, request, response);
}

// A small compile from a client of its own, waited for; how long it took.
double TimeSmallCompile(v1::Grammard::Stub* stub, const std::string& regex,
                        grpc::Status* status, v1::CompileResponse* response) {
  v1::Constraint small;
  small.set_regex(regex);
  const auto start = Clock::now();
  *status = Compile(stub, small, response, true, std::chrono::seconds(30));
  return MsSince(start);
}

v1::Constraint Schema(std::string text) {
  v1::Constraint c;
  c.set_json_schema(std::move(text));
  return c;
}

// What a compile came to: the RPC's error, or the grammar's state.
std::string Outcome(const grpc::Status& s, const v1::CompileResponse& r) {
  if (!s.ok()) return Describe(s);
  if (r.state() == v1::GRAMMAR_STATE_FAILED) return Describe(r.error());
  return r.state() == v1::GRAMMAR_STATE_READY ? "READY" : "COMPILING";
}

// A regex of 65,538 automaton states ((a|b)*a(a|b){n} has 2^(n+1)): under
// SlowCompileTest's flags its compile classifies tokens for about 10 s. The
// salt makes each one a compile of its own.
v1::Constraint SlowRegex(int salt) {
  v1::Constraint c;
  c.set_regex(absl::StrCat("x", salt, "(a|b)*a(a|b){15}"));
  return c;
}

class CompileAbuseTest : public HostileTest {};

// Compiles that take seconds, as a hostile client's would until their
// deadline: each classifies tokens ahead for up to 20 s before it is ready.
// The cache keeps what the flood compiled (10 MB a grammar), as it should,
// up to its budget: a small one here, so that memory coming back near the
// baseline says something.
class SlowCompileTest : public HostileTest {
 protected:
  std::vector<std::string> ExtraFlags() const override {
    return {"--classify_ahead_ms=20000", "--cache_bytes=33554432"};
  }
};

// Item 2: a chain of 30,000 rules overflowed the compile thread's stack
// (SIGSEGV in the NFA construction).
TEST_F(CompileAbuseTest, LongRuleChainsDoNotOverflowTheStack) {
  v1::Constraint c;
  c.mutable_grammar()->set_text(EbnfChain(30000));
  auto stub = NewStub();
  v1::CompileResponse response;
  const auto start = Clock::now();
  const grpc::Status s = Compile(stub.get(), c, &response);
  const double ms = MsSince(start);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.state(), v1::GRAMMAR_STATE_READY)
      << response.error().message();
  ExpectContained(2, "EBNF chain of 30,000 rules", Outcome(s, response), ms);
}

// Item 4: enum values were compared pairwise: 30,000 numbers took 58 s,
// past the compile deadline; 100,000 strings failed only at 41 s.
TEST_F(CompileAbuseTest, LargeEnumsCompileInNearLinearTime) {
  auto stub = NewStub();
  const std::string numbers = EnumOfNumbers(30000);
  const std::string strings = EnumOfStrings(100000);
  std::string answer;
  double ms = 0;
  for (const std::string& schema : {numbers, strings}) {
    v1::CompileResponse response;
    const auto start = Clock::now();
    const grpc::Status s = Compile(stub.get(), Schema(schema), &response);
    ms = std::max(ms, MsSince(start));
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_NE(response.state(), v1::GRAMMAR_STATE_COMPILING);
    // Ready, or refused for its size: never the deadline.
    EXPECT_NE(response.error().code(), grpc::StatusCode::DEADLINE_EXCEEDED)
        << response.error().message();
    answer += (answer.empty() ? "" : " / ") + Outcome(s, response);
  }
  EXPECT_LT(ms, 10000);
  ExpectContained(4, "enum of 30,000 numbers / of 100,000 strings", answer, ms);
}

// Items 4 and 15: one client's slow compiles held both compile threads, so
// another client's small compile waited 30 s and timed out. Compiles are
// now served per client, round robin, and a client with none running gets
// a thread even when others hold them all.
TEST_F(SlowCompileTest, SlowCompilesOfOneClientDoNotStarveAnother) {
  auto flooder = NewStub();
  std::atomic<bool> stop{false};
  std::vector<std::thread> flood;
  for (int t = 0; t < 4; ++t) {
    flood.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        v1::CompileResponse response;
        Compile(flooder.get(), SlowRegex(t * 100000 + i), &response);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  auto victim = NewStub();
  grpc::Status s;
  v1::CompileResponse response;
  const double ms =
      TimeSmallCompile(victim.get(), "[0-9]{4}-[0-9]{2}", &s, &response);
  stop.store(true);
  for (std::thread& t : flood) t.join();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.state(), v1::GRAMMAR_STATE_READY);
  EXPECT_LT(ms, 2000) << "the victim's compile waited behind the flood";
  ExpectContained(15, "4 threads of slow compiles vs a small compile",
                  Outcome(s, response), ms);
}

// Item 15: one client queueing 10,000 distinct schemas made every other
// client's new compile fail at once (the queue was full).
TEST_F(SlowCompileTest, AQueueFloodOfOneClientLeavesRoomForAnother) {
  auto flooder = NewStub();
  std::atomic<int> refused{0};
  std::vector<std::thread> flood;
  for (int t = 0; t < 4; ++t) {
    flood.emplace_back([&, t] {
      for (int i = 0; i < 2500; ++i) {
        v1::CompileResponse response;
        if (!Compile(flooder.get(), SlowRegex(t * 10000 + i), &response,
                     /*wait=*/false)
                 .ok()) {
          refused.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : flood) t.join();
  EXPECT_GT(refused.load(), 0) << "the flooder's queue was never full";
  auto victim = NewStub();
  grpc::Status s;
  v1::CompileResponse response;
  const double ms =
      TimeSmallCompile(victim.get(), "[0-9]{4}-[0-9]{3}", &s, &response);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.state(), v1::GRAMMAR_STATE_READY);
  EXPECT_LT(ms, 2000);
  ExpectContained(15, "10,000 queued compiles vs a small compile",
                  absl::StrCat(refused.load(), " of the flood refused; ",
                               Outcome(s, response)),
                  ms);
}

// Item 9: 30 queued compiles of 50 MB schemas held 3.4 GB; the queue
// counted compiles, not bytes.
TEST_F(CompileAbuseTest, HugeConstraintsAreRefusedByteBudgetFirst) {
  auto stub = NewStub();
  std::string big = "{\"description\":\"" + std::string(50 << 20, 'x') + "\"}";
  std::string answer;
  double ms = 0;
  for (int i = 0; i < 30; ++i) {
    big[20] = static_cast<char>('a' + i % 26);
    v1::CompileResponse response;
    const auto start = Clock::now();
    const grpc::Status s =
        Compile(stub.get(), Schema(big), &response, /*wait=*/false);
    ms = std::max(ms, MsSince(start));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << s.error_message();
    EXPECT_NE(s.error_message().find("--max_constraint_bytes"),
              std::string::npos)
        << s.error_message();
    answer = Describe(s);
  }
  ExpectContained(9, "30 compiles of 50 MB schemas", answer, ms,
                  DuringBounds{int64_t{1} << 30, 40});
}

// Item 9: under the size limit, the bytes of queued texts still have a
// daemon-wide budget.
class CompileQueueBudgetTest : public HostileTest {
 protected:
  // A smaller budget than the default, so that a few compiles reach it.
  std::vector<std::string> ExtraFlags() const override {
    return {"--compile_queue_bytes=33554432"};
  }
};

TEST_F(CompileQueueBudgetTest, QueuedTextHasAByteBudget) {
  auto stub = NewStub();
  std::atomic<int> over{0};
  std::string message;
  absl::Mutex mu;
  // 6 MB of enum values: slow enough to keep the queue busy. Built once:
  // client threads building their own took the cores from the bystander's
  // client thread, in this process. Six of them (36 MB) pass the 32 MB
  // budget as twelve did; with twelve, 72 MB moved through both processes
  // in a second, and in CI (never here) three bystander steps took 110-130
  // ms, a stall the daemon's side of the flood no longer explains (see the
  // stop 42 note).
  std::string values;
  while (values.size() < (6 << 20)) {
    absl::StrAppend(&values, ",\"v", values.size(), "\"");
  }
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      const std::string s = absl::StrCat("{\"enum\":[", t, values, "]}");
      v1::CompileResponse response;
      const grpc::Status st =
          Compile(stub.get(), Schema(s), &response, /*wait=*/false);
      if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        over.fetch_add(1);
        absl::MutexLock lock(&mu);
        message = st.error_message();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double ms = MsSince(start);
  EXPECT_GT(over.load(), 0);
  EXPECT_NE(message.find("--compile_queue_bytes"), std::string::npos)
      << message;
  ExpectContained(9, "6 compiles of 6 MB schemas (32 MB budget)",
                  "RESOURCE_EXHAUSTED: " + message.substr(0, 80), ms,
                  DuringBounds{int64_t{1} << 30, 40});
}

// Item 5: SIGTERM while slow compiles ran (or 256 waited) left the daemon
// alive 30-60 s past its own --shutdown_grace_ms of 5 s.
TEST_F(SlowCompileTest, SigtermWithSlowCompilesExitsWithinTheGrace) {
  auto stub = NewStub();
  int queued = 0;
  for (int i = 0; i < 256; ++i) {
    v1::CompileResponse response;
    if (Compile(stub.get(), SlowRegex(i), &response, /*wait=*/false).ok()) {
      ++queued;
    }
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const ProcessSample peak = watch_->Peak();
  bystander_.reset();
  watch_.reset();
  const auto start = Clock::now();
  const int exit_code = daemon_->Terminate();
  const double ms = MsSince(start);
  EXPECT_LT(ms, 5000 + 1000) << "the default --shutdown_grace_ms is 5000";
  EXPECT_EQ(exit_code, 0) << ReadFileOrEmpty(daemon_->log_path());
  std::printf(
      "HOSTILE item=5 case=\"SIGTERM with %d slow compiles queued\" "
      "answer=\"exit %d\" answer_ms=%.1f rss_during_mb=%lld "
      "threads_during=%d rss_after_mb=0 threads_after=0\n",
      queued, exit_code, ms, static_cast<long long>(peak.rss_bytes >> 20),
      peak.threads);
}

}  // namespace
}  // namespace grammard::testing
