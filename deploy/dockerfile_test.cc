// Checks deploy/Dockerfile without a container engine: what the runtime
// stage copies from the build stage is a Bazel output of a target the build
// stage builds (or the tokenizer folder it prepares), the image runs the
// daemon as uid 65532, and the runtime packages it installs provide every
// shared library `ldd` lists for the binaries (mapped with `dpkg -S`).
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "deploy/testing/deploy_testing.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"

// Defined only when this test, like the binaries it checks, is a sanitizer
// build (--config=asan, ubsan, asan_ubsan, tsan).
extern "C" void __asan_init() __attribute__((weak));
extern "C" void __tsan_init() __attribute__((weak));
extern "C" void __ubsan_handle_builtin_unreachable(void*) __attribute__((weak));

namespace grammard::deploy {
namespace {

// Packages of debian:bookworm-slim itself that the binaries link.
const std::set<std::string> kBaseImagePackages = {"libc6", "libgcc-s1",
                                                  "libstdc++6"};

struct Instruction {
  std::string keyword;  // upper case: FROM, RUN, COPY, ...
  std::string args;     // continuation lines joined
};

struct Stage {
  std::string from;  // "debian:bookworm AS build"
  std::vector<Instruction> instructions;
};

// The Dockerfile's stages; comments dropped, `\` continuations joined.
std::vector<Stage> ParseDockerfile(const std::string& text) {
  std::vector<Stage> stages;
  std::string pending;
  auto flush = [&]() {
    std::string line(absl::StripAsciiWhitespace(pending));
    pending.clear();
    if (line.empty()) return;
    const size_t space = line.find_first_of(" \t");
    Instruction ins;
    ins.keyword = line.substr(0, space);
    for (char& c : ins.keyword) c = static_cast<char>(toupper(c));
    ins.args =
        space == std::string::npos
            ? ""
            : std::string(absl::StripAsciiWhitespace(line.substr(space)));
    if (ins.keyword == "FROM") {
      stages.push_back({ins.args, {}});
    } else if (!stages.empty()) {
      stages.back().instructions.push_back(ins);
    }
  };
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (absl::StartsWith(line, "#")) continue;
    if (absl::ConsumeSuffix(&line, "\\")) {
      absl::StrAppend(&pending, line, " ");
      continue;
    }
    absl::StrAppend(&pending, line);
    flush();
  }
  flush();
  return stages;
}

std::vector<std::string> Words(const std::string& s) {
  return absl::StrSplit(s, absl::ByAnyChar(" \t"), absl::SkipEmpty());
}

class DockerfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = DeployFile("Dockerfile");
    ASSERT_FALSE(path.empty()) << "deploy/Dockerfile is not a runfile";
    absl::StatusOr<std::string> text = ReadFile(path);
    ASSERT_TRUE(text.ok()) << text.status();
    stages_ = ParseDockerfile(*text);
    ASSERT_EQ(stages_.size(), 2u) << "expected a build and a runtime stage";
  }

  const Stage& build() const { return stages_[0]; }
  const Stage& runtime() const { return stages_[1]; }

  // The build stage's RUN lines, joined.
  std::string BuildRuns() const {
    std::string all;
    for (const Instruction& i : build().instructions) {
      if (i.keyword == "RUN") absl::StrAppend(&all, i.args, "\n");
    }
    return all;
  }

  // (source, destination) of each COPY --from=build of the runtime stage.
  std::vector<std::pair<std::string, std::string>> CopiesFromBuild() const {
    std::vector<std::pair<std::string, std::string>> copies;
    for (const Instruction& i : runtime().instructions) {
      if (i.keyword != "COPY") continue;
      std::vector<std::string> w = Words(i.args);
      std::vector<std::string> paths;
      bool from_build = false;
      for (const std::string& word : w) {
        if (word == "--from=build") {
          from_build = true;
        } else if (!absl::StartsWith(word, "--")) {
          paths.push_back(word);
        }
      }
      EXPECT_TRUE(from_build) << "COPY " << i.args
                              << ": the runtime stage copies only build "
                                 "outputs";
      if (!from_build || paths.size() < 2) continue;
      for (size_t k = 0; k + 1 < paths.size(); ++k) {
        copies.emplace_back(paths[k], paths.back());
      }
    }
    return copies;
  }

  // The runtime stage's apt-get install packages.
  std::set<std::string> RuntimePackages() const {
    std::set<std::string> packages;
    for (const Instruction& i : runtime().instructions) {
      if (i.keyword != "RUN") continue;
      bool in_install = false;
      for (const std::string& word : Words(i.args)) {
        if (word == "install") {
          in_install = true;
        } else if (word == "&&" || word == ";") {
          in_install = false;
        } else if (in_install && !absl::StartsWith(word, "-")) {
          packages.insert(word);
        }
      }
    }
    return packages;
  }

  std::vector<Stage> stages_;
};

