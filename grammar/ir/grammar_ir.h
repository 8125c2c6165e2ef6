// The grammar IR: the one internal form of a grammar. Every front end (the
// EBNF parser, the regex parser, later JSON Schema) produces a Grammar, and
// the compiler consumes one.
//
// A Grammar is an arena of expressions plus named rules whose bodies are
// expressions:
//
//   Grammar g;
//   int32_t digit = g.AddCharClass({{'0', '9'}});
//   int32_t body = g.AddSequence({g.AddBytes("-"), g.AddRepeat(digit, 1,
//   kUnbounded)}); g.root = g.AddRule("root", body); g.ToString();  // "root
//   ::= \"-\" [0-9]+\n"
//
// Children are arena indices and always precede their parent, so expressions
// form a DAG (a child may be shared) that every pass walks in index order.
// Rules may reference each other (and themselves) freely through kRuleRef.
//
// Two levels: front ends produce kCharClass (sets of Unicode scalar values);
// LowerToBytes (utf8_lowering.h) replaces each by kByteClass expressions over
// their UTF-8 encodings, so that the compiler only ever sees bytes. Literal
// strings (kBytes) are bytes at both levels.
//
// ToString prints our EBNF dialect (ebnf_parser.h), which ParseEbnf reads back
// into a structurally equal grammar. Byte classes, which EBNF has no notation
// for, print as `%[\x80-\xbf]`, which ParseEbnf also reads.
//
// Cost: adding an expression is O(1) amortised, plus O(r log r) to normalise a
// class of r ranges; Validate, ToString and ExpandedSize are linear in the
// grammar's size.
// Thread-safety: a plain value type; concurrent const access is safe.
#ifndef GRAMMARD_GRAMMAR_IR_GRAMMAR_IR_H_
#define GRAMMARD_GRAMMAR_IR_GRAMMAR_IR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "grammar/base/member_set.h"

namespace grammard::grammar {

// Upper bound of a kRepeat that may repeat without limit.
inline constexpr int32_t kUnbounded = -1;

// The deepest expression nesting Validate accepts. Passes that print or
// compare expressions recurse on nesting, so this bounds their stack use; the
// parsers' own nesting limit keeps well below it.
inline constexpr int32_t kMaxExprDepth = 1024;

// Limits that keep hostile or mistaken grammars from exhausting memory or
// time. Exceeding one is a ResourceExhausted error naming the limit.
struct GrammarLimits {
  // The largest bound a counted repetition {n,m} may use.
  int32_t max_repeat = 10000;
  // The largest grammar, counted by ExpandedSize: expressions after unrolling
  // every counted repetition. Later stages spend time and memory in
  // proportion to it, so `(a{1000}){1000}` is refused here, not there.
  uint64_t max_exprs = uint64_t{1} << 20;
  // The deepest nesting of groups a parser accepts. Real grammars nest a
  // few levels; parsers recurse per level, so this bounds their stack use
  // (kilobytes a level under sanitizers) on any thread.
  int32_t max_nesting = 200;
};

enum class ExprKind : uint8_t {
  kBytes,      // A literal byte string; empty means epsilon.
  kCharClass,  // One Unicode scalar value out of `ranges`.
  kByteClass,  // One byte out of `ranges` (all within 0..255).
  kSequence,   // `children` one after another (at least one child).
  kChoice,     // One of `children` (at least one child).
  kRepeat,     // children[0] repeated min..max times (max may be kUnbounded).
  kRuleRef,    // The body of rules[rule].
};

// An inclusive range [lo, hi] of code points (kCharClass) or bytes
// (kByteClass).
struct CharRange {
  uint32_t lo = 0;
  uint32_t hi = 0;
  bool operator==(const CharRange& other) const {
    return lo == other.lo && hi == other.hi;
  }
};

// One expression. Only the fields of its kind are meaningful.
//
// Class ranges are kept normalised: sorted, disjoint, with touching ranges
// merged, so two classes are equal exactly when their range lists are.
// kCharClass ranges never include surrogates (U+D800..U+DFFF), which UTF-8
// cannot encode: a negated class is complemented against the scalar values
// 0..0x10FFFF minus surrogates. An empty class matches nothing.
struct Expr {
  ExprKind kind = ExprKind::kBytes;
  std::string bytes;              // kBytes
  std::vector<CharRange> ranges;  // kCharClass, kByteClass
  std::vector<int32_t> children;  // kSequence, kChoice, kRepeat (exactly one)
  int32_t min = 0;                // kRepeat
  int32_t max = 0;                // kRepeat: >= min, or kUnbounded
  int32_t rule = -1;              // kRuleRef: index into Grammar::rules
};

struct Rule {
  // Matches [a-zA-Z_][a-zA-Z0-9_.-]*, unique within its grammar.
  std::string name;
  // Index into Grammar::exprs; -1 only while a builder has yet to set it.
  int32_t body = -1;
  // The values this rule matches within one instance of a calling rule must
  // differ as JSON values (base/json_value_key.h): JSON Schema's uniqueItems
  // over items no grammar can list. A matcher keeps each instance's values
  // (engine/stack.h); neither this rule nor the rules that call it are copied
  // into their callers. Such a rule must never leave a value with finitely
  // many ways to go on (a string without maxLength may always grow), or a
  // sequence could run out of distinct values midway; the compiler refuses
  // one that might. ToString does not print it.
  bool distinct = false;
  // Members counted at run time (JSON Schema's `required`, for objects whose
  // members may come in any order and too many to count in the grammar): a
  // call of a rule with member_bit b (0 to MemberSet::kMax - 1) sets bit b
  // of its caller's frame when it returns, and a rule with required_members
  // ends only once its frame holds all of those bits (engine/stack.h). Such
  // rules, and the rules calling the former, are never copied into their
  // callers. The front end must keep every requirement reachable (a required
  // member may always come next), or a sequence could be left with nothing
  // allowed. ToString does not print them.
  int16_t member_bit = -1;
  MemberSet required_members{};
  // A call of a rule with a member_guard is refused where the caller's
  // frame counts every member of it: with member_bit b, {b} (JSON Schema's
  // declared members at most once, in any order). Exact masks need each
  // guarded call from a rule that is not a dispatch to begin with a byte of
  // its own (the separator before a member), so that the byte is refused
  // with it.
  MemberSet member_guard{};
  // A dispatch (no member_bit) reads a trie of member names: after each
  // byte that narrows the names it calls a guarded dispatch of the
  // narrower set, or the one member left. Its frame is its caller's: it
  // reads the members counted there, and what it calls returns and counts
  // there, so each of its calls must end it. A name prefix whose members
  // are all written is then refused at its last byte, and a matcher steps
  // one stack along the names rather than one per member.
  bool member_dispatch = false;
  // Characters counted at run time (JSON Schema's maxLength over a pattern
  // or format whose automaton, counted to that length, would be too large):
  // with max_chars >= 0, the rule reads the rest of a JSON string after its
  // opening quote, its closing quote included, and a matcher counts the
  // characters it holds (a code point, or an escape), refusing a byte past
  // which the string could no longer close within max_chars (engine/
  // stack.h). Such a rule must call no other (its automaton alone reads the
  // string), and is never copied into its callers. ToString does not print
  // it.
  int32_t max_chars = -1;
};

// See the file comment. A passive value: the Add* helpers only append, and
// Validate checks every invariant the rest of the engine relies on.
struct Grammar {
  std::vector<Expr> exprs;
  std::vector<Rule> rules;
  int32_t root = -1;  // Index into rules.

