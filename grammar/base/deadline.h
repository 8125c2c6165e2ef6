// Deadline: when a long computation (a compile, a schema conversion) must
// stop: at a point in time, or as soon as a flag is raised, whichever comes
// first. A server raises the flag to cancel running compiles when it shuts
// down; a time alone converts implicitly, so a caller with nothing to cancel
// passes `now + timeout` as before.
//
//   std::atomic<bool> stop{false};
//   Deadline d(std::chrono::steady_clock::now() + std::chrono::seconds(30),
//              &stop);
//   ... if (d.Passed()) return absl::DeadlineExceededError(...);
//
// Cost: Passed() reads the flag (relaxed) and, unless the deadline is
// never, the steady clock (tens of nanoseconds): loops check it every few
// dozen iterations. Thread-safety: a value; the flag it points to may be
// raised from any thread and must outlive every copy.
#ifndef GRAMMARD_GRAMMAR_BASE_DEADLINE_H_
#define GRAMMARD_GRAMMAR_BASE_DEADLINE_H_

#include <algorithm>
#include <atomic>
#include <chrono>

namespace grammard::grammar {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // Never passes.
  Deadline() = default;
  // Passes at `at` (Clock::time_point::max(): never). Implicit: a time is a
  // deadline.
  Deadline(Clock::time_point at) : at_(at) {}  // NOLINT(runtime/explicit)
  // Passes at `at`, or once `*cancel` is true (null: no flag).
  Deadline(Clock::time_point at, const std::atomic<bool>* cancel)
      : at_(at), cancel_(cancel) {}

  bool Passed() const {
    return cancelled() ||
           (at_ != Clock::time_point::max() && Clock::now() > at_);
  }
  // The flag was raised (as opposed to the time passing).
  bool cancelled() const {
    return cancel_ != nullptr && cancel_->load(std::memory_order_relaxed);
  }
  Clock::time_point at() const { return at_; }
  const std::atomic<bool>* cancel_flag() const { return cancel_; }
  // The same flag, and the earlier of the two times.
  Deadline Until(Clock::time_point at) const {
    return Deadline(std::min(at_, at), cancel_);
  }

 private:
  Clock::time_point at_ = Clock::time_point::max();
  const std::atomic<bool>* cancel_ = nullptr;
};

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_BASE_DEADLINE_H_
