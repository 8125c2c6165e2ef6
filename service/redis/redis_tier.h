// RedisTier: SharedCache on Redis, with a connection pool, short timeouts
// and a circuit breaker.
//
// Keys (Redis Cluster safe: each command names one key, and a grammar's
// value and lease share a hash tag, hence a slot):
//   <prefix>{<grammar id>}        the cached value, with a TTL
//   <prefix>{<grammar id>}:lease  the compile lease: a random token, PX
// A lease is renewed by a background thread every third of its lifetime,
// and released only by its holder (compare-and-delete in Lua).
//
// The breaker opens after `breaker_failures` consecutive failed calls; while
// open every call fails at once (Unavailable) and counts as an error. After
// a backoff (doubling from breaker_backoff to breaker_backoff_max) one call
// is let through to probe: success closes it, failure opens it again.
// Connections broken by an error are dropped and made anew on demand.
//
// Cost: one round trip per call on a pooled connection.
// Thread-safety: every method may be called from any thread.
#ifndef GRAMMARD_SERVICE_REDIS_REDIS_TIER_H_
#define GRAMMARD_SERVICE_REDIS_REDIS_TIER_H_

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "service/redis/redis_connection.h"
#include "service/service_metrics.h"
#include "service/shared_cache.h"

namespace grammard::service::redis {

class RedisTier : public SharedCache {
 public:
  struct Options {
    RedisOptions redis;
    std::string prefix = "grammard:";
    size_t max_value_bytes = size_t{256} << 20;
    std::chrono::milliseconds lease{3000};
    int breaker_failures = 3;
    std::chrono::milliseconds breaker_backoff{500};
    std::chrono::milliseconds breaker_backoff_max{30000};
  };

  // Connects lazily: a Redis that is down at start is not an error.
  // `metrics` must outlive the tier.
  RedisTier(const Options& options, ServiceMetrics* metrics);
  // Releases held leases (best effort) and stops the renewal thread.
  ~RedisTier() override;

  absl::StatusOr<std::optional<std::string>> Get(
      const std::string& id) override;
  absl::Status Put(const std::string& id, std::string_view value,
                   std::chrono::milliseconds ttl) override;
  absl::StatusOr<bool> AcquireLease(const std::string& id) override;
  absl::StatusOr<bool> LeaseHeld(const std::string& id) override;
  void ReleaseLease(const std::string& id) override;

  std::string ValueKey(const std::string& id) const;
  std::string LeaseKey(const std::string& id) const;

 private:
  // One command on a pooled connection, through the breaker.
  absl::StatusOr<RedisReply> Call(const std::vector<std::string_view>& args);
  bool BreakerAllows();
  void BreakerRecord(bool ok);
  void RenewLoop();

  const Options options_;
  ServiceMetrics* const metrics_;

  absl::Mutex pool_mu_;
  std::vector<std::unique_ptr<RedisConnection>> idle_ ABSL_GUARDED_BY(pool_mu_);

  absl::Mutex breaker_mu_;
  int failures_ ABSL_GUARDED_BY(breaker_mu_) = 0;
  bool open_ ABSL_GUARDED_BY(breaker_mu_) = false;
  bool probing_ ABSL_GUARDED_BY(breaker_mu_) = false;
  std::chrono::milliseconds backoff_ ABSL_GUARDED_BY(breaker_mu_);
  std::chrono::steady_clock::time_point retry_at_ ABSL_GUARDED_BY(breaker_mu_);

  absl::Mutex lease_mu_;
  // Lease key -> our token, for leases this process holds.
  std::unordered_map<std::string, std::string> leases_
      ABSL_GUARDED_BY(lease_mu_);
  bool stopping_ ABSL_GUARDED_BY(lease_mu_) = false;
  std::thread renewer_;
};

}  // namespace grammard::service::redis

#endif  // GRAMMARD_SERVICE_REDIS_REDIS_TIER_H_
