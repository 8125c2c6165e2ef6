// Token-mask test cases shared by the kernel emulation and GPU tests: every
// edge case of the semantics in token_mask.h, for every dtype, with logits of
// random bits (NaN payloads included) and random masks, so results can be
// compared bit for bit with ApplyTokenMaskCpu.
//
// Cost: a case's buffers are allocated and filled on construction.
// Thread-safety: MaskCaseData is thread-compatible.
#ifndef GRAMMARD_GPU_TESTING_MASK_CASES_H_
#define GRAMMARD_GPU_TESTING_MASK_CASES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/token_mask.h"

namespace grammard::gpu::testing {

struct MaskCase {
  std::string name;
  LogitsDtype dtype = LogitsDtype::kFloat32;
  int64_t rows = 1;
  int64_t vocab = 0;
  int64_t row_stride = -1;       // -1: vocab.
  int64_t words_per_row = -1;    // -1: enough words for vocab.
  int64_t mask_row_stride = -1;  // -1: words_per_row.
  int64_t mask_vocab = -1;
  std::vector<int32_t> indices;  // Empty: mask row k masks logits row k.
  int offset_bytes = 0;    // Logits start this far past a 256-byte boundary.
  double density = 0.5;    // Chance that a mask bit is set.
  int all_ones_every = 0;  // > 0: every n-th mask row allows everything.
  uint32_t seed = 1;
};

// Every edge case for every dtype.
std::vector<MaskCase> EdgeCases();

// "name/dtype", for test names and failure messages.
std::string CaseName(const MaskCase& c);

// Host logits and mask of a case, filled with random bits.
class MaskCaseData {
 public:
  explicit MaskCaseData(const MaskCase& c);

  MaskCaseData(const MaskCaseData&) = delete;
  MaskCaseData& operator=(const MaskCaseData&) = delete;

  LogitsView logits_view();
  TokenMaskView mask_view() const;

  // The logits' bytes: rows * row_stride elements from logits_view().data.
  uint8_t* logits_bytes() { return storage_.data() + start_; }
  size_t logits_size() const { return storage_.size() - start_; }
  int offset_bytes() const { return case_.offset_bytes; }

 private:
  MaskCase case_;
  std::vector<uint8_t> storage_;
  size_t start_ = 0;
  std::vector<uint32_t> mask_;
};

// Compares logits byte for byte and names the first differing element by row
// and column; "" when equal.
std::string FirstDifference(const uint8_t* got, const uint8_t* want,
                            size_t size, const LogitsView& shape);

}  // namespace grammard::gpu::testing

#endif  // GRAMMARD_GPU_TESTING_MASK_CASES_H_
