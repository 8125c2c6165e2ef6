#include "service/rank_sync.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace grammard::service {

void RankSync::Finish(Round* round, absl::StatusOr<Agreement> outcome) {
  round->done = true;
  round->outcome = std::move(outcome);
  round->finished = Clock::now();
  // Only the outcome is read from now on.
  std::map<uint64_t, int32_t>().swap(round->ready_count);
  std::vector<uint64_t>().swap(round->failed);
}

void RankSync::ForgetOldRounds() {
  const auto now = Clock::now();
  std::vector<std::pair<Clock::time_point, Key>> finished;
  for (auto it = rounds_.begin(); it != rounds_.end();) {
    if (it->second->done && now - it->second->finished > retention_) {
      it = rounds_.erase(it);
    } else {
      if (it->second->done)
        finished.push_back({it->second->finished, it->first});
      ++it;
    }
  }
  if (rounds_.size() < max_rounds_) return;
  std::sort(finished.begin(), finished.end());
  for (const auto& [when, key] : finished) {
    if (rounds_.size() < max_rounds_) break;
    rounds_.erase(key);
  }
}

absl::StatusOr<RankSync::Agreement> RankSync::Join(
    const Report& report, Clock::time_point deadline,
    const std::function<bool()>& cancelled) {
  const std::string where =
      absl::StrCat("group ", report.group, " round ", report.round);
  if (report.world_size <= 0 || report.rank < 0 ||
      report.rank >= report.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": rank ", report.rank, " outside world size ",
                     report.world_size));
  }
  absl::MutexLock lock(&mu_);
  ForgetOldRounds();
  const Key key{report.group, report.round};
  if (rounds_.count(key) == 0 && rounds_.size() >= max_rounds_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        where, ": ", rounds_.size(), " rounds are waiting for ranks already"));
  }
  std::shared_ptr<Round>& slot = rounds_[key];
  if (slot == nullptr) {
    slot = std::make_shared<Round>();
    slot->world_size = report.world_size;
    slot->reported.assign(report.world_size, false);
  }
  // Shared: while the lock is let go below, the map may forget the round.
  const std::shared_ptr<Round> held = slot;
  Round* round = held.get();
  if (round->world_size != report.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": rank ", report.rank, " says world size ", report.world_size,
        " but the round has ", round->world_size));
  }
  if (!round->done) {
    if (round->reported[report.rank]) {
      return absl::AlreadyExistsError(
          absl::StrCat(where, ": rank ", report.rank, " reported twice"));
    }
    round->reported[report.rank] = true;
    ++round->num_reported;
    for (uint64_t id : report.ready) ++round->ready_count[id];
    round->failed.insert(round->failed.end(), report.failed.begin(),
                         report.failed.end());
    if (round->num_reported == round->world_size) {
      Agreement agreed;
      std::sort(round->failed.begin(), round->failed.end());
      round->failed.erase(
          std::unique(round->failed.begin(), round->failed.end()),
          round->failed.end());
      for (const auto& [id, count] : round->ready_count) {
        if (count == round->world_size &&
            !std::binary_search(round->failed.begin(), round->failed.end(),
                                id)) {
          agreed.ready.push_back(id);
        }
      }
      agreed.failed = round->failed;
      Finish(round, std::move(agreed));
    }
  }
  // In slices, so that a caller that went away is noticed.
  constexpr auto kSlice = std::chrono::milliseconds(100);
  while (!round->done) {
    const auto now = Clock::now();
    if (now >= deadline) break;
    if (cancelled) {
      mu_.Unlock();
      const bool gone = cancelled();
      mu_.Lock();
      if (gone) {
        return absl::CancelledError(
            absl::StrCat(where, ": the caller went away"));
      }
      if (round->done) break;
    }
    const auto until = std::min(deadline, Clock::now() + kSlice);
    mu_.AwaitWithDeadline(absl::Condition(
                              +[](Round* r) { return r->done; }, round),
                          absl::Now() + absl::FromChrono(until - Clock::now()));
  }
  if (!round->done) {
    // The ranks missing, at most kShownRanks of them by number.
    constexpr int kShownRanks = 16;
    std::vector<int32_t> missing;
    int32_t more = 0;
    for (int32_t r = 0; r < round->world_size; ++r) {
      if (round->reported[r]) continue;
      if (static_cast<int>(missing.size()) < kShownRanks) {
        missing.push_back(r);
      } else {
        ++more;
      }
    }
    Finish(round, absl::DeadlineExceededError(absl::StrCat(
                      where, ": rank(s) ", absl::StrJoin(missing, ", "),
                      more > 0 ? absl::StrCat(" and ", more, " more") : "",
                      " did not report in time")));
  }
  return round->outcome;
}

}  // namespace grammard::service
