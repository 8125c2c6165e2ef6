#include "gpu/internal/checks.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpu/token_mask.h"

namespace grammard::gpu::internal {
namespace {

constexpr int64_t kMaxMaskWords = kMaxColumns / 32;

// Whether rows * row_stride elements of `bytes` each stay addressable as
// int64 byte offsets, which the kernel computes.
bool ExtentFits(int64_t rows, int64_t row_stride, int bytes) {
  return row_stride == 0 ||
         rows <= std::numeric_limits<int64_t>::max() / bytes / row_stride;
}

absl::Status CheckPointer(const void* p, int alignment, const char* name) {
  if (p == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is null"));
  }
  if (reinterpret_cast<uintptr_t>(p) % alignment != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " is not aligned to its ", alignment, "-byte element size"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckArguments(const LogitsView& logits,
                            const TokenMaskView& mask) {
  const int bytes = LogitsDtypeBytes(logits.dtype);
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("logits.dtype (", static_cast<int32_t>(logits.dtype),
                     ") is not a LogitsDtype"));
  }
  if (logits.rows < 0 || logits.vocab < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("logits shape [", logits.rows, ", ", logits.vocab,
                     "] has a negative extent"));
  }
  if (logits.vocab > kMaxColumns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "logits.vocab (", logits.vocab, ") exceeds ", kMaxColumns));
  }
  if (logits.row_stride < logits.vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("logits.row_stride (", logits.row_stride,
                     ") is smaller than logits.vocab (", logits.vocab, ")"));
  }
  if (!ExtentFits(logits.rows, logits.row_stride, bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("logits.rows (", logits.rows, ") * logits.row_stride (",
                     logits.row_stride, ") overflows int64 byte offsets"));
  }
  if (mask.rows < 0 || mask.words_per_row < 0) {
    return absl::InvalidArgumentError(absl::StrCat("mask shape [", mask.rows,
                                                   ", ", mask.words_per_row,
                                                   "] has a negative extent"));
  }
  if (mask.words_per_row > kMaxMaskWords) {
    return absl::InvalidArgumentError(
        absl::StrCat("mask.words_per_row (", mask.words_per_row, ") exceeds ",
                     kMaxMaskWords));
  }
  if (mask.row_stride < mask.words_per_row) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mask.row_stride (", mask.row_stride,
        ") is smaller than mask.words_per_row (", mask.words_per_row, ")"));
  }
  if (!ExtentFits(mask.rows, mask.row_stride, sizeof(uint32_t))) {
    return absl::InvalidArgumentError(
        absl::StrCat("mask.rows (", mask.rows, ") * mask.row_stride (",
                     mask.row_stride, ") overflows int64 byte offsets"));
  }
  if (mask.vocab < -1 || mask.vocab > mask.words_per_row * 32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mask.vocab (", mask.vocab,
        ") is outside [0, mask.words_per_row * 32 = ", mask.words_per_row * 32,
        "] (or -1 for all of it)"));
  }
  if (mask.indices == nullptr && mask.rows != logits.rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("mask.rows (", mask.rows, ") != logits.rows (",
                     logits.rows, ") and there are no mask.indices"));
  }
  if (mask.indices != nullptr && mask.rows > logits.rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("mask.rows (", mask.rows, ") exceeds logits.rows (",
                     logits.rows, "), so mask.indices cannot be distinct"));
  }
  if (!HasWork(logits, mask)) return absl::OkStatus();
  if (absl::Status s = CheckPointer(logits.data, bytes, "logits.data");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckPointer(mask.words, sizeof(uint32_t), "mask.words");
      !s.ok()) {
    return s;
  }
  if (mask.indices != nullptr) {
    if (absl::Status s =
            CheckPointer(mask.indices, sizeof(int32_t), "mask.indices");
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckIndices(const int32_t* indices, int64_t count,
                          int64_t logits_rows) {
  std::vector<bool> seen(logits_rows);
  for (int64_t k = 0; k < count; ++k) {
    const int32_t row = indices[k];
    if (row < 0 || row >= logits_rows) {
      return absl::InvalidArgumentError(absl::StrCat("mask.indices[", k, "] (",
                                                     row, ") is outside [0, ",
                                                     logits_rows, ")"));
    }
    if (seen[row]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mask.indices[", k, "] (", row, ") repeats an earlier index"));
    }
    seen[row] = true;
  }
  return absl::OkStatus();
}

bool HasWork(const LogitsView& logits, const TokenMaskView& mask) {
  return mask.rows > 0 && logits.vocab > 0;
}

int64_t CoveredColumns(const LogitsView& logits, const TokenMaskView& mask) {
  const int64_t mask_vocab =
      mask.vocab == -1 ? mask.words_per_row * 32 : mask.vocab;
  return std::min(mask_vocab, logits.vocab);
}

}  // namespace grammard::gpu::internal
