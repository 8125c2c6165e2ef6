// The JSON Schema Test Suite runner shared by json_schema_suite_test (CI)
// and the json_schema_suite binary (full tables, `bazel run`).
//
//   absl::StatusOr<SuiteRun> run = RunJsonSchemaSuite(dir, {});
//   for (const std::string& f : run->failures) ...   // must be empty
//
// Every schema of drafts 2020-12 and 7 (required and optional files; remote
// documents from the suite's remotes/ folder) is converted in strict mode
// with members in any order. A schema that is refused counts as a compile
// error. For one that converts, each instance serialized compactly must be
// accepted by the grammar (the Earley oracle, byte by byte) exactly when it
// is valid, the same instance pretty-printed must get the same answer, and
// the engine (GrammarCompiler with an ASCII vocabulary, then
// GrammarMatcher::AcceptString) must agree with the oracle.
//
// Failures (the run must have none):
//   - any invalid instance accepted (draft 7's optional/content.json
//     included: grammard asserts contentEncoding base64 there and refuses
//     contentMediaType application/json);
//   - a valid instance rejected in a required file or optional/format/,
//     except the documented narrowings of the format grammars (leap seconds
//     outside UTC, punycode host labels) and 2020-12's format.json, which
//     expects format as an annotation while grammard asserts it;
//   - the engine refusing a grammar (other than for an empty language, when
//     every instance is invalid) or disagreeing with the oracle.
// Other optional files (numbers past double precision printed as 1e+308,
// regex dialect corners) report valid instances rejected without failing.
//
// Cost: about a second for the whole suite. Thread-safety: one run at a
// time per process is expected (it prints to stdout).
#ifndef GRAMMARD_TESTS_CONFORMANCE_JSON_SCHEMA_SUITE_H_
#define GRAMMARD_TESTS_CONFORMANCE_JSON_SCHEMA_SUITE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grammard::conformance {

struct SuiteCounts {
  int groups = 0;
  int compiled = 0;       // groups whose schema converted
  int rejected = 0;       // groups refused at compile
  int cases = 0;          // every instance
  int compile_error = 0;  // instances of refused groups
  int passed = 0;
  int invalid_accepted = 0;
  int valid_rejected = 0;
  void Add(const SuiteCounts& o);
};

struct SuiteOptions {
  // At most this many groups per file; <= 0: all.
  int limit = 0;
};

struct SuiteRun {
  SuiteCounts total;
  // The files llguidance's published baseline covers: draft 2020-12,
  // required and optional/format.
  SuiteCounts baseline_set;
  // Instances llguidance passes in its baseline (-1 when the file is
  // absent), out of baseline_cases.
  int llguidance_passed = -1;
  int llguidance_cases = 0;
  std::vector<std::string> failures;
  // Each refused schema and the error, one line each.
  std::vector<std::string> rejections;
};

// `suite_dir` is the json-schema-test-suite folder (holding tests/,
// remotes/ and llguidance-baseline/). Prints a table per draft to stdout.
// NotFound when suite_dir/tests is missing.
absl::StatusOr<SuiteRun> RunJsonSchemaSuite(const std::string& suite_dir,
                                            const SuiteOptions& options);

}  // namespace grammard::conformance

#endif  // GRAMMARD_TESTS_CONFORMANCE_JSON_SCHEMA_SUITE_H_
