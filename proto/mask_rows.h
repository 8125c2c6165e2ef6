// Mask rows on the wire (grammard.v1.MaskRow): the service encodes each
// packed row in its smallest form (all allowed, allowed ids, forbidden ids,
// the bitmap, or a reference to an identical earlier row of the step);
// clients decode it back to packed uint32 words.
//
// Cost: EncodeMaskRow is one popcount pass over the row plus a pass over the
// chosen form; decoding is linear in the encoded size plus the row's words.
// Thread-safety: the functions are pure; a StepRowDecoder is one caller's.
#ifndef GRAMMARD_PROTO_MASK_ROWS_H_
#define GRAMMARD_PROTO_MASK_ROWS_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/grammard.pb.h"

namespace grammard::proto {

// Encodes words[0, ceil(vocab_size / 32)); bits at or past vocab_size must
// be zero. A row with no bit set is still encoded (as an empty allowed
// list); the service never sends one.
void EncodeMaskRow(const uint32_t* words, int32_t vocab_size,
                   grammard::v1::MaskRow* row);

// Writes ceil(vocab_size / 32) words. InvalidArgument for a row with no
// encoding, an id outside [0, vocab_size), a bitmap of the wrong length or
// with bits past vocab_size, or a reference (same_as, same_as_previous: only
// StepRowDecoder resolves them).
absl::Status DecodeMaskRow(const grammard::v1::MaskRow& row, int32_t vocab_size,
                           uint32_t* words);

// Decodes the rows of one StepResult: call Next for every row of every
// sequence, in order. A same_as row is copied from where the row it repeats
// was decoded, so those words must stay in place until the step is done.
// A same_as_previous row is copied from `previous`, the sequence's first
// row of its latest step (kept by a client that opened it with
// keeps_previous_row; may be `words` itself). Not thread-safe; one per step
// (or Reset between steps).
class StepRowDecoder {
 public:
  absl::Status Next(const grammard::v1::MaskRow& row, int32_t vocab_size,
                    uint32_t* words, const uint32_t* previous = nullptr);
  void Reset() { decoded_.clear(); }

 private:
  struct Decoded {
    const uint32_t* words;
    int32_t vocab_size;
  };
  std::vector<Decoded> decoded_;
};

// Every row of a StepResult, decoded: the rows of sequences(i) start at
// words[offsets[i]], each ceil(vocab_size(i) / 32) words.
struct DecodedStep {
  std::vector<uint32_t> words;
  std::vector<size_t> offsets;
};
absl::StatusOr<DecodedStep> DecodeStepRows(
    const grammard::v1::StepResult& step,
    absl::FunctionRef<int32_t(size_t)> vocab_size);
// The same, resolving same_as_previous rows from previous_row(i): the first
// row sequences(i) had at its latest step, or null when there is none.
absl::StatusOr<DecodedStep> DecodeStepRows(
    const grammard::v1::StepResult& step,
    absl::FunctionRef<int32_t(size_t)> vocab_size,
    absl::FunctionRef<const uint32_t*(size_t)> previous_row);

// How many tokens an encoded row (not a reference) allows, and the k-th of
// them (from 0, ascending), read from the row as it came: a client that
// samples on the CPU need not decode it into words. Cost: a popcount pass
// over a bitmap, a pass over an id list. InvalidArgument for a reference or
// a malformed row; NthAllowed: OutOfRange unless 0 <= k < CountAllowed.
absl::StatusOr<int64_t> CountAllowed(const grammard::v1::MaskRow& row,
                                     int32_t vocab_size);
absl::StatusOr<int32_t> NthAllowed(const grammard::v1::MaskRow& row,
                                   int32_t vocab_size, int64_t k);

// Which form a row was encoded in (for metrics and tests).
enum class MaskEncoding {
  kAllAllowed,
  kAllowed,
  kForbidden,
  kBitmap,
  kSameAs,
  kSameAsPrevious
};
inline constexpr int kNumMaskEncodings = 6;
MaskEncoding EncodingOf(const grammard::v1::MaskRow& row);
const char* MaskEncodingName(MaskEncoding encoding);

}  // namespace grammard::proto

#endif  // GRAMMARD_PROTO_MASK_ROWS_H_
