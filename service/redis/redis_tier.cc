#include "service/redis/redis_tier.h"

#include <openssl/rand.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace grammard::service::redis {
namespace {

using Clock = std::chrono::steady_clock;

// Only the holder may renew or drop a lease: the token proves it.
constexpr char kRenewScript[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
constexpr char kReleaseScript[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end";

std::string RandomToken() {
  unsigned char bytes[16];
  RAND_bytes(bytes, sizeof(bytes));
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

}  // namespace

RedisTier::RedisTier(const Options& options, ServiceMetrics* metrics)
    : options_(options), metrics_(metrics), backoff_(options.breaker_backoff) {
  renewer_ = std::thread([this] { RenewLoop(); });
}

RedisTier::~RedisTier() {
  std::vector<std::string> held;
  {
    absl::MutexLock lock(&lease_mu_);
    stopping_ = true;
    for (const auto& [id, token] : leases_) held.push_back(id);
  }
  renewer_.join();
  for (const std::string& id : held) ReleaseLease(id);
}

std::string RedisTier::ValueKey(const std::string& id) const {
  return absl::StrCat(options_.prefix, "{", id, "}");
}

std::string RedisTier::LeaseKey(const std::string& id) const {
  return absl::StrCat(options_.prefix, "{", id, "}:lease");
}

bool RedisTier::BreakerAllows() {
  absl::MutexLock lock(&breaker_mu_);
  if (!open_) return true;
  if (probing_ || Clock::now() < retry_at_) return false;
  probing_ = true;  // this call is the probe
  return true;
}

void RedisTier::BreakerRecord(bool ok) {
  absl::MutexLock lock(&breaker_mu_);
  if (ok) {
    failures_ = 0;
    open_ = probing_ = false;
    backoff_ = options_.breaker_backoff;
    metrics_->redis_breaker_open->Set(0);
    return;
  }
  metrics_->redis_errors->Increment();
  if (open_) {  // the probe failed
    probing_ = false;
    backoff_ = std::min(backoff_ * 2, options_.breaker_backoff_max);
    retry_at_ = Clock::now() + backoff_;
    return;
  }
  if (++failures_ >= options_.breaker_failures) {
    open_ = true;
    retry_at_ = Clock::now() + backoff_;
    metrics_->redis_breaker_open->Set(1);
  }
}

absl::StatusOr<RedisReply> RedisTier::Call(
    const std::vector<std::string_view>& args) {
  if (!BreakerAllows()) {
    metrics_->redis_errors->Increment();
    return absl::UnavailableError(
        "redis: circuit breaker open after repeated failures");
  }
  std::unique_ptr<RedisConnection> conn;
  {
    absl::MutexLock lock(&pool_mu_);
    if (!idle_.empty()) {
      conn = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (conn == nullptr) {
    absl::StatusOr<std::unique_ptr<RedisConnection>> made =
        RedisConnection::Connect(options_.redis);
    if (!made.ok()) {
      BreakerRecord(false);
      return made.status();
    }
    conn = *std::move(made);
  }
  absl::StatusOr<RedisReply> reply = conn->Command(args);
  // An error reply (a script error, a full Redis) is the server answering:
  // the connection is healthy, but the tier is not working for us.
  BreakerRecord(reply.ok());
  if (!conn->broken()) {
    absl::MutexLock lock(&pool_mu_);
    idle_.push_back(std::move(conn));
  }
  return reply;
}

absl::StatusOr<std::optional<std::string>> RedisTier::Get(
    const std::string& id) {
  const std::string key = ValueKey(id);
  absl::StatusOr<RedisReply> r = Call({"GET", key});
  if (!r.ok()) return r.status();
  if (r->type != RedisReply::Type::kString) return std::nullopt;
  return std::move(r->str);
}

absl::Status RedisTier::Put(const std::string& id, std::string_view value,
                            std::chrono::milliseconds ttl) {
  if (value.size() > options_.max_value_bytes) return absl::OkStatus();
  const std::string key = ValueKey(id);
  const std::string px = std::to_string(std::max<int64_t>(1, ttl.count()));
  return Call({"SET", key, value, "PX", px}).status();
}

absl::StatusOr<bool> RedisTier::AcquireLease(const std::string& id) {
  const std::string key = LeaseKey(id);
  const std::string token = RandomToken();
  const std::string px = std::to_string(options_.lease.count());
  absl::StatusOr<RedisReply> r = Call({"SET", key, token, "NX", "PX", px});
  if (!r.ok()) return r.status();
  if (r->type == RedisReply::Type::kNil) return false;
  absl::MutexLock lock(&lease_mu_);
  leases_[id] = token;
  return true;
}

absl::StatusOr<bool> RedisTier::LeaseHeld(const std::string& id) {
  const std::string key = LeaseKey(id);
  absl::StatusOr<RedisReply> r = Call({"EXISTS", key});
  if (!r.ok()) return r.status();
  return r->integer > 0;
}

void RedisTier::ReleaseLease(const std::string& id) {
  std::string token;
  {
    absl::MutexLock lock(&lease_mu_);
    auto it = leases_.find(id);
    if (it == leases_.end()) return;
    token = std::move(it->second);
    leases_.erase(it);
  }
  // A failure leaves the lease to lapse on its own.
  const std::string key = LeaseKey(id);
  Call({"EVAL", kReleaseScript, "1", key, token}).IgnoreError();
}

void RedisTier::RenewLoop() {
  const absl::Duration period = absl::FromChrono(options_.lease) / 3;
  for (;;) {
    std::vector<std::pair<std::string, std::string>> held;
    {
      absl::MutexLock lock(&lease_mu_);
      lease_mu_.AwaitWithTimeout(absl::Condition(&stopping_), period);
      if (stopping_) return;
      held.assign(leases_.begin(), leases_.end());
    }
    const std::string px = std::to_string(options_.lease.count());
    for (const auto& [id, token] : held) {
      const std::string key = LeaseKey(id);
      Call({"EVAL", kRenewScript, "1", key, token, px}).IgnoreError();
    }
  }
}

}  // namespace grammard::service::redis
