#include "service/grammarctl/local_daemon.h"

#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace grammard::grammarctl {
namespace {

std::string Basename(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", strerror(errno)));
}

}  // namespace

std::string RunfilePath(const std::string& workspace_relative) {
  std::string dir = Env("TEST_SRCDIR");
  if (dir.empty()) dir = Env("RUNFILES_DIR");
  if (dir.empty()) {
    char exe[PATH_MAX];
    if (realpath("/proc/self/exe", exe) == nullptr) return "";
    dir = std::string(exe) + ".runfiles";
  }
  const std::string path = absl::StrCat(dir, "/grammard/", workspace_relative);
  return access(path.c_str(), F_OK) == 0 ? path : "";
}

absl::StatusOr<std::unique_ptr<LocalDaemon>> LocalDaemon::Start(
    const LocalDaemonOptions& options) {
  std::unique_ptr<LocalDaemon> daemon(new LocalDaemon());
  std::string base = Env("TEST_TMPDIR");
  if (base.empty()) base = "/tmp";
  std::string dir = base + "/grammard-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return Errno("mkdtemp " + dir);
  daemon->dir_ = dir;
  auto make_dir = [&](const std::string& path) -> absl::Status {
    if (mkdir(path.c_str(), 0755) != 0) return Errno("mkdir " + path);
    daemon->created_.push_back(path);
    return absl::OkStatus();
  };
  // grammard serves only real sub-folders, so each tokenizer gets one here
  // whose files link to the originals.
  const std::string tokenizers = dir + "/tokenizers";
  if (absl::Status s = make_dir(tokenizers); !s.ok()) return s;
  for (const std::string& source : options.tokenizer_dirs) {
    char real[PATH_MAX];
    if (realpath(source.c_str(), real) == nullptr) {
      return Errno("tokenizer folder " + source);
    }
    const std::string target = tokenizers + "/" + Basename(real);
    if (absl::Status s = make_dir(target); !s.ok()) return s;
    DIR* d = opendir(real);
    if (d == nullptr) return Errno(std::string("opendir ") + real);
    while (dirent* e = readdir(d)) {
      if (e->d_type != DT_REG && e->d_type != DT_LNK) continue;
      const std::string link = target + "/" + e->d_name;
      if (symlink((std::string(real) + "/" + e->d_name).c_str(),
                  link.c_str()) != 0) {
        closedir(d);
        return Errno("symlink " + link);
      }
      daemon->created_.push_back(link);
    }
    closedir(d);
  }

  const std::string port_file = dir + "/ports";
  daemon->created_.push_back(port_file);
  std::vector<std::string> args = {
      options.binary, "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
      "--port_file=" + port_file, "--tokenizer_dir=" + tokenizers};
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  // The daemon's banner goes to our stderr, keeping our stdout for results.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  const int spawned = posix_spawn(&daemon->pid_, options.binary.c_str(),
                                  &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    daemon->pid_ = -1;
    return absl::InternalError(
        absl::StrCat("spawn ", options.binary, ": ", strerror(spawned)));
  }

  const auto give_up = std::chrono::steady_clock::now() + options.start_timeout;
  for (;;) {
    // The daemon renames the file into place whole, so a read sees it all.
    std::ifstream in(port_file);
    int grpc_port = 0;
    std::string grpc_field, metrics_field;
    if (in >> grpc_field >> metrics_field &&
        std::sscanf(grpc_field.c_str(), "grpc=%d", &grpc_port) == 1 &&
        std::sscanf(metrics_field.c_str(), "metrics=%d",
                    &daemon->metrics_port_) == 1) {
      daemon->target_ = absl::StrCat("127.0.0.1:", grpc_port);
      return daemon;
    }
    int wstatus = 0;
    if (waitpid(daemon->pid_, &wstatus, WNOHANG) == daemon->pid_) {
      daemon->pid_ = -1;
      return absl::InternalError(
          absl::StrCat(options.binary, " exited before serving (status ",
                       wstatus, "); see its output above"));
    }
    if (std::chrono::steady_clock::now() > give_up) {
      return absl::DeadlineExceededError(
          absl::StrCat(options.binary, " did not write ", port_file, " within ",
                       options.start_timeout.count(), " ms"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

LocalDaemon::~LocalDaemon() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    // It lets streams finish their step first; past 10 s it is stuck.
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (waitpid(pid_, nullptr, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > give_up) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    remove(it->c_str());  // folders were created before their contents
  }
  if (!dir_.empty()) rmdir(dir_.c_str());
}

}  // namespace grammard::grammarctl
