// Bystander: an innocent Decode stream that keeps stepping one sequence under
// a simple regex while a test attacks the daemon, and times every step. A
// hostile client must not stall it: the test reads the latencies of the
// steps made during the attack.
//
// Each step accepts the lowest token the previous row allowed and asks for
// the next row; steps are paced (one per `interval`), as an engine's decode
// steps are, so the bystander itself loads the daemon little.
//
// Cost: one channel, one stream and one thread. Thread-safety: every method
// may be called from any thread.
#ifndef GRAMMARD_TESTS_SUPPORT_BYSTANDER_H_
#define GRAMMARD_TESTS_SUPPORT_BYSTANDER_H_

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace grammard::testing {

class Bystander {
 public:
  // Opens its sequence on `target` and steps until destroyed.
  static absl::StatusOr<std::unique_ptr<Bystander>> Start(
      const std::string& target,
      std::chrono::milliseconds interval = std::chrono::milliseconds(5));
  ~Bystander();

  // Latencies of the steps answered since the last Mark (or Start).
  void Mark();
  std::vector<double> LatenciesMs() const;
  // The q-quantile (0..1) of LatenciesMs; the stall so far counts as one
  // step when a step is still unanswered.
  double QuantileMs(double q) const;
  // The first failure of the stream (a refused step, an ended stream); OK
  // while it steps.
  absl::Status status() const;
  int64_t steps() const;

 private:
  Bystander() = default;
  void Run(std::chrono::milliseconds interval);

  struct Link;
  std::unique_ptr<Link> link_;
  mutable absl::Mutex mu_;
  std::vector<double> latencies_ms_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point waiting_since_ ABSL_GUARDED_BY(mu_);
  bool waiting_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace grammard::testing

#endif  // GRAMMARD_TESTS_SUPPORT_BYSTANDER_H_
