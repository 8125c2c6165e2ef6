#include "grammar/thread_pool.h"

namespace grammard::grammar {

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < num_threads; ++i)
    workers_.emplace_back([this] { Work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunShare(const std::function<void(int64_t)>& fn, int64_t n) {
  for (int64_t i = next_.fetch_add(1); i < n; i = next_.fetch_add(1)) fn(i);
}

// Every worker joins every round and reports back before the round ends, so
// none can wake late into the next one.
void ThreadPool::Work() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const std::function<void(int64_t)>* fn = fn_;
    const int64_t n = n_;
    lock.unlock();
    RunShare(*fn, n);
    lock.lock();
    if (++finished_ == workers_.size()) done_.notify_all();
  }
}

void ThreadPool::ParallelFor(int64_t n,
                             const std::function<void(int64_t)>& fn) {
  if (workers_.empty() || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    finished_ = 0;
    next_.store(0);
    ++generation_;
  }
  wake_.notify_all();
  RunShare(fn, n);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return finished_ == workers_.size(); });
  fn_ = nullptr;
}

}  // namespace grammard::grammar
