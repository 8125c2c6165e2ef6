// Whole-system tests: the real grammard on 127.0.0.1, driven over gRPC.
// Every mask row received is checked against the engine's own mask computed
// in-process (service::Sequence over the same compiled constraint).
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/greedy_tokens.h"
#include "gtest/gtest.h"
#include "proto/grammard.grpc.pb.h"
#include "proto/health.grpc.pb.h"
#include "proto/mask_rows.h"
#include "service/constraint.h"
#include "service/sequence.h"
#include "tests/support/daemon.h"
#include "tests/support/paths.h"

namespace grammard {
namespace {

namespace v1 = grammard::v1;
using testing::Daemon;

constexpr char kPersonSchema[] = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer", "minimum": 0, "maximum": 120}
  },
  "required": ["name", "age"]
})";

constexpr char kToolTag[] = R"({
  "structures": [{"begin": "<function=get_weather>",
                  "schema": {"type": "object",
                             "properties": {"city": {"type": "string"}},
                             "required": ["city"]},
                  "end": "</function>"}],
  "triggers": ["<function="]
})";

v1::Constraint Schema(const std::string& schema) {
  v1::Constraint c;
  c.set_json_schema(schema);
  return c;
}

// One daemon (llama3) for the whole suite, plus the same vocabulary
// in-process for reference masks.
class DecodeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::TokenizerDir("llama3")) return;
    auto daemon = Daemon::Start({});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
    grammar::VocabularyOptions options;
    options.name = "llama3";
    auto vocab = grammar::Vocabulary::FromDirectory(
        *testing::TokenizerDir("llama3"), options);
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    vocab_ = new std::shared_ptr<const grammar::Vocabulary>(*vocab);
    compiler_ = new grammar::GrammarCompiler(*vocab);
  }
  static void TearDownTestSuite() {
    delete daemon_;
    delete compiler_;
    delete vocab_;
    daemon_ = nullptr;
  }

  void SetUp() override {
    if (daemon_ == nullptr) {
      GTEST_SKIP() << testing::MissingDataMessage("the llama3 tokenizer");
    }
    channel_ = grpc::CreateChannel(daemon_->target(),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Grammard::NewStub(channel_);
  }

  const grammar::Vocabulary& vocab() const { return **vocab_; }

  grammar::CompiledGrammar Reference(const v1::Constraint& c) {
    auto compiled = service::CompileConstraint(*compiler_, c, {});
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    return compiled->grammar;
  }

  static Daemon* daemon_;
  static std::shared_ptr<const grammar::Vocabulary>* vocab_;
  static grammar::GrammarCompiler* compiler_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Grammard::Stub> stub_;
};

Daemon* DecodeTest::daemon_ = nullptr;
std::shared_ptr<const grammar::Vocabulary>* DecodeTest::vocab_ = nullptr;
grammar::GrammarCompiler* DecodeTest::compiler_ = nullptr;

// A Decode stream as an engine holds it: statuses arrive at any time and
// are kept by sequence; Step returns the step's result.
class Stream {
 public:
  explicit Stream(v1::Grammard::Stub* stub) {
    context_.set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(120));
    rw_ = stub->Decode(&context_);
  }

  void Open(uint64_t id, const v1::Constraint& c, v1::Reasoning reasoning = {},
            bool jump_forward = false, const std::string& tokenizer = "llama3",
            bool keeps_previous_row = false) {
    v1::DecodeRequest request;
    v1::OpenSequence* open = request.mutable_open();
    open->set_sequence_id(id);
    open->set_tokenizer(tokenizer);
    *open->mutable_constraint() = c;
    *open->mutable_reasoning() = reasoning;
    open->set_jump_forward(jump_forward);
    open->set_keeps_previous_row(keeps_previous_row);
    ASSERT_TRUE(rw_->Write(request));
  }

  void Close(uint64_t id) {
    v1::DecodeRequest request;
    request.mutable_close()->set_sequence_id(id);
    ASSERT_TRUE(rw_->Write(request));
  }

  // Reads until sequence `id` has a status.
  v1::SequenceStatus WaitStatus(uint64_t id) {
    while (statuses_[id].empty()) {
      v1::DecodeResponse response;
      if (!rw_->Read(&response)) return {};
      Keep(response);
    }
    v1::SequenceStatus s = statuses_[id].front();
    statuses_[id].pop_front();
    return s;
  }

  // Sends a step and reads until its result.
  v1::StepResult Step(const v1::Step& step) {
    EXPECT_TRUE(rw_->Write(step_request(step)));
    for (;;) {
      v1::DecodeResponse response;
      if (!rw_->Read(&response)) {
        ADD_FAILURE() << "stream ended";
        return {};
      }
      if (response.has_step()) return response.step();
      Keep(response);
    }
  }

  grpc::Status Finish() {
    rw_->WritesDone();
    v1::DecodeResponse response;
    while (rw_->Read(&response)) Keep(response);
    return rw_->Finish();
  }

  grpc::ClientContext& context() { return context_; }
  grpc::ClientReaderWriter<v1::DecodeRequest, v1::DecodeResponse>* rw() {
    return rw_.get();
  }

 private:
  static v1::DecodeRequest step_request(const v1::Step& step) {
    v1::DecodeRequest r;
    *r.mutable_step() = step;
    return r;
  }
  void Keep(const v1::DecodeResponse& response) {
    if (response.has_status()) {
      statuses_[response.status().sequence_id()].push_back(response.status());
    }
  }

  grpc::ClientContext context_;
  std::unique_ptr<
      grpc::ClientReaderWriter<v1::DecodeRequest, v1::DecodeResponse>>
      rw_;
  std::map<uint64_t, std::deque<v1::SequenceStatus>> statuses_;
};