TEST_F(DockerfileTest, BuildsOnBookwormWithTheDevelopersSetup) {
  EXPECT_TRUE(absl::StartsWith(build().from, "debian:bookworm AS build"))
      << build().from;
  EXPECT_EQ(runtime().from, "debian:bookworm-slim");
  // tools/setup.sh installs the Debian packages (and tokenizers), so the
  // image builds with exactly what a developer machine has.
  EXPECT_TRUE(absl::StrContains(BuildRuns(), "tools/setup.sh"));
  EXPECT_TRUE(absl::StrContains(BuildRuns(), "bazel build -c opt"));
}

TEST_F(DockerfileTest, EveryCopiedFileIsABuildOutput) {
  const std::string runs = BuildRuns();
  const auto copies = CopiesFromBuild();
  ASSERT_FALSE(copies.empty());
  std::set<std::string> destinations;
  for (const auto& [source, destination] : copies) {
    destinations.insert(destination);
    if (absl::StartsWith(source, "/out/bazel-bin/")) {
      // /out/bazel-bin/<package>/<name>: the output of //<package>:<name>,
      // which must be what the build stage builds and copies there.
      const std::string relative(absl::StripPrefix(source, "/out/bazel-bin/"));
      const size_t slash = relative.rfind('/');
      ASSERT_NE(slash, std::string::npos) << source;
      const std::string label = absl::StrCat("//", relative.substr(0, slash),
                                             ":", relative.substr(slash + 1));
      EXPECT_TRUE(absl::StrContains(runs, label))
          << source << ": the build stage does not build " << label;
      EXPECT_TRUE(absl::StrContains(runs, " " + relative + " "))
          << source << ": the build stage does not copy " << relative
          << " to /out/bazel-bin";
      const std::string output = testing::RunfilePath(relative);
      ASSERT_FALSE(output.empty()) << source << ": no Bazel output " << relative
                                   << " (list its target as data of this test)";
      EXPECT_EQ(access(output.c_str(), X_OK), 0)
          << output << " is not executable";
    } else if (source == "/out/tokenizers/" || source == "/out/tokenizers") {
      EXPECT_TRUE(absl::StrContains(runs, "mkdir -p") &&
                  absl::StrContains(runs, " /out/tokenizers"))
          << "the build stage must create /out/tokenizers (empty unless "
             "TOKENIZERS names some)";
      EXPECT_TRUE(absl::StrContains(runs, ".deps/tokenizers/"));
      EXPECT_EQ(destination, "/tokenizers/");
    } else {
      ADD_FAILURE() << "COPY --from=build " << source
                    << ": neither a Bazel output (/out/bazel-bin/...) nor "
                       "/out/tokenizers";
    }
  }
  EXPECT_TRUE(destinations.count("/usr/local/bin/grammard"));
  EXPECT_TRUE(destinations.count("/usr/local/bin/grammarctl"));
}

TEST_F(DockerfileTest, RunsTheDaemonAsUid65532) {
  std::string user, entrypoint;
  bool adds_user = false;
  for (const Instruction& i : runtime().instructions) {
    if (i.keyword == "USER") user = i.args;
    if (i.keyword == "ENTRYPOINT") entrypoint = i.args;
    if (i.keyword == "RUN" &&
        absl::StrContains(i.args, "useradd --uid 65532")) {
      adds_user = true;
    }
  }
  EXPECT_TRUE(adds_user);
  EXPECT_EQ(user, "65532:65532");
  EXPECT_EQ(entrypoint, R"(["/usr/local/bin/grammard"])");
}

