// JSON Schema to grammar: the grammar whose strings are exactly the JSON
// texts (in a chosen layout) that a schema accepts, ready for
// GrammarCompiler::Compile.
//
//   JsonSchemaOptions options;             // strict, any JSON whitespace
//   absl::StatusOr<JsonSchemaResult> r = JsonSchemaToGrammar(
//       R"({"type": "object", "properties": {"n": {"type": "integer"}},
//           "required": ["n"]})", options);
//   if (r.ok()) compiler.Compile(r->grammar);
//
// Drafts 2020-12, 2019-09, 7, 6 and 4 (from the schema's $schema, else
// JsonSchemaOptions::default_draft). Enforced: type, enum, const, the
// numeric bounds and multipleOf (exact for numbers of any size, because
// they work on digits), minLength/maxLength/pattern/format together (a
// maxLength whose automaton would grow too large counted by the matcher at
// run time: grammar_ir.h's Rule::max_chars),
// properties, patternProperties, additionalProperties, required,
// propertyNames, min/maxProperties, dependentRequired, dependentSchemas,
// items/prefixItems/additionalItems, min/maxItems, contains with
// min/maxContains (up to four on one array, counted together), uniqueItems
// among up to 12 listed values (in the grammar) and, kept apart by the
// matcher at run time, among values that can always grow (strings without
// maxLength, pattern or format, objects open to more members, arrays
// without maxItems, numbers without bounds or multipleOf: grammar_ir.h's
// Rule::distinct) beside up to 64 listed scalars (enum, const, null,
// booleans, a number's zero: each counted once in the array's frame, its
// Rule::member_guard; so any value at all), allOf, anyOf, oneOf
// (exact when the branches are provably disjoint, else as "this branch and
// not the others"), not and if/then/else where the negation is expressible,
// $ref to $defs, definitions, JSON pointers, $anchor and $id, including
// recursion; $dynamicRef when no other $dynamicAnchor of its name exists;
// unevaluatedProperties beside allOf/$ref only, unevaluatedItems beside no
// applicator; contentEncoding base64 (canonical padding) in draft 7, which
// lets validators assert content keywords (other encodings and media types,
// and content keywords of later drafts, are annotations). Annotations (title,
// description, default, examples, ...) and unknown keywords are ignored, as the
// specification says. Not enforced (strict mode refuses them): uniqueItems over
// other values (closed objects, bounded strings or numbers, ...), the regex,
// idn-email and idn-hostname formats, draft 7's contentMediaType
// application/json, multipleOf and minLength whose automata grow too large,
// $recursiveRef, meta-schemas other than json-schema.org's.
//
// The policy is never silent. In strict mode (the default) a keyword that
// cannot be enforced exactly is an InvalidArgument error naming the keyword
// and its JSON pointer; in lenient mode it is dropped (the grammar then
// accepts more, never less) and listed in JsonSchemaResult::dropped. In
// strict mode the grammar never accepts a text the schema rejects. It may
// accept fewer texts than the schema: numbers under bounds or multipleOf are
// written without exponents, constrained strings and keys with escapes only
// where JSON requires them, objects in the member order chosen below, and
// enum/const objects in the key order they were written in (any order with
// JsonPropertyOrder::kAny, kAnyWhenSmall or kAnyRepeatable, up to five
// members). Two limits remain outside any grammar: a member name the schema
// does not declare may be repeated (RFC 8259 leaves such objects undefined;
// declared names appear at most once but under kAnyRepeatable), and strings
// count at most 65536 characters for min/maxLength.
//
// Cost: linear in the schema for plain schemas; allOf/anyOf/oneOf multiply
// alternatives (bounded by max_alternatives) and string and number
// constraints build automata (bounded by max_automaton_states). Every
// bound, the deadline and max_grammar_exprs fail with a clear
// ResourceExhausted or DeadlineExceeded error instead of running on.
// Thread-safety: a pure function; call it from any number of threads.
#ifndef GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_JSON_SCHEMA_H_
#define GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_JSON_SCHEMA_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/base/deadline.h"
#include "grammar/ir/grammar_ir.h"
#include "nlohmann/json.hpp"