// Row `row` of sequence `seq` of a step, decoded with the step's other rows
// (a row may repeat an earlier one).
std::vector<uint32_t> DecodeRow(const v1::StepResult& step, int seq, int row,
                                int32_t vocab_size) {
  auto decoded =
      proto::DecodeStepRows(step, [&](size_t) { return vocab_size; });
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  const size_t words = static_cast<size_t>(vocab_size + 31) / 32;
  if (!decoded.ok()) return std::vector<uint32_t>(words);
  auto begin = decoded->words.begin() +
               static_cast<std::ptrdiff_t>(decoded->offsets[seq] + row * words);
  return std::vector<uint32_t>(begin,
                               begin + static_cast<std::ptrdiff_t>(words));
}

bool Allowed(const std::vector<uint32_t>& row, int32_t id) {
  return (row[id / 32] >> (id % 32)) & 1;
}

// A sequence driven towards a target text: each step it takes the longest
// allowed token that prefixes what is left (random tokens while thinking),
// then end-of-sequence.
struct Driven {
  uint64_t id;
  v1::Constraint constraint;
  std::string text;
  v1::Reasoning reasoning;
  int thinking_tokens = 0;
  std::unique_ptr<service::Sequence> reference;
  std::optional<grammar::CompiledGrammar> compiled;  // compiled once
  std::vector<int32_t> next;  // tokens to report at the next step
  std::string rest;
  bool done = false;
  // Opened with keeps_previous_row: its first row of the latest step.
  bool keeps_previous_row = false;
  std::vector<uint32_t> previous_row;
};

