#include "tests/conformance/json_schema_suite.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <utility>

#include "grammar/base/status_macros.h"
#include "grammar/compiler.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "grammar/ir/utf8_lowering.h"
#include "grammar/matcher.h"
#include "grammar/testing/earley_oracle.h"
#include "grammar/vocabulary.h"
#include "nlohmann/json.hpp"
#include "tests/support/paths.h"

namespace grammard::conformance {
namespace {

bool HasRunTimeConditions(const grammar::Grammar& g) {
  for (const grammar::Rule& r : g.rules) {
    if (r.distinct || r.member_bit >= 0 || !r.required_members.empty()) {
      return true;
    }
  }
  return false;
}

using grammar::CompiledGrammar;
using grammar::EarleyOracle;
using grammar::GrammarCompiler;
using grammar::GrammarMatcher;
using grammar::JsonSchemaDraft;
using grammar::JsonSchemaOptions;
using grammar::JsonSchemaResult;
using Json = nlohmann::ordered_json;

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Every *.json file under `dir`, as paths relative to `dir`, sorted.
void ListJson(const std::string& dir, const std::string& rel,
              std::vector<std::string>* out) {
  DIR* d = opendir((dir + "/" + rel).c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string path = rel.empty() ? name : rel + "/" + name;
    if (IsDir(dir + "/" + path)) {
      ListJson(dir, path, out);
    } else if (name.size() > 5 && name.substr(name.size() - 5) == ".json") {
      out->push_back(path);
    }
  }
  closedir(d);
  std::sort(out->begin(), out->end());
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Valid instances the format grammars reject on purpose (formats.h): leap
// seconds outside UTC and punycode (xn--) host name labels.
bool KnownNarrower(const std::string& file, const std::string& text) {
  if (EndsWith(file, "format/time.json") ||
      EndsWith(file, "format/date-time.json")) {
    return text.find(":60") != std::string::npos;
  }
  return EndsWith(file, "format/hostname.json") &&
         text.find("xn--") != std::string::npos;
}

class Runner {
 public:
  Runner(std::string root, const SuiteOptions& options, SuiteRun* run)
      : root_(std::move(root)), options_(options), run_(*run) {}

  absl::Status Init() {
    std::vector<std::string> tokens;
    for (char c = ' '; c <= '~'; ++c) tokens.push_back(std::string(1, c));
    tokens.push_back("</s>");
    const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
    absl::StatusOr<std::shared_ptr<const grammar::Vocabulary>> vocab =
        grammar::Vocabulary::FromTokens(tokens, {eos}, {eos}, {"ascii", {}, 0});
    if (!vocab.ok()) return vocab.status();
    compiler_ = std::make_unique<GrammarCompiler>(*vocab);
    // $ref to http://localhost:1234/... reads the suite's remotes folder.
    std::vector<std::string> remotes;
    ListJson(root_ + "/remotes", "", &remotes);
    for (const std::string& r : remotes) {
      documents_["http://localhost:1234/" + r] =
          testing::ReadFileOrEmpty(root_ + "/remotes/" + r);
    }
    return absl::OkStatus();
  }

  // Runs one draft folder, printing a line per file and the draft's total.
  void RunDraft(const std::string& draft, JsonSchemaDraft default_draft) {
    const std::string dir = root_ + "/tests/" + draft;
    std::vector<std::string> files;
    ListJson(dir, "", &files);
    JsonSchemaOptions options;
    options.default_draft = default_draft;
    options.property_order = grammar::JsonPropertyOrder::kAny;
    options.documents = documents_;
    SuiteCounts total;
    std::printf("\n%s\n%-44s %6s %8s %8s %6s %6s %6s\n", draft.c_str(), "file",
                "groups", "compiled", "rejected", "cases", "passed", "wrong");
    for (const std::string& file : files) {
      SuiteCounts c = RunFile(draft, file, &options);
      std::printf("%-44s %6d %8d %8d %6d %6d %6d\n", file.c_str(), c.groups,
                  c.compiled, c.rejected, c.cases, c.passed,
                  c.invalid_accepted + c.valid_rejected);
      total.Add(c);
      if (draft == "draft2020-12" && (file.rfind("optional/", 0) != 0 ||
                                      file.rfind("optional/format/", 0) == 0)) {
        run_.baseline_set.Add(c);
      }
    }
    std::printf(
        "TOTAL draft=%s groups=%d compiled=%d rejected=%d cases=%d passed=%d "
        "compile_error=%d invalid_accepted=%d valid_rejected=%d\n",
        draft.c_str(), total.groups, total.compiled, total.rejected,
        total.cases, total.passed, total.compile_error, total.invalid_accepted,
        total.valid_rejected);
    run_.total.Add(total);
  }

 private:
  SuiteCounts RunFile(const std::string& draft, const std::string& file,
                      JsonSchemaOptions* options) {
    // 2020-12's format.json expects `format` to be an annotation, which
    // grammard asserts on purpose (optional/format/ tests assertion).
    const bool must_accept =
        (file.rfind("optional/", 0) != 0 ||
         file.rfind("optional/format/", 0) == 0) &&
        !(draft == "draft2020-12" && file == "format.json");
    SuiteCounts c;
    Json groups = Json::parse(
        testing::ReadFileOrEmpty(root_ + "/tests/" + draft + "/" + file),
        nullptr, false);
    if (groups.is_discarded() || !groups.is_array()) {
      run_.failures.push_back(draft + "/" + file + ": not a test file");
      return c;
    }
    for (const Json& group : groups) {
      if (options_.limit > 0 && c.groups >= options_.limit) break;
      ++c.groups;
      const std::string where = draft + "/" + file + " \"" +
                                group["description"].get<std::string>() + "\"";
      const Json& tests = group["tests"];
      c.cases += static_cast<int>(tests.size());
      options->deadline =
          std::chrono::steady_clock::now() + std::chrono::seconds(5);
      absl::StatusOr<JsonSchemaResult> result =
          grammar::JsonSchemaToGrammar(group["schema"].dump(), *options);
      absl::StatusOr<grammar::Grammar> bytes =
          result.ok() ? grammar::LowerToBytes(result->grammar)
                      : absl::StatusOr<grammar::Grammar>(result.status());
      absl::StatusOr<EarleyOracle> oracle =
          bytes.ok() ? EarleyOracle::Create(*bytes)
                     : absl::StatusOr<EarleyOracle>(bytes.status());
      if (!oracle.ok()) {
        if (result.ok()) {
          run_.failures.push_back(where + ": grammar unusable: " +
                                  std::string(oracle.status().message()));
        }
        ++c.rejected;
        c.compile_error += static_cast<int>(tests.size());
        run_.rejections.push_back(where + ": " +
                                  std::string(oracle.status().message()));
        continue;
      }
      ++c.compiled;
      absl::StatusOr<CompiledGrammar> compiled =
          compiler_->Compile(result->grammar);
      // The engine refuses grammars with an empty language (schemas such as
      // `false`); the oracle must then reject every instance too.
      const bool empty_language =
          !compiled.ok() && compiled.status().message().find(
                                "accepts no string") != std::string::npos;
      if (!compiled.ok() && !empty_language) {
        run_.failures.push_back(where + ": the engine refuses the grammar: " +
                                std::string(compiled.status().message()));
      }
      // The oracle reads the grammar alone. Run-time conditions (distinct
      // items, counted members) are the engine's to keep: there the
      // engine's answer counts, and the oracle must accept whatever the
      // engine does.
      const bool run_time = HasRunTimeConditions(result->grammar);
      if (run_time && !compiled.ok()) {
        ++c.rejected;
        c.compile_error += static_cast<int>(tests.size());
        continue;
      }
      auto engine_accepts = [&](const std::string& text) {
        GrammarMatcher matcher(*compiled);
        return matcher.AcceptString(text).ok() && matcher.CanTerminate();
      };
      for (const Json& test : tests) {
        const std::string text = test["data"].dump();
        const bool in_grammar =
            (oracle->Check(text) & EarleyOracle::kComplete) != 0;
        bool accepted = in_grammar;
        if (empty_language && in_grammar) {
          run_.failures.push_back(
              where + ": the engine finds no string, the oracle accepts " +
              text);
        } else if (compiled.ok()) {
          const bool engine = engine_accepts(text);
          if (run_time) {
            if (engine && !in_grammar) {
              run_.failures.push_back(
                  where +
                  ": the engine accepts what the grammar does not: " + text);
            }
            accepted = engine;
          } else if (engine != in_grammar) {
            run_.failures.push_back(where + ": engine and oracle disagree on " +
                                    text);
          }
        }
        // The same instance with spaces and newlines (any whitespace is the
        // default layout) must get the same answer.
        const std::string pretty = test["data"].dump(2);
        const bool pretty_accepted =
            run_time ? engine_accepts(pretty)
                     : (oracle->Check(pretty) & EarleyOracle::kComplete) != 0;
        if (pretty_accepted != accepted) {
          run_.failures.push_back(
              where + ": compact and indented texts differ: " + pretty);
        }
        const bool valid = test["valid"].get<bool>();
        if (accepted == valid) {
          ++c.passed;
        } else if (accepted) {
          ++c.invalid_accepted;
          run_.failures.push_back(where + ": accepts invalid " + text);
        } else {
          ++c.valid_rejected;
          if (must_accept && !KnownNarrower(file, text)) {
            run_.failures.push_back(where + ": rejects valid " + text);
          }
        }
      }
    }
    return c;
  }

  const std::string root_;
  const SuiteOptions options_;
  SuiteRun& run_;
  std::unique_ptr<GrammarCompiler> compiler_;
  std::map<std::string, std::string> documents_;
};

// llguidance's published results (llguidance-baseline/): instances marked
// "pass", and all instances.
void ReadBaseline(const std::string& root, SuiteRun* run) {
  Json baseline = Json::parse(
      testing::ReadFileOrEmpty(
          root + "/llguidance-baseline/expected_json_schema_test_suite.json"),
      nullptr, false);
  if (baseline.is_discarded() || !baseline.is_object()) return;
  run->llguidance_passed = 0;
  for (const auto& [draft, files] : baseline.items()) {
    for (const auto& [file, groups] : files.items()) {
      for (const auto& [group, tests] : groups.items()) {
        for (const auto& [test, outcome] : tests.items()) {
          ++run->llguidance_cases;
          if (outcome == "pass") ++run->llguidance_passed;
        }
      }
    }
  }
}

}  // namespace

void SuiteCounts::Add(const SuiteCounts& o) {
  groups += o.groups;
  compiled += o.compiled;
  rejected += o.rejected;
  cases += o.cases;
  compile_error += o.compile_error;
  passed += o.passed;
  invalid_accepted += o.invalid_accepted;
  valid_rejected += o.valid_rejected;
}

absl::StatusOr<SuiteRun> RunJsonSchemaSuite(const std::string& suite_dir,
                                            const SuiteOptions& options) {
  if (!IsDir(suite_dir + "/tests")) {
    return absl::NotFoundError(suite_dir + "/tests is not a folder");
  }
  SuiteRun run;
  Runner runner(suite_dir, options, &run);
  GRAMMARD_RETURN_IF_ERROR(runner.Init());
  runner.RunDraft("draft2020-12", JsonSchemaDraft::k2020_12);
  runner.RunDraft("draft7", JsonSchemaDraft::k7);
  ReadBaseline(suite_dir, &run);
  return run;
}

}  // namespace grammard::conformance
