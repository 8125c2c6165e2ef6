#include "proto/mask_rows.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace grammard::proto {
namespace {

int32_t WordsFor(int32_t vocab_size) { return (vocab_size + 31) / 32; }

// The mask of the valid bits of word w: bits at or past vocab_size are not
// tokens.
uint32_t ValidBits(int32_t w, int32_t vocab_size) {
  const int32_t past = vocab_size - w * 32;
  return past >= 32 ? ~0u : (uint32_t{1} << past) - 1;
}

// Set bits of the row. libgcc's __popcountdi2 (what __builtin_popcount
// becomes without -mpopcnt) made counting a third of a row's encoding
// time, so the POPCNT instruction is used wherever the CPU has it, on 64
// bits at a time.
__attribute__((target("popcnt"))) int64_t CountBitsPopcnt(const uint32_t* words,
                                                          int32_t num_words) {
  int64_t a = 0, b = 0;
  int32_t w = 0;
  for (; w + 4 <= num_words; w += 4) {
    uint64_t x, y;
    std::memcpy(&x, words + w, sizeof x);
    std::memcpy(&y, words + w + 2, sizeof y);
    a += __builtin_popcountll(x);
    b += __builtin_popcountll(y);
  }
  for (; w < num_words; ++w) a += __builtin_popcount(words[w]);
  return a + b;
}

int64_t CountBitsPortable(const uint32_t* words, int32_t num_words) {
  int64_t n = 0;
  for (int32_t w = 0; w < num_words; ++w) {
    uint32_t v = words[w];
    v = v - ((v >> 1) & 0x55555555u);
    v = (v & 0x33333333u) + ((v >> 2) & 0x33333333u);
    n += (((v + (v >> 4)) & 0x0f0f0f0fu) * 0x01010101u) >> 24;
  }
  return n;
}

int64_t CountBits(const uint32_t* words, int32_t num_words) {
  static const bool has_popcnt = __builtin_cpu_supports("popcnt");
  return has_popcnt ? CountBitsPopcnt(words, num_words)
                    : CountBitsPortable(words, num_words);
}

// The word holding the (*k)-th set bit (from 0), *k then counting within
// that word; -1 when the row has no more than *k set bits.
__attribute__((target("popcnt"))) int32_t NthSetWordPopcnt(
    const uint32_t* words, int32_t num_words, int64_t* k) {
  for (int32_t w = 0; w < num_words; ++w) {
    const int64_t bits = __builtin_popcount(words[w]);
    if (*k < bits) return w;
    *k -= bits;
  }
  return -1;
}

int32_t NthSetWordPortable(const uint32_t* words, int32_t num_words,
                           int64_t* k) {
  for (int32_t w = 0; w < num_words; ++w) {
    const int64_t bits = CountBitsPortable(words + w, 1);
    if (*k < bits) return w;
    *k -= bits;
  }
  return -1;
}

int32_t NthSetWord(const uint32_t* words, int32_t num_words, int64_t* k) {
  static const bool has_popcnt = __builtin_cpu_supports("popcnt");
  return has_popcnt ? NthSetWordPopcnt(words, num_words, k)
                    : NthSetWordPortable(words, num_words, k);
}

// Writes the ids whose bit equals `want` as varint gaps (see grammard.proto)
// into *out; false once they would take more than `limit` bytes. The limit
// is checked once per word, so the buffer has room for a word's worth of
// ids past it.
bool EncodeGaps(const uint32_t* words, int32_t vocab_size, bool want,
                size_t limit, std::string* out) {
  constexpr size_t kMaxVarint = 5;  // an id below 2^31
  out->resize(limit + 32 * kMaxVarint);
  char* const begin = &(*out)[0];
  char* p = begin;
  const char* const end = begin + limit;
  const int32_t num_words = WordsFor(vocab_size);
  const uint32_t flip = want ? 0u : ~0u;
  int32_t previous = -1;
  for (int32_t w = 0; w < num_words; ++w) {
    uint32_t bits = (words[w] ^ flip) & ValidBits(w, vocab_size);
    while (bits != 0) {
      const int32_t id = w * 32 + __builtin_ctz(bits);
      bits &= bits - 1;
      auto gap = static_cast<uint32_t>(id - previous - 1);
      previous = id;
      if (gap < 0x80) {  // most gaps: ids are dense where lists are chosen
        *p++ = static_cast<char>(gap);
        continue;
      }
      do {
        *p++ = static_cast<char>(gap | 0x80);
        gap >>= 7;
      } while (gap >= 0x80);
      *p++ = static_cast<char>(gap);
    }
    if (p > end) return false;
  }
  out->resize(static_cast<size_t>(p - begin));
  return true;
}

// Sets (value) or clears the bits of the ids in `gaps`. Ids ascend, so the
// bits of one word are gathered in a register and written once.
// Calls on_id(id) for the ids of a gap list in ascending order until it
// returns false.
template <typename OnId>
absl::Status WalkGaps(const std::string& gaps, int32_t vocab_size, OnId on_id) {
  const auto* p = reinterpret_cast<const unsigned char*>(gaps.data());
  const unsigned char* const end = p + gaps.size();
  int64_t id = -1;
  while (p < end) {
    uint64_t gap = *p++;
    if (gap >= 0x80) {
      gap &= 0x7f;
      for (int shift = 7;; shift += 7) {
        if (p == end || shift > 28) {
          return absl::InvalidArgumentError(
              "mask row: a malformed varint in an id list");
        }
        const unsigned char byte = *p++;
        gap |= uint64_t{byte & 0x7fu} << shift;
        if ((byte & 0x80) == 0) break;
      }
    }
    id += static_cast<int64_t>(gap) + 1;
    if (id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mask row: token id ", id, " outside [0, ", vocab_size, ")"));
    }
    if (!on_id(static_cast<int32_t>(id))) break;
  }
  return absl::OkStatus();
}

absl::Status DecodeGaps(const std::string& gaps, int32_t vocab_size, bool value,
                        uint32_t* words) {
  int64_t word = -1;  // the word `gathered` belongs to
  uint32_t gathered = 0;
  auto flush = [&] {
    if (word < 0) return;
    if (value) {
      words[word] |= gathered;
    } else {
      words[word] &= ~gathered;
    }
  };
  absl::Status s = WalkGaps(gaps, vocab_size, [&](int32_t id) {
    if (id / 32 != word) {
      flush();
      word = id / 32;
      gathered = 0;
    }
    gathered |= uint32_t{1} << (id % 32);
    return true;
  });
  if (!s.ok()) return s;
  flush();
  return absl::OkStatus();
}

// Ids in a gap list: one varint ends at each byte below 0x80.
int64_t CountGaps(const std::string& gaps) {
  int64_t n = 0;
  for (char c : gaps) n += (static_cast<unsigned char>(c) & 0x80) == 0;
  return n;
}

}  // namespace

