#include "client/cuda_mask_applier.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace grammard::client {
namespace {

absl::Status Cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();  // so the error does not resurface in later calls
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(err),
                                          ": ", cudaGetErrorString(err)));
}

// Grows a pinned buffer to at least `count` elements of T.
template <typename T>
absl::Status GrowPinned(T** data, int64_t* capacity, int64_t count) {
  if (count <= *capacity) return absl::OkStatus();
  cudaFreeHost(*data);
  *data = nullptr;
  *capacity = 0;
  void* p = nullptr;
  if (absl::Status s =
          Cuda(cudaHostAlloc(&p, static_cast<size_t>(count) * sizeof(T),
                             cudaHostAllocDefault),
               "cudaHostAlloc");
      !s.ok()) {
    return s;
  }
  *data = static_cast<T*>(p);
  *capacity = count;
  return absl::OkStatus();
}

template <typename T>
absl::Status GrowDevice(T** data, int64_t* capacity, int64_t count) {
  if (count <= *capacity) return absl::OkStatus();
  cudaFree(*data);
  *data = nullptr;
  *capacity = 0;
  void* p = nullptr;
  if (absl::Status s = Cuda(
          cudaMalloc(&p, static_cast<size_t>(count) * sizeof(T)), "cudaMalloc");
      !s.ok()) {
    return s;
  }
  *data = static_cast<T*>(p);
  *capacity = count;
  return absl::OkStatus();
}

}  // namespace

CudaMaskApplier::~CudaMaskApplier() {
  for (HostSlot& slot : slots_) {
    if (slot.copied != nullptr) {
      cudaEventSynchronize(slot.copied);
      cudaEventDestroy(slot.copied);
    }
    cudaFreeHost(slot.words);
    cudaFreeHost(slot.indices);
  }
  if (kernel_done_ != nullptr) {
    cudaEventSynchronize(kernel_done_);
    cudaEventDestroy(kernel_done_);
  }
  cudaFree(staging_.words);
  cudaFree(staging_.indices);
}

absl::Status CudaMaskApplier::Reserve(HostSlot* slot, int64_t words,
                                      int64_t indices) {
  if (slot->copied == nullptr) {
    if (absl::Status s = Cuda(
            cudaEventCreateWithFlags(&slot->copied, cudaEventDisableTiming),
            "cudaEventCreate");
        !s.ok()) {
      return s;
    }
  }
  // The stream must be past the copies out of this slot (two steps ago)
  // before the slot is rewritten or freed.
  if (absl::Status s =
          Cuda(cudaEventSynchronize(slot->copied), "cudaEventSynchronize");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = GrowPinned(&slot->words, &slot->word_capacity, words);
      !s.ok()) {
    return s;
  }
  return GrowPinned(&slot->indices, &slot->index_capacity, indices);
}

absl::Status CudaMaskApplier::ReserveStaging(int64_t words, int64_t indices) {
  if (kernel_done_ == nullptr) {
    if (absl::Status s = Cuda(
            cudaEventCreateWithFlags(&kernel_done_, cudaEventDisableTiming),
            "cudaEventCreate");
        !s.ok()) {
      return s;
    }
  }
  if (words <= staging_.word_capacity && indices <= staging_.index_capacity) {
    return absl::OkStatus();
  }
  // The last kernel reads the staging buffers until it is done.
  if (absl::Status s =
          Cuda(cudaEventSynchronize(kernel_done_), "cudaEventSynchronize");
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          GrowDevice(&staging_.words, &staging_.word_capacity, words);
      !s.ok()) {
    return s;
  }
  return GrowDevice(&staging_.indices, &staging_.index_capacity, indices);
}

absl::Status CudaMaskApplier::WaitAndApply(const gpu::LogitsView& logits,
                                           const int32_t* indices,
                                           cudaStream_t stream,
                                           std::vector<SequenceMasks>* results,
                                           std::chrono::milliseconds timeout) {
  const int64_t rows = client_->PendingRows();
  const int64_t words_per_row = client_->words_per_row();
  const int64_t words = std::max<int64_t>(1, rows * words_per_row);
  const int64_t index_count =
      indices != nullptr ? std::max<int64_t>(1, rows) : 0;
  HostSlot& slot = slots_[next_slot_];
  if (absl::Status s = Reserve(&slot, words, index_count); !s.ok()) return s;
  if (absl::Status s = ReserveStaging(words, index_count); !s.ok()) return s;
  if (absl::Status s = client_->WaitMasks({slot.words, words_per_row, rows},
                                          results, timeout);
      !s.ok()) {
    return s;
  }
  if (indices != nullptr) {
    std::memcpy(slot.indices, indices,
                static_cast<size_t>(rows) * sizeof(int32_t));
  }
  gpu::TokenMaskView mask;
  mask.words = slot.words;
  mask.rows = rows;
  mask.words_per_row = words_per_row;
  mask.row_stride = words_per_row;
  mask.vocab = client_->vocab_size();
  mask.indices = indices != nullptr ? slot.indices : nullptr;
  // The staging buffers are shared: this stream starts after the previous
  // call's kernel, whichever stream that was on.
  if (absl::Status s = Cuda(cudaStreamWaitEvent(stream, kernel_done_, 0),
                            "cudaStreamWaitEvent");
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          gpu::UploadAndApplyTokenMask(logits, mask, staging_, stream);
      !s.ok()) {
    return s;
  }
  next_slot_ ^= 1;
  if (absl::Status s =
          Cuda(cudaEventRecord(slot.copied, stream), "cudaEventRecord");
      !s.ok()) {
    return s;
  }
  return Cuda(cudaEventRecord(kernel_done_, stream), "cudaEventRecord");
}

}  // namespace grammard::client
