// The CUDA kernel behind ApplyTokenMaskInplace, written so that one GPU
// thread's work (MaskRowSlice) also compiles for the host:
// mask_kernel_emulation_test runs it for every thread of the launch grid on
// the CPU and checks the index arithmetic (16-byte alignment heads and tails,
// mask bits straddling words, padding, strides) against ApplyTokenMaskCpu on
// machines without a GPU.
//
// Work split: the logits of a row are cut into 16-byte chunks (4 fp32 or 8
// fp16/bf16 logits) aligned to 16 bytes in memory. The grid has one block of
// 256 threads per 1024 chunks of a row along x, and one mask row per block
// along y (up to 65535, looping beyond). Thread t of block b covers chunks
// b * 1024 + u * 256 + t for u < 4, so each warp instruction touches 512
// contiguous bytes, and issues its 4 loads before any store. Up to 7 logits
// before the row's first aligned chunk and up to 7 after its last one go
// through scalar stores by the first 16 threads of block 0. Logits are
// handled as raw bits, so the dtype only sets the element size and the -inf
// pattern.
//
// Cost: memory-bound. A chunk's mask bits decide its logits traffic: all
// allowed, none; none allowed, one 16-byte store of -inf; mixed, a 16-byte
// load, a blend and a store. Each covered mask word is read once from DRAM.
// 32 registers per thread keep full occupancy.
//
// Thread-safety: stateless.
#ifndef GRAMMARD_GPU_INTERNAL_MASK_KERNEL_H_
#define GRAMMARD_GPU_INTERNAL_MASK_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__CUDACC__)
#define GRAMMARD_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GRAMMARD_HOST_DEVICE inline
#endif

// Only nvcc's device pass knows this pragma; GCC would warn about it.
#if defined(__CUDA_ARCH__)
#define GRAMMARD_UNROLL _Pragma("unroll")
#else
#define GRAMMARD_UNROLL
#endif

