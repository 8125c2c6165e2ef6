#include "grammar/compiled_grammar.h"

#include "grammar/engine/grammar_data.h"

namespace grammard::grammar {

const Vocabulary& CompiledGrammar::vocabulary() const {
  return data_->index->vocab();
}

int32_t CompiledGrammar::mask_words() const {
  return (vocabulary().size() + 31) / 32;
}

int32_t CompiledGrammar::num_states() const { return data_->pda.num_states(); }

bool CompiledGrammar::ClassifyAhead(
    std::chrono::steady_clock::time_point deadline,
    const std::atomic<bool>* cancel) const {
  return data_->table.Prebuild(deadline, cancel);
}

int32_t CompiledGrammar::num_classified() const {
  return data_->table.num_built();
}

bool CompiledGrammar::fully_classified() const {
  return data_->table.complete();
}

size_t CompiledGrammar::MemoryBytes() const {
  return data_->pda.MemoryBytes() + data_->table.MemoryBytes();
}

}  // namespace grammard::grammar
