#include "tests/support/redis_server.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/redis/redis_connection.h"
#include "tests/support/paths.h"

namespace grammard::testing {
namespace {

constexpr char kRedis[] = "/usr/bin/redis-server";

}  // namespace

bool RedisServer::Installed() { return access(kRedis, X_OK) == 0; }

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(
    const RedisServerOptions& options) {
  if (!Installed()) {
    return absl::NotFoundError(
        "redis-server is not installed (Debian package redis-server)");
  }
  std::unique_ptr<RedisServer> r(new RedisServer());
  r->options_ = options;
  r->dir_ = MakeTempDir();
  if (r->dir_.empty()) return absl::InternalError("mkdtemp failed");
  if (options.tls) {
    r->ca_file_ = r->dir_ + "/cert.pem";
    const std::string cmd = absl::StrCat(
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1"
        " -addext subjectAltName=IP:127.0.0.1 -keyout ",
        r->dir_, "/key.pem -out ", r->ca_file_, " >/dev/null 2>&1");
    if (std::system(cmd.c_str()) != 0) {
      return absl::InternalError("openssl could not make a certificate");
    }
  }
  absl::Status s;
  for (int attempt = 0; attempt < 5; ++attempt) {
    r->port_ = FreeLoopbackPort();
    s = r->Launch();
    if (s.ok()) return r;
  }
  return s;
}

absl::Status RedisServer::Launch() {
  std::vector<std::string> args = {kRedis,
                                   "--bind",
                                   "127.0.0.1",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--dir",
                                   dir_,
                                   "--logfile",
                                   dir_ + "/redis.log"};
  if (options_.tls) {
    args.insert(args.end(), {"--port", "0", "--tls-port", std::to_string(port_),
                             "--tls-cert-file", ca_file_, "--tls-key-file",
                             dir_ + "/key.pem", "--tls-auth-clients", "no"});
  } else {
    args.insert(args.end(), {"--port", std::to_string(port_)});
  }
  if (!options_.password.empty()) {
    args.insert(args.end(), {"--requirepass", options_.password});
  }
  pid_ = fork();
  if (pid_ < 0) return absl::InternalError("fork failed");
  if (pid_ == 0) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  service::redis::RedisOptions ping;
  ping.port = port_;
  ping.password = options_.password;
  ping.tls = options_.tls;
  ping.tls_ca_file = ca_file_;
  ping.timeout = std::chrono::milliseconds(500);
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < give_up) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::UnavailableError(
          absl::StrCat("redis-server exited at start on port ", port_));
    }
    auto conn = service::redis::RedisConnection::Connect(ping);
    if (conn.ok() && (*conn)->Command({"PING"}).ok()) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Stop();
  return absl::UnavailableError(
      absl::StrCat("redis-server did not answer on port ", port_));
}

void RedisServer::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

absl::Status RedisServer::Restart() {
  Stop();
  return Launch();
}

RedisServer::~RedisServer() {
  Stop();
  for (const char* f : {"/redis.log", "/cert.pem", "/key.pem"}) {
    unlink((dir_ + f).c_str());
  }
  rmdir(dir_.c_str());
}

}  // namespace grammard::testing
