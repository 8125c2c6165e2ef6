// Sequence: one sequence of a Decode stream on the server: its matcher, its
// reasoning section, and the step logic of the wire contract (roll back,
// accept the reported tokens, fill 1 + drafts mask rows).
//
// Reasoning: while the sequence is inside its thinking section every token
// is allowed and the grammar does not advance; the constraint starts after
// the think-end token. Rolling back across the think-end token re-enters the
// thinking section.
//
// Limits: a sequence holds at most SequenceLimits::max_tokens tokens, and
// the memory of its matcher is charged to a ByteBudget shared by every
// sequence of the daemon; a step past either fails with ResourceExhausted.
//
// Cost: Advance is the matcher's AcceptToken per token, plus an atomic add
// when the matcher grew; FillRows is one mask fill per row plus an accept
// per draft. Thread-safety: one thread at a time.
#ifndef GRAMMARD_SERVICE_SEQUENCE_H_
#define GRAMMARD_SERVICE_SEQUENCE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "grammar/matcher.h"
#include "service/byte_budget.h"

namespace grammard::service {

struct ReasoningOptions {
  bool enabled = false;
  int32_t think_end_token = -1;
};

struct SequenceLimits {
  // Tokens a sequence may hold (thinking tokens included); 0: no limit.
  int64_t max_tokens = 0;
  // Where the matcher's memory is charged; null: nowhere.
  ByteBudget* memory = nullptr;
};

class Sequence {
 public:
  Sequence(uint64_t id, grammar::CompiledGrammar grammar,
           const ReasoningOptions& reasoning,
           const SequenceLimits& limits = {});
  // Releases what it charged to the memory budget.
  ~Sequence();
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  uint64_t id() const { return id_; }
  int32_t mask_words() const { return matcher_.grammar().mask_words(); }
  int32_t vocab_size() const;

  // Undoes `rollback` tokens, then accepts `tokens` in order. On error (a
  // token the grammar refuses, rolling back more than was accepted, more
  // tokens than the limits allow) the message names the sequence and the
  // token, and the state is unspecified: the caller marks the sequence
  // failed.
  absl::Status Advance(int32_t rollback, absl::Span<const int32_t> tokens);

  // Writes 1 + drafts.size() rows of mask_words() words: row i is the mask
  // after drafts[0..i). Rows after a draft the grammar refuses are all
  // allowed (the engine's verification rejects that draft anyway). The
  // state is unchanged afterwards.
  void FillRows(absl::Span<const int32_t> drafts, uint32_t* rows);

  // Names the next row (that of FillRows with no drafts) without writing
  // it: equal keys, of any sequences, mean equal rows. False where only
  // filling tells (see GrammarMatcher::NextMaskKey). Keys stay valid while
  // key_owner() is held.
  bool NextRowKey(std::vector<uintptr_t>* key);
  const std::shared_ptr<const void>& key_owner() const { return key_owner_; }

  bool thinking() const { return thinking_; }
  bool IsTerminated() const { return !thinking_ && matcher_.IsTerminated(); }
  bool CanTerminate() const { return !thinking_ && matcher_.CanTerminate(); }
  // Nothing is forced while thinking.
  grammar::ForcedContinuation JumpForward();

 private:
  absl::Status AcceptOne(int32_t token);
  // Charges the budget for what the matcher grew since the last charge.
  absl::Status ChargeGrowth();
  int64_t held_tokens() const;
  absl::Status RollbackTokens(int32_t k);
  void FillAllAllowed(uint32_t* row) const;

  const uint64_t id_;
  grammar::GrammarMatcher matcher_;
  const std::shared_ptr<const void> key_owner_;
  const ReasoningOptions reasoning_;
  const SequenceLimits limits_;
  int64_t charged_ = 0;  // bytes charged to limits_.memory
  bool thinking_;
  // Tokens accepted inside the thinking section, the think-end token
  // excluded.
  int32_t thinking_tokens_ = 0;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_SEQUENCE_H_
