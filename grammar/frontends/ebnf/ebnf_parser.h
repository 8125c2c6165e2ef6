// The EBNF front end: grammar text in the dialect shared by llama.cpp's GBNF
// and XGrammar's EBNF becomes a Grammar (grammar_ir.h).
//
//   absl::StatusOr<Grammar> g = ParseEbnf(R"(
//     root  ::= "[" item ("," item)* "]"
//     item  ::= [a-z]+ | number    # a comment
//     number ::= "-"? [0-9]{1,10}
//   )");
//
// The dialect:
//   name ::= body         a rule; names match [a-zA-Z_][a-zA-Z0-9_.-]*. A
//                         body may span lines; the next rule starts where a
//                         line starts with `name ::=`.
//   "text"                a literal; escapes \n \r \t \" \' \\ \/ \? \[ \]
//                         \a \b \f \v \0 \e, and \xHH \uHHHH \UHHHHHHHH
//                         naming code points (written as UTF-8).
//   [a-z_] [^"\\]         a character class of code points, with ranges and
//                         negation; the same escapes plus \- \^ \$ \. \* \+
//                         \( \) \{ \} \|.
//   .                     any code point.
//   %[\x80-\xbf]          a class of raw bytes (how ToString prints the byte
//                         classes of a lowered grammar).
//   a b                   sequence;  a | b  alternation (an alternative may
//                         be empty);  ( ... )  grouping; `()` is empty.
//   x? x* x+ x{n} x{n,} x{n,m}   repetition; XGrammar's printed {n, -1}
//                         means {n,}. Bounds above GrammarLimits::max_repeat
//                         are refused.
//   # ...                 a comment to the end of the line.
//   (= ...)               XGrammar's lookahead assertion, only last in a
//                         rule: checked, then dropped (it never changes the
//                         language, only how XGrammar's matcher prunes).
//
// Refused with an error naming the construct: XGrammar's macros (Regex(...),
// TagDispatch(...), Token(...), ExcludeToken(...), TokenTagDispatch(...)),
// XGrammar's rule attributes (name[max_tokens=3] ::= ...), llama.cpp's token
// references (<think>, <[1000]>, !<...>), and single-quoted strings.
//
// The result holds every rule as written, in order, with rules[root] the root
// rule; run Normalize (grammar_passes.h) to drop unreachable rules and reject
// left recursion. ParseEbnf(g.ToString(), root name) gives back a grammar
// structurally equal to g.
//
// Errors are InvalidArgument (ResourceExhausted for a limit) reading
// "EBNF error at line L, column C: <problem>"; columns count code points.
//
// Cost: linear in the text's length. Thread-safety: a pure function.
#ifndef GRAMMARD_GRAMMAR_FRONTENDS_EBNF_EBNF_PARSER_H_
#define GRAMMARD_GRAMMAR_FRONTENDS_EBNF_EBNF_PARSER_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/base/deadline.h"
#include "grammar/ir/grammar_ir.h"

namespace grammard::grammar {

absl::StatusOr<Grammar> ParseEbnf(std::string_view text,
                                  std::string_view root_rule = "root");
// Once `deadline` passes (checked every few rules), DeadlineExceeded: a
// compile being cancelled need not wait for a long text to be read.
absl::StatusOr<Grammar> ParseEbnf(std::string_view text,
                                  std::string_view root_rule,
                                  const GrammarLimits& limits,
                                  const Deadline& deadline = {});

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_FRONTENDS_EBNF_EBNF_PARSER_H_
