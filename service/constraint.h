// Constraints of the wire contract (grammard.v1.Constraint) turned into
// compiled grammars, and into the canonical text that keys the cache.
//
// A constraint is read once, when it is submitted (ParseConstraint): that
// gives the canonical text its grammar is cached under and, for the JSON
// kinds, the parsed document the front end then compiles without parsing
// the text again (CompileConstraint).
//
// The canonical form makes equal constraints equal text: JSON (schemas,
// structural tags) is re-serialized compactly with object keys sorted,
// except the members of "properties", whose order is the output's order;
// JSON options appear only for the kinds that use them.
//
// Cost: ParseConstraint is linear in the spec; CompileConstraint is the
// engine's compile (milliseconds to seconds). Thread-safety: pure functions.
#ifndef GRAMMARD_SERVICE_CONSTRAINT_H_
#define GRAMMARD_SERVICE_CONSTRAINT_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/compiled_grammar.h"
#include "grammar/compiler.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "nlohmann/json.hpp"
#include "proto/grammard.pb.h"

namespace grammard::service {

// "json_schema", "regex", ...; "unset" for a constraint without a kind.
const char* ConstraintKindName(const grammard::v1::Constraint& constraint);

// A constraint as read by ParseConstraint.
struct ParsedConstraint {
  // The constraint without its JSON text, which lives on in `json`.
  grammard::v1::Constraint spec;
  // The parsed json_schema or structural_tag; null for the other kinds.
  nlohmann::ordered_json json;
  // Equal constraints, equal text: the cache key's.
  std::string canonical;
  // About how much memory this holds (JsonHeapBytes and the spec's size),
  // for the compile queue's byte budget.
  int64_t bytes = 0;
};

// InvalidArgument for a constraint with no kind, text that is not UTF-8
// (wire_text.h), or JSON that does not parse.
absl::StatusOr<ParsedConstraint> ParseConstraint(
    const grammard::v1::Constraint& constraint);

// A lower bound of ParseConstraint's `bytes` for the JSON text of
// `constraint`, read without building the document (0 for other kinds).
int64_t LeastParsedBytes(const grammard::v1::Constraint& constraint);

struct CompileLimits {
  grammar::Deadline deadline{};
  int32_t max_states = 100000;
  std::chrono::microseconds classify_ahead{0};  // see CompilePool::Options
};

struct CompiledConstraint {
  grammar::CompiledGrammar grammar;
  // Keywords lenient JSON Schema conversion dropped.
  std::vector<grammar::DroppedKeyword> dropped;
};

// Errors are the front end's (InvalidArgument naming the problem,
// DeadlineExceeded, ResourceExhausted), prefixed with the constraint kind.
// By value: the parsed document is handed on to the front end.
absl::StatusOr<CompiledConstraint> CompileConstraint(
    const grammar::GrammarCompiler& compiler, ParsedConstraint constraint,
    const CompileLimits& limits);
// ParseConstraint, then the above (tests and benchmarks).
absl::StatusOr<CompiledConstraint> CompileConstraint(
    const grammar::GrammarCompiler& compiler,
    const grammard::v1::Constraint& constraint, const CompileLimits& limits);

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_CONSTRAINT_H_
