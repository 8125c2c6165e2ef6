// ProcessWatch: samples another process's resident memory and thread count
// (/proc/<pid>/status) every few milliseconds, keeps their peaks, and kills
// the process (SIGKILL) the moment either passes a hard cap. A hostile-client
// test that the daemon fails then fails as a test, with the figures, instead
// of exhausting the machine it runs on.
//
// Cost: one small /proc read per interval on a thread of its own.
// Thread-safety: every method may be called from any thread.
#ifndef GRAMMARD_TESTS_SUPPORT_PROCESS_WATCH_H_
#define GRAMMARD_TESTS_SUPPORT_PROCESS_WATCH_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace grammard::testing {

struct ProcessSample {
  int64_t rss_bytes = -1;  // -1: the process is gone
  int threads = -1;
};

// The process's figures now; -1s once it has exited.
ProcessSample SampleProcess(pid_t pid);

class ProcessWatch {
 public:
  struct Caps {
    int64_t rss_bytes = int64_t{4} << 30;
    int threads = 2000;
  };
  ProcessWatch(
      pid_t pid, const Caps& caps,
      std::chrono::milliseconds interval = std::chrono::milliseconds(10));
  ~ProcessWatch();

  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  // Peaks since construction or the last ResetPeaks.
  ProcessSample Peak() const;
  void ResetPeaks();
  // Whether a cap was passed (and the process killed); what was passed.
  bool killed() const { return killed_.load(); }
  std::string why_killed() const;

 private:
  void Run();

  const pid_t pid_;
  const Caps caps_;
  const std::chrono::milliseconds interval_;
  mutable absl::Mutex mu_;
  ProcessSample peak_ ABSL_GUARDED_BY(mu_);
  std::string why_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> killed_{false};
  std::thread thread_;
};

// Waits (up to `within`) until the process's resident memory is at most
// `rss_bytes` and its threads at most `threads`; the last sample either way.
ProcessSample SettleBelow(pid_t pid, int64_t rss_bytes, int threads,
                          std::chrono::milliseconds within);

}  // namespace grammard::testing

#endif  // GRAMMARD_TESTS_SUPPORT_PROCESS_WATCH_H_
