// Encoding the mask rows of one Decode step for the wire. Most rows of a
// batch repeat: sequences sharing a grammar sit in the same state (in one
// benchmark, 8 rows in 10 equal an earlier row of their step), and a
// sequence inside a long string keeps its row from step to step. So a
// sequence's first row equal to the one it was last sent goes out as
// MaskRow.same_as_previous (when its client keeps that row) or reuses its
// encoding, a row equal to an earlier row of its step becomes a reference
// to it (MaskRow.same_as), and only the other rows are encoded
// (proto/mask_rows.h), possibly in parallel.
//
// Cost: per row a 64-bit hash of a quarter of its words and, on a hash
// match, a memcmp; an encode (about 15 us for 5,000 listed ids of the llama3
// vocabulary) only for new rows; a RowMemory holds a copy of the row and
// its encoding (about 20 KB for llama3).
//
// Thread-safety: a StepRowEncoder belongs to one stream's handler thread;
// Finish may run encodes concurrently through its for_each argument.
#ifndef GRAMMARD_SERVICE_STEP_ROWS_H_
#define GRAMMARD_SERVICE_STEP_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "proto/grammard.pb.h"

namespace grammard::service {

// A sequence's first row as last sent, kept between its steps, and its
// encoding when it was sent encoded (otherwise no encoding is set).
struct RowMemory {
  std::vector<uint32_t> words;
  grammard::v1::MaskRow encoded;
};

class StepRowEncoder {
 public:
  // Runs fn(i) for every i in [0, n), in any order, possibly concurrently.
  using ForEach =
      std::function<void(size_t n, const std::function<void(size_t)>& fn)>;

  // The next row of the step, in wire order: ceil(vocab_size / 32) words
  // that must stay in place until Finish. For a sequence's first row,
  // `memory` is where it is kept between steps (null for the others), and
  // `client_keeps_previous` says the client keeps it too. `out` is written
  // by Add or by Finish.
  void Add(const uint32_t* words, int32_t vocab_size, RowMemory* memory,
           bool client_keeps_previous, grammard::v1::MaskRow* out);

  // Encodes the rows that need it, updates their memories and gets ready
  // for the next step.
  void Finish(const ForEach& for_each);

 private:
  struct Row {
    const uint32_t* words;
    int32_t vocab_size;
    uint32_t next_same_hash;  // an earlier row with the same hash, or kNone
  };
  struct Pending {
    const uint32_t* words;
    int32_t vocab_size;
    RowMemory* memory;
    grammard::v1::MaskRow* out;
  };
  static constexpr uint32_t kNone = ~0u;

  std::vector<Row> rows_;
  absl::flat_hash_map<uint64_t, uint32_t> last_with_hash_;
  std::vector<Pending> pending_;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_STEP_ROWS_H_
