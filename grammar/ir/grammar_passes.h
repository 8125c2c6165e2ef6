// Normalisation passes over the grammar IR, run between a front end and the
// compiler:
//
//   absl::StatusOr<Grammar> g = ParseEbnf(text);          // front end
//   if (g.ok()) g = Normalize(*g);                         // this file
//   if (g.ok()) g = LowerToBytes(*g);                      // utf8_lowering.h
//
// Normalize drops what the root cannot reach and rejects left recursion,
// which top-down engines (a pushdown automaton that expands rules before
// reading input) cannot run: they would expand the same rule forever.
//
// Cost: every pass is linear in the grammar's size.
// Thread-safety: pure functions of their arguments.
#ifndef GRAMMARD_GRAMMAR_IR_GRAMMAR_PASSES_H_
#define GRAMMARD_GRAMMAR_IR_GRAMMAR_PASSES_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grammar/base/deadline.h"
#include "grammar/ir/grammar_ir.h"

namespace grammard::grammar {

// Validate, then RemoveUnreachableRules, then CheckNoLeftRecursion.
// By value: a grammar the caller no longer needs is moved, not copied.
// DeadlineExceeded when `deadline` passes (checked between the passes,
// each linear).
absl::StatusOr<Grammar> Normalize(Grammar grammar,
                                  const Deadline& deadline = {});

// The grammar without the rules the root cannot reach, and without the
// expressions only those rules used. Kept rules keep their relative order;
// the arena is compacted. Valid grammars only.
Grammar RemoveUnreachableRules(Grammar grammar);

// Which expressions (indexed like grammar.exprs) can match the empty string.
// A rule is nullable exactly when its body is. Valid grammars only.
std::vector<bool> NullableExprs(const Grammar& grammar);
// The same, indexed like grammar.rules.
std::vector<bool> NullableRules(const Grammar& grammar);

// Per expression, an id that two expressions share exactly when they are
// structurally equal: the same kind and fields, children with equal ids,
// and references to rules of one class, `rule_class[rule]` (the rule
// itself when `rule_class` is empty). Linear in the grammar's size.
std::vector<int32_t> StructuralIds(const Grammar& grammar,
                                   const std::vector<int32_t>& rule_class = {});

// The grammar with equal rules merged: rules whose bodies are structurally
// equal once equal rules count as one (the coarsest such partition, found
// by refinement), every reference pointing to the first rule of its class,
// and the copies the root no longer reaches dropped. Front ends emit such
// copies (a pattern lowered once per property that uses it, each a chain
// of rules), and a compiler would determinize and classify every copy.
// Unchanged when the refinement would take more than about 2^22 steps.
// Valid grammars only.
Grammar MergeEqualRules(Grammar grammar);

// InvalidArgument naming the rule chain when some rule can reach itself
// without consuming input: directly (`a ::= a "x"`), through other rules
// (`a ::= b "x"`, `b ::= a`), through a nullable prefix (`a ::= "x"? a`) or
// through a repetition that may repeat zero times (`a ::= b* a`). The message
// reads "left recursion: expr -> term -> expr". Every rule is checked,
// reachable or not. Valid grammars only.
absl::Status CheckNoLeftRecursion(const Grammar& grammar);

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_IR_GRAMMAR_PASSES_H_
