#include "tests/load/step_sampler.h"

#include "absl/status/status.h"
#include "proto/mask_rows.h"

namespace grammard::load {

namespace v1 = grammard::v1;

void StepSampler::BeginStep() {
  resolved_.clear();
  counts_.clear();
}

absl::StatusOr<int32_t> StepSampler::Next(const v1::SequenceResult& result,
                                          KeptRow* kept, std::mt19937* rng) {
  if (result.has_error()) {
    return absl::Status(static_cast<absl::StatusCode>(result.error().code()),
                        result.error().message());
  }
  // Every row is resolved, a terminated sequence's too: later rows may
  // refer to it.
  for (int j = 0; j < result.rows_size(); ++j) {
    const v1::MaskRow& row = result.rows(j);
    const v1::MaskRow* target = &row;
    if (row.has_same_as()) {
      if (row.same_as() >= resolved_.size()) {
        return absl::InternalError("same_as refers to no earlier row");
      }
      target = resolved_[row.same_as()];
    } else if (row.has_same_as_previous()) {
      if (j != 0 || kept == nullptr || !kept->has) {
        return absl::InternalError("same_as_previous with no kept row");
      }
      target = &kept->row;
    }
    resolved_.push_back(target);
  }
  if (result.terminated()) return -1;
  if (result.rows_size() == 0) return absl::InternalError("a result, no row");
  const v1::MaskRow& first = *resolved_[resolved_.size() - result.rows_size()];
  // Rows that repeat one row (same_as) are counted once a step.
  auto [counted, added] = counts_.try_emplace(&first, 0);
  if (added) {
    auto allowed = proto::CountAllowed(first, vocab_size_);
    if (!allowed.ok()) return allowed.status();
    counted->second = *allowed;
  }
  const int64_t allowed = counted->second;
  if (allowed == 0) return absl::InternalError("a row allows nothing");
  auto token = proto::NthAllowed(
      first, vocab_size_,
      std::uniform_int_distribution<int64_t>(0, allowed - 1)(*rng));
  if (!token.ok()) return token.status();
  if (kept != nullptr && !result.rows(0).has_same_as_previous()) {
    kept->row = first;
    kept->has = true;
  }
  return *token;
}

}  // namespace grammard::load
