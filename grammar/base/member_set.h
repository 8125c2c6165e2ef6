// MemberSet: a set of member bits, 0 to MemberSet::kMax - 1: the counted
// members a rule requires (grammar_ir.h's Rule::required_members) and those
// one frame of a matcher has seen (engine/stack.h's NodeSide::members).
// JSON Schema objects in any order give each declared member a bit, so the
// width bounds the objects that can be counted at run time.
//
// Cost: a value of kMax / 8 bytes; every operation is a few word
// operations. Thread-safety: a value.
#ifndef GRAMMARD_GRAMMAR_BASE_MEMBER_SET_H_
#define GRAMMARD_GRAMMAR_BASE_MEMBER_SET_H_

#include <array>
#include <cstdint>

namespace grammard::grammar {

class MemberSet {
 public:
  static constexpr int kWords = 4;
  static constexpr int kMax = 64 * kWords;

  bool Has(int bit) const { return words_[bit >> 6] >> (bit & 63) & 1; }
  void Add(int bit) { words_[bit >> 6] |= uint64_t{1} << (bit & 63); }
  void AddAll(const MemberSet& other) {
    for (int k = 0; k < kWords; ++k) words_[k] |= other.words_[k];
  }
  // Whether every bit of `other` is in this set.
  bool Contains(const MemberSet& other) const {
    for (int k = 0; k < kWords; ++k) {
      if ((words_[k] & other.words_[k]) != other.words_[k]) return false;
    }
    return true;
  }
  bool Intersects(const MemberSet& other) const {
    for (int k = 0; k < kWords; ++k) {
      if ((words_[k] & other.words_[k]) != 0) return true;
    }
    return false;
  }
  bool empty() const {
    for (uint64_t w : words_) {
      if (w != 0) return false;
    }
    return true;
  }
  uint64_t word(int k) const { return words_[k]; }

  friend bool operator==(const MemberSet& a, const MemberSet& b) {
    return a.words_ == b.words_;
  }
  friend bool operator!=(const MemberSet& a, const MemberSet& b) {
    return !(a == b);
  }
  friend bool operator<(const MemberSet& a, const MemberSet& b) {
    return a.words_ < b.words_;
  }

 private:
  std::array<uint64_t, kWords> words_{};
};

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_BASE_MEMBER_SET_H_
