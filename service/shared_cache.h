// SharedCache: the fleet-wide tier of compiled grammars that CompilePool
// consults after a local miss, and the compile lease that makes one replica
// of the fleet compile a grammar while the others wait for its result.
//
// Implemented on Redis (redis/redis_tier.h). Every call may fail (the store
// is down or slow): callers then carry on locally, so a failing tier costs
// latency, never a request.
//
// Thread-safety: implementations are safe to call from any thread.
#ifndef GRAMMARD_SERVICE_SHARED_CACHE_H_
#define GRAMMARD_SERVICE_SHARED_CACHE_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace grammard::service {

class SharedCache {
 public:
  virtual ~SharedCache() = default;

  // The value stored for grammar `id`; nullopt when there is none.
  virtual absl::StatusOr<std::optional<std::string>> Get(
      const std::string& id) = 0;
  // Stores `value` for `id`, expiring after `ttl`. Values over the tier's
  // size cap are not stored (OK: the cap is a policy, not a failure).
  virtual absl::Status Put(const std::string& id, std::string_view value,
                           std::chrono::milliseconds ttl) = 0;

  // Takes the compile lease for `id` unless someone holds it; true if this
  // replica now holds it. A held lease is kept alive until ReleaseLease and
  // lapses on its own if this process dies.
  virtual absl::StatusOr<bool> AcquireLease(const std::string& id) = 0;
  // Whether any replica holds the lease for `id`.
  virtual absl::StatusOr<bool> LeaseHeld(const std::string& id) = 0;
  virtual void ReleaseLease(const std::string& id) = 0;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_SHARED_CACHE_H_
