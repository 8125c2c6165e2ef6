#include "gpu/token_mask_cuda.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gpu/internal/checks.h"
#include "gpu/internal/kernel_params.h"
#include "gpu/internal/mask_kernel.h"
#include "gpu/token_mask.h"

namespace grammard::gpu {
namespace {

absl::Status CudaStatus(cudaError_t err, absl::string_view what) {
  // The error is reported here; clearing it keeps the caller's next
  // cudaGetLastError from blaming its own work for it.
  cudaGetLastError();
  const std::string message = absl::StrCat(what, ": ", cudaGetErrorName(err),
                                           " (", cudaGetErrorString(err), ")");
  switch (err) {
    case cudaErrorInvalidValue:
    case cudaErrorInvalidResourceHandle:
      return absl::InvalidArgumentError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

// Whether the current device can dereference p itself (not a translation of
// it, as for host memory registered on a system without unified addressing).
absl::Status CheckDevicePointer(const void* p, int device,
                                absl::string_view name) {
  cudaPointerAttributes attributes;
  if (const cudaError_t err = cudaPointerGetAttributes(&attributes, p);
      err != cudaSuccess) {
    return CudaStatus(err,
                      absl::StrCat("cudaPointerGetAttributes(", name, ")"));
  }
  if (attributes.devicePointer != p) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " cannot be dereferenced by the GPU (",
                     attributes.type == cudaMemoryTypeUnregistered
                         ? "pageable host memory"
                         : "host memory mapped at another device address",
                     "); pass device, managed or mapped pinned memory"));
  }
  if (attributes.type == cudaMemoryTypeDevice && attributes.device != device) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is memory of device ", attributes.device,
                     " but the current device is ", device));
  }
  return absl::OkStatus();
}

absl::Status CheckPinned(const void* p, absl::string_view name) {
  cudaPointerAttributes attributes;
  if (const cudaError_t err = cudaPointerGetAttributes(&attributes, p);
      err != cudaSuccess) {
    return CudaStatus(err,
                      absl::StrCat("cudaPointerGetAttributes(", name, ")"));
  }
  if (attributes.type != cudaMemoryTypeHost) {
    return absl::InvalidArgumentError(absl::StrCat(
        name,
        " is not pinned host memory (cudaHostAlloc or cudaHostRegister)"));
  }
  return absl::OkStatus();
}

// For arguments CheckArguments accepted, with work to do.
absl::Status CheckDevicePointers(const LogitsView& logits,
                                 const TokenMaskView& mask,
                                 absl::string_view mask_name) {
  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) {
    return CudaStatus(err, "cudaGetDevice");
  }
  if (absl::Status s = CheckDevicePointer(logits.data, device, "logits.data");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckDevicePointer(mask.words, device,
                                          absl::StrCat(mask_name, ".words"));
      !s.ok()) {
    return s;
  }
  if (mask.indices == nullptr) return absl::OkStatus();
  return CheckDevicePointer(mask.indices, device,
                            absl::StrCat(mask_name, ".indices"));
}

absl::Status Launch(const LogitsView& logits, const TokenMaskView& mask,
                    cudaStream_t stream) {
  if (const cudaError_t err = internal::LaunchTokenMaskKernel(
          internal::MakeMaskKernelParams(logits, mask),
          LogitsDtypeBytes(logits.dtype), stream);
      err != cudaSuccess) {
    return CudaStatus(err, "launching the token mask kernel");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyTokenMaskInplace(const LogitsView& logits,
                                   const TokenMaskView& mask,
                                   cudaStream_t stream) {
  if (absl::Status s = internal::CheckArguments(logits, mask); !s.ok()) {
    return s;
  }
  if (!internal::HasWork(logits, mask)) return absl::OkStatus();
  if (absl::Status s = CheckDevicePointers(logits, mask, "mask"); !s.ok()) {
    return s;
  }
  return Launch(logits, mask, stream);
}

absl::Status UploadAndApplyTokenMask(const LogitsView& logits,
                                     const TokenMaskView& host_mask,
                                     const DeviceMaskStaging& staging,
                                     cudaStream_t stream) {
  if (absl::Status s = internal::CheckArguments(logits, host_mask); !s.ok()) {
    return s;
  }
  if (!internal::HasWork(logits, host_mask)) return absl::OkStatus();
  if (host_mask.indices != nullptr) {
    if (absl::Status s = internal::CheckIndices(host_mask.indices,
                                                host_mask.rows, logits.rows);
        !s.ok()) {
      return s;
    }
  }
  const int64_t words = host_mask.rows * host_mask.words_per_row;
  if (staging.words == nullptr) {
    return absl::InvalidArgumentError("staging.words is null");
  }
  if (staging.word_capacity < words) {
    return absl::InvalidArgumentError(absl::StrCat(
        "staging.word_capacity (", staging.word_capacity,
        ") is smaller than host_mask.rows * host_mask.words_per_row (", words,
        ")"));
  }
  if (host_mask.indices != nullptr && staging.indices == nullptr) {
    return absl::InvalidArgumentError(
        "staging.indices is null but host_mask has indices");
  }
  if (host_mask.indices != nullptr && staging.index_capacity < host_mask.rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "staging.index_capacity (", staging.index_capacity,
        ") is smaller than host_mask.rows (", host_mask.rows, ")"));
  }
  if (absl::Status s = CheckPinned(host_mask.words, "host_mask.words");
      !s.ok()) {
    return s;
  }
  if (host_mask.indices != nullptr) {
    if (absl::Status s = CheckPinned(host_mask.indices, "host_mask.indices");
        !s.ok()) {
      return s;
    }
  }
  TokenMaskView device_mask = host_mask;
  device_mask.words = staging.words;
  device_mask.row_stride = host_mask.words_per_row;
  device_mask.indices =
      host_mask.indices == nullptr ? nullptr : staging.indices;
  // Checked before the copies so that a rejected call enqueues nothing.
  if (absl::Status s = CheckDevicePointers(logits, device_mask, "staging");
      !s.ok()) {
    return s;
  }
  if (words > 0) {
    const size_t row_bytes = host_mask.words_per_row * sizeof(uint32_t);
    if (const cudaError_t err = cudaMemcpy2DAsync(
            staging.words, row_bytes, host_mask.words,
            host_mask.row_stride * sizeof(uint32_t), row_bytes, host_mask.rows,
            cudaMemcpyHostToDevice, stream);
        err != cudaSuccess) {
      return CudaStatus(err, "copying host_mask.words to staging.words");
    }
  }
  if (host_mask.indices != nullptr) {
    if (const cudaError_t err = cudaMemcpyAsync(
            staging.indices, host_mask.indices,
            host_mask.rows * sizeof(int32_t), cudaMemcpyHostToDevice, stream);
        err != cudaSuccess) {
      return CudaStatus(err, "copying host_mask.indices to staging.indices");
    }
  }
  return Launch(logits, device_mask, stream);
}

}  // namespace grammard::gpu