TEST_F(DecodeTest, MixedConstraintsOnOneStreamMatchTheEngineInProcess) {
  std::vector<Driven> seqs;
  auto add = [&](v1::Constraint c, std::string text) {
    Driven d;
    d.id = 100 + seqs.size();
    d.constraint = std::move(c);
    d.text = std::move(text);
    seqs.push_back(std::move(d));
  };
  add(Schema(kPersonSchema), R"({"name": "Ada", "age": 36})");
  // The same text again: its rows go out as references to the first's, or
  // to its own previous row.
  add(Schema(kPersonSchema), R"({"name": "Ada", "age": 36})");
  seqs.back().keeps_previous_row = true;
  v1::Constraint regex;
  regex.set_regex("[a-z]{2,5}@(x|y)\\.com");
  add(regex, "abc@y.com");
  v1::Constraint ebnf;
  ebnf.mutable_grammar()->set_text(
      "root ::= \"(\" num (\"+\" num)* \")\"\nnum ::= [0-9]+");
  add(ebnf, "(12+345+6)");
  v1::Constraint choice;
  for (const char* c : {"yes", "no", "maybe"}) {
    choice.mutable_choice()->add_choices(c);
  }
  add(choice, "maybe");
  v1::Constraint tag;
  tag.set_structural_tag(kToolTag);
  add(tag,
      "Let me check. <function=get_weather>{\"city\": \"Paris\"}</function> "
      "Done.");
  v1::Constraint object;
  object.mutable_json_object();
  add(object, R"({"ok": [1, 2.5, null]})");
  seqs.back().reasoning.set_enabled(true);
  seqs.back().reasoning.set_think_end_token_id(128002);
  seqs.back().thinking_tokens = 5;
  seqs.back().keeps_previous_row = true;  // all-allowed while thinking

  Stream stream(stub_.get());
  int references = 0;           // rows sent as MaskRow.same_as
  int previous_references = 0;  // and as same_as_previous
  for (Driven& d : seqs) {
    stream.Open(d.id, d.constraint, d.reasoning, /*jump_forward=*/false,
                "llama3", d.keeps_previous_row);
    service::ReasoningOptions r{d.reasoning.enabled(),
                                d.reasoning.think_end_token_id()};
    d.compiled = Reference(d.constraint);
    d.reference = std::make_unique<service::Sequence>(d.id, *d.compiled, r);
    d.rest = d.text;
  }
  for (Driven& d : seqs) {
    v1::SequenceStatus s = stream.WaitStatus(d.id);
    ASSERT_EQ(s.state(), v1::GRAMMAR_STATE_READY)
        << d.id << ": " << s.error().message();
    EXPECT_EQ(s.grammar_id().size(), 32u);
  }

  std::mt19937 rng(1);
  const int32_t n = vocab().size();
  for (int step = 0; step < 200; ++step) {
    v1::Step request;
    request.set_step_id(step);
    std::vector<Driven*> live;
    for (Driven& d : seqs) {
      if (d.done) continue;
      v1::SequenceStep* s = request.add_sequences();
      s->set_sequence_id(d.id);
      for (int32_t t : d.next) s->add_accepted_tokens(t);
      ASSERT_TRUE(d.reference->Advance(0, d.next).ok());
      d.next.clear();
      live.push_back(&d);
    }
    if (live.empty()) break;
    v1::StepResult result = stream.Step(request);
    ASSERT_EQ(result.step_id(), static_cast<uint64_t>(step));
    ASSERT_EQ(result.sequences_size(), static_cast<int>(live.size()));
    auto decoded = proto::DecodeStepRows(
        result, [&](size_t) { return n; },
        [&](size_t i) -> const uint32_t* {
          const std::vector<uint32_t>& kept = live[i]->previous_row;
          return kept.empty() ? nullptr : kept.data();
        });
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    for (size_t i = 0; i < live.size(); ++i) {
      Driven& d = *live[i];
      const v1::SequenceResult& r = result.sequences(static_cast<int>(i));
      ASSERT_EQ(r.sequence_id(), d.id);
      ASSERT_FALSE(r.has_error()) << r.error().message();
      ASSERT_EQ(r.rows_size(), 1);
      if (r.rows(0).has_same_as()) ++references;
      if (r.rows(0).has_same_as_previous()) ++previous_references;
      const auto row = decoded->words.begin() +
                       static_cast<std::ptrdiff_t>(decoded->offsets[i]);
      std::vector<uint32_t> wire(row, row + (n + 31) / 32);
      if (d.keeps_previous_row) d.previous_row = wire;
      std::vector<uint32_t> local(wire.size());
      d.reference->FillRows({}, local.data());
      ASSERT_EQ(wire, local) << "sequence " << d.id << " step " << step;
      EXPECT_EQ(r.terminated(), d.reference->IsTerminated());
      if (r.terminated()) {
        d.done = true;
        continue;
      }
      int32_t token;
      if (d.reference->thinking()) {
        token = d.thinking_tokens-- > 0 ? static_cast<int32_t>(rng() % 128000)
                                        : d.reasoning.think_end_token_id();
      } else if (d.rest.empty()) {
        ASSERT_TRUE(r.can_terminate()) << d.id;
        token = vocab().eos_ids()[0];
      } else {
        token = grammar::LongestAllowedToken(*d.compiled, local.data(), d.rest);
        ASSERT_GE(token, 0) << "sequence " << d.id << " stuck at " << d.rest;
        d.rest.erase(0, vocab().bytes(token).size());
      }
      ASSERT_TRUE(Allowed(wire, token));
      d.next.push_back(token);
    }
  }
  for (const Driven& d : seqs) EXPECT_TRUE(d.done) << d.id;
  EXPECT_GT(references, 0);
  EXPECT_GT(previous_references, 0);
  EXPECT_TRUE(stream.Finish().ok());
}

