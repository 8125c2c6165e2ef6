// The bad-input catalogue: hostile constraints, tokenizers and Decode
// messages, each with the gRPC code and message fragment it must produce,
// within its deadline, while a bystander sequence on the same stream keeps
// decoding. The daemon runs with tight limits (a 3 s compile deadline, 20,000
// automaton states, 4 MiB messages, 3 streams per client) so that every
// case ends quickly.
//
// Invalid UTF-8 is refused in every text field of a request (they are
// proto `bytes`: see proto/grammard.proto).
#include <chrono>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grammard.grpc.pb.h"
#include "tests/support/daemon.h"
#include "tests/support/deep_inputs.h"
#include "tests/support/paths.h"

namespace grammard {
namespace {

namespace v1 = grammard::v1;
using Clock = std::chrono::steady_clock;
using testing::Daemon;
using testing::Nested;

constexpr int kCompileTimeoutMs = 3000;
// Time a refusal may take past the compile deadline. The sanitizers slow the
// daemon several times over (under ASan the 9,000-property schema took 7 s).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kOverrunMs = 8000;
#else
constexpr int kOverrunMs = 2000;
#endif
constexpr int kMaxMessageBytes = 4 << 20;

// A Compile either fails as an RPC (rpc_code) or answers FAILED with
// error.code; either way with `fragment` in the message. code OK: READY.
struct CompileCase {
  std::string name;
  std::function<v1::Constraint()> make;
  grpc::StatusCode code;
  std::string fragment;
  bool rpc_error = false;  // refused before compiling (malformed request)
};

v1::Constraint Schema(std::string text) {
  v1::Constraint c;
  c.set_json_schema(std::move(text));
  return c;
}
v1::Constraint Regex(std::string text) {
  v1::Constraint c;
  c.set_regex(std::move(text));
  return c;
}
v1::Constraint Ebnf(std::string text) {
  v1::Constraint c;
  c.mutable_grammar()->set_text(std::move(text));
  return c;
}

// An object schema of n integer properties.
v1::Constraint Properties(int n) {
  std::string s = R"({"type":"object","properties":{)";
  for (int i = 0; i < n; ++i) {
    if (i > 0) s += ",";
    s += absl::StrCat("\"p", i, "\":{\"type\":\"integer\"}");
  }
  return Schema(s + "}}");
}

std::vector<CompileCase> CompileCases() {
  using grpc::StatusCode;
  return {
      {"schema nested 10,000 deep",
       [] {
         return Schema(Nested(10000, R"({"type":"array","items":)",
                              R"({"type":"integer"})", "}"));
       },
       StatusCode::INVALID_ARGUMENT, "nested deeper than 512 levels", true},
      {"schema of 50,000 properties", [] { return Properties(50000); },
       StatusCode::INVALID_ARGUMENT, "more than 10000 members", true},
      {"schema of 9,000 properties", [] { return Properties(9000); },
       StatusCode::INVALID_ARGUMENT, "\"properties\" at #/properties"},
      {"$ref cycle with no base case",
       [] {
         return Schema(R"({"$defs":{"a":{"$ref":"#/$defs/b"},
                                    "b":{"$ref":"#/$defs/a"}},
                           "$ref":"#/$defs/a"})");
       },
       StatusCode::INVALID_ARGUMENT, "refers to itself"},
      {"oneOf nested 16 deep (disjoint: exact, compiles)",
       [] {
         return Schema(Nested(16, R"({"oneOf":[{"type":"string"},)",
                              R"({"type":"integer"})", "]}"));
       },
       StatusCode::OK, ""},
      {"regex (a|a)*b (an automaton: no backtracking)",
       [] { return Regex("(a|a)*b"); }, StatusCode::OK, ""},
      {"regex (a*)*", [] { return Regex("(a*)*"); }, StatusCode::OK, ""},
      {"regex a{1000}{1000}", [] { return Regex("a{1000}{1000}"); },
       StatusCode::INVALID_ARGUMENT, "consecutive quantifiers"},
      {"regex huge repeat", [] { return Regex("a{0,2000000000}"); },
       StatusCode::RESOURCE_EXHAUSTED, "exceeds the limit of 10000"},
      {"regex of 21,000 states",
       [] { return Regex("[a-z]{7000}[0-9]{7000}[A-Z]{7000}"); },
       StatusCode::RESOURCE_EXHAUSTED, ""},
      {"grammar undefined rule", [] { return Ebnf("root ::= missing"); },
       StatusCode::INVALID_ARGUMENT, "rule \"missing\" is not defined"},
      {"grammar unreachable rule (ignored)",
       [] { return Ebnf("root ::= \"a\"\nlonely ::= \"b\""); }, StatusCode::OK,
       ""},
      {"grammar left recursion", [] { return Ebnf("root ::= root \"a\""); },
       StatusCode::INVALID_ARGUMENT, "left recursion"},
      {"structural tag not JSON",
       [] {
         v1::Constraint c;
         c.set_structural_tag("{\"structures\": [");
         return c;
       },
       StatusCode::INVALID_ARGUMENT, "not valid JSON", true},
      {"no constraint at all", [] { return v1::Constraint(); },
       StatusCode::INVALID_ARGUMENT, "", true},
      {"schema not UTF-8", [] { return Schema("{\"const\":\"\xC3\"}"); },
       StatusCode::INVALID_ARGUMENT,
       "constraint.json_schema is not valid UTF-8 (byte 10", true},
      {"regex not UTF-8 (a surrogate)", [] { return Regex("a\xED\xA0\x80"); },
       StatusCode::INVALID_ARGUMENT,
       "constraint.regex is not valid UTF-8 (byte 1", true},
      {"grammar root rule not UTF-8",
       [] {
         v1::Constraint c = Ebnf("root ::= \"a\"");
         c.mutable_grammar()->set_root_rule("r\xFF");
         return c;
       },
       StatusCode::INVALID_ARGUMENT, "constraint.grammar.root_rule", true},
      {"choice not UTF-8 (overlong)",
       [] {
         v1::Constraint c;
         c.mutable_choice()->add_choices("yes");
         c.mutable_choice()->add_choices("n\xC0\xAF");
         return c;
       },
       StatusCode::INVALID_ARGUMENT, "constraint.choice.choices[1]", true},
      {"structural tag not UTF-8",
       [] {
         v1::Constraint c;
         c.set_structural_tag("\x80");
         return c;
       },
       StatusCode::INVALID_ARGUMENT, "constraint.structural_tag", true},
      {"separator not UTF-8",
       [] {
         v1::Constraint c = Schema("{}");
         c.mutable_json_options()->set_item_separator("\xF8");
         return c;
       },
       StatusCode::INVALID_ARGUMENT, "constraint.json_options.item_separator",
       true},
  };
}

