// Structural tags: free text in which tool calls (or any tagged JSON) may
// appear, each tag's JSON constrained by its own schema. This is XGrammar's
// (legacy) structural tag format, the one vLLM forwards:
//
//   {"structures": [{"begin": "<function=get_weather>",
//                    "schema": {"type": "object", ...},
//                    "end": "</function>"}, ...],
//    "triggers": ["<function="]}
//
// (a "type": "structural_tag" member may be present; it changes nothing).
//
// The language: free text, in which the first occurrence of a trigger must
// be the start of a tag: the `begin` of a structure that starts with that
// trigger, then JSON matching the structure's schema, then its `end`; after
// it free text again, scanned afresh, any number of times. The text may end
// anywhere in free text, never inside a tag. Where several triggers end at
// the same place (one is a suffix of another) any of them may start the tag;
// where one trigger is a prefix of another, the shorter one is seen first,
// so the structures of both start after it. A trigger that no structure
// starts with may not appear in free text. Free text is valid UTF-8, matched
// one code point at a time.
//
// The free text is an Aho-Corasick automaton over the triggers' code points,
// one rule per state whose every call is in tail position: the matcher
// returns straight to the caller's caller on tail calls, so its stacks stay
// flat over any length of free text.
//
//   absl::StatusOr<StructuralTagResult> r = StructuralTagGrammar(spec);
//   if (r.ok()) compiler.Compile(r->grammar);
//
// Cost: linear in the triggers' total length times their distinct code
// points, plus one JsonSchemaToGrammar per structure (each bounded by
// `options`; the merged grammar by the compiler's max_grammar_exprs).
// Thread-safety: a pure function; call it from any number of threads.
#ifndef GRAMMARD_GRAMMAR_FRONTENDS_STRUCTURAL_TAG_STRUCTURAL_TAG_H_
#define GRAMMARD_GRAMMAR_FRONTENDS_STRUCTURAL_TAG_STRUCTURAL_TAG_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "grammar/ir/grammar_ir.h"
#include "nlohmann/json.hpp"

namespace grammard::grammar {

struct StructuralTagResult {
  // Code point level (kCharClass), as built: GrammarCompiler::Compile is
  // where every front end's grammar is validated and normalised.
  Grammar grammar;
  // What lenient conversion dropped from the schemas; each pointer names its
  // structure, e.g. "/structures/0/schema#/uniqueItems".
  std::vector<DroppedKeyword> dropped;
};

// InvalidArgument naming the problem and its JSON pointer for a spec that is
// not JSON, has unknown keys, no (or empty) triggers, a structure without a
// begin, end or schema, or a begin that starts with no trigger. A schema's
// own error keeps its code, prefixed with "/structures/<i>/schema".
absl::StatusOr<StructuralTagResult> StructuralTagGrammar(
    std::string_view spec_json, const JsonSchemaOptions& options = {});
// The same for a spec already parsed (ParseBoundedJson).
absl::StatusOr<StructuralTagResult> ParsedStructuralTagGrammar(
    nlohmann::ordered_json spec, const JsonSchemaOptions& options = {});

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_FRONTENDS_STRUCTURAL_TAG_STRUCTURAL_TAG_H_
