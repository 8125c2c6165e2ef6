// The builtin JSON grammar: any JSON value (RFC 8259) in our EBNF dialect,
// the "builtin JSON" workload. The text lives in json.ebnf beside this file
// and is compiled in, so the engine needs no data file at run time.
//
//   absl::StatusOr<Grammar> g = ParseEbnf(BuiltinJsonEbnf());
//
// Whitespace ([ \t\n\r]*) is allowed between tokens but not around the whole
// value, like XGrammar's builtin grammar. No rule is left-recursive.
//
// Cost: none (a constant). Thread-safety: immutable.
#ifndef GRAMMARD_GRAMMAR_FRONTENDS_EBNF_JSON_GRAMMAR_H_
#define GRAMMARD_GRAMMAR_FRONTENDS_EBNF_JSON_GRAMMAR_H_

#include <string_view>

namespace grammard::grammar {

// EBNF text whose root rule is "root".
std::string_view BuiltinJsonEbnf();

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_FRONTENDS_EBNF_JSON_GRAMMAR_H_
