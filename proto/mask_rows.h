// Mask rows on the wire (grammard.v1.MaskRow): the service encodes each
// packed row in its smallest form (all allowed, allowed ids, forbidden ids or
// the bitmap); clients decode it back to packed uint32 words.
//
// Cost: EncodeMaskRow is one popcount pass over the row plus a pass over the
// chosen form; DecodeMaskRow is linear in the encoded size plus the row's
// words. Thread-safety: pure functions.
#ifndef GRAMMARD_PROTO_MASK_ROWS_H_
#define GRAMMARD_PROTO_MASK_ROWS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "proto/grammard.pb.h"

namespace grammard::proto {

// Encodes words[0, ceil(vocab_size / 32)); bits at or past vocab_size must
// be zero. A row with no bit set is still encoded (as an empty allowed
// list); the service never sends one.
void EncodeMaskRow(const uint32_t* words, int32_t vocab_size,
                   grammard::v1::MaskRow* row);

// Writes ceil(vocab_size / 32) words. InvalidArgument for a row with no
// encoding, an id outside [0, vocab_size) or a bitmap of the wrong length.
absl::Status DecodeMaskRow(const grammard::v1::MaskRow& row, int32_t vocab_size,
                           uint32_t* words);

// Which form a row was encoded in (for metrics and tests).
enum class MaskEncoding { kAllAllowed, kAllowed, kForbidden, kBitmap };
MaskEncoding EncodingOf(const grammard::v1::MaskRow& row);
const char* MaskEncodingName(MaskEncoding encoding);

}  // namespace grammard::proto

#endif  // GRAMMARD_PROTO_MASK_ROWS_H_
