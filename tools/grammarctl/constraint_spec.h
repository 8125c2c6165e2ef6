// Turns grammarctl's constraint flags into a grammard.v1.Constraint, and
// reads the files those flags (and the load benchmark's) name.
//
// Cost: reads at most one file. Thread-safety: pure functions (they read
// the environment and files only).
#ifndef GRAMMARD_TOOLS_GRAMMARCTL_CONSTRAINT_SPEC_H_
#define GRAMMARD_TOOLS_GRAMMARCTL_CONSTRAINT_SPEC_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/grammard.pb.h"

namespace grammard::grammarctl {

// Exactly one of the kinds must be set (non-empty, or json_object true).
struct ConstraintSpec {
  std::string json_schema;     // JSON text, or a file holding it
  std::string regex;           // the pattern itself
  std::string ebnf;            // a file
  std::string choices;         // comma-separated
  bool json_object = false;    // any JSON object
  std::string structural_tag;  // JSON text, or a file holding it
  std::string whitespace;      // "", "any", "compact" or "indented"
  bool lenient = false;        // drop unenforceable schema keywords
};

absl::StatusOr<grammard::v1::Constraint> BuildConstraint(
    const ConstraintSpec& spec);

// A path as the user meant it: under `bazel run` the working directory is
// the runfiles tree, so a relative path is taken from BUILD_WORKING_DIRECTORY
// when that is set.
std::string UserPath(const std::string& path);

// The contents of UserPath(path).
absl::StatusOr<std::string> ReadUserFile(const std::string& path);

}  // namespace grammard::grammarctl

#endif  // GRAMMARD_TOOLS_GRAMMARCTL_CONSTRAINT_SPEC_H_