class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::TokenizerDir("llama3")) return;
    testing::DaemonOptions options;
    options.flags = {absl::StrCat("--compile_timeout_ms=", kCompileTimeoutMs),
                     "--max_grammar_states=20000", "--max_streams_per_client=3",
                     absl::StrCat("--max_message_bytes=", kMaxMessageBytes)};
    auto daemon = Daemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    if (daemon_ == nullptr) {
      GTEST_SKIP() << testing::MissingDataMessage("the llama3 tokenizer");
    }
    stub_ = v1::Grammard::NewStub(grpc::CreateChannel(
        daemon_->target(), grpc::InsecureChannelCredentials()));
  }

  static Daemon* daemon_;
  std::unique_ptr<v1::Grammard::Stub> stub_;
};

Daemon* BadInputTest::daemon_ = nullptr;

TEST_F(BadInputTest, HostileConstraintsFailCleanlyAndInTime) {
  for (const CompileCase& c : CompileCases()) {
    SCOPED_TRACE(c.name);
    v1::CompileRequest request;
    request.set_tokenizer("llama3");
    *request.mutable_constraint() = c.make();
    request.set_wait(true);
    v1::CompileResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    const Clock::time_point start = Clock::now();
    grpc::Status s = stub_->Compile(&context, request, &response);
    const auto elapsed = Clock::now() - start;
    EXPECT_LT(elapsed,
              std::chrono::milliseconds(kCompileTimeoutMs + kOverrunMs));
    int code = s.error_code();
    std::string message = s.error_message();
    if (!c.rpc_error && s.ok()) {
      code = response.error().code();
      message = response.error().message();
      EXPECT_EQ(response.state(),
                code == 0 ? v1::GRAMMAR_STATE_READY : v1::GRAMMAR_STATE_FAILED);
    }
    EXPECT_EQ(code, c.code) << message;
    EXPECT_NE(message.find(c.fragment), std::string::npos) << message;
  }
}

