// The fleet-wide cache, whole-system: a real redis-server and three real
// daemons sharing it. A grammar compiled on one replica is an L2 hit on
// another; concurrent requests over the fleet compile once; killing the
// compiling replica lets another take over; a Redis outage loses no request
// and the tier recovers; damaged and wrong-version values are replaced.
#include <zlib.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grammar/compiled_grammar.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grammard.grpc.pb.h"
#include "service/redis/redis_connection.h"
#include "tests/support/daemon.h"
#include "tests/support/paths.h"
#include "tests/support/redis_server.h"

namespace grammard {
namespace {

namespace v1 = grammard::v1;
using std::chrono::milliseconds;
using testing::Daemon;
using testing::Metric;
using testing::RedisServer;

constexpr char kPrefix[] = "t:";

// A small schema made unique by `tag`, so each test compiles afresh.
std::string Schema(const std::string& tag) {
  return absl::StrCat(
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":)",
      "20", R"(},"tag":{"const":")", tag,
      R"("},"n":{"type":"integer","minimum":0,"maximum":99999}},)",
      R"("required":["name","tag"]})");
}

double Compiles(const Daemon& d) {
  return Metric(d, "grammard_compile_duration_seconds_count");
}

class RedisCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RedisServer::Installed()) {
      GTEST_SKIP() << "redis-server is not installed (Debian package "
                      "redis-server)";
    }
    if (!testing::TokenizerDir("llama3")) {
      GTEST_SKIP() << testing::MissingDataMessage("the llama3 tokenizer");
    }
    auto redis = RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = *std::move(redis);
    for (int i = 0; i < 3; ++i) {
      testing::DaemonOptions o;
      // Compiles classify every token before they are done, so that the
      // order schema compiles for about half a second (a few milliseconds
      // otherwise): long enough to kill its compiler.
      o.flags = {absl::StrCat("--redis=127.0.0.1:", redis_->port()),
                 absl::StrCat("--redis_prefix=", kPrefix),
                 "--redis_timeout_ms=200", "--redis_lease_ms=1000",
                 "--classify_ahead_ms=600000"};
      auto d = Daemon::Start(o);
      ASSERT_TRUE(d.ok()) << d.status();
      daemons_.push_back(*std::move(d));
      stubs_.push_back(v1::Grammard::NewStub(grpc::CreateChannel(
          daemons_.back()->target(), grpc::InsecureChannelCredentials())));
    }
  }

  v1::CompileResponse Compile(int replica, const std::string& schema,
                              grpc::Status* status = nullptr) {
    v1::CompileRequest request;
    request.set_tokenizer("llama3");
    request.mutable_constraint()->set_json_schema(schema);
    request.set_wait(true);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(120));
    v1::CompileResponse response;
    grpc::Status s = stubs_[replica]->Compile(&context, request, &response);
    if (status != nullptr) *status = s;
    EXPECT_TRUE(status != nullptr || s.ok()) << s.error_message();
    return response;
  }

  std::unique_ptr<service::redis::RedisConnection> RedisClient() {
    service::redis::RedisOptions o;
    o.port = redis_->port();
    o.timeout = milliseconds(2000);
    auto c = service::redis::RedisConnection::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  static std::string Key(const std::string& id) {
    return absl::StrCat(kPrefix, "{", id, "}");
  }

  std::unique_ptr<RedisServer> redis_;
  std::vector<std::unique_ptr<Daemon>> daemons_;
  std::vector<std::unique_ptr<v1::Grammard::Stub>> stubs_;
};

