// CudaMaskApplier: a Client's step masks applied to logits on the GPU. It
// waits for the step's reply, decodes the rows into pinned host memory of
// its own and calls gpu::UploadAndApplyTokenMask, which copies them to the
// device and masks the logits on the caller's stream; nothing waits for the
// GPU.
//
// Two pinned buffers alternate, so decoding step n+1 never overwrites rows
// the stream may still be copying for step n: before reusing a buffer (two
// steps later) the applier waits for the event recorded after its copy,
// long passed in practice. The device staging buffers are shared by all
// calls, and each call's stream first waits for the previous call's kernel,
// so calls on different streams are safe too.
//
// Cost per step: WaitMasks, the decode into pinned memory, and two async
// copies plus one kernel launch on the stream. Buffers grow to the largest
// step seen (growing waits for the work that uses the old ones).
//
// Thread-safety: one thread at a time (the engine's step loop).
#ifndef GRAMMARD_CLIENT_CUDA_MASK_APPLIER_H_
#define GRAMMARD_CLIENT_CUDA_MASK_APPLIER_H_

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "client/client.h"
#include "gpu/token_mask_cuda.h"

namespace grammard::client {

class CudaMaskApplier {
 public:
  // Allocates nothing until the first call; `client` must outlive it.
  explicit CudaMaskApplier(Client* client) : client_(client) {}
  // Waits for the GPU work that uses its buffers, then frees them.
  ~CudaMaskApplier();

  CudaMaskApplier(const CudaMaskApplier&) = delete;
  CudaMaskApplier& operator=(const CudaMaskApplier&) = delete;

  // Client::WaitMasks, then masks device `logits` on `stream`: mask row k
  // applies to logits row indices[k] (indices in host memory, copied), or
  // row k when indices is null. Errors of the client as WaitMasks returns
  // them; CUDA failures carry the CUDA error's name.
  absl::Status WaitAndApply(const gpu::LogitsView& logits,
                            const int32_t* indices, cudaStream_t stream,
                            std::vector<SequenceMasks>* results,
                            std::chrono::milliseconds timeout = {});

 private:
  struct HostSlot {
    uint32_t* words = nullptr;  // pinned
    int64_t word_capacity = 0;
    int32_t* indices = nullptr;  // pinned
    int64_t index_capacity = 0;
    cudaEvent_t copied = nullptr;  // recorded after the upload's copies
  };

  absl::Status Reserve(HostSlot* slot, int64_t words, int64_t indices);
  absl::Status ReserveStaging(int64_t words, int64_t indices);

  Client* const client_;
  HostSlot slots_[2];
  int next_slot_ = 0;
  gpu::DeviceMaskStaging staging_;
  cudaEvent_t kernel_done_ = nullptr;  // recorded after the last kernel
};

}  // namespace grammard::client

#endif  // GRAMMARD_CLIENT_CUDA_MASK_APPLIER_H_
