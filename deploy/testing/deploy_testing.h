// Helpers for deploy/'s tests: locating deploy/ files in the runfiles,
// running the operators' tools (kubectl, yq, promtool, ldd, dpkg) as child
// processes, reading YAML as JSON, and finding the metric names a PromQL
// expression uses.
//
// Cost: each RunCommand is a fork/exec; YAML goes through `yq -c .`.
// Thread-safety: none needed (one test thread); no shared state.
#ifndef GRAMMARD_DEPLOY_TESTING_DEPLOY_TESTING_H_
#define GRAMMARD_DEPLOY_TESTING_DEPLOY_TESTING_H_

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace grammard::deploy {

// The runfile of deploy/<relative> (a data dependency); empty if absent.
std::string DeployFile(const std::string& relative);

// The whole file; NotFound if it cannot be read.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// An executable named `name` on PATH or in /usr/bin, /usr/local/bin, /bin;
// empty when there is none.
std::string FindExecutable(const std::string& name);

// "<name> not found on PATH: <why the test needs it> (skipping)".
std::string MissingToolMessage(const std::string& name,
                               const std::string& purpose);

struct CommandResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string out;
  std::string err;
};

// Runs argv (argv[0] a path) to completion with stdin from /dev/null;
// Internal only when it cannot be started. Past `timeout` its whole process
// group is killed and the answer is DeadlineExceeded, with the end of what it
// printed.
absl::StatusOr<CommandResult> RunCommand(
    const std::vector<std::string>& argv,
    std::chrono::seconds timeout = std::chrono::seconds(300));

// Every document of a YAML stream as JSON, through `yq -c .`
// (FailedPrecondition when yq is missing; empty documents are dropped).
absl::StatusOr<std::vector<nlohmann::json>> YamlDocuments(
    const std::string& yaml_path);
// The same for YAML held in memory (written to a temporary file first).
absl::StatusOr<std::vector<nlohmann::json>> YamlStringDocuments(
    const std::string& yaml);

// A fresh empty folder under TEST_TMPDIR (or /tmp).
std::string MakeTempDir();

// The names in a PromQL expression that look like grammard metrics
// (grammard_...), as written (histogram series keep _bucket/_sum/_count).
std::set<std::string> GrammardMetricNames(const std::string& expr);

// Metric families and their types ("counter", "gauge", "histogram") from the
// `# TYPE` lines of a Prometheus text exposition.
std::vector<std::pair<std::string, std::string>> ExpositionTypes(
    const std::string& exposition);

// Whether a series name used in PromQL belongs to an exported family: the
// family itself, or a histogram's _bucket, _sum or _count series.
bool IsExportedSeries(
    const std::string& name,
    const std::vector<std::pair<std::string, std::string>>& families);

}  // namespace grammard::deploy

#endif  // GRAMMARD_DEPLOY_TESTING_DEPLOY_TESTING_H_
