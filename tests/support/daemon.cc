#include "tests/support/daemon.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/support/paths.h"

namespace grammard::testing {

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(
    const DaemonOptions& options) {
  std::unique_ptr<Daemon> d(new Daemon());
  d->dir_ = MakeTempDir();
  if (d->dir_.empty()) return absl::InternalError("mkdtemp failed");
  const std::string tokenizers = d->dir_ + "/tokenizers";
  mkdir(tokenizers.c_str(), 0755);
  for (const std::string& name : options.tokenizers) {
    std::optional<std::string> dir = TokenizerDir(name);
    if (!dir)
      return absl::NotFoundError(MissingDataMessage("tokenizer " + name));
    const std::string link = tokenizers + "/" + name;
    if (symlink(dir->c_str(), link.c_str()) != 0) {
      return absl::InternalError("symlink failed in " + tokenizers);
    }
    d->tokenizer_links_.push_back(link);
  }
  const char* other = std::getenv("GRAMMARD_DAEMON");
  const std::string binary =
      options.binary == "service/grammard" && other != nullptr && *other
          ? std::string(other)
      : options.binary.rfind('/', 0) == 0 ? options.binary
                                          : RunfilePath(options.binary);
  if (binary.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no runfile ", options.binary, " (list //service:grammard as data)"));
  }
  d->log_path_ = d->dir_ + "/grammard.log";
  d->args_ = {binary, "--metrics_listen=127.0.0.1:0",
              "--port_file=" + d->dir_ + "/ports",
              "--tokenizer_dir=" + tokenizers};
  if (options.unix_socket) {
    // A folder of its own under /tmp: the test's folder is too deep for a
    // socket path (107 bytes at most).
    char socket_dir[] = "/tmp/grammard.XXXXXX";
    if (mkdtemp(socket_dir) == nullptr) {
      return absl::InternalError("mkdtemp failed in /tmp");
    }
    d->socket_path_ = std::string(socket_dir) + "/grammard.sock";
    d->args_.push_back("--unix_socket=" + d->socket_path_);
  }
  d->args_.insert(d->args_.end(), options.flags.begin(), options.flags.end());
  if (absl::Status s = d->Launch("127.0.0.1:0"); !s.ok()) return s;
  return d;
}

absl::Status Daemon::Restart() {
  Kill();
  return Launch(target());
}

absl::Status Daemon::Launch(const std::string& listen) {
  const std::string port_file = dir_ + "/ports";
  unlink(port_file.c_str());  // a restart must not read the old ports
  std::vector<std::string> args = args_;
  args.insert(args.begin() + 1, "--listen=" + listen);
  pid_ = fork();
  if (pid_ < 0) return absl::InternalError("fork failed");
  if (pid_ == 0) {
    int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(log, 1);
    dup2(log, 2);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::perror("execv");
    _exit(127);
  }
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < give_up) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(absl::StrCat("grammard exited at start:\n",
                                              ReadFileOrEmpty(log_path_)));
    }
    std::string ports = ReadFileOrEmpty(port_file);
    if (std::sscanf(ports.c_str(), "grpc=%d metrics=%d", &grpc_port_,
                    &metrics_port_) == 2) {
      return absl::OkStatus();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::InternalError(absl::StrCat(
      "grammard did not serve within 60 s:\n", ReadFileOrEmpty(log_path_)));
}

Daemon::~Daemon() {
  Kill();
  for (const std::string& link : tokenizer_links_) unlink(link.c_str());
  rmdir((dir_ + "/tokenizers").c_str());
  for (const char* file : {"/ports", "/ports.tmp", "/grammard.log"}) {
    unlink((dir_ + file).c_str());
  }
  if (!socket_path_.empty()) {
    unlink(socket_path_.c_str());  // left behind by a kill
    rmdir(socket_path_.substr(0, socket_path_.rfind('/')).c_str());
  }
  rmdir(dir_.c_str());
}

std::string Daemon::target() const {
  return absl::StrCat("127.0.0.1:", grpc_port_);
}

std::string Daemon::unix_target() const {
  return socket_path_.empty() ? "" : "unix:" + socket_path_;
}

int Daemon::Wait() {
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int Daemon::Terminate() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  return Wait();
}

void Daemon::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  Wait();
}

namespace {

// A stream socket of `family` connected to `addr`, or why not (`name` says
// where).
absl::StatusOr<int> ConnectTo(int family, const sockaddr* addr, socklen_t len,
                              const std::string& name) {
  const int fd = socket(family, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(strerror(errno));
  if (connect(fd, addr, len) != 0) {
    const std::string error = strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect ", name, ": ", error));
  }
  return fd;
}

}  // namespace

absl::StatusOr<int> ConnectLoopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ConnectTo(AF_INET, reinterpret_cast<sockaddr*>(&addr), sizeof(addr),
                   absl::StrCat("127.0.0.1:", port));
}

absl::StatusOr<int> ConnectUnix(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError("socket path too long: " + path);
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  return ConnectTo(AF_UNIX, reinterpret_cast<sockaddr*>(&addr), sizeof(addr),
                   "unix:" + path);
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  absl::StatusOr<int> connected = ConnectLoopback(port);
  if (!connected.ok()) return connected.status();
  const int fd = *connected;
  // HTTP/1.0: the server closes the connection after the response, which
  // marks its end.
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (write(fd, request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("short write of the HTTP request");
  }
  std::string response;
  char buffer[16384];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) {
    response.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  const size_t space = response.find(' ');
  if (body == std::string::npos || space == std::string::npos ||
      response.compare(space + 1, 3, "200") != 0) {
    return absl::UnavailableError(absl::StrCat(
        "GET ", path, ": ", response.substr(0, response.find('\r'))));
  }
  return response.substr(body + 4);
}

double Metric(const Daemon& daemon, const std::string& name, int* samples) {
  return Metric(daemon.metrics_port(), name, samples);
}

double Metric(int metrics_port, const std::string& name, int* samples) {
  if (samples != nullptr) *samples = 0;
  auto text = HttpGet(metrics_port, "/metrics");
  if (!text.ok()) return -1;
  double sum = 0;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name, 0) != 0) continue;
    const char next = line[name.size()];
    if (next != ' ' && next != '{') continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
    if (samples != nullptr) ++*samples;
  }
  return sum;
}

}  // namespace grammard::testing
