// StepSampler: the load benchmarks' model stand-in. For each sequence of a
// StepResult it draws one token uniformly from the tokens its first row
// allows, read from the row as it came off the wire: references resolved
// (same_as to the earlier row of the step, same_as_previous to the row the
// sequence kept), proto::CountAllowed once per distinct row of a step and
// proto::NthAllowed one pass per sequence. Decoding every row into 16 KB of
// words first would cost about a millisecond a step for 64 rows, work a node
// does on its GPU, and leave the daemon idle that long.
//
// Cost: per step, a popcount pass (bitmaps) or a pass over the ids (lists)
// of each distinct first row, and one more per sequence.
// Thread-safety: one per stream, used by one thread at a time.
#ifndef GRAMMARD_TESTS_LOAD_STEP_SAMPLER_H_
#define GRAMMARD_TESTS_LOAD_STEP_SAMPLER_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "proto/grammard.pb.h"

namespace grammard::load {

// A sequence's first row as it last came, for same_as_previous (sequences
// opened with keeps_previous_row).
struct KeptRow {
  grammard::v1::MaskRow row;
  bool has = false;
};

class StepSampler {
 public:
  explicit StepSampler(int32_t vocab_size) : vocab_size_(vocab_size) {}

  // Call before the first sequence of each StepResult.
  void BeginStep();

  // The next SequenceResult of the step, in order: the token drawn, or -1
  // when the sequence terminated. `kept` (null: the sequence keeps no row)
  // is updated with its first row. An error for a sequence's error or a
  // malformed result.
  absl::StatusOr<int32_t> Next(const grammard::v1::SequenceResult& result,
                               KeptRow* kept, std::mt19937* rng);

 private:
  const int32_t vocab_size_;
  std::vector<const grammard::v1::MaskRow*> resolved_;  // the step's rows
  absl::flat_hash_map<const grammard::v1::MaskRow*, int64_t> counts_;
};

}  // namespace grammard::load

#endif  // GRAMMARD_TESTS_LOAD_STEP_SAMPLER_H_
