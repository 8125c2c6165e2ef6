#include "service/fill_pool.h"

#include <algorithm>

namespace grammard::service {

FillPool::FillPool(int threads) {
  for (int i = 1; i < threads; ++i) helpers_.emplace_back([this] { Help(); });
}

FillPool::~FillPool() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : helpers_) t.join();
}

void FillPool::RunShare() {
  for (size_t i = next_.fetch_add(1); i < n_; i = next_.fetch_add(1)) {
    (*fn_)(i);
  }
}

void FillPool::Help() {
  uint64_t seen = 0;  // the last loop this helper joined
  auto wanted = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || (open_ && round_ != seen);
  };
  absl::MutexLock lock(&mu_);
  for (;;) {
    mu_.Await(absl::Condition(&wanted));
    if (stop_) return;
    seen = round_;
    ++active_;
    mu_.Unlock();
    RunShare();
    mu_.Lock();
    --active_;
  }
}

void FillPool::ForEach(size_t n, size_t min_shared,
                       const std::function<void(size_t)>& fn) {
  if (n < std::max<size_t>(min_shared, 2) || helpers_.empty() ||
      !busy_.TryLock()) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    fn_ = &fn;
    n_ = n;
    next_.store(0);
    open_ = true;
    ++round_;
  }
  RunShare();
  {
    // Closed: a helper waking now does not join; those inside finish the
    // items they took.
    absl::MutexLock lock(&mu_);
    open_ = false;
    mu_.Await(absl::Condition(
        +[](FillPool* p)
             ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) { return p->active_ == 0; },
        this));
    fn_ = nullptr;
  }
  busy_.Unlock();
}

}  // namespace grammard::service
