// RedisTier against a real redis-server: values and their TTL, the size
// cap, leases (exclusive, renewed while held, lapsing when the holder stops),
// AUTH, TLS, and the breaker opening while Redis is down and closing once
// it is back.
#include "service/redis/redis_tier.h"

#include <thread>

#include "gtest/gtest.h"
#include "service/metrics/metrics.h"
#include "tests/support/redis_server.h"

namespace grammard::service::redis {
namespace {

using std::chrono::milliseconds;
using testing::RedisServer;
using testing::RedisServerOptions;

class RedisTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RedisServer::Installed()) {
      GTEST_SKIP() << "redis-server is not installed (Debian package "
                      "redis-server)";
    }
  }

  std::unique_ptr<RedisServer> StartRedis(RedisServerOptions o = {}) {
    auto r = RedisServer::Start(o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : nullptr;
  }

  RedisTier::Options OptionsFor(const RedisServer& server) {
    RedisTier::Options o;
    o.redis.port = server.port();
    o.redis.timeout = milliseconds(500);
    o.prefix = "test:";
    return o;
  }

  metrics::Registry registry_;
  ServiceMetrics metrics_{&registry_};
};

TEST_F(RedisTierTest, PutGetAndExpiry) {
  auto server = StartRedis();
  ASSERT_NE(server, nullptr);
  RedisTier tier(OptionsFor(*server), &metrics_);
  EXPECT_EQ(*tier.Get("g1"), std::nullopt);
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(tier.Put("g1", big, milliseconds(60000)).ok());
  EXPECT_EQ(*tier.Get("g1"), big);
  ASSERT_TRUE(tier.Put("short", "x", milliseconds(50)).ok());
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_EQ(*tier.Get("short"), std::nullopt);
  EXPECT_EQ(tier.ValueKey("g1"), "test:{g1}");
  EXPECT_EQ(tier.LeaseKey("g1"), "test:{g1}:lease");
}

TEST_F(RedisTierTest, ValuesOverTheCapAreNotStored) {
  auto server = StartRedis();
  ASSERT_NE(server, nullptr);
  RedisTier::Options o = OptionsFor(*server);
  o.max_value_bytes = 10;
  RedisTier tier(o, &metrics_);
  EXPECT_TRUE(tier.Put("big", std::string(11, 'x'), milliseconds(60000)).ok());
  EXPECT_EQ(*tier.Get("big"), std::nullopt);
  EXPECT_TRUE(tier.Put("small", "0123456789", milliseconds(60000)).ok());
  EXPECT_EQ(*tier.Get("small"), "0123456789");
}

TEST_F(RedisTierTest, LeaseIsExclusiveRenewedAndReleased) {
  auto server = StartRedis();
  ASSERT_NE(server, nullptr);
  RedisTier::Options o = OptionsFor(*server);
  o.lease = milliseconds(300);
  RedisTier a(o, &metrics_), b(o, &metrics_);
  EXPECT_TRUE(*a.AcquireLease("g"));
  EXPECT_FALSE(*b.AcquireLease("g"));
  // Held well past its lifetime: the renewal keeps it.
  std::this_thread::sleep_for(milliseconds(900));
  EXPECT_TRUE(*b.LeaseHeld("g"));
  EXPECT_FALSE(*b.AcquireLease("g"));
  // Only the holder's release drops it.
  b.ReleaseLease("g");
  EXPECT_TRUE(*b.LeaseHeld("g"));
  a.ReleaseLease("g");
  EXPECT_FALSE(*b.LeaseHeld("g"));
  EXPECT_TRUE(*b.AcquireLease("g"));
}

TEST_F(RedisTierTest, LeaseOfADeadHolderLapses) {
  auto server = StartRedis();
  ASSERT_NE(server, nullptr);
  RedisTier::Options o = OptionsFor(*server);
  o.lease = milliseconds(300);
  RedisTier b(o, &metrics_);
  // A holder that died: its lease, never renewed.
  RedisOptions raw;
  raw.port = server->port();
  auto conn = RedisConnection::Connect(raw);
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE((*conn)
                  ->Command({"SET", b.LeaseKey("g"), "dead", "NX", "PX", "300"})
                  .ok());
  EXPECT_FALSE(*b.AcquireLease("g"));
  std::this_thread::sleep_for(milliseconds(450));
  EXPECT_FALSE(*b.LeaseHeld("g"));
  EXPECT_TRUE(*b.AcquireLease("g"));
}

TEST_F(RedisTierTest, Auth) {
  auto server = StartRedis({"s3cret", false});
  ASSERT_NE(server, nullptr);
  RedisTier::Options o = OptionsFor(*server);
  {
    RedisTier none(o, &metrics_);
    absl::Status s = none.Put("g", "v", milliseconds(1000));
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("NOAUTH"), std::string::npos) << s;
  }
  o.redis.password = "wrong";
  {
    RedisTier wrong(o, &metrics_);
    absl::Status s = wrong.Get("g").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  }
  o.redis.password = "s3cret";
  RedisTier right(o, &metrics_);
  ASSERT_TRUE(right.Put("g", "v", milliseconds(1000)).ok());
  EXPECT_EQ(*right.Get("g"), "v");
}

TEST_F(RedisTierTest, Tls) {
  auto server = StartRedis({"", true});
  ASSERT_NE(server, nullptr);
  RedisTier::Options o = OptionsFor(*server);
  o.redis.tls = true;
  o.redis.tls_ca_file = server->ca_file();
  RedisTier tier(o, &metrics_);
  ASSERT_TRUE(tier.Put("g", "over tls", milliseconds(1000)).ok());
  EXPECT_EQ(*tier.Get("g"), "over tls");
  // Without trusting the certificate the handshake fails.
  o.redis.tls_ca_file = "/dev/null";
  RedisTier untrusting(o, &metrics_);
  EXPECT_FALSE(untrusting.Get("g").ok());
  // Plain text to a TLS port gets no answer in time.
  o.redis.tls = false;
  RedisTier plain(o, &metrics_);
  EXPECT_FALSE(plain.Get("g").ok());
}

TEST_F(RedisTierTest, BreakerOpensWhileDownAndClosesWhenBack) {
  auto server = StartRedis();
  ASSERT_NE(server, nullptr);
  RedisTier::Options o = OptionsFor(*server);
  o.redis.timeout = milliseconds(100);
  o.breaker_failures = 3;
  o.breaker_backoff = milliseconds(200);
  RedisTier tier(o, &metrics_);
  ASSERT_TRUE(tier.Put("g", "v", milliseconds(60000)).ok());
  server->Stop();
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(tier.Get("g").ok());
  EXPECT_EQ(metrics_.redis_breaker_open->Value(), 1);
  // Open: refused without trying.
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status s = tier.Get("g").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("breaker open"), std::string::npos) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(50));
  ASSERT_TRUE(server->Restart().ok());
  // The next probe after the backoff reconnects and closes the breaker.
  bool back = false;
  for (int i = 0; i < 100 && !back; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
    back = tier.Put("g", "again", milliseconds(60000)).ok();
  }
  EXPECT_TRUE(back);
  EXPECT_EQ(metrics_.redis_breaker_open->Value(), 0);
  EXPECT_EQ(*tier.Get("g"), "again");
  EXPECT_GE(metrics_.redis_errors->Value(), 4);
}

}  // namespace
}  // namespace grammard::service::redis
