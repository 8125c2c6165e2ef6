// Every front end fed input nested as deep as it allows (and past that),
// compiled on a thread with a small stack: nothing on the compile path may
// recurse as deep as the input nests. Each case either compiles or is
// refused with its own error; a crash fails the whole test.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grammar/compiler.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "grammar/frontends/structural_tag/structural_tag.h"
#include "grammar/vocabulary.h"
#include "gtest/gtest.h"
#include "tests/support/deep_inputs.h"
#include "tests/support/small_stack.h"

namespace grammard::grammar {
namespace {

// The stack glibc gives threads where RLIMIT_STACK is unlimited, a quarter
// of the usual 8 MB and an eighth of what the daemon's compile threads get
// (service/compile_pool.h).
// AddressSanitizer's redzones make every frame several times larger.
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kStackBytes = size_t{8} << 20;
#else
constexpr size_t kStackBytes = size_t{2} << 20;
#endif

class DeepInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> tokens;
    for (char c = ' '; c <= '~'; ++c) tokens.push_back(std::string(1, c));
    tokens.push_back("</s>");
    const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
    auto vocab = Vocabulary::FromTokens(tokens, {eos}, {eos}, {});
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    compiler_ = std::make_unique<GrammarCompiler>(*std::move(vocab));
  }

  CompileOptions Options() const {
    CompileOptions options;
    options.deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(60);
    options.classify_ahead = std::chrono::microseconds(0);
    return options;
  }

  // The status of `compile`, run on the small stack.
  static absl::Status OnSmallStack(
      const std::function<absl::Status()>& compile) {
    absl::Status status;
    testing::RunOnSmallStack(kStackBytes, [&] { status = compile(); });
    return status;
  }

  absl::Status Ebnf(const std::string& text) const {
    return OnSmallStack([&] {
      return compiler_->CompileEbnf(text, "root", Options()).status();
    });
  }
  absl::Status Regex(const std::string& text) const {
    return OnSmallStack(
        [&] { return compiler_->CompileRegex(text, Options()).status(); });
  }
  absl::Status Schema(const std::string& text) const {
    return OnSmallStack([&]() -> absl::Status {
      JsonSchemaOptions options;
      options.deadline = Options().deadline;
      absl::StatusOr<JsonSchemaResult> r = JsonSchemaToGrammar(text, options);
      if (!r.ok()) return r.status();
      return compiler_->Compile(std::move(r->grammar), Options()).status();
    });
  }

  std::unique_ptr<GrammarCompiler> compiler_;
};

// Each rule copied into the one before: the automaton's construction
// recursed once a rule (the daemon's 8 MB compile thread crashed on a chain
// of 30,000).
TEST_F(DeepInputTest, EbnfRuleChains) {
  const absl::Status chain = Ebnf(testing::EbnfChain(20000));
  EXPECT_TRUE(chain.ok()) << chain;
}

