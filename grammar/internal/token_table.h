// TokenTable: for every state of a Pda that reads bytes, which tokens are
// certainly allowed when a stack top in that state reads them, and which
// depend on what lies below it on the stack.
//
// A token is classified by reading it from the state with an unknown caller:
//   accepted  - some path consumes it all inside the state's own rule (or
//               ends the rule exactly at its last byte): allowed whatever
//               the stack below;
//   rejected  - every path dies, inside the rule or after leaving it into
//               any of the rule's return states: never allowed;
//   uncertain - the rest: it leaves the rule with bytes left and survives in
//               some caller. A matcher checks these against the real stack.
// Only paths that read their first byte from the state itself count: the
// rules it calls are scan nodes of their own in a matcher's position.
//
// Cost: building walks the token trie once per state, pruning where a prefix
// dies and settling at once a subtree whose bytes all lead back to the same
// stack sets (the inside of an identifier or a string): the bulk of compile
// time. States of call-free rules that behave alike share one table.
// Memory: per table a bitset of the vocabulary or a list of ids, whichever
// is smaller, plus the uncertain ids. Thread-safety: immutable once built.
#ifndef GRAMMARD_GRAMMAR_INTERNAL_TOKEN_TABLE_H_
#define GRAMMARD_GRAMMAR_INTERNAL_TOKEN_TABLE_H_

#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/internal/byte_io.h"
#include "grammar/internal/pda.h"
#include "grammar/internal/token_index.h"

namespace grammard::grammar::internal {

// A set of token ids, stored the cheaper way to put into a mask row: a
// bitset over the vocabulary when many, else the ids (a regex state that
// allows a few digits).
class TokenSet {
 public:
  TokenSet() = default;
  // `bits` has one bit per id of the vocabulary, `words` words.
  static TokenSet FromBits(std::vector<uint32_t> bits);
  static TokenSet FromIds(std::vector<int32_t> ids, int32_t words);

  // ORs the set into `row` (`words` long). `clean` says the row is still
  // all zeros (cleared by the first call that writes it), which lets a
  // bitset be copied rather than merged.
  void AddTo(uint32_t* row, int32_t words, bool* clean) const;
  size_t MemoryBytes() const;

  void Save(ByteWriter* out) const;
  // False (and `in` failed) unless every id is below `vocab_size`.
  bool Load(ByteReader* in, int32_t vocab_size);

 private:
  std::vector<uint32_t> bits_;  // empty when ids_ holds the set
  std::vector<int32_t> ids_;
};

// Uncertain tokens settled by what lies below a stack top: most tokens that
// leave a rule end inside its caller (`",` after a string in an array), so
// a few levels of known callers decide them.
struct ContextTokens {
  int32_t return_state;            // the caller's state at this level
  TokenSet accepted;               // allowed whatever lies further below
  std::vector<int32_t> uncertain;  // leave this caller's rule too
  // The next caller down, by return_state, while uncertain is not empty and
  // the depth limit allows; past it the matcher reads the tokens for real.
  std::vector<ContextTokens> contexts;

  const ContextTokens* Context(int32_t return_state) const;
};

struct StateTokens {
  TokenSet accepted;               // allowed whatever the stack below
  std::vector<int32_t> uncertain;  // token ids, in byte order
  // One entry per return state of the state's rule, by return_state, when
  // `uncertain` is not empty. With no caller at all (the root rule's frame
  // at the bottom) every uncertain token is rejected: nothing may follow.
  std::vector<ContextTokens> contexts;

  const ContextTokens* Context(int32_t return_state) const;
};

class TokenTable {
 public:
  // Past `deadline` building stops and timed_out() says so; the table is
  // then incomplete and must not be used.
  TokenTable(const Pda& pda, const TokenIndex& index,
             std::chrono::steady_clock::time_point deadline =
                 std::chrono::steady_clock::time_point::max());

  bool timed_out() const { return timed_out_; }

  // Null for states that read no byte.
  const StateTokens* For(int32_t state) const {
    int32_t slot = slot_[state];
    return slot < 0 ? nullptr : &tables_[slot];
  }

  size_t MemoryBytes() const;

  // The table in serialize.h's form, and back, for `pda` over a vocabulary
  // of `vocab_size` ids; Load checks every index, and that exactly the
  // states that read bytes have a table.
  void Save(ByteWriter* out) const;
  static absl::StatusOr<TokenTable> Load(ByteReader* in, const Pda& pda,
                                         int32_t vocab_size);

 private:
  TokenTable() = default;

  std::vector<int32_t> slot_;
  std::vector<StateTokens> tables_;
  bool timed_out_ = false;
};

// Classifies every token of `index` for `state`, with contexts (exposed for
// tests).
StateTokens ClassifyState(const Pda& pda, const TokenIndex& index,
                          int32_t state);

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_INTERNAL_TOKEN_TABLE_H_
