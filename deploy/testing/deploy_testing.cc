// Helpers for deploy/'s tests (see deploy_testing.h).
#include "deploy/testing/deploy_testing.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/paths.h"

namespace grammard::deploy {

std::string DeployFile(const std::string& relative) {
  return testing::RunfilePath("deploy/" + relative);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string FindExecutable(const std::string& name) {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (absl::string_view d : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      dirs.emplace_back(d);
    }
  }
  for (const char* d : {"/usr/local/bin", "/usr/bin", "/bin"}) {
    dirs.emplace_back(d);
  }
  for (const std::string& dir : dirs) {
    const std::string candidate = dir + "/" + name;
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

std::string MissingToolMessage(const std::string& name,
                               const std::string& purpose) {
  return absl::StrCat(name, " not found on PATH: ", purpose,
                      " (skipping; tools/setup.sh installs it)");
}

std::string MakeTempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string pattern =
      absl::StrCat(base != nullptr ? base : "/tmp", "/deploy.XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) return "";
  return pattern;
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         std::chrono::seconds timeout) {
  const std::string dir = MakeTempDir();
  if (dir.empty()) return absl::InternalError("mkdtemp failed");
  const std::string out_path = dir + "/out", err_path = dir + "/err";
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    setpgid(0, 0);  // its children too die with it on a timeout
    const int in = open("/dev/null", O_RDONLY);
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  bool timed_out = false;
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > give_up) {
      timed_out = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = ReadFile(out_path).value_or("");
  result.err = ReadFile(err_path).value_or("");
  unlink(out_path.c_str());
  unlink(err_path.c_str());
  rmdir(dir.c_str());
  if (timed_out) {
    const std::string printed = result.out + result.err;
    return absl::DeadlineExceededError(absl::StrCat(
        argv[0], " did not finish within ", timeout.count(), " s; it printed: ",
        printed.substr(printed.size() > 4000 ? printed.size() - 4000 : 0)));
  }
  if (result.exit_code == 127 && result.out.empty() && result.err.empty()) {
    return absl::InternalError("cannot execute " + argv[0]);
  }
  return result;
}

absl::StatusOr<std::vector<nlohmann::json>> YamlDocuments(
    const std::string& yaml_path) {
  const std::string yq = FindExecutable("yq");
  if (yq.empty()) return absl::FailedPreconditionError("yq not found");
  absl::StatusOr<CommandResult> r = RunCommand({yq, "-c", ".", yaml_path});
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("yq -c . ", yaml_path, " failed: ", r->err));
  }
  std::vector<nlohmann::json> docs;
  for (absl::string_view line : absl::StrSplit(r->out, '\n')) {
    if (line.empty()) continue;
    nlohmann::json doc =
        nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
    if (doc.is_discarded()) {
      return absl::InvalidArgumentError(absl::StrCat("yq printed ", line));
    }
    if (!doc.is_null()) docs.push_back(std::move(doc));
  }
  return docs;
}

absl::StatusOr<std::vector<nlohmann::json>> YamlStringDocuments(
    const std::string& yaml) {
  const std::string dir = MakeTempDir();
  if (dir.empty()) return absl::InternalError("mkdtemp failed");
  const std::string path = dir + "/in.yaml";
  std::ofstream(path) << yaml;
  absl::StatusOr<std::vector<nlohmann::json>> docs = YamlDocuments(path);
  unlink(path.c_str());
  rmdir(dir.c_str());
  return docs;
}

std::set<std::string> GrammardMetricNames(const std::string& expr) {
  static const std::regex name(R"(\bgrammard_[A-Za-z0-9_:]*)");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), name);
       it != std::sregex_iterator(); ++it) {
    names.insert(it->str());
  }
  return names;
}

std::vector<std::pair<std::string, std::string>> ExpositionTypes(
    const std::string& exposition) {
  std::vector<std::pair<std::string, std::string>> families;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    std::vector<std::string> f =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (f.size() == 4 && f[0] == "#" && f[1] == "TYPE") {
      families.emplace_back(f[2], f[3]);
    }
  }
  return families;
}

bool IsExportedSeries(
    const std::string& name,
    const std::vector<std::pair<std::string, std::string>>& families) {
  for (const auto& [family, type] : families) {
    if (name == family) return true;
    if (type != "histogram") continue;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (name == family + suffix) return true;
    }
  }
  return false;
}

}  // namespace grammard::deploy
