// GrammarData: everything a compiled grammar holds, shared by its matchers:
// the vocabulary, its token index, the Pda and the per-state token table.
//
// Thread-safety: immutable once built.
#ifndef GRAMMARD_GRAMMAR_INTERNAL_GRAMMAR_DATA_H_
#define GRAMMARD_GRAMMAR_INTERNAL_GRAMMAR_DATA_H_

#include <chrono>
#include <memory>

#include "grammar/internal/pda.h"
#include "grammar/internal/token_index.h"
#include "grammar/internal/token_table.h"
#include "grammar/vocabulary.h"

namespace grammard::grammar::internal {

struct GrammarData {
  GrammarData(std::shared_ptr<const TokenIndex> index_in, Pda pda_in,
              std::chrono::steady_clock::time_point deadline =
                  std::chrono::steady_clock::time_point::max())
      : index(std::move(index_in)),
        pda(std::move(pda_in)),
        table(pda, *index, deadline) {}
  // A grammar loaded back (serialize.h): nothing is recomputed.
  GrammarData(std::shared_ptr<const TokenIndex> index_in, Pda pda_in,
              TokenTable table_in)
      : index(std::move(index_in)),
        pda(std::move(pda_in)),
        table(std::move(table_in)) {}

  std::shared_ptr<const TokenIndex> index;
  Pda pda;
  TokenTable table;
};

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_INTERNAL_GRAMMAR_DATA_H_
