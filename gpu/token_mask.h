// Applying a grammar's packed token mask to a batch of logits: every token the
// mask disallows gets -inf, so sampling can only pick allowed tokens. This
// header holds the argument types shared with the CUDA kernel
// (token_mask_cuda.h) and ApplyTokenMaskCpu, the reference that kernel is
// tested against bit for bit and the fallback on machines without a GPU. It
// needs no CUDA headers or libraries.
//
// Mask layout (XGrammar / vLLM): each mask row is a run of uint32 words, and
// token t is allowed iff bit t % 32 of word t / 32 is set (LSB first).
//
// Semantics, identical for every implementation:
//   - Mask row k applies to logits row mask.indices[k], or to logits row k
//     when there are no indices; logits rows no mask row names are untouched.
//   - The mask covers min(mask.vocab, logits.vocab) columns. A covered column
//     whose bit is 0 becomes -inf; columns past the covered range (a padded
//     embedding: logits.vocab > mask.vocab) become -inf too; mask bits past
//     logits.vocab are ignored.
//   - Allowed logits are never written, so their bits survive exactly (NaN
//     payloads included), and a row whose mask allows every covered column,
//     with no padding, is left untouched.
//   - -inf is written as its bit pattern: 0xFF800000 (fp32), 0xFC00 (fp16),
//     0xFF80 (bf16); logits are never converted to or from float.
//
// Cost: ApplyTokenMaskCpu reads each mask word once, skips the 32 logits of a
// word with every bit set, and writes only disallowed logits: O(mask words +
// disallowed tokens) per row.
//
// Thread-safety: stateless; concurrent calls on disjoint logits are safe.
#ifndef GRAMMARD_GPU_TOKEN_MASK_H_
#define GRAMMARD_GPU_TOKEN_MASK_H_

#include <cstdint>

#include "absl/status/status.h"

namespace grammard::gpu {

enum class LogitsDtype : int32_t { kFloat32, kFloat16, kBFloat16 };

// Bytes per logit; 0 for a value outside the enum.
int LogitsDtypeBytes(LogitsDtype dtype);

// The bits of -inf in dtype, in the low LogitsDtypeBytes(dtype) bytes; 0 for
// a value outside the enum.
uint32_t NegativeInfinityBits(LogitsDtype dtype);

// Logits row r, column c lives at data + (r * row_stride + c) elements.
struct LogitsView {
  void* data = nullptr;
  LogitsDtype dtype = LogitsDtype::kFloat32;
  int64_t rows = 0;
  int64_t vocab = 0;
  int64_t row_stride = 0;  // In elements, >= vocab.
};

// Mask row k starts at words + k * row_stride and holds words_per_row words.
struct TokenMaskView {
  const uint32_t* words = nullptr;
  int64_t rows = 0;
  int64_t words_per_row = 0;
  int64_t row_stride = 0;  // In words, >= words_per_row.
  // Columns the mask speaks for, <= words_per_row * 32; -1 means
  // words_per_row * 32. Logits columns past it are masked.
  int64_t vocab = -1;
  // Optional, `rows` distinct entries in [0, logits.rows): the logits row
  // each mask row applies to, so a mixed batch sends masks only for its
  // constrained rows (vLLM's layout; XGrammar's `indices` instead select the
  // same row of logits and mask). Null: rows must equal logits.rows.
  const int32_t* indices = nullptr;
};

// Maps an element type to its LogitsDtype; token_mask_cuda.h adds __half and
// __nv_bfloat16.
template <typename T>
struct LogitsDtypeOf;
template <>
struct LogitsDtypeOf<float> {
  static constexpr LogitsDtype value = LogitsDtype::kFloat32;
};

// A view whose dtype follows from the pointer type, so typed callers cannot
// get it wrong.
template <typename T>
LogitsView MakeLogitsView(T* data, int64_t rows, int64_t vocab,
                          int64_t row_stride) {
  return LogitsView{data, LogitsDtypeOf<T>::value, rows, vocab, row_stride};
}

// Masks host logits in place. InvalidArgument, naming the argument, for a
// bad shape, stride, dtype, null or misaligned pointer, or an index out of
// range or repeated; logits are untouched then.
absl::Status ApplyTokenMaskCpu(const LogitsView& logits,
                               const TokenMaskView& mask);

}  // namespace grammard::gpu

#endif  // GRAMMARD_GPU_TOKEN_MASK_H_