// A tokenizer.json whose ids contradict each other, and one too large.
TEST_F(BadInputTest, LyingOrOversizedTokenizersAreRefused) {
  struct Case {
    std::string name, json;
    grpc::StatusCode code;
    std::string fragment;
  } cases[] = {
      {"ids repeat",
       R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []},
           "decoder": {"type": "ByteLevel"}, "added_tokens": []})",
       grpc::StatusCode::INVALID_ARGUMENT, "id 0"},
      {"id past any sensible size",
       R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 2000000000},
                     "merges": []}, "decoder": {"type": "ByteLevel"},
           "added_tokens": []})",
       grpc::StatusCode::INVALID_ARGUMENT, "2000000000"},
      {"not JSON", "{", grpc::StatusCode::INVALID_ARGUMENT, "JSON"},
      {"over the message limit",
       std::string(static_cast<size_t>(kMaxMessageBytes) + 1, ' '),
       grpc::StatusCode::RESOURCE_EXHAUSTED, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::RegisterTokenizerRequest request;
    request.set_name("liar");
    request.set_tokenizer_json(c.json);
    v1::Tokenizer response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    grpc::Status s = stub_->RegisterTokenizer(&context, request, &response);
    EXPECT_EQ(s.error_code(), c.code) << s.error_message();
    EXPECT_NE(s.error_message().find(c.fragment), std::string::npos)
        << s.error_message();
  }
}