TEST_F(DeepInputTest, EbnfRuleChainsOfCalls) {
  // Each rule refers to the next in the middle of its text: copied into
  // one another, the rules nest 30,000 deep.
  std::string text = "root ::= r0\n";
  for (int i = 0; i < 30000; ++i) {
    absl::StrAppend(&text, "r", i, " ::= \"a\" r", i + 1, " \"b\" | \"c\"\n");
  }
  absl::StrAppend(&text, "r30000 ::= \"a\"\n");
  // Whatever the outcome, it comes by the deadline (choosing what to copy
  // was quadratic in such chains: 150 s).
  CompileOptions options = Options();
  options.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  const auto start = std::chrono::steady_clock::now();
  absl::Status status;
  testing::RunOnSmallStack(kStackBytes, [&] {
    status = compiler_->CompileEbnf(text, "root", options).status();
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(8));
  EXPECT_TRUE(status.code() == absl::StatusCode::kDeadlineExceeded ||
              status.code() == absl::StatusCode::kResourceExhausted ||
              status.ok())
      << status;
}

TEST_F(DeepInputTest, EbnfGroups) {
  EXPECT_TRUE(Ebnf("root ::= " + testing::Nested(200, "(", "\"a\"", ")")).ok());
  EXPECT_EQ(
      Ebnf("root ::= " + testing::Nested(100000, "(", "\"a\"", ")")).code(),
      absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(
      Ebnf("root ::= " + testing::Nested(200, "(\"x\" ", "\"a\"", ")*")).ok());
}

TEST_F(DeepInputTest, RegexGroups) {
  EXPECT_TRUE(Regex(testing::Nested(200, "(", "a", ")")).ok());
  EXPECT_TRUE(Regex(testing::Nested(200, "(x|", "a", ")?")).ok());
  EXPECT_EQ(Regex(testing::Nested(100000, "(", "a", ")")).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(DeepInputTest, JsonSchemasAtTheirNestingLimit) {
  const int depth = 250;  // every level is two JSON levels: under 512
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {R"({"type":"array","items":)", "}"},
      {R"({"type":"object","properties":{"p":)", "},\"required\":[\"p\"]}"},
      {R"({"type":"array","prefixItems":[)", "]}"},
      {R"({"type":"object","additionalProperties":)", "}"},
  };
  for (const auto& [open, close] : kinds) {
    SCOPED_TRACE(open);
    const absl::Status s =
        Schema(testing::Nested(depth, open, R"({"type":"integer"})", close));
    EXPECT_TRUE(s.ok()) << s;
  }
}

// Applicators expand inside one another up to 128 levels.
TEST_F(DeepInputTest, JsonSchemaApplicatorsAtTheirLimit) {
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {R"({"allOf":[)", "]}"},
      {R"({"anyOf":[{"type":"null"},)", "]}"},
      {R"({"oneOf":[{"type":"null"},)", "]}"},
      {R"({"not":{"not":)", "}}"},
      {R"({"if":{"type":"string"},"then":)", "}"},
  };
  for (const auto& [open, close] : kinds) {
    SCOPED_TRACE(open);
    const absl::Status s =
        Schema(testing::Nested(120, open, R"({"type":"integer"})", close));
    EXPECT_TRUE(s.ok() || s.code() == absl::StatusCode::kResourceExhausted)
        << s;
    EXPECT_EQ(Schema(testing::Nested(250, open, R"({"type":"integer"})", close))
                  .code(),
              absl::StatusCode::kResourceExhausted);
  }
}

// A schema whose $defs chain 9,000 definitions, each referring to the next
// from within `open` ... `close`.
std::string RefChain(const std::string& open, const std::string& close) {
  std::string defs;
  for (int i = 0; i < 9000; ++i) {
    absl::StrAppend(&defs, i ? "," : "", "\"d", i, "\":", open,
                    "{\"$ref\":\"#/$defs/d", i + 1, "\"}", close);
  }
  return absl::StrCat(R"({"$defs":{)", defs,
                      R"(,"d9000":{"type":"integer"}},"$ref":"#/$defs/d0"})");
}

TEST_F(DeepInputTest, JsonSchemaRefChains) {
  // Each definition a bare reference, and each an object holding the next.
  for (const auto& [open, close] :
       {std::pair<std::string, std::string>{"", ""},
        {R"({"type":"object","properties":{"x":)", "}}"}}) {
    SCOPED_TRACE(open);
    const absl::Status s = Schema(RefChain(open, close));
    EXPECT_TRUE(s.ok() || s.code() == absl::StatusCode::kResourceExhausted)
        << s;
  }
}

TEST_F(DeepInputTest, StructuralTagsHoldingDeepSchemas) {
  const std::string schema = testing::Nested(250, R"({"type":"array","items":)",
                                             R"({"type":"integer"})", "}");
  const std::string spec =
      absl::StrCat(R"({"structures":[{"begin":"<f>","schema":)", schema,
                   R"(,"end":"</f>"}],"triggers":["<f>"]})");
  const absl::Status s = OnSmallStack([&]() -> absl::Status {
    absl::StatusOr<StructuralTagResult> r = StructuralTagGrammar(spec);
    if (!r.ok()) return r.status();
    return compiler_->Compile(std::move(r->grammar), Options()).status();
  });
  EXPECT_TRUE(s.ok() || s.code() == absl::StatusCode::kResourceExhausted) << s;
}

// A schema of 30,000 enum numbers, and one of 100,000 strings: their values
// are compared by hash, not pairwise (30,000 numbers took 58 s).
TEST_F(DeepInputTest, LargeEnumsConvertWellWithinTheirDeadline) {
  const std::string numbers = testing::EnumOfNumbers(30000);
  const std::string strings = testing::EnumOfStrings(100000);
  for (const std::string& schema : {numbers, strings}) {
    JsonSchemaOptions options;
    // Far more than the few hundred milliseconds it takes; the pairwise
    // comparison took minutes.
    options.deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(20);
    absl::StatusOr<JsonSchemaResult> r = JsonSchemaToGrammar(schema, options);
    EXPECT_NE(r.status().code(), absl::StatusCode::kDeadlineExceeded)
        << r.status();
  }
}

// A raised flag stops a conversion and a compile as a passed deadline does.
TEST_F(DeepInputTest, ARaisedFlagCancelsConversionAndCompile) {
  std::atomic<bool> stop{true};
  const std::string strings = testing::EnumOfStrings(100000);
  JsonSchemaOptions options;
  options.deadline = Deadline(Deadline::Clock::time_point::max(), &stop);
  EXPECT_EQ(JsonSchemaToGrammar(strings, options).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  CompileOptions compile;
  compile.deadline = Deadline(Deadline::Clock::time_point::max(), &stop);
  EXPECT_EQ(compiler_->CompileRegex("[a-z]{5}", compile).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  stop = false;
  EXPECT_TRUE(compiler_->CompileRegex("[a-z]{5}", compile).ok());
}

}  // namespace
}  // namespace grammard::grammar
