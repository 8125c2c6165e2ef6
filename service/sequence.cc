#include "service/sequence.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "grammar/base/status_macros.h"

namespace grammard::service {

Sequence::Sequence(uint64_t id, grammar::CompiledGrammar grammar,
                   const ReasoningOptions& reasoning,
                   const SequenceLimits& limits)
    : id_(id),
      matcher_(std::move(grammar)),
      key_owner_(matcher_.grammar().KeepAlive()),
      reasoning_(reasoning),
      limits_(limits),
      thinking_(reasoning.enabled) {
  // The matcher's start counts as well; a few hundred bytes, never refused.
  if (limits_.memory != nullptr) {
    charged_ = static_cast<int64_t>(matcher_.MemoryBytes());
    limits_.memory->Charge(charged_);
  }
}

Sequence::~Sequence() {
  if (limits_.memory != nullptr) limits_.memory->Release(charged_);
}

int64_t Sequence::held_tokens() const {
  return (reasoning_.enabled ? thinking_tokens_ + (thinking_ ? 0 : 1) : 0) +
         (thinking_ ? 0 : matcher_.num_accepted());
}

absl::Status Sequence::ChargeGrowth() {
  if (limits_.memory == nullptr) return absl::OkStatus();
  const int64_t now = static_cast<int64_t>(matcher_.MemoryBytes());
  if (now <= charged_) return absl::OkStatus();
  if (!limits_.memory->TryCharge(now - charged_)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the daemon's sequences hold ", limits_.memory->used() >> 20,
        " MB, its limit (--max_sequence_memory_mb is ",
        limits_.memory->limit() >> 20, ")"));
  }
  charged_ = now;
  return absl::OkStatus();
}

int32_t Sequence::vocab_size() const {
  return matcher_.grammar().vocabulary().size();
}

absl::Status Sequence::AcceptOne(int32_t token) {
  if (thinking_) {
    if (token < 0 || token >= vocab_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", token, " outside the vocabulary [0, ",
                       vocab_size(), ")"));
    }
    if (token == reasoning_.think_end_token) {
      thinking_ = false;
    } else {
      ++thinking_tokens_;
    }
    return absl::OkStatus();
  }
  return matcher_.AcceptToken(token);
}

absl::Status Sequence::RollbackTokens(int32_t k) {
  if (k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rollback of ", k, " tokens"));
  }
  const int64_t accepted = held_tokens();
  if (k > accepted) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rollback of ", k, " tokens but only ", accepted, " were accepted"));
  }
  if (!thinking_) {
    const int32_t in_grammar = std::min(k, matcher_.num_accepted());
    GRAMMARD_RETURN_IF_ERROR(matcher_.Rollback(in_grammar));
    k -= in_grammar;
    if (k > 0) {  // back across the think-end token
      thinking_ = true;
      --k;
    }
  }
  thinking_tokens_ -= k;
  return absl::OkStatus();
}

absl::Status Sequence::Advance(int32_t rollback,
                               absl::Span<const int32_t> tokens) {
  if (rollback != 0) {
    if (absl::Status s = RollbackTokens(rollback); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", id_, ": ", s.message()));
    }
  }
  if (limits_.max_tokens > 0 &&
      held_tokens() + static_cast<int64_t>(tokens.size()) >
          limits_.max_tokens) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "sequence ", id_, ": ", tokens.size(), " accepted_tokens on top of ",
        held_tokens(), " held; a sequence holds at most ", limits_.max_tokens,
        " (--max_sequence_tokens)"));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (absl::Status s = AcceptOne(tokens[i]); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", id_, ": accepted token ", i, " (id ",
                       tokens[i], ") refused: ", s.message()));
    }
    if (absl::Status s = ChargeGrowth(); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("sequence ", id_, ": accepted token ", i, ": ",
                                 s.message()));
    }
  }
  return absl::OkStatus();
}

void Sequence::FillAllAllowed(uint32_t* row) const {
  const int32_t words = mask_words();
  std::memset(row, 0xff, sizeof(uint32_t) * words);
  if (vocab_size() % 32 != 0) {
    row[words - 1] = (uint32_t{1} << (vocab_size() % 32)) - 1;
  }
}

void Sequence::FillRows(absl::Span<const int32_t> drafts, uint32_t* rows) {
  const int32_t words = mask_words();
  int32_t advanced = 0;
  bool refused = false;
  for (size_t i = 0; i <= drafts.size(); ++i) {
    uint32_t* row = rows + i * words;
    if (refused || thinking_) {
      FillAllAllowed(row);
    } else {
      matcher_.FillNextTokenMask(row);
    }
    if (i == drafts.size() || refused) continue;
    if (AcceptOne(drafts[i]).ok()) {
      ++advanced;
    } else {
      refused = true;
    }
  }
  // Undoing what was just accepted cannot fail.
  RollbackTokens(advanced).IgnoreError();
}

bool Sequence::NextRowKey(std::vector<uintptr_t>* key) {
  if (!thinking_) return matcher_.NextMaskKey(key);
  // All allowed: no matcher key starts with 0 (a grammar's address).
  key->assign({0, static_cast<uintptr_t>(vocab_size())});
  return true;
}

grammar::ForcedContinuation Sequence::JumpForward() {
  if (thinking_ || matcher_.IsTerminated()) return {};
  return matcher_.JumpForward();
}

}  // namespace grammard::service
