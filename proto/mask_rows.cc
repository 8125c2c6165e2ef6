#include "proto/mask_rows.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace grammard::proto {
namespace {

int32_t WordsFor(int32_t vocab_size) { return (vocab_size + 31) / 32; }

// Bytes of an id as a protobuf varint.
int VarintBytes(uint32_t v) {
  int n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Appends the ids whose bit equals `want` (with bits past vocab_size
// treated as not wanted).
void AppendIds(const uint32_t* words, int32_t vocab_size, bool want,
               google::protobuf::RepeatedField<int32_t>* ids) {
  const int32_t num_words = WordsFor(vocab_size);
  for (int32_t w = 0; w < num_words; ++w) {
    uint32_t bits = want ? words[w] : ~words[w];
    if (w == num_words - 1 && vocab_size % 32 != 0) {
      bits &= (uint32_t{1} << (vocab_size % 32)) - 1;
    }
    while (bits != 0) {
      ids->Add(w * 32 + __builtin_ctz(bits));
      bits &= bits - 1;
    }
  }
}

}  // namespace

void EncodeMaskRow(const uint32_t* words, int32_t vocab_size,
                   grammard::v1::MaskRow* row) {
  const int32_t num_words = WordsFor(vocab_size);
  int64_t allowed = 0;
  for (int32_t w = 0; w < num_words; ++w)
    allowed += __builtin_popcount(words[w]);
  const int64_t forbidden = vocab_size - allowed;
  if (forbidden == 0) {
    row->set_all_allowed(true);
    return;
  }
  // Ids cost their varint size; bounding every id by the largest keeps the
  // choice to one popcount pass.
  const int64_t id_bytes = VarintBytes(static_cast<uint32_t>(vocab_size));
  const int64_t bitmap_bytes = int64_t{4} * num_words;
  const int64_t fewer = allowed < forbidden ? allowed : forbidden;
  if (fewer * id_bytes >= bitmap_bytes) {
    auto* out = row->mutable_bitmap()->mutable_words();
    out->Resize(num_words, 0);
    std::memcpy(out->mutable_data(), words, sizeof(uint32_t) * num_words);
  } else if (allowed <= forbidden) {
    auto* ids = row->mutable_allowed()->mutable_ids();
    ids->Reserve(static_cast<int>(allowed));
    AppendIds(words, vocab_size, true, ids);
  } else {
    auto* ids = row->mutable_forbidden()->mutable_ids();
    ids->Reserve(static_cast<int>(forbidden));
    AppendIds(words, vocab_size, false, ids);
  }
}

absl::Status DecodeMaskRow(const grammard::v1::MaskRow& row, int32_t vocab_size,
                           uint32_t* words) {
  const int32_t num_words = WordsFor(vocab_size);
  auto set_ids = [&](const google::protobuf::RepeatedField<int32_t>& ids,
                     bool value) -> absl::Status {
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "mask row: token id ", id, " outside [0, ", vocab_size, ")"));
      }
      if (value) {
        words[id / 32] |= uint32_t{1} << (id % 32);
      } else {
        words[id / 32] &= ~(uint32_t{1} << (id % 32));
      }
    }
    return absl::OkStatus();
  };
  auto fill_all = [&] {
    std::memset(words, 0xff, sizeof(uint32_t) * num_words);
    if (vocab_size % 32 != 0) {
      words[num_words - 1] = (uint32_t{1} << (vocab_size % 32)) - 1;
    }
  };
  switch (row.encoding_case()) {
    case grammard::v1::MaskRow::kAllAllowed:
      fill_all();
      return absl::OkStatus();
    case grammard::v1::MaskRow::kAllowed:
      std::memset(words, 0, sizeof(uint32_t) * num_words);
      return set_ids(row.allowed().ids(), true);
    case grammard::v1::MaskRow::kForbidden:
      fill_all();
      return set_ids(row.forbidden().ids(), false);
    case grammard::v1::MaskRow::kBitmap:
      if (row.bitmap().words_size() != num_words) {
        return absl::InvalidArgumentError(
            absl::StrCat("mask row: bitmap of ", row.bitmap().words_size(),
                         " words for a vocabulary of ", vocab_size, " tokens (",
                         num_words, " words)"));
      }
      std::memcpy(words, row.bitmap().words().data(),
                  sizeof(uint32_t) * num_words);
      return absl::OkStatus();
    case grammard::v1::MaskRow::ENCODING_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("mask row: no encoding set");
}

MaskEncoding EncodingOf(const grammard::v1::MaskRow& row) {
  switch (row.encoding_case()) {
    case grammard::v1::MaskRow::kAllAllowed:
      return MaskEncoding::kAllAllowed;
    case grammard::v1::MaskRow::kAllowed:
      return MaskEncoding::kAllowed;
    case grammard::v1::MaskRow::kForbidden:
      return MaskEncoding::kForbidden;
    default:
      return MaskEncoding::kBitmap;
  }
}

const char* MaskEncodingName(MaskEncoding encoding) {
  switch (encoding) {
    case MaskEncoding::kAllAllowed:
      return "all_allowed";
    case MaskEncoding::kAllowed:
      return "allowed";
    case MaskEncoding::kForbidden:
      return "forbidden";
    case MaskEncoding::kBitmap:
      return "bitmap";
  }
  return "bitmap";
}

}  // namespace grammard::proto
