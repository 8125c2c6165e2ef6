#include "grammar/base/thread_pool.h"

#include <chrono>

namespace grammard::grammar {
namespace {

// How long an idle worker keeps polling before it sleeps: a decode loop
// asks for the next batch's masks soon, and waking a sleeping thread costs
// tens of microseconds, as much as filling a whole batch of easy rows.
constexpr std::chrono::microseconds kSpin{50};

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < num_threads; ++i)
    workers_.emplace_back([this] { Work(); });
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stop_.store(true, std::memory_order_release);
  }
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunShare(const std::function<void(int64_t)>& fn, int64_t n) {
  for (int64_t i = next_.fetch_add(1); i < n; i = next_.fetch_add(1)) fn(i);
}

// A round is open while round_ is odd; fn_ and n_ are written before it
// opens (release) and read by a worker that saw it open (acquire). A worker
// counts itself in active_ and then checks the round is still the one it
// saw: the caller closes the round and then waits for active_ to drop to
// zero, so (all four being sequentially consistent) a worker either got in
// before the close and is waited for, or sees the close and touches
// nothing. A worker still asleep when the round opens is not waited for.
void ThreadPool::Work() {
  uint64_t done = 0;  // the last round this worker saw
  auto ready = [&] {
    const uint64_t r = round_.load(std::memory_order_acquire);
    return ((r & 1) != 0 && r != done) || stop_.load(std::memory_order_acquire);
  };
  while (true) {
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    for (int polls = 1; !ready(); ++polls) {
      if (polls % 64 == 0 && std::chrono::steady_clock::now() > spin_until) {
        absl::MutexLock lock(&mu_, absl::Condition(&ready));
        break;
      }
      std::this_thread::yield();
    }
    if (stop_.load(std::memory_order_acquire)) return;
    const uint64_t seen = round_.load();
    active_.fetch_add(1);
    if (round_.load() == seen && (seen & 1) != 0) RunShare(*fn_, n_);
    active_.fetch_sub(1);
    done = seen;
  }
}

void ThreadPool::ParallelFor(int64_t n,
                             const std::function<void(int64_t)>& fn) {
  if (workers_.empty() || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  fn_ = &fn;
  n_ = n;
  next_.store(0);
  {
    // Under the lock so that a worker going to sleep cannot miss it.
    absl::MutexLock lock(&mu_);
    round_.fetch_add(1);  // open
  }
  RunShare(fn, n);
  round_.fetch_add(1);  // closed: no worker starts on it now
  while (active_.load() != 0) std::this_thread::yield();
  fn_ = nullptr;
}

}  // namespace grammard::grammar
