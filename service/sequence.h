// Sequence: one sequence of a Decode stream on the server: its matcher, its
// reasoning section, and the step logic of the wire contract (roll back,
// accept the reported tokens, fill 1 + drafts mask rows).
//
// Reasoning: while the sequence is inside its thinking section every token
// is allowed and the grammar does not advance; the constraint starts after
// the think-end token. Rolling back across the think-end token re-enters the
// thinking section.
//
// Cost: Advance is the matcher's AcceptToken per token; FillRows is one mask
// fill per row plus an accept per draft. Thread-safety: one thread at a time.
#ifndef GRAMMARD_SERVICE_SEQUENCE_H_
#define GRAMMARD_SERVICE_SEQUENCE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "grammar/matcher.h"

namespace grammard::service {

struct ReasoningOptions {
  bool enabled = false;
  int32_t think_end_token = -1;
};

class Sequence {
 public:
  Sequence(uint64_t id, grammar::CompiledGrammar grammar,
           const ReasoningOptions& reasoning);

  uint64_t id() const { return id_; }
  int32_t mask_words() const { return matcher_.grammar().mask_words(); }
  int32_t vocab_size() const;

  // Undoes `rollback` tokens, then accepts `tokens` in order. On error (a
  // token the grammar refuses, rolling back more than was accepted) the
  // message names the sequence and the token, and the state is unspecified:
  // the caller marks the sequence failed.
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
  absl::Status RollbackTokens(int32_t k);
  void FillAllAllowed(uint32_t* row) const;

  const uint64_t id_;
  grammar::GrammarMatcher matcher_;
  const std::shared_ptr<const void> key_owner_;
  const ReasoningOptions reasoning_;
  bool thinking_;
  // Tokens accepted inside the thinking section, the think-end token
  // excluded.
  int32_t thinking_tokens_ = 0;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_SEQUENCE_H_
