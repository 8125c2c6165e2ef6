#include "tests/support/process_watch.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace grammard::testing {

ProcessSample SampleProcess(pid_t pid) {
  ProcessSample sample;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/status", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return sample;
  char line[256];
  bool zombie = false;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    long long value = 0;
    char state = 0;
    if (std::sscanf(line, "VmRSS: %lld kB", &value) == 1) {
      sample.rss_bytes = value * 1024;
    } else if (std::sscanf(line, "Threads: %lld", &value) == 1) {
      sample.threads = static_cast<int>(value);
    } else if (std::sscanf(line, "State: %c", &state) == 1) {
      zombie = state == 'Z' || state == 'X';
    }
  }
  std::fclose(f);
  if (zombie) return ProcessSample{};
  return sample;
}

ProcessWatch::ProcessWatch(pid_t pid, const Caps& caps,
                           std::chrono::milliseconds interval)
    : pid_(pid), caps_(caps), interval_(interval) {
  peak_ = SampleProcess(pid_);
  thread_ = std::thread([this] { Run(); });
}

ProcessWatch::~ProcessWatch() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

ProcessSample ProcessWatch::Peak() const {
  absl::MutexLock lock(&mu_);
  return peak_;
}

void ProcessWatch::ResetPeaks() {
  const ProcessSample now = SampleProcess(pid_);
  absl::MutexLock lock(&mu_);
  peak_ = now;
}

std::string ProcessWatch::why_killed() const {
  absl::MutexLock lock(&mu_);
  return why_;
}

void ProcessWatch::Run() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::FromChrono(interval_));
    if (stop_ || killed_.load()) continue;
    const ProcessSample s = SampleProcess(pid_);
    if (s.rss_bytes < 0) continue;  // exited
    peak_.rss_bytes = std::max(peak_.rss_bytes, s.rss_bytes);
    peak_.threads = std::max(peak_.threads, s.threads);
    if (s.rss_bytes > caps_.rss_bytes || s.threads > caps_.threads) {
      why_ = absl::StrCat("killed at ", s.rss_bytes >> 20, " MB resident and ",
                          s.threads, " threads (caps ", caps_.rss_bytes >> 20,
                          " MB, ", caps_.threads, ")");
      kill(pid_, SIGKILL);
      killed_.store(true);
    }
  }
}

ProcessSample SettleBelow(pid_t pid, int64_t rss_bytes, int threads,
                          std::chrono::milliseconds within) {
  const auto give_up = std::chrono::steady_clock::now() + within;
  for (;;) {
    const ProcessSample s = SampleProcess(pid);
    if ((s.rss_bytes <= rss_bytes && s.threads <= threads) ||
        std::chrono::steady_clock::now() > give_up) {
      return s;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace grammard::testing
