// GrammarCompiler: turns an EBNF grammar, a regex or a grammar in the
// internal form into a CompiledGrammar for one vocabulary.
//
//   GrammarCompiler compiler(vocab);
//   absl::StatusOr<CompiledGrammar> g = compiler.CompileEbnf(R"(root ::= "yes"
//   | "no")");
//
// Compiling: parse, lower character classes to UTF-8 bytes, build one byte
// automaton per rule, drop what can never complete, determinize and
// minimize, then group the states whose tokens classify alike. Classifying
// the vocabulary's tokens for a state (token_table.h) waits until a matcher
// first reaches it, so a grammar is ready after the automaton work and its
// first masks pay for the states they visit.
//
// Thread-safety: a compiler is immutable after construction; compile on any
// number of threads at once. Construction indexes the vocabulary once
// (sorting its tokens: tens of milliseconds for 128K tokens).
#ifndef GRAMMARD_GRAMMAR_COMPILER_H_
#define GRAMMARD_GRAMMAR_COMPILER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/base/deadline.h"
#include "grammar/compiled_grammar.h"
#include "grammar/ir/grammar_ir.h"
#include "grammar/vocabulary.h"

namespace grammard::grammar {

namespace internal {
class TokenIndex;
}

struct CompileOptions {
  // Automaton states over all rules; past it compiling fails with
  // ResourceExhausted instead of using unbounded time and memory.
  int32_t max_states = 100000;
  // The largest grammar (ExpandedSize, see grammar_ir.h) compiled, counted
  // once unreachable rules are dropped; past it ResourceExhausted.
  uint64_t max_grammar_exprs = uint64_t{1} << 20;
  // Once this passes (its time, or its flag raised) compiling stops with
  // DeadlineExceeded (checked while parsing EBNF, inside the passes that
  // walk rules, and every 64 automaton
  // states, so it overruns by at most their work).
  Deadline deadline{};
  // How long compiling may spend classifying tokens ahead of any matcher
  // (nearest the start first); what is left is classified when a matcher
  // first needs it. Enough for a typical EBNF or regex grammar to be done,
  // so its masks stay flat; a large schema is ready after this much instead
  // of after classifying states no output may visit (seconds).
  std::chrono::microseconds classify_ahead = std::chrono::milliseconds(50);
};

class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const Vocabulary> vocab);

  const Vocabulary& vocabulary() const;

  // GBNF / XGrammar-style EBNF; `root_rule` names the start rule.
  absl::StatusOr<CompiledGrammar> CompileEbnf(
      std::string_view ebnf, std::string_view root_rule = "root",
      const CompileOptions& options = {}) const;
  // A regex whose full matches are the language (see
  // frontends/regex/regex_parser.h).
  absl::StatusOr<CompiledGrammar> CompileRegex(
      std::string_view regex, const CompileOptions& options = {}) const;
  // A grammar in the internal form (any front end's output). By value: a
  // grammar the caller is done with is moved through the passes, not
  // copied (a Kubernetes schema's is 50K expressions).
  absl::StatusOr<CompiledGrammar> Compile(
      Grammar grammar, const CompileOptions& options = {}) const;
  // A grammar from SerializeGrammar's bytes (serialize.h), for this
  // compiler's vocabulary. FailedPrecondition for bytes of another engine,
  // format or tokenizer; DataLoss for damaged bytes.
  absl::StatusOr<CompiledGrammar> Deserialize(std::string_view bytes) const;

 private:
  std::shared_ptr<const internal::TokenIndex> index_;
};

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_COMPILER_H_