  // Each returns the index of the new expression.
  int32_t AddBytes(std::string_view bytes);
  int32_t AddEpsilon() { return AddBytes(""); }
  // Normalises `ranges` (any order, overlaps allowed) and, when `negated`,
  // complements them. Code point ranges are clipped to scalar values; byte
  // ranges to 0..255.
  int32_t AddCharClass(std::vector<CharRange> ranges, bool negated = false);
  int32_t AddByteClass(std::vector<CharRange> ranges, bool negated = false);
  int32_t AddSequence(std::vector<int32_t> children);
  int32_t AddChoice(std::vector<int32_t> children);
  int32_t AddRepeat(int32_t child, int32_t min, int32_t max);
  int32_t AddRuleRef(int32_t rule);
  // Returns the index of the new rule. `body` may be set later.
  int32_t AddRule(std::string name, int32_t body = -1);

  // The index of the rule called `name`, or -1.
  int32_t FindRule(std::string_view name) const;

  // The grammar in our EBNF dialect, one rule a line, in rule order. Valid
  // grammars only (call Validate first on untrusted ones).
  std::string ToString() const;
  // One expression in the same notation, for messages and debugging.
  std::string ExprToString(int32_t expr) const;

  // OK when every invariant holds: indices in range, children before their
  // parent, kinds with their required children, repeat bounds ordered, class
  // ranges normalised, rule names valid and unique, nesting within
  // kMaxExprDepth. InvalidArgument naming the first violation otherwise.
  absl::Status Validate() const;
};

// Whether two valid grammars have the same rules (names, order, root) and
// structurally identical bodies, whatever their arena layouts.
bool StructurallyEqual(const Grammar& a, const Grammar& b);

// Whether `name` is a valid rule name.
bool IsValidRuleName(std::string_view name);

// Sorts and merges `ranges`, clips them to 0..`max_value` and, for code
// points, removes surrogates. The normal form Expr::ranges are kept in.
std::vector<CharRange> NormalizeCodepointRanges(std::vector<CharRange> ranges);
std::vector<CharRange> NormalizeByteRanges(std::vector<CharRange> ranges);
// The complement of normalised ranges among scalar values (or bytes).
std::vector<CharRange> ComplementCodepointRanges(
    const std::vector<CharRange>& ranges);
std::vector<CharRange> ComplementByteRanges(
    const std::vector<CharRange>& ranges);

// The number of expressions reachable from rule bodies once every counted
// repetition is unrolled: a repeat {m,n} counts max(m, n) copies of its child
// ({m,} counts m + 1), rule references count 1 (rules are not inlined).
// Saturates at UINT64_MAX. Valid grammars only.
uint64_t ExpandedSize(const Grammar& grammar);

// ResourceExhausted naming the limit when ExpandedSize(grammar) exceeds
// limits.max_exprs.
absl::Status CheckSizeLimit(const Grammar& grammar,
                            const GrammarLimits& limits);

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_IR_GRAMMAR_IR_H_