void EncodeMaskRow(const uint32_t* words, int32_t vocab_size,
                   grammard::v1::MaskRow* row) {
  const int32_t num_words = WordsFor(vocab_size);
  const int64_t allowed = CountBits(words, num_words);
  const int64_t forbidden = vocab_size - allowed;
  if (forbidden == 0) {
    row->set_all_allowed(true);
    return;
  }
  // A gap takes at least one byte, so a list of more ids than the bitmap
  // has bytes is never smaller; otherwise the list is tried and given up as
  // soon as it outgrows the bitmap.
  const auto bitmap_bytes = static_cast<size_t>(4 * num_words);
  const bool want = allowed <= forbidden;
  const auto fewer = static_cast<size_t>(want ? allowed : forbidden);
  if (fewer < bitmap_bytes) {
    std::string* gaps =
        want ? row->mutable_allowed_gaps() : row->mutable_forbidden_gaps();
    if (EncodeGaps(words, vocab_size, want, bitmap_bytes, gaps)) return;
  }
  auto* out = row->mutable_bitmap()->mutable_words();
  out->Resize(num_words, 0);
  std::memcpy(out->mutable_data(), words, sizeof(uint32_t) * num_words);
}

absl::Status DecodeMaskRow(const grammard::v1::MaskRow& row, int32_t vocab_size,
                           uint32_t* words) {
  const int32_t num_words = WordsFor(vocab_size);
  auto fill_all = [&] {
    std::memset(words, 0xff, sizeof(uint32_t) * num_words);
    if (vocab_size % 32 != 0) {
      words[num_words - 1] = ValidBits(num_words - 1, vocab_size);
    }
  };
  switch (row.encoding_case()) {
    case grammard::v1::MaskRow::kAllAllowed:
      fill_all();
      return absl::OkStatus();
    case grammard::v1::MaskRow::kAllowedGaps:
      std::memset(words, 0, sizeof(uint32_t) * num_words);
      return DecodeGaps(row.allowed_gaps(), vocab_size, true, words);
    case grammard::v1::MaskRow::kForbiddenGaps:
      fill_all();
      return DecodeGaps(row.forbidden_gaps(), vocab_size, false, words);
    case grammard::v1::MaskRow::kBitmap:
      if (row.bitmap().words_size() != num_words) {
        return absl::InvalidArgumentError(
            absl::StrCat("mask row: bitmap of ", row.bitmap().words_size(),
                         " words for a vocabulary of ", vocab_size, " tokens (",
                         num_words, " words)"));
      }
      if (num_words > 0 && (row.bitmap().words(num_words - 1) &
                            ~ValidBits(num_words - 1, vocab_size)) != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("mask row: a bitmap allowing ids past the vocabulary "
                         "of ",
                         vocab_size, " tokens"));
      }
      std::memcpy(words, row.bitmap().words().data(),
                  sizeof(uint32_t) * num_words);
      return absl::OkStatus();
    case grammard::v1::MaskRow::kSameAs:
    case grammard::v1::MaskRow::kSameAsPrevious:
      return absl::InvalidArgumentError(
          "mask row: a reference to another row (same_as, same_as_previous) "
          "needs StepRowDecoder");
    case grammard::v1::MaskRow::ENCODING_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("mask row: no encoding set");
}

