// TEST-ONLY. A brute-force Earley recognizer over a byte-level Grammar: the
// reference that property tests compare fast matchers against. Correctness
// over speed; never link it into the engine.
//
//   absl::StatusOr<Grammar> g = LowerToBytes(*Normalize(*ParseEbnf(text)));
//   absl::StatusOr<EarleyOracle> oracle = EarleyOracle::Create(*g);
//   uint8_t v = oracle->Check("{\"a\": 1");  // EarleyOracle::kPrefix
//
// The grammar is first desugared into a plain context-free grammar over byte
// sets: choices and repetitions become nonterminals ({m,n} as m copies then a
// chain of n - m optional steps; a body that matches empty as exactly n
// copies, built by doubling), and productions using a symbol that derives no
// string at all are dropped, so that every Earley item left can still
// complete. Nullable symbols are handled the Aycock-Horspool way (a predicted
// nullable symbol is also skipped at once), so epsilon rules, nullable rules
// and repeats of nullable bodies are all exact.
//
// Cost: Create is linear in the grammar once repetitions are unrolled; Check
// is the usual Earley O(n^3) worst case, in practice a few microseconds per
// input byte on JSON-like grammars. Thread-safety: immutable once created;
// Check may run concurrently.
#ifndef GRAMMARD_GRAMMAR_TESTING_EARLEY_ORACLE_H_
#define GRAMMARD_GRAMMAR_TESTING_EARLEY_ORACLE_H_

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/ir/grammar_ir.h"

namespace grammard::grammar {

class EarleyOracle {
 public:
  // Check's answer is a combination of these flags.
  static constexpr uint8_t kReject = 0;
  // The input followed by at least one more byte is a prefix of some string
  // of the language: generation may continue.
  static constexpr uint8_t kPrefix = 1;
  // The input is a string of the language: generation may stop.
  static constexpr uint8_t kComplete = 2;

  // `grammar` must be valid and byte level (no kCharClass: see LowerToBytes).
  // ResourceExhausted when the desugared grammar would exceed `max_symbols`.
  static absl::StatusOr<EarleyOracle> Create(const Grammar& grammar,
                                             size_t max_symbols = 1 << 24);

  uint8_t Check(std::string_view input) const;

 private:
  using ByteSet = std::array<uint64_t, 4>;
  static constexpr int32_t kEndOfProduction = INT32_MIN;

  EarleyOracle() = default;

  // Symbols are nonterminal ids (>= 0) or ~terminal id (< 0).
  std::vector<int32_t> prod_lhs_;
  std::vector<std::vector<int32_t>> nt_prods_;
  std::vector<bool> nt_nullable_;
  std::vector<ByteSet> terminals_;
  // Dotted positions, numbered production by production: a production of k
  // symbols owns k + 1 consecutive positions.
  std::vector<int32_t> prod_first_pos_;
  std::vector<int32_t> pos_next_;  // Symbol after the dot, or kEndOfProduction.
  std::vector<int32_t> pos_prod_;
  int32_t start_prod_ = -1;  // -1 when the language is empty.
};

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_TESTING_EARLEY_ORACLE_H_
