#include "tests/support/paths.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace grammard::testing {
namespace {

bool IsDir(const std::string& path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string Dirname(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

// The WORKSPACE file in the runfiles tree is a symlink into the source tree.
std::string RootFromRunfiles() {
  const std::string link = RunfilePath("WORKSPACE");
  char resolved[PATH_MAX];
  if (link.empty() || realpath(link.c_str(), resolved) == nullptr) return "";
  return Dirname(resolved);
}

}  // namespace

std::string RunfilePath(const std::string& workspace_relative) {
  std::vector<std::string> dirs;
  for (const char* var : {"TEST_SRCDIR", "RUNFILES_DIR"}) {
    if (std::string dir = Env(var); !dir.empty()) dirs.push_back(dir);
  }
  // `bazel run` without RUNFILES_DIR: the binary's own runfiles folder.
  char exe[PATH_MAX];
  if (realpath("/proc/self/exe", exe) != nullptr) {
    dirs.push_back(std::string(exe) + ".runfiles");
  }
  for (const std::string& dir : dirs) {
    const std::string path = dir + "/grammard/" + workspace_relative;
    if (access(path.c_str(), F_OK) == 0) return path;
  }
  return "";
}

std::string SourceRoot() {
  std::string root = Env("GRAMMARD_SOURCE_ROOT");
  if (IsDir(root)) return root;
  root = Env("BUILD_WORKSPACE_DIRECTORY");
  if (IsDir(root)) return root;
  return RootFromRunfiles();
}

std::optional<std::string> SharedDataDir() {
  std::string dir = Env("GRAMMARD_SHARED_DATA");
  if (dir.empty()) {
    std::string root = SourceRoot();
    if (root.empty()) return std::nullopt;
    dir = root + "/../shared/data";
  }
  if (!IsDir(dir)) return std::nullopt;
  return dir;
}

std::optional<std::string> TokenizerDir(const std::string& name) {
  std::string base = Env("GRAMMARD_TOKENIZERS");
  if (base.empty()) {
    std::string root = SourceRoot();
    if (root.empty()) return std::nullopt;
    base = root + "/.deps/tokenizers";
  }
  std::string dir = base + "/" + name;
  if (!IsDir(dir)) return std::nullopt;
  return dir;
}

std::string MissingDataMessage(const std::string& what) {
  return what +
         " not found: run tools/setup.sh for tokenizers; ../shared/data must "
         "sit beside the source tree (or set GRAMMARD_SHARED_DATA / "
         "GRAMMARD_TOKENIZERS)";
}

}  // namespace grammard::testing

namespace grammard::testing {

std::vector<std::string> FilesEndingWith(const std::string& dir,
                                         const std::string& suffix) {
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) ==
              0) {
        files.push_back(name);
      }
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

std::string MakeTempDir() {
  std::string base = Env("TEST_TMPDIR");
  std::string pattern = (base.empty() ? "/tmp" : base) + "/grammard.XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return "";
  return pattern;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace grammard::testing