absl::Status StepRowDecoder::Next(const grammard::v1::MaskRow& row,
                                  int32_t vocab_size, uint32_t* words,
                                  const uint32_t* previous) {
  if (row.encoding_case() == grammard::v1::MaskRow::kSameAsPrevious) {
    if (previous == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("mask row ", decoded_.size(),
                       ": same_as_previous for a sequence with no previous "
                       "row kept"));
    }
    if (previous != words) {
      std::memcpy(words, previous,
                  sizeof(uint32_t) * static_cast<size_t>(WordsFor(vocab_size)));
    }
  } else if (row.encoding_case() == grammard::v1::MaskRow::kSameAs) {
    if (row.same_as() >= decoded_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("mask row ", decoded_.size(), ": same_as ",
                       row.same_as(), " is not an earlier row of the step"));
    }
    const Decoded& earlier = decoded_[row.same_as()];
    if (earlier.vocab_size != vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mask row ", decoded_.size(), ": same_as ", row.same_as(),
          ", a row of ", earlier.vocab_size, " tokens, not ", vocab_size));
    }
    if (earlier.words != words) {
      std::memcpy(words, earlier.words,
                  sizeof(uint32_t) * static_cast<size_t>(WordsFor(vocab_size)));
    }
  } else if (absl::Status s = DecodeMaskRow(row, vocab_size, words); !s.ok()) {
    return s;
  }
  decoded_.push_back(Decoded{words, vocab_size});
  return absl::OkStatus();
}

absl::StatusOr<DecodedStep> DecodeStepRows(
    const grammard::v1::StepResult& step,
    absl::FunctionRef<int32_t(size_t)> vocab_size) {
  return DecodeStepRows(step, vocab_size,
                        [](size_t) -> const uint32_t* { return nullptr; });
}

absl::StatusOr<DecodedStep> DecodeStepRows(
    const grammard::v1::StepResult& step,
    absl::FunctionRef<int32_t(size_t)> vocab_size,
    absl::FunctionRef<const uint32_t*(size_t)> previous_row) {
  DecodedStep decoded;
  size_t total = 0;
  for (int i = 0; i < step.sequences_size(); ++i) {
    decoded.offsets.push_back(total);
    total += static_cast<size_t>(step.sequences(i).rows_size()) *
             static_cast<size_t>(WordsFor(vocab_size(static_cast<size_t>(i))));
  }
  // Sized before decoding: same_as rows are copied from earlier rows here.
  decoded.words.resize(total);
  StepRowDecoder decoder;
  for (int i = 0; i < step.sequences_size(); ++i) {
    const int32_t vocab = vocab_size(static_cast<size_t>(i));
    uint32_t* out = decoded.words.data() + decoded.offsets[i];
    const uint32_t* previous = previous_row(static_cast<size_t>(i));
    for (const grammard::v1::MaskRow& row : step.sequences(i).rows()) {
      if (absl::Status s = decoder.Next(row, vocab, out, previous); !s.ok()) {
        return s;
      }
      previous = nullptr;  // only a first row may repeat the previous one
      out += WordsFor(vocab);
    }
  }
  return decoded;
}

