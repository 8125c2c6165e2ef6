// CompiledGrammar: a grammar compiled for one vocabulary, ready to drive any
// number of GrammarMatchers (matcher.h) on any threads.
//
// Produced by GrammarCompiler (compiler.h). Cheap to copy: copies share the
// compiled data. Thread-safety: share freely; what it answers never changes.
// Underneath, per-state token tables are built by the first matcher that
// needs them (once, whichever thread), so MemoryBytes grows as outputs
// visit new states.
#ifndef GRAMMARD_GRAMMAR_COMPILED_GRAMMAR_H_
#define GRAMMARD_GRAMMAR_COMPILED_GRAMMAR_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "grammar/vocabulary.h"

namespace grammard::grammar {

namespace internal {
struct GrammarData;
}

// Changes whenever the same constraint and vocabulary could compile to
// different masks (or a refusal to a grammar); caches of compiled grammars,
// and of refusals, key on it. 2: uniqueItems kept at run time (distinct
// rules), so a fleet cache must not serve the refusals older daemons stored.
// 3: required members of large objects in any order counted at run time.
// 4: unique items over any value; maxLength over patterns and formats too
// large to count in an automaton, counted at run time.
inline constexpr char kEngineVersion[] = "grammard-engine-4";

class CompiledGrammar {
 public:
  explicit CompiledGrammar(std::shared_ptr<const internal::GrammarData> data)
      : data_(std::move(data)) {}

  const Vocabulary& vocabulary() const;
  // Words of one mask row: ceil(vocabulary().size() / 32).
  int32_t mask_words() const;
  // Automaton states, and the bytes the compiled form occupies now.
  int32_t num_states() const;
  size_t MemoryBytes() const;

  // Classifies tokens for the states no matcher has reached yet, nearest
  // the start first, until `deadline` or until `*cancel` is set: the work
  // the first masks of later sequences would otherwise do. Safe while
  // matchers run; a background thread may call it. True once everything is
  // classified.
  bool ClassifyAhead(std::chrono::steady_clock::time_point deadline,
                     const std::atomic<bool>* cancel = nullptr) const;
  // States whose tokens are classified so far, and whether that is every
  // state (nothing left to do ahead).
  int32_t num_classified() const;
  bool fully_classified() const;

  const internal::GrammarData& data() const { return *data_; }

  // Keeps this grammar's tables alive while held, and with them the mask
  // keys of its matchers (GrammarMatcher::NextMaskKey) valid and unique.
  std::shared_ptr<const void> KeepAlive() const { return data_; }

 private:
  std::shared_ptr<const internal::GrammarData> data_;
};

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_COMPILED_GRAMMAR_H_