namespace grammard::grammar {

enum class JsonSchemaDraft { k4, k6, k7, k2019_09, k2020_12 };

// Whitespace between JSON tokens.
enum class JsonWhitespace {
  kAny,       // any JSON whitespace (space, tab, CR, LF) between tokens
  kCompact,   // none: exactly item_separator and key_separator
  kIndented,  // a newline and `indent` spaces per level before each member
              // and each non-empty container's closing bracket
};

// The order members of an object may appear in.
enum class JsonPropertyOrder {
  kAsWritten,      // declared properties in schema order, others anywhere
  kRequiredFirst,  // required properties first, then the rest as written
  kAny,            // any order, each declared member at most once: up to
                   // 6 declared properties in the grammar (2^6 rules);
                   // larger objects (up to 256 declared properties, no
                   // minProperties/maxProperties past 1, no negated
                   // additionalProperties) count their members at run
                   // time (a matcher's frame bits: masks next to a
                   // member read its separator for real, and each
                   // member written begins as one stack per member not
                   // written yet); others stay as written, as under
                   // kAnyRepeatable, and past 256 declared properties
                   // are refused
  kAnyWhenSmall,   // kAny for objects of at most 6 declared properties
                   // (64 grammar rules each), kAsWritten for larger ones
  kAnyRepeatable,  // kAnyWhenSmall, and larger objects in any order too
                   // where a declared member may appear more than once
                   // (each occurrence valid, so whichever one a parser
                   // keeps is valid); rules grow as 2^(required ones),
                   // and past 6 required ones (up to 256) the matcher
                   // counts them at run time instead (a frame's bits;
                   // masks there read the tokens that may close the
                   // object for real). Objects with min/maxProperties,
                   // a negated additionalProperties or more than 64
                   // required properties stay as written.
};

struct JsonSchemaOptions {
  bool strict = true;
  JsonSchemaDraft default_draft = JsonSchemaDraft::k2020_12;

  JsonWhitespace whitespace = JsonWhitespace::kAny;
  // kAny: the longest whitespace run allowed; -1 for no limit.
  int32_t max_whitespace_run = -1;
  // kIndented: spaces per nesting level.
  int32_t indent = 2;
  // kCompact and kIndented: what separates items and a key from its value.
  std::string item_separator = ",";
  std::string key_separator = ":";

  JsonPropertyOrder property_order = JsonPropertyOrder::kAsWritten;

  // Once this passes (its time, or its flag raised) the conversion fails
  // with DeadlineExceeded.
  Deadline deadline{};
  // Expressions the conversion may build; past it ResourceExhausted (the
  // compiler bounds what it compiles again: CompileOptions).
  uint64_t max_grammar_exprs = uint64_t{1} << 20;
  // Alternatives one schema may expand into through anyOf/oneOf/allOf.
  int32_t max_alternatives = 512;
  // States of any one automaton built for string or number constraints.
  int32_t max_automaton_states = 20000;

  // Other schema documents $ref may reach, by absolute URI (without
  // fragment). Nothing is ever fetched: other URIs are NotFound.
  std::map<std::string, std::string> documents;
};

// A keyword lenient mode dropped.
struct DroppedKeyword {
  std::string keyword;
  std::string pointer;  // e.g. "#/properties/tags/uniqueItems"
  std::string reason;
};

struct JsonSchemaResult {
  // Code point level (kCharClass), as built: GrammarCompiler::Compile is
  // where every front end's grammar is validated and normalised.
  Grammar grammar;
  // Always empty in strict mode.
  std::vector<DroppedKeyword> dropped;
};

// InvalidArgument for text that is not JSON or not a schema, and in strict
// mode for a keyword that cannot be enforced (naming it and its pointer);
// NotFound for a $ref that leads nowhere; ResourceExhausted or
// DeadlineExceeded when a limit above is reached.
absl::StatusOr<JsonSchemaResult> JsonSchemaToGrammar(
    std::string_view schema_json, const JsonSchemaOptions& options = {});
// The same for a schema already parsed (ParseBoundedJson, base/
// bounded_json.h), so that a caller who read it (for a cache key, or as
// part of a larger document) does not have it parsed twice.
absl::StatusOr<JsonSchemaResult> ParsedJsonSchemaToGrammar(
    nlohmann::ordered_json schema, const JsonSchemaOptions& options = {});

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_JSON_SCHEMA_H_