TEST_F(RedisCacheTest, CompiledOnOneReplicaIsAnL2HitOnAnother) {
  const v1::CompileResponse a = Compile(0, Schema("l2"));
  ASSERT_EQ(a.state(), v1::GRAMMAR_STATE_READY) << a.error().message();
  EXPECT_EQ(Compiles(*daemons_[0]), 1);
  const v1::CompileResponse b = Compile(1, Schema("l2"));
  ASSERT_EQ(b.state(), v1::GRAMMAR_STATE_READY) << b.error().message();
  EXPECT_EQ(b.grammar_id(), a.grammar_id());
  EXPECT_EQ(b.num_states(), a.num_states());
  // Not memory_bytes: a grammar grows as its tokens are classified (after
  // the compile, in the background), so the copy in Redis holds what was
  // classified when it was stored.
  EXPECT_GT(b.memory_bytes(), 0);
  EXPECT_EQ(Compiles(*daemons_[1]), 0);
  EXPECT_EQ(Metric(*daemons_[1], "grammard_redis_hits_total"), 1);
  // A failure that would repeat is shared too (briefly).
  const v1::CompileResponse bad = Compile(0, R"({"type":"no such type"})");
  EXPECT_EQ(bad.state(), v1::GRAMMAR_STATE_FAILED);
  const v1::CompileResponse bad_b = Compile(1, R"({"type":"no such type"})");
  EXPECT_EQ(bad_b.state(), v1::GRAMMAR_STATE_FAILED);
  EXPECT_EQ(bad_b.error().message(), bad.error().message());
  EXPECT_EQ(Compiles(*daemons_[1]), 0);
}

TEST_F(RedisCacheTest, TwentyConcurrentRequestsOverThreeReplicasCompileOnce) {
  const std::string schema = Schema("twenty");
  std::vector<std::thread> threads;
  std::vector<v1::CompileResponse> responses(20);
  for (int i = 0; i < 20; ++i) {
    threads.emplace_back([&, i] { responses[i] = Compile(i % 3, schema); });
  }
  for (std::thread& t : threads) t.join();
  for (const v1::CompileResponse& r : responses) {
    EXPECT_EQ(r.state(), v1::GRAMMAR_STATE_READY) << r.error().message();
    EXPECT_EQ(r.grammar_id(), responses[0].grammar_id());
  }
  EXPECT_EQ(
      Compiles(*daemons_[0]) + Compiles(*daemons_[1]) + Compiles(*daemons_[2]),
      1);
}

