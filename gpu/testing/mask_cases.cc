#include "gpu/testing/mask_cases.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpu/token_mask.h"

namespace grammard::gpu::testing {
namespace {

std::string DtypeName(LogitsDtype dtype) {
  switch (dtype) {
    case LogitsDtype::kFloat32:
      return "fp32";
    case LogitsDtype::kFloat16:
      return "fp16";
    case LogitsDtype::kBFloat16:
      return "bf16";
  }
  return "invalid";
}

MaskCase Case(std::string name, int64_t rows, int64_t vocab) {
  MaskCase c;
  c.name = std::move(name);
  c.rows = rows;
  c.vocab = vocab;
  return c;
}

void AddCasesFor(LogitsDtype dtype, std::vector<MaskCase>& cases) {
  const int bytes = LogitsDtypeBytes(dtype);
  const auto add = [&](MaskCase c) {
    c.dtype = dtype;
    c.seed = static_cast<uint32_t>(cases.size() + 1);
    cases.push_back(std::move(c));
  };
  add(Case("aligned", 4, 4096));
  add(Case("vocab_1000", 3, 1000));
  add(Case("vocab_1001_unaligned_rows", 5, 1001));
  add(Case("vocab_33", 2, 33));
  for (int vocab : {1, 2, 3, 5, 7, 9, 17}) {
    MaskCase c = Case(absl::StrCat("tiny_vocab_", vocab), 3, vocab);
    c.offset_bytes = bytes * (vocab % (16 / bytes));
    add(c);
  }
  add(Case("one_row_llama3", 1, 128256));
  {
    MaskCase c = Case("one_row_qwen3_unaligned", 1, 151669);
    c.offset_bytes = 3 * bytes % 16;
    add(c);
  }
  add(Case("rows_1024", 1024, 1000));
  add(Case("rows_70000_grid_loop", 70000, 40));
  {
    MaskCase c = Case("indices", 16, 2000);
    c.indices = {7, 0, 15, 3, 9};
    add(c);
  }
  {
    MaskCase c = Case("indices_one", 8, 1000);
    c.indices = {5};
    add(c);
  }
  {
    MaskCase c = Case("indices_300_of_1024", 1024, 777);
    std::vector<int32_t> rows(1024);
    for (int32_t r = 0; r < 1024; ++r) rows[r] = r;
    std::shuffle(rows.begin(), rows.end(), std::mt19937(7));
    c.indices.assign(rows.begin(), rows.begin() + 300);
    add(c);
  }
  {
    MaskCase c = Case("padding_implicit", 3, 1100);
    c.words_per_row = 32;
    add(c);
  }
  {
    MaskCase c = Case("padding_explicit", 3, 1100);
    c.words_per_row = 35;
    c.mask_vocab = 1000;
    add(c);
  }
  {
    MaskCase c = Case("padding_unaligned", 3, 1111);
    c.words_per_row = 31;
    c.offset_bytes = bytes;
    add(c);
  }
  {
    MaskCase c = Case("padding_no_mask_words", 2, 100);
    c.words_per_row = 0;
    add(c);
  }
  {
    MaskCase c = Case("mask_wider", 3, 1000);
    c.words_per_row = 40;
    add(c);
  }
  {
    MaskCase c = Case("mask_wider_explicit", 3, 1000);
    c.words_per_row = 40;
    c.mask_vocab = 1200;
    add(c);
  }
  {
    MaskCase c = Case("strides", 6, 999);
    c.row_stride = 1013;
    c.words_per_row = 32;
    c.mask_row_stride = 35;
    c.offset_bytes = bytes;
    add(c);
  }
  {
    MaskCase c = Case("strides_aligned", 6, 1000);
    c.row_stride = 1024;
    c.mask_row_stride = 40;
    add(c);
  }
  {
    MaskCase c = Case("all_ones_every_2nd_row", 8, 3000);
    c.all_ones_every = 2;
    add(c);
  }
  {
    MaskCase c = Case("all_ones_with_padding", 2, 1100);
    c.words_per_row = 32;
    c.density = 1.0;
    add(c);
  }
  {
    MaskCase c = Case("all_allowed", 4, 5000);
    c.density = 1.0;
    add(c);
  }
  {
    MaskCase c = Case("none_allowed", 4, 5000);
    c.density = 0.0;
    add(c);
  }
  {
    MaskCase c = Case("sparse", 4, 128256);
    c.density = 0.002;
    add(c);
  }
  {
    MaskCase c = Case("dense", 4, 128256);
    c.density = 0.998;
    add(c);
  }
  for (int k = 1; k < 16 / bytes; ++k) {
    MaskCase c = Case(absl::StrCat("base_offset_", k * bytes), 3, 1001);
    c.offset_bytes = k * bytes;
    add(c);
  }
}

}  // namespace

std::vector<MaskCase> EdgeCases() {
  std::vector<MaskCase> cases;
  for (LogitsDtype dtype :
       {LogitsDtype::kFloat32, LogitsDtype::kFloat16, LogitsDtype::kBFloat16}) {
    AddCasesFor(dtype, cases);
  }
  return cases;
}

std::string CaseName(const MaskCase& c) {
  return absl::StrCat(c.name, "/", DtypeName(c.dtype));
}

MaskCaseData::MaskCaseData(const MaskCase& c) : case_(c) {
  if (case_.row_stride == -1) case_.row_stride = case_.vocab;
  if (case_.words_per_row == -1) case_.words_per_row = (case_.vocab + 31) / 32;
  if (case_.mask_row_stride == -1) {
    case_.mask_row_stride = case_.words_per_row;
  }
  std::mt19937 rng(case_.seed);

  const size_t size =
      case_.rows * case_.row_stride * LogitsDtypeBytes(case_.dtype);
  storage_.resize(size + 256 + case_.offset_bytes);
  const uintptr_t base = reinterpret_cast<uintptr_t>(storage_.data());
  start_ = (256 - base % 256) % 256 + case_.offset_bytes;
  storage_.resize(start_ + size);
  // Only the logits are random: the bytes before them depend on where the
  // allocation landed, and two copies of a case must hold the same bits.
  for (size_t i = start_; i < storage_.size(); i += sizeof(uint32_t)) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    std::memcpy(&storage_[i], &bits,
                std::min(sizeof(bits), storage_.size() - i));
  }