namespace grammard::gpu::internal {

inline constexpr int kThreadsPerBlock = 256;
inline constexpr int kChunksPerThread = 4;
inline constexpr int kChunkBytes = 16;
// CUDA's limit on gridDim.y; blocks loop over mask rows beyond it.
inline constexpr int64_t kMaxGridRows = 65535;

struct MaskKernelParams {
  char* logits;
  int64_t logits_rows;
  int64_t logits_row_bytes;
  int32_t vocab;
  int32_t covered;  // min(mask vocab, vocab)
  const uint32_t* mask;
  int64_t mask_rows;
  int64_t mask_row_stride;  // In words.
  const int32_t* indices;   // Null: mask row k masks logits row k.
  uint32_t neg_inf;         // -inf bits repeated to fill 32 bits.
};

struct alignas(kChunkBytes) Chunk {
  uint32_t word[4];
};

// gridDim.x: enough blocks for the most chunks a row can hold, and at least
// one, whose first threads also handle the scalar head and tail.
inline int64_t BlocksPerRow(int32_t vocab, int elem_bytes) {
  const int64_t chunks = vocab / (kChunkBytes / elem_bytes);
  const int64_t per_block = kThreadsPerBlock * kChunksPerThread;
  return chunks == 0 ? 1 : (chunks + per_block - 1) / per_block;
}

inline int64_t GridRows(int64_t mask_rows) {
  return mask_rows < kMaxGridRows ? mask_rows : kMaxGridRows;
}

// The mask and indices are read-only for the kernel's lifetime, so device
// code reads them through the non-coherent read-only cache.
GRAMMARD_HOST_DEVICE uint32_t LoadMaskWord(const uint32_t* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

GRAMMARD_HOST_DEVICE int32_t LoadIndex(const int32_t* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

// The host build is the emulation: it traps where the GPU would fault on a
// misaligned 16-byte access, and copies through memcpy because the caller's
// logits are float, __half or __nv_bfloat16 objects, not uint32_t.
inline void TrapIfMisaligned(const void* p) {
  if (reinterpret_cast<uintptr_t>(p) % kChunkBytes != 0) std::abort();
}

GRAMMARD_HOST_DEVICE Chunk LoadChunk(const char* p) {
#if defined(__CUDA_ARCH__)
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  return Chunk{{v.x, v.y, v.z, v.w}};
#else
  TrapIfMisaligned(p);
  Chunk chunk;
  std::memcpy(&chunk, p, sizeof(chunk));
  return chunk;
#endif
}

GRAMMARD_HOST_DEVICE void StoreChunk(char* p, const Chunk& chunk) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint4*>(p) =
      make_uint4(chunk.word[0], chunk.word[1], chunk.word[2], chunk.word[3]);
#else
  TrapIfMisaligned(p);
  std::memcpy(p, &chunk, sizeof(chunk));
#endif
}

template <int kElemBytes>
GRAMMARD_HOST_DEVICE void StoreElement(char* p, uint32_t bits) {
  if constexpr (kElemBytes == 4) {
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<uint32_t*>(p) = bits;
#else
    std::memcpy(p, &bits, sizeof(bits));
#endif
  } else {
    const uint16_t half = static_cast<uint16_t>(bits);
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<uint16_t*>(p) = half;
#else
    std::memcpy(p, &half, sizeof(half));
#endif
  }
}

GRAMMARD_HOST_DEVICE int32_t Min(int32_t a, int32_t b) { return a < b ? a : b; }

// Whether column col is covered and allowed.
GRAMMARD_HOST_DEVICE bool ColumnAllowed(const uint32_t* mask_row,
                                        int32_t covered, int32_t col) {
  return col < covered &&
         ((LoadMaskWord(mask_row + col / 32) >> (col % 32)) & 1u) != 0;
}

// Bit j (j < n <= 8) is set iff column col + j is covered and allowed, given
// `window`: mask word col / 32 in the low half and, where columns
// [col, col + n) run into it, word col / 32 + 1 in the high half.
GRAMMARD_HOST_DEVICE uint32_t WindowBits(uint64_t window, int32_t covered,
                                         int32_t col, int n) {
  if (col >= covered) return 0;
  const uint32_t bits =
      static_cast<uint32_t>(window >> (col % 32)) & ((1u << n) - 1);
  const int32_t left = covered - col;
  return left < n ? bits & ((1u << left) - 1) : bits;
}

// Keeps the logits whose bit is set in `allowed` (element i of the chunk is
// bit i; little-endian, so fp16 element 2w is the low half of word w) and
// replaces the others by neg_inf.
template <int kElemBytes>
GRAMMARD_HOST_DEVICE Chunk Blend(Chunk chunk, uint32_t allowed,
                                 uint32_t neg_inf) {
  GRAMMARD_UNROLL
  for (int w = 0; w < 4; ++w) {
    uint32_t keep;
    if constexpr (kElemBytes == 4) {
      keep = 0u - ((allowed >> w) & 1u);
    } else {
      keep = ((0u - ((allowed >> (2 * w)) & 1u)) & 0x0000FFFFu) |
             ((0u - ((allowed >> (2 * w + 1)) & 1u)) & 0xFFFF0000u);
    }
    chunk.word[w] = (chunk.word[w] & keep) | (neg_inf & ~keep);
  }
  return chunk;
}

// What thread `thread` of block (`block`, k) does for mask row k.
template <int kElemBytes>
GRAMMARD_HOST_DEVICE void MaskRowSlice(const MaskKernelParams& p, int64_t k,
                                       int32_t block, int32_t thread) {
  constexpr int kPerChunk = kChunkBytes / kElemBytes;
  constexpr uint32_t kAllAllowed = (1u << kPerChunk) - 1;
  int64_t row = k;
  if (p.indices != nullptr) {
    row = LoadIndex(p.indices + k);
    // Indices in device memory cannot be checked on the host without a
    // synchronisation; skipping a bad one keeps every write inside logits.
    if (row < 0 || row >= p.logits_rows) return;
  }
  char* const row_data = p.logits + row * p.logits_row_bytes;
  const uint32_t* const mask_row = p.mask + k * p.mask_row_stride;
  const int misalign =
      static_cast<int>(reinterpret_cast<uintptr_t>(row_data) % kChunkBytes);
  const int32_t to_boundary =
      (kChunkBytes - misalign) % kChunkBytes / kElemBytes;
  const int32_t head = to_boundary < p.vocab ? to_boundary : p.vocab;
  const int32_t chunks = (p.vocab - head) / kPerChunk;

  if (block == 0 && thread < 2 * kPerChunk) {
    const bool in_head = thread < kPerChunk;
    const int32_t col =
        in_head ? thread : head + chunks * kPerChunk + thread - kPerChunk;
    if (col < (in_head ? head : p.vocab) &&
        !ColumnAllowed(mask_row, p.covered, col)) {
      StoreElement<kElemBytes>(row_data + int64_t{col} * kElemBytes, p.neg_inf);
    }
  }

  char* const body = row_data + int64_t{head} * kElemBytes;
  const int32_t first = block * (kThreadsPerBlock * kChunksPerThread) + thread;
  // All mask loads come first, with no branch between them, so one memory
  // round trip serves every chunk of the thread. Their addresses are clamped
  // to the covered words, as WindowBits ignores bits past `covered`. A window
  // reaches into a second word only in a row that starts unaligned (head > 0:
  // chunks then start mid-word).
  uint64_t window[kChunksPerThread] = {};
  if (p.covered > 0) {
    const int32_t last_word = (p.covered - 1) / 32;
    GRAMMARD_UNROLL
    for (int u = 0; u < kChunksPerThread; ++u) {
      const int32_t c = first + u * kThreadsPerBlock;
      const int32_t word = Min((head + c * kPerChunk) / 32, last_word);
      window[u] = LoadMaskWord(mask_row + word);
      if (head > 0) {
        window[u] |= uint64_t{LoadMaskWord(mask_row + Min(word + 1, last_word))}
                     << 32;
      }
    }
  }
  uint32_t allowed[kChunksPerThread];
  Chunk data[kChunksPerThread];
  GRAMMARD_UNROLL
  for (int u = 0; u < kChunksPerThread; ++u) {
    const int32_t c = first + u * kThreadsPerBlock;
    allowed[u] = c < chunks ? WindowBits(window[u], p.covered,
                                         head + c * kPerChunk, kPerChunk)
                            : kAllAllowed;
    data[u] = allowed[u] != 0 && allowed[u] != kAllAllowed
                  ? LoadChunk(body + int64_t{c} * kChunkBytes)
                  : Chunk{{p.neg_inf, p.neg_inf, p.neg_inf, p.neg_inf}};
  }
  GRAMMARD_UNROLL
  for (int u = 0; u < kChunksPerThread; ++u) {
    if (allowed[u] == kAllAllowed) continue;
    const int32_t c = first + u * kThreadsPerBlock;
    StoreChunk(body + int64_t{c} * kChunkBytes,
               Blend<kElemBytes>(data[u], allowed[u], p.neg_inf));
  }
}

// Launches the kernel over mask rows [0, params.mask_rows) for logits of
// elem_bytes (2 or 4) bytes; returns the launch's error, not the kernel's.
cudaError_t LaunchTokenMaskKernel(const MaskKernelParams& params,
                                  int elem_bytes, cudaStream_t stream);

}  // namespace grammard::gpu::internal

#endif  // GRAMMARD_GPU_INTERNAL_MASK_KERNEL_H_
