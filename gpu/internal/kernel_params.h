// Translates checked ApplyTokenMaskInplace arguments into the kernel's
// parameters; shared by the launch path and the host emulation test so both
// exercise the same translation.
//
// Cost: O(1). Thread-safety: stateless.
#ifndef GRAMMARD_GPU_INTERNAL_KERNEL_PARAMS_H_
#define GRAMMARD_GPU_INTERNAL_KERNEL_PARAMS_H_

#include <cstdint>

#include "gpu/internal/checks.h"
#include "gpu/internal/mask_kernel.h"
#include "gpu/token_mask.h"

namespace grammard::gpu::internal {

// For arguments CheckArguments accepted.
inline MaskKernelParams MakeMaskKernelParams(const LogitsView& logits,
                                             const TokenMaskView& mask) {
  const int bytes = LogitsDtypeBytes(logits.dtype);
  const uint32_t neg_inf = NegativeInfinityBits(logits.dtype);
  MaskKernelParams params;
  params.logits = static_cast<char*>(logits.data);
  params.logits_rows = logits.rows;
  params.logits_row_bytes = logits.row_stride * bytes;
  params.vocab = static_cast<int32_t>(logits.vocab);
  params.covered = static_cast<int32_t>(CoveredColumns(logits, mask));
  params.mask = mask.words;
  params.mask_rows = mask.rows;
  params.mask_row_stride = mask.row_stride;
  params.indices = mask.indices;
  params.neg_inf = bytes == 4 ? neg_inf : neg_inf | neg_inf << 16;
  return params;
}

}  // namespace grammard::gpu::internal

#endif  // GRAMMARD_GPU_INTERNAL_KERNEL_PARAMS_H_
