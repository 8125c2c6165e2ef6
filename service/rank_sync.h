// RankSync: the readiness barrier of tensor/data-parallel groups, with
// SGLang's semantics. Each rank of a group reports, for one round, which of
// its sequences have a ready grammar and which failed; once every rank has
// reported, all of them get the same answer: failed = union over ranks,
// ready = intersection over ranks minus failed. So every rank schedules the
// same sequences.
//
// A round never hangs and never diverges: a rank whose deadline passes
// before the others report fails the round for everyone (DeadlineExceeded
// naming the missing ranks), and a rank arriving after that gets the same
// error. Finished rounds are remembered for `retention` so late or repeated
// reports get the round's outcome, up to `max_rounds` rounds in all: past
// that the oldest finished ones are forgotten first, and a new round is
// ResourceExhausted while all are still waiting for ranks. A waiting call
// whose client went away (`cancelled`) returns Cancelled within 100 ms.
//
// Cost: Join is O(ids reported) under one mutex, then a wait.
// Thread-safety: every method may be called from any thread.
#ifndef GRAMMARD_SERVICE_RANK_SYNC_H_
#define GRAMMARD_SERVICE_RANK_SYNC_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace grammard::service {

class RankSync {
 public:
  using Clock = std::chrono::steady_clock;

  struct Report {
    std::string group;
    uint64_t round = 0;
    int32_t rank = 0;
    int32_t world_size = 0;
    std::vector<uint64_t> ready;
    std::vector<uint64_t> failed;
  };
  struct Agreement {
    std::vector<uint64_t> ready;   // sorted
    std::vector<uint64_t> failed;  // sorted
  };

  explicit RankSync(std::chrono::seconds retention = std::chrono::seconds(60),
                    size_t max_rounds = 1024)
      : retention_(retention), max_rounds_(max_rounds) {}

  // Reports and waits for the round's outcome until `deadline`.
  // InvalidArgument for a rank outside [0, world_size) or a world size
  // differing from the round's; AlreadyExists for a rank reporting twice.
  absl::StatusOr<Agreement> Join(
      const Report& report, Clock::time_point deadline,
      const std::function<bool()>& cancelled = nullptr);

 private:
  struct Round {
    int32_t world_size = 0;
    std::vector<bool> reported;
    int32_t num_reported = 0;
    std::map<uint64_t, int32_t> ready_count;
    std::vector<uint64_t> failed;
    bool done = false;
    absl::StatusOr<Agreement> outcome = Agreement{};
    Clock::time_point finished;
  };
  using Key = std::pair<std::string, uint64_t>;

  void Finish(Round* round, absl::StatusOr<Agreement> outcome)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets finished rounds past their retention, and more, oldest first,
  // while over max_rounds_.
  void ForgetOldRounds() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::chrono::seconds retention_;
  const size_t max_rounds_;
  absl::Mutex mu_;
  std::map<Key, std::shared_ptr<Round>> rounds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_RANK_SYNC_H_