  const int64_t mask_rows = case_.indices.empty()
                                ? case_.rows
                                : static_cast<int64_t>(case_.indices.size());
  // One word at least, so that mask.words is never null.
  mask_.resize(std::max<int64_t>(1, mask_rows * case_.mask_row_stride));
  std::bernoulli_distribution allowed(case_.density);
  for (int64_t k = 0; k < mask_rows; ++k) {
    const bool all_ones =
        case_.all_ones_every > 0 && k % case_.all_ones_every == 0;
    for (int64_t w = 0; w < case_.mask_row_stride; ++w) {
      uint32_t word = 0;
      if (all_ones) {
        word = ~0u;
      } else if (case_.density == 0.5 || w >= case_.words_per_row) {
        word = static_cast<uint32_t>(rng());
      } else {
        for (int bit = 0; bit < 32; ++bit) {
          word |= uint32_t{allowed(rng)} << bit;
        }
      }
      mask_[k * case_.mask_row_stride + w] = word;
    }
  }
}

LogitsView MaskCaseData::logits_view() {
  return LogitsView{logits_bytes(), case_.dtype, case_.rows, case_.vocab,
                    case_.row_stride};
}

TokenMaskView MaskCaseData::mask_view() const {
  TokenMaskView view;
  view.words = mask_.data();
  view.rows = case_.indices.empty()
                  ? case_.rows
                  : static_cast<int64_t>(case_.indices.size());
  view.words_per_row = case_.words_per_row;
  view.row_stride = case_.mask_row_stride;
  view.vocab = case_.mask_vocab;
  view.indices = case_.indices.empty() ? nullptr : case_.indices.data();
  return view;
}

std::string FirstDifference(const uint8_t* got, const uint8_t* want,
                            size_t size, const LogitsView& shape) {
  const int bytes = LogitsDtypeBytes(shape.dtype);
  for (size_t i = 0; i < size; i += bytes) {
    if (std::memcmp(got + i, want + i, bytes) == 0) continue;
    uint32_t g = 0;
    uint32_t w = 0;
    std::memcpy(&g, got + i, bytes);
    std::memcpy(&w, want + i, bytes);
    const int64_t element = static_cast<int64_t>(i / bytes);
    return absl::StrCat("row ", element / shape.row_stride, ", column ",
                        element % shape.row_stride, ": got 0x",
                        absl::Hex(g, absl::kZeroPad8), ", want 0x",
                        absl::Hex(w, absl::kZeroPad8));
  }
  return "";
}

}  // namespace grammard::gpu::testing