absl::StatusOr<int64_t> CountAllowed(const grammard::v1::MaskRow& row,
                                     int32_t vocab_size) {
  using v1::MaskRow;
  switch (row.encoding_case()) {
    case MaskRow::kAllAllowed:
      return vocab_size;
    case MaskRow::kBitmap:
      if (row.bitmap().words_size() != WordsFor(vocab_size)) {
        return absl::InvalidArgumentError(
            "mask row: a bitmap of the wrong length");
      }
      return CountBits(row.bitmap().words().data(), row.bitmap().words_size());
    case MaskRow::kAllowedGaps:
      return CountGaps(row.allowed_gaps());
    case MaskRow::kForbiddenGaps:
      return vocab_size - CountGaps(row.forbidden_gaps());
    default:
      return absl::InvalidArgumentError(
          "mask row: a reference or no encoding (resolve references first)");
  }
}

absl::StatusOr<int32_t> NthAllowed(const grammard::v1::MaskRow& row,
                                   int32_t vocab_size, int64_t k) {
  using v1::MaskRow;
  // One pass that stops at the k-th id: counting first would read the row
  // twice, and a sampling client calls this once per sequence and step.
  auto out_of_range = [&]() -> absl::Status {
    auto count = CountAllowed(row, vocab_size);
    if (!count.ok()) return count.status();
    return absl::OutOfRangeError(
        absl::StrCat("mask row: no allowed token number ", k, " of ", *count));
  };
  if (k < 0) return out_of_range();
  int64_t left = k;
  int32_t found = -1;
  absl::Status s;
  switch (row.encoding_case()) {
    case MaskRow::kAllAllowed:
      if (k >= vocab_size) return out_of_range();
      return static_cast<int32_t>(k);
    case MaskRow::kBitmap: {
      const auto& words = row.bitmap().words();
      if (words.size() != WordsFor(vocab_size))
        return CountAllowed(row, vocab_size).status();
      const int32_t w = NthSetWord(words.data(), words.size(), &left);
      if (w < 0) return out_of_range();
      uint32_t word = words[w];
      for (; left > 0; --left) word &= word - 1;  // drop the lowest bits
      return 32 * w + __builtin_ctz(word);
    }
    case MaskRow::kAllowedGaps:
      s = WalkGaps(row.allowed_gaps(), vocab_size, [&](int32_t id) {
        if (left-- > 0) return true;
        found = id;
        return false;
      });
      break;
    case MaskRow::kForbiddenGaps: {  // the k-th id, stepping over forbidden
      int64_t id = k;
      s = WalkGaps(row.forbidden_gaps(), vocab_size, [&](int32_t forbidden) {
        if (forbidden > id) return false;
        ++id;
        return true;
      });
      if (id < vocab_size) found = static_cast<int32_t>(id);
      break;
    }
    default:
      return CountAllowed(row, vocab_size).status();
  }
  if (!s.ok()) return s;
  if (found < 0) return out_of_range();
  return found;
}

MaskEncoding EncodingOf(const grammard::v1::MaskRow& row) {
  switch (row.encoding_case()) {
    case grammard::v1::MaskRow::kAllAllowed:
      return MaskEncoding::kAllAllowed;
    case grammard::v1::MaskRow::kAllowedGaps:
      return MaskEncoding::kAllowed;
    case grammard::v1::MaskRow::kForbiddenGaps:
      return MaskEncoding::kForbidden;
    case grammard::v1::MaskRow::kSameAs:
      return MaskEncoding::kSameAs;
    case grammard::v1::MaskRow::kSameAsPrevious:
      return MaskEncoding::kSameAsPrevious;
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
    case MaskEncoding::kSameAs:
      return "same_as";
    case MaskEncoding::kSameAsPrevious:
      return "same_as_previous";
  }
  return "bitmap";
}

}  // namespace grammard::proto
