// libFuzzer target: the mask rows a client receives → StepResult parsing
// and DecodeStepRows (gap lists, bitmaps, same_as and same_as_previous
// references), which must refuse malformed rows and never write past the
// rows it sized. The first byte picks the vocabulary size.
#include <cstdint>
#include <vector>

#include "proto/grammard.pb.h"
#include "proto/mask_rows.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int32_t vocab = 1 + data[0] * 37;
  grammard::v1::StepResult step;
  if (!step.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
  // A kept row as a client holds it: no bit past the vocabulary.
  std::vector<uint32_t> previous(static_cast<size_t>(vocab + 31) / 32,
                                 0x5a5a5a5a);
  if (vocab % 32 != 0) previous.back() &= (uint32_t{1} << (vocab % 32)) - 1;
  auto decoded = grammard::proto::DecodeStepRows(
      step, [&](size_t) { return vocab; },
      [&](size_t i) -> const uint32_t* {
        return i % 2 == 0 ? previous.data() : nullptr;
      });
  if (decoded.ok()) {
    // Every decoded row has no bit past the vocabulary.
    const size_t words = previous.size();
    for (size_t r = 0; r < decoded->words.size() / words; ++r) {
      const uint32_t last = decoded->words[r * words + words - 1];
      if (vocab % 32 != 0 && (last >> (vocab % 32)) != 0) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
