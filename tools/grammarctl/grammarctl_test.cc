// grammarctl against the real daemon: compile and generate a small JSON
// schema with Llama 3's tokenizer, and check the generated text is JSON that
// fits the schema. Skips when the tokenizers are not installed.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/daemon.h"
#include "tests/support/paths.h"

namespace grammard::grammarctl {
namespace {

// Every value is bounded, so a random walk finishes well within max_tokens.
constexpr char kSchema[] =
    R"({"type": "object", "properties": {"ok": {"type": "boolean"},)"
    R"( "size": {"enum": ["small", "large"]},)"
    R"( "count": {"type": "integer", "minimum": 0, "maximum": 9}},)"
    R"( "required": ["ok", "size", "count"], "additionalProperties": false})";

struct CommandRun {
  int exit_code = -1;
  std::string out;
  std::string err;  // when the command sent it to a file
};

// Runs a shell command; stdout is captured.
CommandRun RunCommand(const std::string& command) {
  CommandRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) {
    run.out.append(buffer, n);
  }
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

std::string Binary() {
  return grammard::testing::RunfilePath("tools/grammarctl/grammarctl");
}

class GrammarctlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = grammard::testing::TokenizerDir("llama3").value_or("");
    if (tokenizer_.empty()) return;
    auto daemon = grammard::testing::Daemon::Start({});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
  }

  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }

  void SetUp() override {
    if (tokenizer_.empty()) {
      GTEST_SKIP() << grammard::testing::MissingDataMessage(
          "the llama3 tokenizer");
    }
    ASSERT_NE(daemon_, nullptr);
  }

  // Runs grammarctl against the daemon with the given flags (each wrapped in
  // single quotes for the shell); stdout and stderr are captured, stderr
  // also copied to the log.
  static CommandRun Grammarctl(const std::vector<std::string>& flags) {
    const std::string err_path =
        std::string(std::getenv("TEST_TMPDIR")) + "/stderr";
    std::string command =
        Binary() + " --target=" + daemon_->target() + " --tokenizer=llama3";
    for (const std::string& flag : flags) command += " '" + flag + "'";
    CommandRun run = RunCommand(command + " 2>" + err_path);
    std::stringstream err;
    err << std::ifstream(err_path).rdbuf();
    run.err = err.str();
    std::cerr << run.err;
    return run;
  }

  static std::string tokenizer_;
  static grammard::testing::Daemon* daemon_;
};

std::string GrammarctlTest::tokenizer_;
grammard::testing::Daemon* GrammarctlTest::daemon_ = nullptr;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Needs no daemon: --help prints the usage and the constraint flags (absl
// printed "No flags matched" when the flags lived in main.cc).
TEST(GrammarctlHelpTest, HelpPrintsUsageAndTheConstraintFlags) {
  const std::string out = RunCommand(Binary() + " --help 2>&1").out;
  EXPECT_NE(out.find("grammarctl compile  --target=HOST:PORT"),
            std::string::npos)
      << out;
  for (const char* flag : {"--json_schema", "--regex", "--ebnf", "--choices",
                           "--json_object", "--structural_tag", "--target"}) {
    EXPECT_NE(out.find(std::string(flag) + " ("), std::string::npos)
        << flag << " missing from:\n"
        << out;
  }
  EXPECT_EQ(out.find("No flags matched"), std::string::npos) << out;
}

// Needs no daemon: generate gives up connecting within --timeout_s.
TEST(GrammarctlNoDaemonTest, UnreachableDaemonExits1) {
  const CommandRun run = RunCommand(Binary() +
                                    " generate --target=127.0.0.1:1 --regex=a"
                                    " --timeout_s=1");
  EXPECT_EQ(run.exit_code, 1) << run.out;
}

TEST_F(GrammarctlTest, CompilesASchemaFile) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/s.json";
  std::ofstream(path) << kSchema;
  const CommandRun first = Grammarctl({"compile", "--json_schema=" + path});
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_NE(first.out.find("state=GRAMMAR_STATE_READY"), std::string::npos)
      << first.out;
  // The same constraint again is served from the cache.
  const CommandRun second = Grammarctl({"compile", "--json_schema=" + path});
  ASSERT_EQ(second.exit_code, 0) << second.out;
  EXPECT_NE(second.out.find("cache_hit=true"), std::string::npos) << second.out;
}

TEST_F(GrammarctlTest, ReportsACompileError) {
  const CommandRun run = Grammarctl({"compile", "--regex=(unclosed"});
  EXPECT_EQ(run.exit_code, 1) << run.out;
}

TEST_F(GrammarctlTest, BadUsageExits2) {
  EXPECT_EQ(Grammarctl({"generate"}).exit_code, 2);  // no constraint
  EXPECT_EQ(Grammarctl({"generate", "--regex=a", "--json_object"}).exit_code,
            2);
  EXPECT_EQ(Grammarctl({"generate", "--regex=a", "--sequences=0"}).exit_code,
            2);
  EXPECT_EQ(Grammarctl({"decode", "--regex=a"}).exit_code, 2);
}

TEST_F(GrammarctlTest, UnknownTokenizerExits1) {
  // The later --tokenizer overrides the helper's.
  const CommandRun run =
      Grammarctl({"generate", "--regex=a", "--tokenizer=no_such_tokenizer"});
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_EQ(run.out, "");
}

TEST_F(GrammarctlTest, WarnsWhenTheLocalTokenizerIsNotTheServedOne) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/other";
  std::filesystem::create_directories(dir + "/llama3");
  std::ofstream(dir + "/llama3/tokenizer.json")
      << R"({"model": {"type": "BPE", "vocab": {"a": 0}},)"
      << R"( "decoder": {"type": "ByteLevel"}})";
  const CommandRun run =
      Grammarctl({"generate", "--choices=yes,no", "--tokenizer_dir=" + dir});
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.err.find("is not the tokenizer the server serves as llama3"),
            std::string::npos)
      << run.err;
}

TEST_F(GrammarctlTest, GeneratesJsonThatFitsTheSchema) {
  const CommandRun run =
      Grammarctl({"generate", std::string("--json_schema=") + kSchema,
                  "--whitespace=compact", "--sequences=2", "--seed=3",
                  "--max_tokens=256", "--tokenizer_dir=" + tokenizer_ + "/.."});
  ASSERT_EQ(run.exit_code, 0) << run.out;
  // The local tokenizer.json is the one the daemon serves: the text printed
  // is made of the bytes the masks were computed over.
  EXPECT_EQ(run.err, "");
  // Per sequence: its text on one line (compact JSON), then its summary.
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_EQ(lines.size(), 4u) << run.out;
  for (size_t i = 0; i < lines.size(); i += 2) {
    EXPECT_NE(lines[i + 1].find("terminated=true"), std::string::npos)
        << lines[i + 1];
    const nlohmann::json doc =
        nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(doc.is_discarded()) << "not JSON: " << lines[i];
    ASSERT_TRUE(doc.is_object()) << lines[i];
    EXPECT_TRUE(doc["ok"].is_boolean()) << lines[i];
    EXPECT_TRUE(doc["size"] == "small" || doc["size"] == "large") << lines[i];
    ASSERT_TRUE(doc["count"].is_number_integer()) << lines[i];
    EXPECT_GE(doc["count"].get<int>(), 0) << lines[i];
    EXPECT_LE(doc["count"].get<int>(), 9) << lines[i];
    EXPECT_EQ(doc.size(), 3u) << lines[i];
  }
}

}  // namespace
}  // namespace grammard::grammarctl
