// The regex front end: an ECMAScript-style regular expression (the dialect
// of JSON Schema's "pattern") becomes a one-rule Grammar whose language is
// the set of strings the pattern matches in full.
//
//   absl::StatusOr<Grammar> g = ParseRegex(R"(\d{3}-\d{4})");
//   g->ToString();  // "root ::= [0-9]{3} \"-\" [0-9]{4}\n"
//
// Supported: literals (UTF-8); escapes \n \t \r \f \v \0 \cX \xHH \uHHHH
// (surrogate pairs combine) \u{H...}, and any escaped punctuation or _ (\.
// \/ \\ \( \_ ...); `.` (any code point except \n); classes [a-z] [^...]
// [] [^]; the ECMAScript class escapes \d = [0-9], \w = [A-Za-z0-9_], \s =
// the ECMAScript white space and line terminators (with Unicode spaces), and
// \D \W \S, in and out of classes; groups (...), (?:...), (?<name>...),
// (?P<name>...); alternation, including empty alternatives; quantifiers
// ? * + {n} {n,} {n,m} and their lazy forms (??, *?, +?, {n,m}? : laziness
// changes which match a search prefers, never the set of full matches).
// A `{` that does not start a quantifier is a literal, as ECMAScript's
// Annex B reads it; so are a lone `]` and `}`.
//
// Anchors: `^` where nothing can have been matched yet (the start of the
// pattern, of a top-level alternative, or of a group standing there) and `$`
// where nothing can follow (the end of the pattern or of such a group) are
// no-ops, since the whole input is matched anyway; anywhere else, and inside
// a group repeated more than once, they are refused.
//
// Refused with an error naming the construct and its offset: backreferences
// (\1, \k<name>, (?P=name)), lookahead and lookbehind ((?=, (?!, (?<=, (?<!),
// word boundaries (\b, \B), Unicode property escapes (\p{L}, \P{L}), inline
// flags ((?i)), octal escapes, possessive or consecutive quantifiers (a++,
// a**), {,m}, and escapes ECMAScript does not define (such as \a, \e, \z).
// Bounds above GrammarLimits::max_repeat and patterns that unroll past
// GrammarLimits::max_exprs are ResourceExhausted.
//
// Errors read "regex error at offset N: <problem>", N a 0-based byte offset.
//
// Cost: linear in the pattern's length. Thread-safety: a pure function.
#ifndef GRAMMARD_GRAMMAR_FRONTENDS_REGEX_REGEX_PARSER_H_
#define GRAMMARD_GRAMMAR_FRONTENDS_REGEX_REGEX_PARSER_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/ir/grammar_ir.h"

namespace grammard::grammar {

absl::StatusOr<Grammar> ParseRegex(std::string_view pattern);
absl::StatusOr<Grammar> ParseRegex(std::string_view pattern,
                                   const GrammarLimits& limits);

// The same dialect with ^ and $ kept wherever they stand, for a caller that
// gives them their meaning (JSON Schema's search: ^ holds only where the
// input starts, $ only where it ends; see the JSON Schema front end's
// char_dfa.h). Each becomes a reference to a rule of its own, named
// kStartAnchorRule or kEndAnchorRule, with an empty body; a quantifier on
// an anchor itself is still refused.
inline constexpr char kStartAnchorRule[] = "start_anchor";
inline constexpr char kEndAnchorRule[] = "end_anchor";
absl::StatusOr<Grammar> ParseRegexKeepingAnchors(
    std::string_view pattern, const GrammarLimits& limits = {});

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_FRONTENDS_REGEX_REGEX_PARSER_H_
