// Argument checks shared by ApplyTokenMaskCpu and the CUDA entry points, so
// every implementation rejects the same inputs with the same messages.
//
// Cost: CheckArguments is O(1) and reads no logits, mask or index memory (it
// may be device memory); CheckIndices is O(count + logits_rows) and allocates
// one bit per logits row. Thread-safety: stateless.
#ifndef GRAMMARD_GPU_INTERNAL_CHECKS_H_
#define GRAMMARD_GPU_INTERNAL_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gpu/token_mask.h"

namespace grammard::gpu::internal {

// Column arithmetic is int32 on the GPU, and a thread's column can run up to
// 8K past the row's end: logits.vocab and the bits of a mask row stay below
// 2^30 to leave that headroom.
inline constexpr int64_t kMaxColumns = int64_t{1} << 30;

// Shapes, strides, dtype, extents, and the pointers a call with work
// (HasWork) dereferences: non-null and aligned to their element size.
absl::Status CheckArguments(const LogitsView& logits,
                            const TokenMaskView& mask);

// Host-readable indices: each in [0, logits_rows), none repeated.
absl::Status CheckIndices(const int32_t* indices, int64_t count,
                          int64_t logits_rows);

// Whether any logit can change: some mask row and some column.
bool HasWork(const LogitsView& logits, const TokenMaskView& mask);

// min(mask vocab, logits.vocab), for arguments CheckArguments accepted.
int64_t CoveredColumns(const LogitsView& logits, const TokenMaskView& mask);

}  // namespace grammard::gpu::internal

#endif  // GRAMMARD_GPU_INTERNAL_CHECKS_H_
