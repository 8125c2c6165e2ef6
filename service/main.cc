// grammard: the constrained-decoding daemon. For now it loads the tokenizers
// named by --tokenizer_dir (one sub-folder each, holding tokenizer.json and
// tokenizer_config.json) and prints what it loaded; the gRPC service comes
// with the service issue.
#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "grammar/vocabulary.h"

ABSL_FLAG(
    std::string, tokenizer_dir, ".deps/tokenizers",
    "Folder of tokenizers: one sub-folder per tokenizer, named after it.");

namespace {

std::vector<std::string> SubFolders(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != ".." && e->d_type == DT_DIR)
        names.push_back(name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::GetFlag(FLAGS_tokenizer_dir);
  std::vector<std::string> names = SubFolders(dir);
  if (names.empty()) {
    std::fprintf(stderr,
                 "grammard: no tokenizers under %s (run tools/setup.sh)\n",
                 dir.c_str());
    return 1;
  }
  int failed = 0;
  for (const std::string& name : names) {
    auto vocab = grammard::grammar::Vocabulary::FromDirectory(dir + "/" + name,
                                                              {name, {}, 0});
    if (!vocab.ok()) {
      std::fprintf(stderr, "grammard: %s\n", vocab.status().ToString().c_str());
      ++failed;
      continue;
    }
    std::printf("%s\n", (*vocab)->Summary().c_str());
  }
  return failed == 0 ? 0 : 1;
}