// Bad steps on a stream: each gets its error in its own result, and a
// bystander sequence on the same stream steps on unharmed.
TEST_F(BadInputTest, BadStepsFailOnlyTheirSequence) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
  auto rw = stub_->Decode(&context);
  for (uint64_t id : {1, 2, 3}) {
    v1::DecodeRequest open;
    open.mutable_open()->set_sequence_id(id);
    open.mutable_open()->set_tokenizer("llama3");
    open.mutable_open()->mutable_constraint()->set_regex("[a-z]+");
    ASSERT_TRUE(rw->Write(open));
  }
  int ready = 0;
  v1::DecodeResponse response;
  while (ready < 3 && rw->Read(&response)) {
    if (response.has_status()) {
      ASSERT_EQ(response.status().state(), v1::GRAMMAR_STATE_READY);
      ++ready;
    }
  }
  struct Bad {
    std::string name;
    std::function<void(v1::SequenceStep*)> make;
    grpc::StatusCode code;
    std::string fragment;
  } bad[] = {
      // First, so that the later steps show the bystander steps again.
      {"listed twice in one step",
       [](v1::SequenceStep* s) { s->set_sequence_id(1); },
       grpc::StatusCode::INVALID_ARGUMENT, "sequence 1 appears twice"},
      {"never opened", [](v1::SequenceStep* s) { s->set_sequence_id(99); },
       grpc::StatusCode::NOT_FOUND, "not open"},
      {"token outside the vocabulary",
       [](v1::SequenceStep* s) {
         s->set_sequence_id(2);
         s->add_accepted_tokens(1 << 30);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "outside the vocabulary"},
      {"rollback deeper than the history",
       [](v1::SequenceStep* s) {
         s->set_sequence_id(3);
         s->set_rollback(5);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "only 0 were accepted"},
  };
  for (uint64_t step_id = 1; step_id <= std::size(bad); ++step_id) {
    const Bad& b = bad[step_id - 1];
    SCOPED_TRACE(b.name);
    v1::DecodeRequest request;
    request.mutable_step()->set_step_id(step_id);
    v1::SequenceStep* bystander = request.mutable_step()->add_sequences();
    bystander->set_sequence_id(1);
    b.make(request.mutable_step()->add_sequences());
    ASSERT_TRUE(rw->Write(request));
    do {
      ASSERT_TRUE(rw->Read(&response));
    } while (!response.has_step());
    ASSERT_EQ(response.step().sequences_size(), 2);
    const v1::SequenceResult& ok = response.step().sequences(0);
    EXPECT_FALSE(ok.has_error()) << ok.error().message();
    EXPECT_EQ(ok.rows_size(), 1);
    const v1::SequenceResult& failed = response.step().sequences(1);
    EXPECT_EQ(failed.error().code(), b.code) << failed.error().message();
    EXPECT_NE(failed.error().message().find(b.fragment), std::string::npos)
        << failed.error().message();
  }
  rw->WritesDone();
  EXPECT_TRUE(rw->Finish().ok());
}

// Names and ids that are not UTF-8 are refused naming the field, by the
// unary RPCs and, on a stream, for their sequence alone.
TEST_F(BadInputTest, NamesAndIdsThatAreNotUtf8AreRefusedByName) {
  auto expect_refused = [](const grpc::Status& s, const std::string& field) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << s.error_message();
    EXPECT_NE(s.error_message().find(field + " is not valid UTF-8"),
              std::string::npos)
        << s.error_message();
  };
  {
    v1::CompileRequest request;
    request.set_tokenizer("llama\xFF");
    request.mutable_constraint()->set_regex("a");
    v1::CompileResponse response;
    grpc::ClientContext context;
    expect_refused(stub_->Compile(&context, request, &response), "tokenizer");
  }
  {
    v1::RegisterTokenizerRequest request;
    request.set_name("\xC3");
    request.set_tokenizer_json("{}");
    v1::Tokenizer response;
    grpc::ClientContext context;
    expect_refused(stub_->RegisterTokenizer(&context, request, &response),
                   "name");
  }
  {
    v1::SyncGroupRequest request;
    request.set_group_id("g\xED\xB0\x80");
    request.set_world_size(1);
    v1::SyncGroupResponse response;
    grpc::ClientContext context;
    expect_refused(stub_->SyncGroup(&context, request, &response), "group_id");
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
  auto rw = stub_->Decode(&context);
  v1::DecodeRequest open;
  open.mutable_open()->set_sequence_id(1);
  open.mutable_open()->set_tokenizer("llama3");
  open.mutable_open()->mutable_constraint()->set_regex("[a-z]+");
  ASSERT_TRUE(rw->Write(open));
  open.mutable_open()->set_sequence_id(2);
  open.mutable_open()->set_tokenizer("llama3\xFF");
  ASSERT_TRUE(rw->Write(open));
  open.mutable_open()->set_sequence_id(3);
  open.mutable_open()->set_tokenizer("llama3");
  open.mutable_open()->set_grammar_id("\xFF");
  ASSERT_TRUE(rw->Write(open));
  open.mutable_open()->set_sequence_id(4);
  open.mutable_open()->mutable_constraint()->set_regex("\xFF");
  ASSERT_TRUE(rw->Write(open));
  std::map<uint64_t, v1::SequenceStatus> statuses;
  v1::DecodeResponse response;
  while (statuses.size() < 4 && rw->Read(&response)) {
    if (response.has_status()) {
      statuses[response.status().sequence_id()] = response.status();
    }
  }
  ASSERT_EQ(statuses.size(), 4u);
  EXPECT_EQ(statuses[1].state(), v1::GRAMMAR_STATE_READY);
  const std::pair<uint64_t, std::string> refused[] = {
      {2, "sequence 2: tokenizer is not valid UTF-8"},
      {3, "sequence 3: grammar_id is not valid UTF-8"},
      {4, "constraint.regex is not valid UTF-8"}};
  for (const auto& [id, fragment] : refused) {
    EXPECT_EQ(statuses[id].state(), v1::GRAMMAR_STATE_FAILED) << id;
    EXPECT_EQ(statuses[id].error().code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(statuses[id].error().message().find(fragment), std::string::npos)
        << statuses[id].error().message();
  }
  v1::DecodeRequest step;
  step.mutable_step()->set_step_id(1);
  step.mutable_step()->add_sequences()->set_sequence_id(1);
  ASSERT_TRUE(rw->Write(step));
  do {
    ASSERT_TRUE(rw->Read(&response));
  } while (!response.has_step());
  ASSERT_EQ(response.step().sequences_size(), 1);
  EXPECT_FALSE(response.step().sequences(0).has_error());
  EXPECT_EQ(response.step().sequences(0).rows_size(), 1);
  rw->WritesDone();
  EXPECT_TRUE(rw->Finish().ok());
}

// A client holding its limit of streams is refused another, and gets one
// again once it closes one.
TEST_F(BadInputTest, StreamsPerClientAreLimited) {
  struct Held {
    grpc::ClientContext context;
    std::unique_ptr<
        grpc::ClientReaderWriter<v1::DecodeRequest, v1::DecodeResponse>>
        rw;
  };
  // Each stream opens a sequence and waits for its status, so the server
  // has taken it on before the next.
  auto hold = [&](Held* h) {
    h->rw = stub_->Decode(&h->context);
    v1::DecodeRequest open;
    open.mutable_open()->set_sequence_id(1);
    open.mutable_open()->set_tokenizer("llama3");
    open.mutable_open()->mutable_constraint()->set_regex("[0-9]+");
    if (!h->rw->Write(open)) return false;
    v1::DecodeResponse response;
    return h->rw->Read(&response) && response.has_status();
  };
  std::vector<std::unique_ptr<Held>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<Held>());
    ASSERT_TRUE(hold(held.back().get())) << "stream " << i;
  }
  Held refused;
  EXPECT_FALSE(hold(&refused));
  grpc::Status s = refused.rw->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << s.error_message();
  EXPECT_NE(s.error_message().find("--max_streams_per_client"),
            std::string::npos)
      << s.error_message();

  // The handler frees the slot before it returns, so before Finish does.
  held[0]->rw->WritesDone();
  EXPECT_TRUE(held[0]->rw->Finish().ok());
  held[0] = std::make_unique<Held>();
  EXPECT_TRUE(hold(held[0].get()));
  for (auto& h : held) {
    h->rw->WritesDone();
    EXPECT_TRUE(h->rw->Finish().ok());
  }
}

}  // namespace
}  // namespace grammard
