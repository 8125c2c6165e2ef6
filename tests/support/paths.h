// Where tests, benchmarks and runners find files that live outside Bazel's
// view: the source tree, the shared test data beside it (../shared/data) and
// the tokenizers installed by tools/setup.sh (.deps/tokenizers).
//
// Cost: a few stat() calls per lookup. Thread-safe.
//
// Each location can be overridden by an environment variable, so a runner can
// point at another copy of the data:
//   GRAMMARD_SOURCE_ROOT, GRAMMARD_SHARED_DATA, GRAMMARD_TOKENIZERS.
#ifndef GRAMMARD_TESTS_SUPPORT_PATHS_H_
#define GRAMMARD_TESTS_SUPPORT_PATHS_H_

#include <optional>
#include <string>
#include <vector>

namespace grammard::testing {

// A file of the runfiles tree by its workspace-relative name (e.g.
// "service/grammard", a data dependency), for code run by `bazel test` or
// `bazel run`; empty when there is no such file.
std::string RunfilePath(const std::string& workspace_relative);

// The source tree's root: found from the runfiles symlink of //:WORKSPACE
// (targets using this library get it as data), or BUILD_WORKSPACE_DIRECTORY
// under `bazel run`. Empty when neither is available.
std::string SourceRoot();

// ../shared/data beside the source tree, when it exists.
std::optional<std::string> SharedDataDir();

// The folder of one installed tokenizer (holding tokenizer.json and
// tokenizer_config.json), e.g. TokenizerDir("llama3"), when it exists.
std::optional<std::string> TokenizerDir(const std::string& name);

// The names (not paths) of the files in `dir` ending in `suffix`, sorted;
// empty when `dir` cannot be read.
std::vector<std::string> FilesEndingWith(const std::string& dir,
                                         const std::string& suffix);

// The whole of a file; empty when it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

// A new empty folder under $TEST_TMPDIR (or /tmp); empty on failure.
std::string MakeTempDir();

// A TCP port free on 127.0.0.1 right now, for servers that cannot take
// port 0 and report it back (redis-server, prometheus); 0 on failure. Free
// unless another process grabs it first: callers retry.
int FreeLoopbackPort();

// The message tests print when they skip for missing data.
std::string MissingDataMessage(const std::string& what);

}  // namespace grammard::testing

#endif  // GRAMMARD_TESTS_SUPPORT_PATHS_H_
