// TEST-ONLY. A deliberately naive matcher that reads the IR directly, at the
// code point level or the byte level, with no lowering and no desugaring: the
// independent check that property tests hold LowerToBytes + EarleyOracle
// against.
//
// It computes, by memoised recursive descent, the end positions every
// expression can reach from every input position, and whether the rest of the
// input is a proper prefix of something the expression generates (at a class,
// by trying every completion of a partial UTF-8 character). That is exact for
// grammars without left recursion (run Normalize first), on short inputs.
//
// Cost: O(|exprs| * n^2) per Check, for inputs of at most kMaxInput bytes.
// Thread-safety: Check mutates memo tables; one thread at a time.
#ifndef GRAMMARD_GRAMMAR_TESTING_REFERENCE_MATCHER_H_
#define GRAMMARD_GRAMMAR_TESTING_REFERENCE_MATCHER_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "grammar/ir/grammar_ir.h"

namespace grammard::grammar {

class ReferenceMatcher {
 public:
  static constexpr size_t kMaxInput = 62;

  // `grammar` must be valid and free of left recursion; it must outlive the
  // matcher.
  explicit ReferenceMatcher(const Grammar& grammar);

  // The flags of EarleyOracle::Check (kPrefix | kComplete), for inputs of at
  // most kMaxInput bytes.
  uint8_t Check(std::string_view input);

  // Set when a call re-entered itself without consuming input, which only
  // left recursion can cause; Check's answers are then meaningless.
  bool saw_left_recursion() const { return saw_left_recursion_; }

 private:
  uint64_t Ends(int32_t expr, size_t pos);
  bool Partial(int32_t expr, size_t pos);
  uint64_t Step(int32_t expr, uint64_t from);
  bool ClassContains(const Expr& expr, uint32_t value) const;
  bool ClassPartial(const Expr& expr, size_t pos) const;

  const Grammar& g_;
  std::vector<bool> productive_;
  std::string_view input_;
  // Indexed [expr * (kMaxInput + 1) + pos]. State 0: unknown, 1: computing,
  // 2: known.
  std::vector<uint8_t> ends_state_;
  std::vector<uint64_t> ends_;
  std::vector<uint8_t> partial_state_;
  std::vector<bool> partial_;
  bool saw_left_recursion_ = false;
};

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_TESTING_REFERENCE_MATCHER_H_
