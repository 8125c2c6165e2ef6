// Choice: the grammar whose language is exactly a given list of strings, for
// "one of these labels" constraints (vLLM's guided_choice).
//
//   absl::StatusOr<Grammar> g = ChoiceGrammar({"yes", "no", "\"maybe\"\n"});
//   if (g.ok()) compiler.Compile(*g);
//
// Strings are literal bytes (quotes, backslashes and newlines included) and
// must be valid UTF-8; duplicates are merged and the empty string is a valid
// choice. GrammarCompiler::Compile validates and normalises the result, as it
// does every front end's.
//
// Cost: linear in the total length of the strings. The compiler turns the
// alternatives into a trie, so long lists cost states in proportion to their
// distinct prefixes.
// Thread-safety: a pure function; call it from any number of threads.
#ifndef GRAMMARD_GRAMMAR_FRONTENDS_CHOICE_CHOICE_H_
#define GRAMMARD_GRAMMAR_FRONTENDS_CHOICE_CHOICE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/ir/grammar_ir.h"

namespace grammard::grammar {

// InvalidArgument for an empty list ("choice: the list is empty") and for a
// string that is not valid UTF-8 (naming its index and the offending byte).
absl::StatusOr<Grammar> ChoiceGrammar(const std::vector<std::string>& choices);

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_FRONTENDS_CHOICE_CHOICE_H_