// The order schema compiles for about half a second, classifying every
// token (see SetUp): long enough to kill its compiler.
TEST_F(RedisCacheTest, KillingTheCompilingReplicaStillAnswersTheOthers) {
  auto shared = testing::SharedDataDir();
  const std::string path =
      testing::SourceRoot().empty()
          ? ""
          : testing::SourceRoot() + "/../shared/bench/order_schema_nolen.json";
  const std::string schema = testing::ReadFileOrEmpty(path);
  if (schema.empty()) GTEST_SKIP() << testing::MissingDataMessage(path);
  std::thread first([&] {
    grpc::Status status;
    Compile(0, schema, &status);  // its replica dies: UNAVAILABLE
  });
  // Wait until replica 0 compiles (it holds the lease), then ask the others.
  for (int i = 0;
       i < 500 && Metric(*daemons_[0], "grammard_compiles_running") < 1; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(Metric(*daemons_[0], "grammard_compiles_running"), 1);
  std::vector<v1::CompileResponse> responses(2);
  std::thread second([&] { responses[0] = Compile(1, schema); });
  std::thread third([&] { responses[1] = Compile(2, schema); });
  for (int i = 0;
       i < 500 &&
       Metric(*daemons_[1], "grammard_redis_remote_waits_total") +
               Metric(*daemons_[2], "grammard_redis_remote_waits_total") <
           2;
       ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  daemons_[0]->Kill();
  second.join();
  third.join();
  first.join();
  for (const v1::CompileResponse& r : responses) {
    EXPECT_EQ(r.state(), v1::GRAMMAR_STATE_READY) << r.error().message();
  }
  EXPECT_EQ(Compiles(*daemons_[1]) + Compiles(*daemons_[2]), 1);
}

TEST_F(RedisCacheTest, RedisOutageLosesNoRequestAndTheTierRecovers) {
  ASSERT_EQ(Compile(0, Schema("before")).state(), v1::GRAMMAR_STATE_READY);
  redis_->Stop();
  for (int i = 0; i < 6; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const v1::CompileResponse r =
        Compile(i % 3, Schema(absl::StrCat("down", i)));
    EXPECT_EQ(r.state(), v1::GRAMMAR_STATE_READY) << r.error().message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  }
  EXPECT_GT(Metric(*daemons_[0], "grammard_redis_errors_total"), 0);
  ASSERT_TRUE(redis_->Restart().ok());
  // Once the breakers let a probe through, grammars are shared again.
  bool shared = false;
  for (int i = 0; i < 100 && !shared; ++i) {
    const std::string schema = Schema(absl::StrCat("after", i));
    ASSERT_EQ(Compile(0, schema).state(), v1::GRAMMAR_STATE_READY);
    const double hits = Metric(*daemons_[1], "grammard_redis_hits_total");
    ASSERT_EQ(Compile(1, schema).state(), v1::GRAMMAR_STATE_READY);
    shared = Metric(*daemons_[1], "grammard_redis_hits_total") == hits + 1;
    if (!shared) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(shared);
  EXPECT_EQ(Metric(*daemons_[0], "grammard_redis_breaker_open"), 0);
}

// A value of another engine version: the stored value, inflated, with the
// engine's version string altered, stored back undeflated.
std::string WithOtherEngineVersion(const std::string& value) {
  uint64_t body_len = 0;
  std::memcpy(&body_len, value.data() + 5, 8);
  std::string body(body_len, '\0');
  if (value[4] == 1) {
    uLongf len = body_len;
    uncompress(reinterpret_cast<Bytef*>(body.data()), &len,
               reinterpret_cast<const Bytef*>(value.data() + 13),
               value.size() - 13);
  } else {
    body = value.substr(13);
  }
  const size_t at = body.find(grammar::kEngineVersion);
  if (at == std::string::npos) return "";
  body[at + std::strlen(grammar::kEngineVersion) - 1] ^= 1;
  std::string out = value.substr(0, 13);
  out[4] = 0;
  return out + body;
}

TEST_F(RedisCacheTest, DamagedOrWrongVersionValuesAreIgnoredAndReplaced) {
  auto redis = RedisClient();
  ASSERT_NE(redis, nullptr);
  int replica = 0;
  for (const char* kind : {"garbage", "truncated", "other engine"}) {
    SCOPED_TRACE(kind);
    const std::string schema = Schema(kind);
    const v1::CompileResponse first = Compile(replica, schema);
    ASSERT_EQ(first.state(), v1::GRAMMAR_STATE_READY);
    const std::string key = Key(first.grammar_id());
    auto stored = redis->Command({"GET", key});
    ASSERT_TRUE(stored.ok() && !stored->str.empty());
    std::string bad = std::string(kind) == "garbage" ? "garbage"
                      : std::string(kind) == "truncated"
                          ? stored->str.substr(0, stored->str.size() / 2)
                          : WithOtherEngineVersion(stored->str);
    ASSERT_FALSE(bad.empty());
    ASSERT_TRUE(redis->Command({"SET", key, bad}).ok());
    const int next = (replica + 1) % 3;
    const double rejected =
        Metric(*daemons_[next], "grammard_redis_rejected_total");
    const double compiles = Compiles(*daemons_[next]);
    const v1::CompileResponse again = Compile(next, schema);
    EXPECT_EQ(again.state(), v1::GRAMMAR_STATE_READY);
    EXPECT_EQ(Metric(*daemons_[next], "grammard_redis_rejected_total"),
              rejected + 1);
    EXPECT_EQ(Compiles(*daemons_[next]), compiles + 1);
    // Replaced by a good value: the third replica loads it.
    auto replaced = redis->Command({"GET", key});
    ASSERT_TRUE(replaced.ok());
    EXPECT_TRUE(replaced->str != bad);
    const int third = (next + 1) % 3;
    const double third_compiles = Compiles(*daemons_[third]);
    EXPECT_EQ(Compile(third, schema).state(), v1::GRAMMAR_STATE_READY);
    EXPECT_EQ(Compiles(*daemons_[third]), third_compiles);
    replica = next;
  }
}

}  // namespace
}  // namespace grammard
