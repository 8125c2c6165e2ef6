// FillPool: the threads that fill and encode the mask rows of Decode steps,
// shared by all streams. A step's loop borrows the helpers when they are
// free and runs on its own thread while another stream's step has them, so
// streams never wait for each other.
//
// Cost: a loop shorter than its min_shared items, or one that finds the
// helpers taken, runs on the calling thread alone, at no cost beyond its
// items. Waking a helper costs the caller a futex call and the helper a
// context switch, and a helper on an idle vCPU of a VM arrives tens of
// microseconds later, after a short loop is done; on a node, where the
// cores belong to the engine feeding the GPUs, it is CPU spent for nothing.
// For the same reason a helper sleeps as soon as a loop is done rather than
// polling for the next (grammar::ThreadPool polls 50 us: a step's three
// loops then kept a core busy a step long). A loop never waits for a helper
// to wake: the caller takes every item no helper took.
//
// Thread-safety: ForEach may be called from any thread.
#ifndef GRAMMARD_SERVICE_FILL_POOL_H_
#define GRAMMARD_SERVICE_FILL_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace grammard::service {

class FillPool {
 public:
  // `threads` counts the calling thread: threads - 1 helpers.
  explicit FillPool(int threads);
  ~FillPool();
  FillPool(const FillPool&) = delete;
  FillPool& operator=(const FillPool&) = delete;

  // Runs fn(i) for every i in [0, n), in any order; with the helpers when
  // n >= min_shared and no other loop has them. Returns when all are done.
  void ForEach(size_t n, size_t min_shared,
               const std::function<void(size_t)>& fn);

 private:
  void Help();
  // Takes items until none is left.
  void RunShare();

  absl::Mutex busy_;  // held by the loop that has the helpers
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool open_ ABSL_GUARDED_BY(mu_) = false;   // a loop takes helpers now
  uint64_t round_ ABSL_GUARDED_BY(mu_) = 0;  // loops that took helpers
  int active_ ABSL_GUARDED_BY(mu_) = 0;      // helpers inside the loop
  // The open loop's: written under mu_ before it opens, read by helpers
  // that saw it open (and counted themselves in active_).
  const std::function<void(size_t)>* fn_ = nullptr;
  size_t n_ = 0;
  std::atomic<size_t> next_{0};
  std::vector<std::thread> helpers_;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_FILL_POOL_H_
