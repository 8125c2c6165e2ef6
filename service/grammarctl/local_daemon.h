// Runs grammard as a child process on free ports, for tests and benchmarks
// that talk to the real daemon: it gets a private tokenizer folder holding
// only the tokenizers asked for (loading all of them takes half a minute),
// its stdout goes to our stderr, and it is stopped with SIGTERM on
// destruction.
//
// Cost: a fork/exec and the daemon's start (loading each tokenizer, about a
// second for a 128K vocabulary). Thread-safety: none needed; one owner.
#ifndef GRAMMARD_SERVICE_GRAMMARCTL_LOCAL_DAEMON_H_
#define GRAMMARD_SERVICE_GRAMMARCTL_LOCAL_DAEMON_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grammard::grammarctl {

struct LocalDaemonOptions {
  // The grammard binary.
  std::string binary;
  // Folders of the tokenizers to serve (each holding tokenizer.json and
  // tokenizer_config.json); each is served under its folder's name.
  std::vector<std::string> tokenizer_dirs;
  // More flags, e.g. "--fill_threads=2".
  std::vector<std::string> extra_args;
  // How long the daemon may take to write its port file.
  std::chrono::milliseconds start_timeout{60000};
};

class LocalDaemon {
 public:
  static absl::StatusOr<std::unique_ptr<LocalDaemon>> Start(
      const LocalDaemonOptions& options);
  ~LocalDaemon();

  LocalDaemon(const LocalDaemon&) = delete;
  LocalDaemon& operator=(const LocalDaemon&) = delete;

  // "127.0.0.1:<port>" of the gRPC server.
  const std::string& target() const { return target_; }
  int metrics_port() const { return metrics_port_; }

 private:
  LocalDaemon() = default;

  pid_t pid_ = -1;
  std::string dir_;  // the private folder: tokenizers/ and the port file
  std::vector<std::string> created_;  // paths under dir_, deepest last
  std::string target_;
  int metrics_port_ = 0;
};

// The path of a runfile given its workspace-relative name (e.g.
// "service/grammard"), for a binary run by `bazel test` or `bazel run`.
// Empty when there is no runfiles tree.
std::string RunfilePath(const std::string& workspace_relative);

}  // namespace grammard::grammarctl

#endif  // GRAMMARD_SERVICE_GRAMMARCTL_LOCAL_DAEMON_H_
