// ThreadPool: a fixed set of worker threads for data-parallel loops, such as
// filling the mask rows of a batch (one matcher per row).
//
// Cost: ParallelFor hands out indices through one atomic counter, so any
// worker that finishes early takes the next row; the calling thread works
// too. Idle workers poll (yielding) for 50 us after a round before they
// sleep, so back-to-back rounds skip the wake-up latency; a round never
// waits for a sleeping worker to wake (the caller does what is left).
// Thread-safety: ParallelFor may be called from one thread at a time.
#ifndef GRAMMARD_GRAMMAR_BASE_THREAD_POOL_H_
#define GRAMMARD_GRAMMAR_BASE_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace grammard::grammar {

class ThreadPool {
 public:
  // num_threads counts the caller: 1 runs everything on the calling thread.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(i) for every i in [0, n) and returns when all are done.
  void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn);

 private:
  void Work();
  void RunShare(const std::function<void(int64_t)>& fn, int64_t n);

  std::vector<std::thread> workers_;
  // Only for sleeping and waking workers: a worker sleeps until a round
  // opens or the pool stops, both of which happen under it.
  absl::Mutex mu_;
  std::atomic<uint64_t> round_{0};  // odd while a ParallelFor is open
  std::atomic<bool> stop_{false};
  std::atomic<int> active_{0};                        // workers inside a round
  const std::function<void(int64_t)>* fn_ = nullptr;  // see Work()
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
};

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_BASE_THREAD_POOL_H_
