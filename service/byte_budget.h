// ByteBudget: a daemon-wide allowance of bytes that requests may hold at
// once (queued constraint text, the state of open sequences). A holder
// charges what it is about to keep and releases it when done; a charge that
// would pass the limit is refused, so the caller can refuse the request
// with a clear error instead of growing without bound.
//
// Cost: one atomic add per charge or release. Thread-safety: every method
// may be called from any thread.
#ifndef GRAMMARD_SERVICE_BYTE_BUDGET_H_
#define GRAMMARD_SERVICE_BYTE_BUDGET_H_

#include <atomic>
#include <cstdint>

namespace grammard::service {

class ByteBudget {
 public:
  // `limit` bytes; 0 or less: no limit (charges always succeed).
  explicit ByteBudget(int64_t limit) : limit_(limit) {}
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  // Adds `bytes` (>= 0) unless the total would pass the limit; whether it
  // was added.
  bool TryCharge(int64_t bytes) {
    const int64_t after =
        used_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    if (limit_ > 0 && after > limit_ && bytes > 0) {
      used_.fetch_sub(bytes, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  // Adds `bytes` whatever the limit: for what cannot be refused.
  void Charge(int64_t bytes) {
    used_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void Release(int64_t bytes) {
    used_.fetch_sub(bytes, std::memory_order_relaxed);
  }

  int64_t used() const { return used_.load(std::memory_order_relaxed); }
  int64_t limit() const { return limit_; }

 private:
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_BYTE_BUDGET_H_
