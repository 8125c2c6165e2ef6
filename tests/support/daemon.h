// Daemon: runs the real grammard binary as a child process for whole-system
// tests and benchmarks, on 127.0.0.1 with ports picked by the kernel.
//
// Cost: a fork/exec plus the daemon's start (loading its tokenizers: about
// 0.3 s for one 128K vocabulary). Thread-safety: one thread per Daemon.
#ifndef GRAMMARD_TESTS_SUPPORT_DAEMON_H_
#define GRAMMARD_TESTS_SUPPORT_DAEMON_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grammard::testing {

struct DaemonOptions {
  // The grammard binary: a runfile (the target lists //service:grammard as
  // data) or an absolute path. $GRAMMARD_DAEMON, when set, replaces the
  // default runfile: a suite then runs against another build (an earlier
  // commit's, to show what a new test catches).
  std::string binary = "service/grammard";
  // Tokenizers to serve, by name, from TokenizerDir (paths.h).
  std::vector<std::string> tokenizers = {"llama3"};
  // More flags, e.g. "--compile_timeout_ms=1".
  std::vector<std::string> flags;
  // Also serve on a Unix socket (--unix_socket), in a folder of its own
  // under /tmp (a test's folder is too deep for a socket path);
  // unix_target() names it.
  bool unix_socket = false;
};

class Daemon {
 public:
  // Starts the daemon and waits (up to 60 s) until it serves. NotFound when
  // a tokenizer is not installed; Internal, with the daemon's log, when it
  // exits or never serves.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(
      const DaemonOptions& options);
  // Kills the daemon if still running and removes its folder.
  ~Daemon();

  std::string target() const;  // "127.0.0.1:<grpc port>"
  // With DaemonOptions::unix_socket, the socket's path and "unix:<path>";
  // else empty.
  const std::string& unix_socket_path() const { return socket_path_; }
  std::string unix_target() const;
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  pid_t pid() const { return pid_; }  // -1 once it has exited
  const std::string& log_path() const { return log_path_; }

  // Sends SIGTERM and waits; the exit status (-1 if killed by a signal).
  int Terminate();
  // SIGKILL, as a crash would.
  void Kill();
  // Kills the daemon if it still runs and starts it again with the same
  // options on the same gRPC address (metrics on a new port), as a
  // supervisor restarting a crashed daemon would; waits until it serves.
  absl::Status Restart();

 private:
  Daemon() = default;
  int Wait();
  // Starts the binary listening on `listen` and waits until it serves.
  absl::Status Launch(const std::string& listen);

  std::vector<std::string> args_;  // binary and flags, without --listen
  pid_t pid_ = -1;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  std::string dir_;  // tokenizers/, the port file and the log
  std::vector<std::string> tokenizer_links_;
  std::string log_path_;
  std::string socket_path_;  // with DaemonOptions::unix_socket
};

// A TCP connection to 127.0.0.1:<port>: the socket, or why not.
absl::StatusOr<int> ConnectLoopback(int port);
// A connection to the Unix socket at `path`: the socket, or why not.
absl::StatusOr<int> ConnectUnix(const std::string& path);

// GET http://127.0.0.1:<port><path>; the body, or an error.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

// The sum of a metric's samples (over its labels) on the daemon's /metrics,
// 0 when there are none (a labelled family before its first sample); -1 if
// the page cannot be read. With `samples`, how many there were.
double Metric(const Daemon& daemon, const std::string& name,
              int* samples = nullptr);
// The same for the /metrics page on 127.0.0.1:<metrics_port> (a daemon this
// process did not start: in a container, behind a published port).
double Metric(int metrics_port, const std::string& name,
              int* samples = nullptr);

}  // namespace grammard::testing

#endif  // GRAMMARD_TESTS_SUPPORT_DAEMON_H_
