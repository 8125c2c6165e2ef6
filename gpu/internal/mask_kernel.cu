#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/internal/mask_kernel.h"

namespace grammard::gpu::internal {
namespace {

// Blocks per SM at full occupancy: 2048 threads from sm_80 on, 1024 on sm_75.
// Saying so caps registers at 32 per thread (ptxas would take 38 and fit
// only 6 blocks).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
constexpr int kMinBlocksPerSm = 1024 / kThreadsPerBlock;
#else
constexpr int kMinBlocksPerSm = 2048 / kThreadsPerBlock;
#endif

template <int kElemBytes>
__global__ void __launch_bounds__(kThreadsPerBlock, kMinBlocksPerSm)
    TokenMaskKernel(const __grid_constant__ MaskKernelParams params) {
  for (int64_t k = blockIdx.y; k < params.mask_rows; k += gridDim.y) {
    MaskRowSlice<kElemBytes>(params, k, blockIdx.x, threadIdx.x);
  }
}

}  // namespace

cudaError_t LaunchTokenMaskKernel(const MaskKernelParams& params,
                                  int elem_bytes, cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim =
      dim3(static_cast<unsigned>(BlocksPerRow(params.vocab, elem_bytes)),
           static_cast<unsigned>(GridRows(params.mask_rows)));
  config.blockDim = dim3(kThreadsPerBlock);
  config.stream = stream;
  if (elem_bytes == 4) {
    return cudaLaunchKernelEx(&config, TokenMaskKernel<4>, params);
  }
  return cudaLaunchKernelEx(&config, TokenMaskKernel<2>, params);
}

}  // namespace grammard::gpu::internal