// The package providing each library `ldd` lists for `binary`; a library
// no package provides maps to "" (reported by the caller). One `dpkg -S`
// call answers for all of them.
std::map<std::string, std::string> LibraryPackages(const std::string& ldd,
                                                   const std::string& dpkg,
                                                   const std::string& binary) {
  std::map<std::string, std::string> packages;
  absl::StatusOr<CommandResult> r = RunCommand({ldd, binary});
  EXPECT_TRUE(r.ok() && r->exit_code == 0)
      << "ldd " << binary << ": " << (r.ok() ? r->err : r.status().ToString());
  if (!r.ok()) return packages;
  // Library -> the paths dpkg may know it by: as ldd prints it, resolved,
  // and each with and without /usr (usrmerge makes /lib and /usr/lib one
  // folder, and dpkg records the path its package ships).
  std::map<std::string, std::vector<std::string>> candidates;
  std::vector<std::string> query = {dpkg, "-S"};
  for (absl::string_view line : absl::StrSplit(r->out, '\n')) {
    std::vector<std::string> w = Words(std::string(line));
    std::string path;
    if (w.size() >= 3 && w[1] == "=>") {
      path = w[2];
      EXPECT_NE(path, "not") << binary << ": " << line;
    } else if (!w.empty() && absl::StartsWith(w[0], "/")) {
      path = w[0];  // the dynamic loader
    }
    if (path.empty() || !absl::StartsWith(path, "/")) continue;
    std::vector<std::string> names = {path};
    char real[PATH_MAX];
    if (realpath(path.c_str(), real) != nullptr) names.push_back(real);
    for (size_t n = names.size(), k = 0; k < n; ++k) {
      const std::string c = names[k];
      names.push_back(absl::StartsWith(c, "/usr/") ? c.substr(4) : "/usr" + c);
    }
    query.insert(query.end(), names.begin(), names.end());
    candidates[path] = names;
  }
  // "libssl3:amd64: /usr/lib/x86_64-linux-gnu/libssl.so.3" per known path;
  // unknown paths only add to stderr (and make the exit status 1).
  std::map<std::string, std::string> owner;
  absl::StatusOr<CommandResult> s = RunCommand(query);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return packages;
  for (absl::string_view line : absl::StrSplit(s->out, '\n')) {
    const size_t colon = line.rfind(": ");
    if (colon == absl::string_view::npos ||
        absl::StartsWith(line, "diversion")) {
      continue;
    }
    std::string package(line.substr(0, colon));
    package = package.substr(0, package.find_first_of(":,"));
    owner.emplace(std::string(line.substr(colon + 2)), package);
  }
  for (const auto& [library, names] : candidates) {
    std::string& package = packages[library];
    for (const std::string& name : names) {
      if (auto it = owner.find(name); it != owner.end()) {
        package = it->second;
        break;
      }
    }
  }
  return packages;
}

// A sanitizer's runtime, which sanitizer builds load and the image's optimised
// build never does.
bool SanitizerRuntime(const std::string& package) {
  static const bool sanitized = __asan_init != nullptr ||
                                __tsan_init != nullptr ||
                                __ubsan_handle_builtin_unreachable != nullptr;
  return sanitized && (absl::StartsWith(package, "libasan") ||
                       absl::StartsWith(package, "libtsan") ||
                       absl::StartsWith(package, "libubsan") ||
                       absl::StartsWith(package, "liblsan"));
}

TEST_F(DockerfileTest, RuntimePackagesProvideEveryLinkedLibrary) {
  const std::string ldd = FindExecutable("ldd");
  const std::string dpkg = FindExecutable("dpkg");
  if (ldd.empty() || dpkg.empty()) {
    GTEST_SKIP() << MissingToolMessage(
        ldd.empty() ? "ldd" : "dpkg",
        "maps the binaries' shared libraries to Debian packages");
  }
  std::set<std::string> allowed = RuntimePackages();
  ASSERT_FALSE(allowed.empty()) << "the runtime stage installs no packages";
  allowed.insert(kBaseImagePackages.begin(), kBaseImagePackages.end());
  for (const char* relative :
       {"service/grammard", "tools/grammarctl/grammarctl"}) {
    const std::string binary = testing::RunfilePath(relative);
    ASSERT_FALSE(binary.empty()) << relative << " is not a runfile";
    const auto packages = LibraryPackages(ldd, dpkg, binary);
    EXPECT_GT(packages.size(), 3u) << "ldd listed almost nothing";
    for (const auto& [library, package] : packages) {
      if (SanitizerRuntime(package)) continue;
      EXPECT_FALSE(package.empty())
          << relative << " loads " << library
          << ", which no Debian package provides (the image cannot have it)";
      if (package.empty()) continue;
      EXPECT_TRUE(allowed.count(package))
          << relative << " loads " << library << " from package " << package
          << ", which deploy/Dockerfile's runtime stage does not install ("
          << absl::StrJoin(allowed, " ") << ")";
    }
  }
}

}  // namespace
}  // namespace grammard::deploy
