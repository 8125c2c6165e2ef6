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
}

void RankSync::ForgetOldRounds() {
  const auto now = Clock::now();
  for (auto it = rounds_.begin(); it != rounds_.end();) {
    if (it->second->done && now - it->second->finished > retention_) {
      it = rounds_.erase(it);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<RankSync::Agreement> RankSync::Join(const Report& report,
                                                   Clock::time_point deadline) {
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
  std::unique_ptr<Round>& slot = rounds_[{report.group, report.round}];
  if (slot == nullptr) {
    slot = std::make_unique<Round>();
    slot->world_size = report.world_size;
    slot->reported.assign(report.world_size, false);
  }
  Round* round = slot.get();
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
  const absl::Time until =
      absl::Now() + absl::FromChrono(deadline - Clock::now());
  mu_.AwaitWithDeadline(absl::Condition(
                            +[](Round* r) { return r->done; }, round),
                        until);
  if (!round->done) {
    std::vector<int32_t> missing;
    for (int32_t r = 0; r < round->world_size; ++r) {
      if (!round->reported[r]) missing.push_back(r);
    }
    Finish(round, absl::DeadlineExceededError(absl::StrCat(
                      where, ": rank(s) ", absl::StrJoin(missing, ", "),
                      " did not report in time")));
  }
  return round->outcome;
}

}  // namespace grammard::service
