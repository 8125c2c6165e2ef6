#include "tests/load/bench_constraints.h"

#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/support/gzip_lines.h"
#include "tests/support/paths.h"

namespace grammard::load {

namespace v1 = grammard::v1;

std::vector<Workload> BenchWorkloads(const std::string& shared_data) {
  std::vector<Workload> out;
  const std::string bench = shared_data + "/../bench";
  std::istringstream workloads(
      grammard::testing::ReadFileOrEmpty(bench + "/WORKLOADS.tsv"));
  for (std::string line; std::getline(workloads, line);) {
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (line.empty() || line[0] == '#' || f.size() < 3) continue;
    const std::string text =
        grammard::testing::ReadFileOrEmpty(bench + "/" + f[2]);
    v1::Constraint c;
    if (f[1] == "json_schema") {
      c.set_json_schema(text);
    } else if (f[1] == "regex") {
      c.set_regex(std::string(absl::StripTrailingAsciiWhitespace(text)));
    } else if (f[1] == "ebnf") {
      c.mutable_grammar()->set_text(text);
    } else if (f[1] == "builtin_json") {
      c.mutable_json_object();
    } else {
      continue;
    }
    out.push_back(Workload{f[0], c});
  }
  return out;
}

std::vector<v1::Constraint> MaskBenchSchemas(const std::string& shared_data,
                                             int limit_per_file) {
  std::vector<v1::Constraint> out;
  const std::string dir = shared_data + "/maskbench";
  for (const std::string& f :
       grammard::testing::FilesEndingWith(dir, ".jsonl.gz")) {
    auto lines =
        grammard::testing::ReadGzipLines(dir + "/" + f, limit_per_file);
    if (!lines) continue;
    for (const std::string& line : *lines) {
      auto c = nlohmann::json::parse(line, nullptr, false);
      if (!c.is_object() || !c.contains("schema")) continue;
      out.emplace_back().set_json_schema(c["schema"].dump());
    }
  }
  return out;
}

}  // namespace grammard::load