TEST_F(DecodeTest, SpeculativeRowsRollbackAndJumpForward) {
  v1::Constraint c = Schema(R"({"type": "object",
      "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
      "required": ["name", "age"], "additionalProperties": false})");
  c.mutable_json_options()->set_whitespace(v1::JsonOptions::WHITESPACE_COMPACT);
  Stream stream(stub_.get());
  stream.Open(1, c, {}, /*jump_forward=*/true);
  ASSERT_EQ(stream.WaitStatus(1).state(), v1::GRAMMAR_STATE_READY);
  service::Sequence reference(1, Reference(c), {});
  const int32_t n = vocab().size();
  const grammar::CompiledGrammar g = Reference(c);

  // Tokens of the text, found greedily under the reference's masks.
  std::vector<int32_t> tokens;
  {
    service::Sequence walk(2, g, {});
    std::string rest = R"({"name":"Bo","age":7})";
    while (!rest.empty()) {
      std::vector<uint32_t> row(walk.mask_words());
      walk.FillRows({}, row.data());
      int32_t t = grammar::LongestAllowedToken(g, row.data(), rest);
      ASSERT_GE(t, 0);
      tokens.push_back(t);
      rest.erase(0, vocab().bytes(t).size());
      ASSERT_TRUE(walk.Advance(0, {t}).ok());
    }
  }
  ASSERT_GE(tokens.size(), 4u);

  // Step 0: nothing accepted, all tokens as drafts, plus one bad draft.
  v1::Step step;
  v1::SequenceStep* s = step.add_sequences();
  s->set_sequence_id(1);
  std::vector<int32_t> drafts = tokens;
  drafts.push_back(vocab().eos_ids()[0]);
  drafts.push_back(tokens[0]);  // refused after EOS
  for (int32_t t : drafts) s->add_draft_tokens(t);
  v1::StepResult result = stream.Step(step);
  ASSERT_EQ(result.sequences(0).rows_size(),
            static_cast<int>(drafts.size()) + 1);
  std::vector<uint32_t> local((drafts.size() + 1) * reference.mask_words());
  reference.FillRows(drafts, local.data());
  for (size_t i = 0; i <= drafts.size(); ++i) {
    std::vector<uint32_t> wire = DecodeRow(result, 0, static_cast<int>(i), n);
    EXPECT_TRUE(std::equal(wire.begin(), wire.end(),
                           local.begin() + i * reference.mask_words()))
        << "row " << i;
  }
  // Jump-forward at the start of the object: `{"name":"` is forced.
  EXPECT_EQ(result.sequences(0).jump_forward_bytes(), "{\"name\":\"");
  EXPECT_GT(result.sequences(0).jump_forward_tokens_size(), 0);

  // Accept all drafts but the last two, then roll back two of them and
  // accept them again: the masks follow.
  step.mutable_sequences(0)->clear_draft_tokens();
  for (int32_t t : tokens) step.mutable_sequences(0)->add_accepted_tokens(t);
  result = stream.Step(step);
  ASSERT_FALSE(result.sequences(0).has_error());
  EXPECT_TRUE(result.sequences(0).can_terminate());
  step.mutable_sequences(0)->clear_accepted_tokens();
  step.mutable_sequences(0)->set_rollback(2);
  result = stream.Step(step);
  ASSERT_TRUE(reference.Advance(0, tokens).ok());
  ASSERT_TRUE(reference.Advance(2, {}).ok());
  std::vector<uint32_t> row(reference.mask_words());
  reference.FillRows({}, row.data());
  EXPECT_EQ(DecodeRow(result, 0, 0, n), row);
  EXPECT_FALSE(result.sequences(0).can_terminate());
  EXPECT_TRUE(stream.Finish().ok());
}

