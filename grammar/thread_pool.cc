#include "grammar/thread_pool.h"

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
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunShare(const std::function<void(int64_t)>& fn, int64_t n) {
  for (int64_t i = next_.fetch_add(1); i < n; i = next_.fetch_add(1)) fn(i);
}

// A round's fn_ and n_ are written before generation_ moves on (release)
// and read after a worker sees it move (acquire). Every worker reports back
// before the round ends, so none can wake late into the next one.
void ThreadPool::Work() {
  uint64_t seen = 0;
  while (true) {
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    for (int polls = 1;; ++polls) {
      if (generation_.load(std::memory_order_acquire) != seen ||
          stop_.load(std::memory_order_acquire)) {
        break;
      }
      if (polls % 64 == 0 && std::chrono::steady_clock::now() > spin_until) {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] {
          return generation_.load(std::memory_order_acquire) != seen ||
                 stop_.load(std::memory_order_acquire);
        });
        break;
      }
      std::this_thread::yield();
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    RunShare(*fn_, n_);
    finished_.fetch_add(1, std::memory_order_acq_rel);
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
  finished_.store(0);
  {
    // Under the lock so that a worker going to sleep cannot miss it.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  RunShare(fn, n);
  while (finished_.load(std::memory_order_acquire) !=
         static_cast<int>(workers_.size())) {
    std::this_thread::yield();
  }
  fn_ = nullptr;
}

}  // namespace grammard::grammar
