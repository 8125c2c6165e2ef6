// Lowering from code points to bytes: every kCharClass becomes an expression
// over kByteClass, kSequence and kChoice that matches exactly the UTF-8
// encodings of the class's code points, so the compiler works on bytes only
// and one automaton edge is one byte range.
//
// A code point range splits into byte-range sequences the classic way: first
// at encoding-length boundaries (U+007F, U+07FF, U+FFFF) and around the
// surrogates, then wherever a continuation byte would not span its full range
// 0x80..0xBF. What remains are ranges whose encodings form a cross product of
// byte ranges, e.g. U+0800..U+FFFF minus surrogates is
//   [E0][A0-BF][80-BF] | [E1-EC][80-BF][80-BF] | [ED][80-9F][80-BF] |
//   [EE-EF][80-BF][80-BF]
// Sequences sharing a leading byte range are then merged into a trie, and
// identical classes are lowered once and shared.
//
// Cost: linear in the grammar's size plus, per distinct class of r ranges,
// O(r) sequences. Thread-safety: pure functions.
#ifndef GRAMMARD_GRAMMAR_IR_UTF8_LOWERING_H_
#define GRAMMARD_GRAMMAR_IR_UTF8_LOWERING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/ir/grammar_ir.h"

namespace grammard::grammar {

// The byte strings b[0] b[1] ... with each b[i] within bytes[i]: one to four
// ranges.
struct Utf8Sequence {
  std::vector<CharRange> bytes;
};

// Byte-range sequences matching exactly the UTF-8 encodings of the scalar
// values in [lo, hi] (surrogates skipped), in increasing code point order.
// Empty when the range holds no scalar value.
std::vector<Utf8Sequence> Utf8Sequences(uint32_t lo, uint32_t hi);

// The grammar with every kCharClass lowered to bytes. Other expressions, the
// rules and the root are kept (indices may change); a lowered class that is a
// sequence or a choice is spliced into an enclosing one of the same kind.
// ResourceExhausted when the result exceeds limits.max_exprs (see
// CheckSizeLimit). Valid grammars only.
absl::StatusOr<Grammar> LowerToBytes(const Grammar& grammar,
                                     const GrammarLimits& limits = {});

// Whether the grammar has no kCharClass left: what LowerToBytes returns.
bool IsByteLevel(const Grammar& grammar);

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_IR_UTF8_LOWERING_H_
