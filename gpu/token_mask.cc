#include "gpu/token_mask.h"

#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "gpu/internal/checks.h"

namespace grammard::gpu {
namespace {

// Bits is the logit's storage type (uint32_t or uint16_t); logits are written
// through memcpy because the caller's objects are float, __half or
// __nv_bfloat16, not Bits.
template <typename Bits>
void MaskRow(char* row, const uint32_t* mask_row, int64_t covered,
             int64_t vocab, Bits neg_inf) {
  const auto mask_column = [&](int64_t col) {
    std::memcpy(row + col * sizeof(Bits), &neg_inf, sizeof(Bits));
  };
  const int64_t whole_words = covered / 32;
  for (int64_t w = 0; w < whole_words; ++w) {
    const uint32_t word = mask_row[w];
    if (word == 0) {
      // The common case under a grammar: a straight run of 32 stores, which
      // the compiler vectorises.
      for (int i = 0; i < 32; ++i) mask_column(w * 32 + i);
      continue;
    }
    for (uint32_t disallowed = ~word; disallowed != 0;
         disallowed &= disallowed - 1) {
      mask_column(w * 32 + __builtin_ctz(disallowed));
    }
  }
  for (int64_t col = whole_words * 32; col < vocab; ++col) {
    if (col >= covered || ((mask_row[col / 32] >> (col % 32)) & 1) == 0) {
      mask_column(col);
    }
  }
}

}  // namespace

int LogitsDtypeBytes(LogitsDtype dtype) {
  switch (dtype) {
    case LogitsDtype::kFloat32:
      return 4;
    case LogitsDtype::kFloat16:
    case LogitsDtype::kBFloat16:
      return 2;
  }
  return 0;
}

uint32_t NegativeInfinityBits(LogitsDtype dtype) {
  switch (dtype) {
    case LogitsDtype::kFloat32:
      return 0xFF800000u;
    case LogitsDtype::kFloat16:
      return 0xFC00u;
    case LogitsDtype::kBFloat16:
      return 0xFF80u;
  }
  return 0;
}

absl::Status ApplyTokenMaskCpu(const LogitsView& logits,
                               const TokenMaskView& mask) {
  if (absl::Status s = internal::CheckArguments(logits, mask); !s.ok()) {
    return s;
  }
  if (!internal::HasWork(logits, mask)) return absl::OkStatus();
  if (mask.indices != nullptr) {
    if (absl::Status s =
            internal::CheckIndices(mask.indices, mask.rows, logits.rows);
        !s.ok()) {
      return s;
    }
  }
  const int64_t covered = internal::CoveredColumns(logits, mask);
  const int bytes = LogitsDtypeBytes(logits.dtype);
  const uint32_t neg_inf = NegativeInfinityBits(logits.dtype);
  for (int64_t k = 0; k < mask.rows; ++k) {
    const int64_t row = mask.indices == nullptr ? k : mask.indices[k];
    char* const row_data =
        static_cast<char*>(logits.data) + row * logits.row_stride * bytes;
    const uint32_t* const mask_row = mask.words + k * mask.row_stride;
    if (bytes == 4) {
      MaskRow<uint32_t>(row_data, mask_row, covered, logits.vocab, neg_inf);
    } else {
      MaskRow<uint16_t>(row_data, mask_row, covered, logits.vocab,
                        static_cast<uint16_t>(neg_inf));
    }
  }
  return absl::OkStatus();
}

}  // namespace grammard::gpu
