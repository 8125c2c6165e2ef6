// RedisServer: a real redis-server (Debian package) as a child process on
// 127.0.0.1, for the tests and benchmarks of the shared cache tier. No
// persistence; its folder is removed on destruction.
//
// Cost: a fork/exec and a few milliseconds of start. Thread-safety: one
// thread per RedisServer.
#ifndef GRAMMARD_TESTS_SUPPORT_REDIS_SERVER_H_
#define GRAMMARD_TESTS_SUPPORT_REDIS_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace grammard::testing {

struct RedisServerOptions {
  std::string password;  // requirepass when set
  // Serve TLS only, with a self-signed certificate for 127.0.0.1 made at
  // start (ca_file() is that certificate).
  bool tls = false;
};

class RedisServer {
 public:
  // Whether /usr/bin/redis-server exists (tests skip without it).
  static bool Installed();
  // Starts on a free port and waits until it answers PING.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(
      const RedisServerOptions& options = {});
  ~RedisServer();

  int port() const { return port_; }
  const std::string& ca_file() const { return ca_file_; }
  // Stops it (SIGKILL: an outage, not a shutdown).
  void Stop();
  // Starts it again on the same port, empty.
  absl::Status Restart();

 private:
  RedisServer() = default;
  absl::Status Launch();

  RedisServerOptions options_;
  std::string dir_;
  std::string ca_file_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace grammard::testing

#endif  // GRAMMARD_TESTS_SUPPORT_REDIS_SERVER_H_
