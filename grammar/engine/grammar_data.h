// GrammarData: everything a compiled grammar holds, shared by its matchers:
// the vocabulary, its token index, the Pda and the per-state token table.
//
// Thread-safety: immutable once made, but for the token table's tables,
// which are built on demand and safely (token_table.h).
#ifndef GRAMMARD_GRAMMAR_ENGINE_GRAMMAR_DATA_H_
#define GRAMMARD_GRAMMAR_ENGINE_GRAMMAR_DATA_H_

#include <chrono>
#include <memory>

#include "absl/status/statusor.h"
#include "grammar/base/deadline.h"
#include "grammar/base/status_macros.h"
#include "grammar/engine/distinct_values.h"
#include "grammar/engine/pda.h"
#include "grammar/engine/token_index.h"
#include "grammar/engine/token_table.h"
#include "grammar/vocabulary.h"

namespace grammard::grammar::internal {

struct GrammarData {
  // The table starts empty: the compiler groups it (TokenTable::Group), a
  // loaded grammar reads it back (TokenTable::Load).
  GrammarData(std::shared_ptr<const TokenIndex> index_in, Pda pda_in)
      : index(std::move(index_in)),
        pda(std::move(pda_in)),
        table(pda, *index),
        value_ending_tokens(TokensThatMayEndValues(pda, *index)),
        member_checked(TokensThatMayCheckMembers(pda, *index)) {}

  std::shared_ptr<const TokenIndex> index;
  Pda pda;
  // Refers to `pda` and `*index`, so the struct stays where it was made.
  TokenTable table;
  // With distinct rules, the tokens a matcher reads for real inside their
  // values, and those it reads where no value was seen (distinct_values.h).
  ValueEndingTokens value_ending_tokens;
  // With counted members, the tokens a matcher reads for real where a frame
  // lacks some or has counted some, from a stack top outside a dispatch and
  // inside one (distinct_values.h).
  MemberCheckedTokens member_checked;
};

// The data of a grammar just compiled: states grouped, none classified yet.
// DeadlineExceeded once `deadline` passes.
inline absl::StatusOr<std::shared_ptr<const GrammarData>> MakeGrammarData(
    std::shared_ptr<const TokenIndex> index, Pda pda,
    const Deadline& deadline = {}) {
  auto data = std::make_shared<GrammarData>(std::move(index), std::move(pda));
  GRAMMARD_RETURN_IF_ERROR(data->table.Group(deadline));
  return data;
}

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_ENGINE_GRAMMAR_DATA_H_
