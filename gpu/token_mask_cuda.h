// Applying packed token masks to logits on the GPU: ApplyTokenMaskInplace
// launches a kernel on the caller's stream; UploadAndApplyTokenMask first
// copies the masks from pinned host memory on that stream. Semantics and
// argument types are in token_mask.h; results are bit-identical to
// ApplyTokenMaskCpu.
//
// Cost: host side, the argument checks, a cudaPointerGetAttributes per
// pointer (so a host pointer is reported, not left to kill the context) and
// one launch; nothing waits for the GPU (mask_bench's gpu_latency rows
// measure it). Device side, a memory-bound kernel over 16-byte chunks of
// logits (4 fp32 or 8 fp16/bf16): a chunk whose tokens are all allowed costs
// no logits traffic, one with none allowed a store of -inf, a mixed one a
// load and a store; every covered mask word of the masked rows is read once
// (1/32 of the fp32 logits bytes, 1/16 of 16-bit ones).
//
// All-allowed rows are skipped by that per-chunk test inside the kernel,
// rather than by a per-row flag from the caller: such a row then costs
// reading its mask and no logits traffic, a few percent of masking it; the
// test also skips allowed stretches inside constrained rows; and no second
// input can disagree with the mask. A caller that knows from the wire format
// that a row allows everything can still leave it out of mask.indices and
// not send its mask at all.
//
// Errors: InvalidArgument for anything token_mask.h rejects and for pointers
// the GPU cannot dereference (pageable host memory, another device's memory);
// CUDA failures carry the CUDA error's name and text. Faults inside the
// kernel surface at the stream's next synchronisation, as for any kernel.
// Indices in device memory cannot be checked without a synchronisation: the
// kernel skips out-of-range ones, and repeated ones leave their row
// unspecified. UploadAndApplyTokenMask checks them on the host.
//
// Thread-safety: stateless; any thread may call at any time, and the work is
// ordered by the stream it is given.
#ifndef GRAMMARD_GPU_TOKEN_MASK_CUDA_H_
#define GRAMMARD_GPU_TOKEN_MASK_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "gpu/token_mask.h"

// Declared as cuda_fp16.h and cuda_bf16.h declare them: including those
// headers would cost every client their parse time, and under g++ they need
// libcu++ headers without a file extension (<nv/target>) that
// //third_party:cuda_headers does not export.
struct __half;
struct __nv_bfloat16;

namespace grammard::gpu {

template <>
struct LogitsDtypeOf<__half> {
  static constexpr LogitsDtype value = LogitsDtype::kFloat16;
};
template <>
struct LogitsDtypeOf<__nv_bfloat16> {
  static constexpr LogitsDtype value = LogitsDtype::kBFloat16;
};

// Masks logits in place on `stream`. logits.data, mask.words and
// mask.indices must be usable by the current device: its own memory, managed
// memory or mapped pinned host memory.
absl::Status ApplyTokenMaskInplace(const LogitsView& logits,
                                   const TokenMaskView& mask,
                                   cudaStream_t stream);

// Device buffers that UploadAndApplyTokenMask copies masks into: allocate
// them once and reuse them. Calls ordered on one stream may share them.
struct DeviceMaskStaging {
  uint32_t* words = nullptr;
  int64_t word_capacity = 0;
  // Only masks with indices need these.
  int32_t* indices = nullptr;
  int64_t index_capacity = 0;
};

// Copies host_mask's rows (packed to words_per_row words each) and indices
// from pinned host memory (cudaHostAlloc, cudaHostRegister) into staging
// with cudaMemcpyAsync on `stream`, then masks logits on the same stream.
// Pageable memory is rejected: copying from it would block the caller. The
// host buffers must stay unchanged until the stream has passed the copies,
// the staging buffers until it has passed the kernel.
absl::Status UploadAndApplyTokenMask(const LogitsView& logits,
                                     const TokenMaskView& host_mask,
                                     const DeviceMaskStaging& staging,
                                     cudaStream_t stream);

}  // namespace grammard::gpu

#endif  // GRAMMARD_GPU_TOKEN_MASK_CUDA_H_
