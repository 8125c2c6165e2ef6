// ByteWriter / ByteReader: the little-endian binary form compiled grammars
// are saved in (serialize.h). The reader is bounds-checked: a short or
// malformed buffer gives DataLoss, never a read past its end or an
// allocation larger than the buffer could describe.
//
// Cost: memcpy-speed. Thread-safety: one thread per object.
#ifndef GRAMMARD_GRAMMAR_BASE_BYTE_IO_H_
#define GRAMMARD_GRAMMAR_BASE_BYTE_IO_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"

namespace grammard::grammar::internal {

class ByteWriter {
 public:
  template <typename T>
  void Put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  template <typename T>
  void PutVector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    Put<uint64_t>(v.size());
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void PutString(std::string_view s) {
    Put<uint64_t>(s.size());
    out_.append(s.data(), s.size());
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  // Each Get returns false (and sets status()) once the buffer runs short.
  template <typename T>
  bool Get(T* value) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (!Need(sizeof(T))) return false;
    std::memcpy(value, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  template <typename T>
  bool GetVector(std::vector<T>* v) {
    uint64_t n = 0;
    if (!Get(&n)) return false;
    if (n > (in_.size() - pos_) / sizeof(T)) return Fail();
    v->resize(n);
    // An empty vector's data() may be null, which memcpy must not get
    // (UBSan), even for 0 bytes.
    if (n > 0) std::memcpy(v->data(), in_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return true;
  }
  bool GetString(std::string* s) {
    uint64_t n = 0;
    if (!Get(&n) || !Need(n)) return false;
    s->assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == in_.size(); }
  // Marks the data malformed (a check of the caller's failed).
  bool Fail() {
    ok_ = false;
    return false;
  }
  // Fail(), as a status to return.
  absl::Status Malformed() {
    Fail();
    return status();
  }
  absl::Status status() const {
    return ok_ ? absl::OkStatus()
               : absl::DataLossError("compiled grammar: malformed data");
  }

 private:
  bool Need(uint64_t n) {
    if (!ok_ || n > in_.size() - pos_) return Fail();
    return true;
  }

  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_BASE_BYTE_IO_H_