TEST_F(DecodeTest, OneBadSequenceLeavesTheOthersAlone) {
  Stream stream(stub_.get());
  v1::Constraint good;
  good.set_regex("(ab)+");
  stream.Open(1, good);
  stream.Open(2, Schema(R"({"type": "object", "minProperties": "three"})"));
  stream.Open(3, good, {}, false, "no-such-tokenizer");
  stream.Open(4, good);
  stream.Open(1, good);  // already open
  // Sequence 1's READY (from a compile thread) and the refusal of its second
  // open may arrive in either order.
  v1::SequenceStatus first = stream.WaitStatus(1);
  v1::SequenceStatus second = stream.WaitStatus(1);
  if (first.state() != v1::GRAMMAR_STATE_READY) std::swap(first, second);
  EXPECT_EQ(first.state(), v1::GRAMMAR_STATE_READY);
  EXPECT_EQ(second.error().code(), grpc::StatusCode::ALREADY_EXISTS);
  v1::SequenceStatus bad_schema = stream.WaitStatus(2);
  EXPECT_EQ(bad_schema.state(), v1::GRAMMAR_STATE_FAILED);
  EXPECT_EQ(bad_schema.error().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad_schema.error().message().find("minProperties"),
            std::string::npos)
      << bad_schema.error().message();
  v1::SequenceStatus unknown = stream.WaitStatus(3);
  EXPECT_EQ(unknown.error().code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(unknown.error().message().find("no-such-tokenizer"),
            std::string::npos);
  EXPECT_EQ(stream.WaitStatus(4).state(), v1::GRAMMAR_STATE_READY);

  // Sequence 4 reports a token the grammar refuses; 1 steps normally; 9 was
  // never opened; 2 failed to compile.
  const int32_t bad_token = vocab().eos_ids()[0];
  v1::Step step;
  for (uint64_t id : {1, 4, 9, 2}) step.add_sequences()->set_sequence_id(id);
  step.mutable_sequences(1)->add_accepted_tokens(bad_token);
  v1::StepResult result = stream.Step(step);
  ASSERT_EQ(result.sequences_size(), 4);
  EXPECT_FALSE(result.sequences(0).has_error());
  EXPECT_EQ(result.sequences(0).rows_size(), 1);
  EXPECT_EQ(result.sequences(1).error().code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(result.sequences(1).error().message().find("sequence 4"),
            std::string::npos)
      << result.sequences(1).error().message();
  EXPECT_EQ(result.sequences(1).rows_size(), 0);
  EXPECT_EQ(result.sequences(2).error().code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(result.sequences(3).error().code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  // The failed sequence stays failed until closed; a closed id can be
  // opened again.
  step.mutable_sequences(1)->clear_accepted_tokens();
  result = stream.Step(step);
  EXPECT_EQ(result.sequences(1).error().code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_FALSE(result.sequences(0).has_error());
  stream.Close(4);
  stream.Open(4, good);
  EXPECT_EQ(stream.WaitStatus(4).state(), v1::GRAMMAR_STATE_READY);
  step.clear_sequences();
  step.add_sequences()->set_sequence_id(4);
  EXPECT_FALSE(stream.Step(step).sequences(0).has_error());
  EXPECT_TRUE(stream.Finish().ok());
}

TEST_F(DecodeTest, DroppedStreamMidStepDoesNotDisturbOthers) {
  v1::Constraint c = Schema(kPersonSchema);
  Stream survivor(stub_.get());
  survivor.Open(1, c);
  ASSERT_EQ(survivor.WaitStatus(1).state(), v1::GRAMMAR_STATE_READY);
  for (int round = 0; round < 5; ++round) {
    Stream doomed(stub_.get());
    for (uint64_t id = 0; id < 64; ++id) doomed.Open(id, c);
    for (uint64_t id = 0; id < 64; ++id) {
      ASSERT_EQ(doomed.WaitStatus(id).state(), v1::GRAMMAR_STATE_READY);
    }
    v1::DecodeRequest request;
    for (uint64_t id = 0; id < 64; ++id) {
      request.mutable_step()->add_sequences()->set_sequence_id(id);
    }
    ASSERT_TRUE(doomed.rw()->Write(request));
    doomed.context().TryCancel();  // gone while the server fills the step
    EXPECT_FALSE(doomed.rw()->Finish().ok());
  }
  v1::Step step;
  step.add_sequences()->set_sequence_id(1);
  v1::StepResult result = survivor.Step(step);
  EXPECT_FALSE(result.sequences(0).has_error());
  EXPECT_TRUE(survivor.Finish().ok());
}

// A client uploads tokenizer.json under a name of its own: the server knows
// it by that name and by fingerprint (the llama3 files, so the same one as
// the served llama3), lists it, and decodes with it exactly as in-process.
TEST_F(DecodeTest, UploadedTokenizerDecodesLikeTheServedOne) {
  const std::string dir = *testing::TokenizerDir("llama3");
  v1::RegisterTokenizerRequest upload;
  upload.set_name("uploaded-llama3");
  upload.set_tokenizer_json(testing::ReadFileOrEmpty(dir + "/tokenizer.json"));
  upload.set_tokenizer_config_json(
      testing::ReadFileOrEmpty(dir + "/tokenizer_config.json"));
  v1::Tokenizer registered;
  {
    grpc::ClientContext context;
    grpc::Status s = stub_->RegisterTokenizer(&context, upload, &registered);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_EQ(registered.name(), "uploaded-llama3");
  EXPECT_EQ(registered.fingerprint(), vocab().fingerprint());
  EXPECT_EQ(registered.vocab_size(), vocab().size());
  EXPECT_EQ(std::vector<int32_t>(registered.eos_token_ids().begin(),
                                 registered.eos_token_ids().end()),
            vocab().eos_ids());
  v1::ListTokenizersResponse list;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(
        stub_->ListTokenizers(&context, v1::ListTokenizersRequest(), &list)
            .ok());
  }
  bool listed = false;
  for (const v1::Tokenizer& t : list.tokenizers()) {
    listed |= t.name() == "uploaded-llama3";
  }
  EXPECT_TRUE(listed);

  // Decode under it, by name and by fingerprint, against the engine.
  const v1::Constraint constraint = Schema(kPersonSchema);
  Stream stream(stub_.get());
  stream.Open(1, constraint, {}, false, "uploaded-llama3");
  stream.Open(2, constraint, {}, false, registered.fingerprint());
  for (uint64_t id : {1, 2}) {
    ASSERT_EQ(stream.WaitStatus(id).state(), v1::GRAMMAR_STATE_READY) << id;
  }
  const grammar::CompiledGrammar compiled = Reference(constraint);
  service::Sequence reference(1, compiled, {});
  std::string rest = R"({"name": "Ada", "age": 36})";
  const int32_t n = vocab().size();
  std::vector<int32_t> next;
  for (int step = 0; !rest.empty(); ++step) {
    v1::Step request;
    request.set_step_id(static_cast<uint64_t>(step));
    for (uint64_t id : {1, 2}) {
      v1::SequenceStep* s = request.add_sequences();
      s->set_sequence_id(id);
      for (int32_t t : next) s->add_accepted_tokens(t);
    }
    ASSERT_TRUE(reference.Advance(0, next).ok());
    v1::StepResult result = stream.Step(request);
    std::vector<uint32_t> local(static_cast<size_t>(reference.mask_words()));
    reference.FillRows({}, local.data());
    for (int i = 0; i < 2; ++i) {
      ASSERT_FALSE(result.sequences(i).has_error())
          << result.sequences(i).error().message();
      ASSERT_EQ(DecodeRow(result, i, 0, n), local) << "step " << step;
    }
    const int32_t token =
        grammar::LongestAllowedToken(compiled, local.data(), rest);
    ASSERT_GE(token, 0) << rest;
    rest.erase(0, vocab().bytes(token).size());
    next = {token};
  }
  EXPECT_TRUE(stream.Finish().ok());
}

TEST_F(DecodeTest, CompileReportsCacheHitsAndErrors) {
  v1::CompileRequest request;
  request.set_tokenizer("llama3");
  // Unique to this test, so the first compile is a miss.
  *request.mutable_constraint() =
      Schema(R"({"type": "array", "items": {"enum": ["compile-test", 1, 2]}})");
  request.set_wait(true);
  v1::CompileResponse first, second;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Compile(&context, request, &first).ok());
  }
  EXPECT_EQ(first.state(), v1::GRAMMAR_STATE_READY);
  EXPECT_FALSE(first.cache_hit());
  EXPECT_GT(first.num_states(), 0);
  // Same schema, other key order and spacing: a hit.
  *request.mutable_constraint() =
      Schema(R"({"items":{"enum":["compile-test",1,2]},"type":"array"})");
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Compile(&context, request, &second).ok());
  }
  EXPECT_TRUE(second.cache_hit());
  EXPECT_EQ(second.grammar_id(), first.grammar_id());

  // A sequence may open by grammar id.
  Stream stream(stub_.get());
  v1::DecodeRequest open;
  open.mutable_open()->set_sequence_id(7);
  open.mutable_open()->set_grammar_id(first.grammar_id());
  ASSERT_TRUE(stream.rw()->Write(open));
  EXPECT_EQ(stream.WaitStatus(7).state(), v1::GRAMMAR_STATE_READY);
  open.mutable_open()->set_sequence_id(8);
  open.mutable_open()->set_grammar_id("feedface");
  ASSERT_TRUE(stream.rw()->Write(open));
  EXPECT_EQ(stream.WaitStatus(8).error().code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(stream.Finish().ok());

  grpc::ClientContext context;
  request.set_tokenizer("nope");
  grpc::Status status = stub_->Compile(&context, request, &second);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(status.error_message().find("nope"), std::string::npos);
  grpc::ClientContext context2;
  request.set_tokenizer("llama3");
  request.mutable_constraint()->Clear();
  status = stub_->Compile(&context2, request, &second);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  auto metrics = testing::HttpGet(daemon_->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_NE(metrics->find("grammard_cache_hits_total"), std::string::npos);
  EXPECT_EQ(metrics->find("grammard_cache_hits_total 0\n"), std::string::npos);
}

TEST_F(DecodeTest, HealthIsServing) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(health->Check(&context, request, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(DecodeTest, LiveMetricsPassPromtool) {
  if (access("/usr/bin/promtool", X_OK) != 0) {
    GTEST_SKIP() << "promtool is not installed (Debian package prometheus)";
  }
  auto metrics = testing::HttpGet(daemon_->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  for (const char* name :
       {"grammard_compile_duration_seconds_bucket",
        "grammard_step_duration_seconds", "grammard_mask_fill_duration_seconds",
        "grammard_active_streams", "grammard_compile_queue_depth",
        "grammard_build_info"}) {
    EXPECT_NE(metrics->find(name), std::string::npos) << name;
  }
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/metrics.txt";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fwrite(metrics->data(), 1, metrics->size(), f);
  std::fclose(f);
  const std::string command =
      "/usr/bin/promtool check metrics < " + path + " 2>&1";
  FILE* p = popen(command.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << out;
}

TEST_F(DecodeTest, RankSyncAgreesAcrossRanksAndFailsMissingRanksInTime) {
  auto sync = [&](const std::string& group, int rank, int world,
                  std::vector<uint64_t> ready, std::vector<uint64_t> failed,
                  v1::SyncGroupResponse* out) {
    v1::SyncGroupRequest request;
    request.set_group_id(group);
    request.set_round(1);
    request.set_rank(rank);
    request.set_world_size(world);
    for (uint64_t id : ready) request.add_ready(id);
    for (uint64_t id : failed) request.add_failed(id);
    request.set_timeout_ms(500);
    grpc::ClientContext context;
    return stub_->SyncGroup(&context, request, out);
  };
  // Group "a": rank 2 reports a compile failure for sequence 3. Group "b"
  // runs at the same time; its rank 3 never reports.
  std::vector<std::thread> threads;
  std::vector<v1::SyncGroupResponse> a(4), b(3);
  std::vector<grpc::Status> a_status(4), b_status(3);
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      a_status[r] = sync(
          "a", r, 4, {1, 2, 3},
          r == 2 ? std::vector<uint64_t>{3} : std::vector<uint64_t>{}, &a[r]);
    });
  }
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back(
        [&, r] { b_status[r] = sync("b", r, 4, {1}, {}, &b[r]); });
  }
  for (auto& t : threads) t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(a_status[r].ok()) << a_status[r].error_message();
    EXPECT_EQ(std::vector<uint64_t>(a[r].ready().begin(), a[r].ready().end()),
              std::vector<uint64_t>({1, 2}));
    EXPECT_EQ(std::vector<uint64_t>(a[r].failed().begin(), a[r].failed().end()),
              std::vector<uint64_t>({3}));
  }
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(b_status[r].error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    EXPECT_NE(b_status[r].error_message().find("rank(s) 3"), std::string::npos)
        << b_status[r].error_message();
  }
}

// Starts a daemon of a test's own with extra flags; leaves `daemon` null
// (the test skipped or failed) when it cannot.
void StartOwnDaemon(std::vector<std::string> flags,
                    std::unique_ptr<Daemon>* daemon,
                    std::unique_ptr<v1::Grammard::Stub>* stub) {
  if (!testing::TokenizerDir("llama3")) {
    GTEST_SKIP() << testing::MissingDataMessage("the llama3 tokenizer");
  }
  testing::DaemonOptions options;
  options.flags = std::move(flags);
  auto started = Daemon::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  *daemon = *std::move(started);
  *stub = v1::Grammard::NewStub(grpc::CreateChannel(
      (*daemon)->target(), grpc::InsecureChannelCredentials()));
}

// A daemon of its own: a compile deadline of 1 ms, for a schema that takes
// about 20 ms to compile (an email counted to 100,000,000 characters; a
// plain string counted to 20,000 now takes about 1.4, too near the deadline
// to fail it every time), and SIGTERM at the end.
TEST(DaemonTest, CompileDeadlineIsReportedAndNotCachedAndSigtermStops) {
  std::unique_ptr<Daemon> daemon;
  std::unique_ptr<v1::Grammard::Stub> stub;
  // A grace well past a normal stop (well under a second): on a starved
  // machine (five busy loops on two cores) a stop took 5 to 6 s now and
  // then, past the default 5 s, and the watchdog ended it with 1.
  StartOwnDaemon({"--compile_timeout_ms=1", "--shutdown_grace_ms=15000"},
                 &daemon, &stub);
  if (daemon == nullptr) return;
  v1::CompileRequest request;
  request.set_tokenizer("llama3");
  *request.mutable_constraint() = Schema(
      R"({"type": "string", "format": "email", "maxLength": 100000000})");
  request.set_wait(true);
  for (int attempt = 0; attempt < 2; ++attempt) {
    grpc::ClientContext context;
    v1::CompileResponse response;
    ASSERT_TRUE(stub->Compile(&context, request, &response).ok());
    EXPECT_EQ(response.state(), v1::GRAMMAR_STATE_FAILED);
    EXPECT_EQ(response.error().code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    EXPECT_NE(response.error().message().find("deadline"), std::string::npos)
        << response.error().message();
    EXPECT_FALSE(response.cache_hit());  // tried again, not a cached failure
  }
  // SIGTERM cancels an idle stream (a stream inside a step finishes it
  // first) and the daemon exits 0.
  grpc::ClientContext context;
  auto rw = stub->Decode(&context);
  v1::DecodeRequest open;
  open.mutable_open()->set_sequence_id(1);
  open.mutable_open()->set_tokenizer("llama3");
  open.mutable_open()->mutable_constraint()->set_regex("a+");
  ASSERT_TRUE(rw->Write(open));
  v1::DecodeResponse response;
  ASSERT_TRUE(rw->Read(&response));
  // On failure, the log says which phase of the stop overran.
  EXPECT_EQ(daemon->Terminate(), 0)
      << "the daemon's log:\n"
      << testing::ReadFileOrEmpty(daemon->log_path());
  while (rw->Read(&response)) {
  }
  const grpc::StatusCode code = rw->Finish().error_code();
  EXPECT_TRUE(code == grpc::StatusCode::CANCELLED ||
              code == grpc::StatusCode::UNAVAILABLE)
      << code;
}

// The daemon's grammard_active_sequences gauge; -1 if it cannot be read,
// so that a gauge gone from /metrics never reads as "all reclaimed".
double ActiveSequences(const Daemon& daemon) {
  int samples = 0;
  const double value =
      testing::Metric(daemon, "grammard_active_sequences", &samples);
  return samples == 1 ? value : -1;
}

// Whether the gauge drops to 0 before `limit`.
bool ReclaimedWithin(const Daemon& daemon, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (ActiveSequences(daemon) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// A client process killed outright (no close, no stream end): the daemon
// frees its sequences as soon as the connection is gone.
TEST(DaemonTest, AKilledClientsSequencesAreReclaimed) {
  std::unique_ptr<Daemon> daemon;
  std::unique_ptr<v1::Grammard::Stub> stub;
  StartOwnDaemon({"--stream_idle_timeout_s=60"}, &daemon, &stub);
  if (daemon == nullptr) return;
  const std::string client =
      testing::RunfilePath("tests/integration/vanishing_client");
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    execl(client.c_str(), client.c_str(), daemon->target().c_str(), "32",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  char line[16] = {};
  ASSERT_GT(read(out[0], line, sizeof(line) - 1), 0) << "client died early";
  close(out[0]);
  EXPECT_STREQ(line, "ready\n");
  EXPECT_EQ(ActiveSequences(*daemon), 32);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  EXPECT_TRUE(ReclaimedWithin(*daemon, std::chrono::seconds(10)))
      << ActiveSequences(*daemon) << " sequences still open";
}

// A client that stays connected but silent past the idle limit: its stream
// is cancelled and its sequences freed.
TEST(DaemonTest, IdleStreamsAreCancelled) {
  std::unique_ptr<Daemon> daemon;
  std::unique_ptr<v1::Grammard::Stub> stub;
  StartOwnDaemon({"--stream_idle_timeout_s=1"}, &daemon, &stub);
  if (daemon == nullptr) return;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  auto rw = stub->Decode(&context);
  v1::DecodeRequest open;
  open.mutable_open()->set_sequence_id(1);
  open.mutable_open()->set_tokenizer("llama3");
  open.mutable_open()->mutable_constraint()->set_regex("a+");
  ASSERT_TRUE(rw->Write(open));
  const auto start = std::chrono::steady_clock::now();
  v1::DecodeResponse response;
  while (rw->Read(&response)) {
  }
  // Cut off with a status that says why.
  const grpc::Status status = rw->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(status.error_message().find("--stream_idle_timeout_s"),
            std::string::npos)
      << status.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(ReclaimedWithin(*daemon, std::chrono::seconds(5)));
}

// The token tables a sequence's masks build in a grammar are charged to the
// cache when the sequence closes: a grammar no request hits again would
// otherwise hold them uncharged, and the cache's budget would not bound the
// daemon's memory (a soak with a 64 MB cache grew to 900 MB).
TEST(DaemonTest, WhatASequenceBuiltIsChargedToTheCacheWhenItCloses) {
  std::unique_ptr<Daemon> daemon;
  std::unique_ptr<v1::Grammard::Stub> stub;
  // Nothing classified but by the sequence's own masks.
  StartOwnDaemon({"--classify_in_background=false"}, &daemon, &stub);
  if (daemon == nullptr) return;
  Stream stream(stub.get());
  stream.Open(1, Schema(R"({"type": "object", "properties": {
      "a": {"type": "string"}, "b": {"type": "array",
      "items": {"type": "integer"}}}, "required": ["a"]})"));
  ASSERT_EQ(stream.WaitStatus(1).state(), v1::GRAMMAR_STATE_READY);
  const double compiled = testing::Metric(*daemon, "grammard_cache_bytes");
  ASSERT_GT(compiled, 0);
  v1::Step step;
  step.add_sequences()->set_sequence_id(1);
  ASSERT_EQ(stream.Step(step).sequences_size(), 1);  // builds tables
  EXPECT_EQ(testing::Metric(*daemon, "grammard_cache_bytes"), compiled);
  stream.Close(1);
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (testing::Metric(*daemon, "grammard_cache_bytes") == compiled &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(testing::Metric(*daemon, "grammard_cache_bytes"), compiled);
  EXPECT_TRUE(stream.Finish().ok());
}

}  // namespace
}  // namespace grammard
