#include "service/decode_session.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grammar/matcher.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/mask_rows.h"
#include "service/constraint.h"
#include "service/metrics/metrics.h"

namespace grammard::service {
namespace {

namespace v1 = grammard::v1;
using Ids = std::vector<int32_t>;
using Row = std::vector<uint32_t>;

// The test vocabulary: ids 0-93 the printable ASCII characters '!'..'~',
// 94 " ", then kWords, then <eos>.
constexpr const char* kWords[] = {"ab", "yes", "no", "maybe"};
constexpr int32_t kSpace = 94;
constexpr int32_t kYes = 96;
constexpr int32_t kEos = 99;
constexpr int32_t kVocabSize = 100;
constexpr size_t kRowWords = (kVocabSize + 31) / 32;

// The vocabulary as a byte-level BPE tokenizer.json, as a client uploads.
std::string TokenizerJson() {
  nlohmann::json vocab = nlohmann::json::object();
  int32_t id = 0;
  for (char c = '!'; c <= '~'; ++c) vocab[std::string(1, c)] = id++;
  vocab["\xC4\xA0"] = id++;  // " " in the byte-level alphabet
  for (const char* word : kWords) vocab[word] = id++;
  nlohmann::json added = nlohmann::json::array();
  added.push_back({{"id", id}, {"content", "<eos>"}, {"special", true}});
  nlohmann::json model = {{"type", "BPE"}, {"vocab", vocab}};
  model["merges"] = nlohmann::json::array();
  nlohmann::json tokenizer = {{"model", model}, {"added_tokens", added}};
  tokenizer["decoder"] = {{"type", "ByteLevel"}};
  return tokenizer.dump();
}

// One token per character.
Ids Tokens(const std::string& text) {
  Ids ids;
  for (char c : text) ids.push_back(c == ' ' ? kSpace : c - '!');
  return ids;
}

Ids Concat(Ids a, const Ids& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool Allows(const Row& row, int32_t id) {
  return (row[static_cast<size_t>(id) / 32] >> (id % 32)) & 1;
}

Row AllAllowed() {
  Row row(kRowWords, ~uint32_t{0});
  row.back() = (uint32_t{1} << (kVocabSize % 32)) - 1;
  return row;
}

v1::Constraint Regex(const std::string& regex) {
  v1::Constraint c;
  c.set_regex(regex);
  return c;
}

v1::Constraint Schema(const std::string& schema) {
  v1::Constraint c;
  c.set_json_schema(schema);
  return c;
}

v1::Constraint Choice(const std::vector<std::string>& choices) {
  v1::Constraint c;
  for (const std::string& choice : choices) {
    c.mutable_choice()->add_choices(choice);
  }
  return c;
}

constexpr char kEmail[] = "[a-c]+@(x|y)\\.com";
constexpr char kCounter[] = R"({"type": "object",
    "properties": {"n": {"type": "integer"}}, "required": ["n"],
    "additionalProperties": false})";

void AddSequence(v1::Step* step, uint64_t id, const Ids& accepted = {},
                 const Ids& drafts = {}, int32_t rollback = 0) {
  v1::SequenceStep* s = step->add_sequences();
  s->set_sequence_id(id);
  s->set_rollback(rollback);
  for (int32_t t : accepted) s->add_accepted_tokens(t);
  for (int32_t t : drafts) s->add_draft_tokens(t);
}

// The rows of each sequence of a step, decoded (references resolved).
std::vector<std::vector<Row>> DecodeRows(const v1::StepResult& result) {
  std::vector<std::vector<Row>> rows(
      static_cast<size_t>(result.sequences_size()));
  auto decoded =
      proto::DecodeStepRows(result, [](size_t) { return kVocabSize; });
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  if (!decoded.ok()) return rows;
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int j = 0; j < result.sequences(static_cast<int>(i)).rows_size();
         ++j) {
      auto begin =
          decoded->words.begin() +
          static_cast<std::ptrdiff_t>(decoded->offsets[i] +
                                      static_cast<size_t>(j) * kRowWords);
      rows[i].emplace_back(begin,
                           begin + static_cast<std::ptrdiff_t>(kRowWords));
    }
  }
  return rows;
}

// Records what a session writes; statuses come from its notifier thread.
class RecordingWriter final : public ReplyWriter {
 public:
  bool Write(const v1::DecodeResponse& reply) override {
    absl::MutexLock lock(&mu_);
    if (reply.has_status()) {
      statuses_[reply.status().sequence_id()].push_back(reply.status());
    } else {
      steps_.push_back(reply.step());
    }
    return true;
  }
  void Abort(const absl::Status& status) override {
    ADD_FAILURE() << "aborted: " << status;
  }

  // The oldest status of sequence `id` not taken yet; waits for it up to
  // 30 s (an empty status after that).
  v1::SequenceStatus TakeStatus(uint64_t id) {
    absl::MutexLock lock(&mu_);
    std::vector<v1::SequenceStatus>& mine = statuses_[id];
    auto arrived = [&mine] { return !mine.empty(); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&arrived), absl::Seconds(30))) {
      ADD_FAILURE() << "no status for sequence " << id;
      return {};
    }
    v1::SequenceStatus status = mine.front();
    mine.erase(mine.begin());
    return status;
  }

  std::vector<v1::StepResult> steps() {
    absl::MutexLock lock(&mu_);
    return steps_;
  }

 private:
  absl::Mutex mu_;
  std::map<uint64_t, std::vector<v1::SequenceStatus>> statuses_
      ABSL_GUARDED_BY(mu_);
  std::vector<v1::StepResult> steps_ ABSL_GUARDED_BY(mu_);
};

class DecodeSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grammar::VocabularyOptions options;
    options.name = "tiny";
    options.eos_ids = {kEos};
    auto tokenizer = tokenizers_.Register(TokenizerJson(), "", options);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *tokenizer;
    ASSERT_EQ(tokenizer_->vocab->size(), kVocabSize);
    NewSession({});
  }

  void NewSession(const DecodeOptions& options) {
    session_.reset();
    session_ = std::make_unique<DecodeSession>(
        options,
        DecodeResources{&tokenizers_, &compiles_, &metrics_, &sequence_memory_,
                        &fill_},
        "ipv4:127.0.0.1:1", &writer_);
  }

  v1::OpenSequence OpenRequest(uint64_t id, const v1::Constraint& c) {
    v1::OpenSequence open;
    open.set_sequence_id(id);
    open.set_tokenizer("tiny");
    *open.mutable_constraint() = c;
    return open;
  }

  // Opens `id` and waits for its grammar.
  bool OpenReady(uint64_t id, const v1::Constraint& c) {
    session_->Open(OpenRequest(id, c));
    const v1::SequenceStatus status = writer_.TakeStatus(id);
    EXPECT_EQ(status.state(), v1::GRAMMAR_STATE_READY)
        << id << ": " << status.error().message();
    return status.state() == v1::GRAMMAR_STATE_READY;
  }

  // Runs a step; its result is what the session wrote last.
  v1::StepResult Step(const v1::Step& step) {
    v1::DecodeResponse reply;
    EXPECT_TRUE(session_->Step(step, &reply));
    const std::vector<v1::StepResult> written = writer_.steps();
    EXPECT_FALSE(written.empty());
    if (!written.empty()) {
      EXPECT_EQ(written.back().SerializeAsString(),
                reply.step().SerializeAsString());
    }
    return reply.step();
  }

  // The mask after `tokens`, from the grammar library's own matcher over
  // the same constraint.
  Row Reference(const v1::Constraint& c, const Ids& tokens) {
    const std::string key = c.SerializeAsString();
    auto compiled = references_.find(key);
    if (compiled == references_.end()) {
      auto built = CompileConstraint(*tokenizer_->compiler, c, {});
      EXPECT_TRUE(built.ok()) << built.status();
      if (!built.ok()) return {};
      compiled = references_.emplace(key, built->grammar).first;
    }
    grammar::GrammarMatcher matcher(compiled->second);
    for (int32_t t : tokens) {
      const absl::Status accepted = matcher.AcceptToken(t);
      EXPECT_TRUE(accepted.ok()) << accepted;
    }
    Row row(kRowWords);
    matcher.FillNextTokenMask(row.data());
    return row;
  }

  metrics::Registry metrics_registry_;
  ServiceMetrics metrics_{&metrics_registry_};
  GrammarCache cache_{size_t{1} << 30, &metrics_};
  CompilePool compiles_{CompilePool::Options{}, &cache_, &metrics_};
  TokenizerRegistry tokenizers_;
  std::shared_ptr<const TokenizerEntry> tokenizer_;
  ByteBudget sequence_memory_{int64_t{1} << 30};
  FillPool fill_{2};
  RecordingWriter writer_;
  std::map<std::string, grammar::CompiledGrammar> references_;
  std::unique_ptr<DecodeSession> session_;
};

// A regex, a JSON schema (twice: the second's rows go out as references
// to the first's) and a choice, stepped together one token at a time to
// the end of their texts: every row is the matcher's own mask.
TEST_F(DecodeSessionTest, MixedConstraintsInOneStepGiveTheMatchersRows) {
  struct Driven {
    uint64_t id;
    v1::Constraint constraint;
    Ids tokens;  // the text, then end-of-sequence
    size_t reported = 0;
    bool done = false;
  };
  std::vector<Driven> seqs = {
      {1, Regex(kEmail), Concat(Tokens("abc@y.com"), {kEos})},
      {2, Schema(kCounter), Concat(Tokens(R"({"n": 12})"), {kEos})},
      {3, Schema(kCounter), Concat(Tokens(R"({"n": 12})"), {kEos})},
      {4, Choice({"yes", "no", "maybe"}), {kYes, kEos}},
  };
  for (const Driven& d : seqs) ASSERT_TRUE(OpenReady(d.id, d.constraint));

  int references = 0;
  for (uint64_t step_id = 0; step_id < 20; ++step_id) {
    v1::Step step;
    step.set_step_id(step_id);
    std::vector<Driven*> live;
    for (Driven& d : seqs) {
      if (d.done) continue;
      Ids accepted;
      if (step_id > 0) accepted.push_back(d.tokens[d.reported++]);
      AddSequence(&step, d.id, accepted);
      live.push_back(&d);
    }
    if (live.empty()) break;
    const v1::StepResult result = Step(step);
    EXPECT_EQ(result.step_id(), step_id);
    ASSERT_FALSE(result.has_error()) << result.error().message();
    ASSERT_EQ(result.sequences_size(), static_cast<int>(live.size()));
    const std::vector<std::vector<Row>> rows = DecodeRows(result);
    for (size_t i = 0; i < live.size(); ++i) {
      Driven& d = *live[i];
      const v1::SequenceResult& r = result.sequences(static_cast<int>(i));
      SCOPED_TRACE(::testing::Message()
                   << "sequence " << d.id << ", step " << step_id);
      ASSERT_EQ(r.sequence_id(), d.id);
      ASSERT_FALSE(r.has_error()) << r.error().message();
      ASSERT_EQ(rows[i].size(), 1u);
      if (r.rows(0).has_same_as()) ++references;
      const Ids held(
          d.tokens.begin(),
          d.tokens.begin() + static_cast<std::ptrdiff_t>(d.reported));
      EXPECT_EQ(rows[i][0], Reference(d.constraint, held));
      EXPECT_EQ(r.terminated(), d.reported == d.tokens.size());
      if (r.terminated()) {
        d.done = true;
        continue;
      }
      EXPECT_EQ(r.can_terminate(), d.reported + 1 == d.tokens.size());
      EXPECT_TRUE(Allows(rows[i][0], d.tokens[d.reported]));
    }
  }
  for (const Driven& d : seqs) EXPECT_TRUE(d.done) << d.id;
  EXPECT_GT(references, 0);
}

// A step's rows with drafts are the masks after each prefix of the drafts
// (all allowed past a draft the grammar refuses), and rollback undoes
// accepted tokens.
TEST_F(DecodeSessionTest, DraftRowsFollowEachPrefixAndRollbackUndoes) {
  const v1::Constraint email = Regex(kEmail);
  ASSERT_TRUE(OpenReady(7, email));
  struct Case {
    int32_t rollback;
    Ids accepted;
    Ids drafts;
    Ids held;                 // after the step
    int first_refused_draft;  // -1: none
  };
  const Case cases[] = {
      {0, {}, Tokens("ab@"), {}, -1},
      {0, Tokens("ab@"), Tokens("y."), Tokens("ab@"), -1},
      {2, Tokens("c"), Tokens("@zx"), Tokens("ac"), 1},
      {1, Tokens("b@x.com"), {}, Tokens("ab@x.com"), -1},
  };
  uint64_t step_id = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "step " << step_id);
    v1::Step step;
    step.set_step_id(step_id++);
    AddSequence(&step, 7, c.accepted, c.drafts, c.rollback);
    const v1::StepResult result = Step(step);
    ASSERT_EQ(result.sequences_size(), 1);
    ASSERT_FALSE(result.sequences(0).has_error())
        << result.sequences(0).error().message();
    const std::vector<Row> rows = DecodeRows(result)[0];
    ASSERT_EQ(rows.size(), 1 + c.drafts.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const bool past_refused = c.first_refused_draft >= 0 &&
                                i > static_cast<size_t>(c.first_refused_draft);
      const Ids prefix(c.drafts.begin(),
                       c.drafts.begin() + static_cast<std::ptrdiff_t>(i));
      EXPECT_EQ(rows[i], past_refused
                             ? AllAllowed()
                             : Reference(email, Concat(c.held, prefix)))
          << "row " << i;
    }
  }
  v1::Step end;
  end.set_step_id(step_id);
  AddSequence(&end, 7, {kEos});
  EXPECT_TRUE(Step(end).sequences(0).terminated());
}

// A token the mask forbids fails its sequence: that step's result says
// which token, every later step says the sequence has failed, and closing
// it frees the id for a fresh sequence.
TEST_F(DecodeSessionTest, ARefusedTokenFailsItsSequenceUntilClosed) {
  const v1::Constraint email = Regex(kEmail);
  ASSERT_TRUE(OpenReady(1, email));
  const int32_t at = Tokens("@")[0];
  ASSERT_FALSE(Allows(Reference(email, {}), at));

  v1::Step refused;
  refused.set_step_id(1);
  AddSequence(&refused, 1, {at});
  const v1::StepResult first = Step(refused);
  ASSERT_EQ(first.sequences_size(), 1);
  const v1::SequenceResult& r = first.sequences(0);
  EXPECT_EQ(r.sequence_id(), 1u);
  EXPECT_EQ(r.rows_size(), 0);
  EXPECT_EQ(r.error().code(),
            static_cast<int32_t>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(r.error().message().find(absl::StrCat(
                "sequence 1: accepted token 0 (id ", at, ") refused")),
            std::string::npos)
      << r.error().message();

  v1::Step again;
  again.set_step_id(2);
  AddSequence(&again, 1);
  const v1::SequenceResult later = Step(again).sequences(0);
  EXPECT_EQ(later.rows_size(), 0);
  EXPECT_EQ(later.error().code(),
            static_cast<int32_t>(absl::StatusCode::kFailedPrecondition));
  EXPECT_NE(later.error().message().find("the sequence has failed, close it"),
            std::string::npos)
      << later.error().message();

  v1::CloseSequence close;
  close.set_sequence_id(1);
  session_->Close(close);
  ASSERT_TRUE(OpenReady(1, email));
  const v1::StepResult fresh = Step(again);
  ASSERT_FALSE(fresh.sequences(0).has_error())
      << fresh.sequences(0).error().message();
  EXPECT_EQ(DecodeRows(fresh)[0][0], Reference(email, {}));
}

// In one step, a refused token, an id not open and an id listed twice
// each fail only their own entry: the neighbours' rows are still the
// matcher's, in this step and the next.
TEST_F(DecodeSessionTest, ASequenceFailsAloneAndItsNeighboursKeepTheirRows) {
  const v1::Constraint email = Regex(kEmail);
  const v1::Constraint counter = Schema(kCounter);
  const v1::Constraint answer = Choice({"yes", "no", "maybe"});
  ASSERT_TRUE(OpenReady(1, email));
  ASSERT_TRUE(OpenReady(2, counter));
  ASSERT_TRUE(OpenReady(3, answer));

  v1::Step step;
  step.set_step_id(5);
  AddSequence(&step, 1, Tokens("a"));
  AddSequence(&step, 2, Tokens("x"));  // a JSON object starts with '{'
  AddSequence(&step, 9);
  AddSequence(&step, 3, {kYes});
  AddSequence(&step, 3);
  const v1::StepResult result = Step(step);
  ASSERT_FALSE(result.has_error()) << result.error().message();
  ASSERT_EQ(result.sequences_size(), 5);
  const std::vector<std::vector<Row>> rows = DecodeRows(result);
  struct Expected {
    uint64_t id;
    absl::StatusCode code;
    std::string fragment;
  };
  const Expected expected[] = {
      {1, absl::StatusCode::kOk, ""},
      {2, absl::StatusCode::kInvalidArgument, "sequence 2: accepted token 0"},
      {9, absl::StatusCode::kNotFound, "sequence 9 is not open on this stream"},
      {3, absl::StatusCode::kOk, ""},
      {3, absl::StatusCode::kInvalidArgument,
       "sequence 3 appears twice in step 5"},
  };
  for (int i = 0; i < 5; ++i) {
    const v1::SequenceResult& r = result.sequences(i);
    const Expected& e = expected[i];
    SCOPED_TRACE(::testing::Message() << "entry " << i);
    EXPECT_EQ(r.sequence_id(), e.id);
    EXPECT_EQ(r.error().code(), static_cast<int32_t>(e.code));
    EXPECT_NE(r.error().message().find(e.fragment), std::string::npos)
        << r.error().message();
    EXPECT_EQ(r.rows_size(), e.code == absl::StatusCode::kOk ? 1 : 0);
  }
  EXPECT_EQ(rows[0][0], Reference(email, Tokens("a")));
  EXPECT_EQ(rows[3][0], Reference(answer, {kYes}));
  EXPECT_TRUE(result.sequences(3).can_terminate());

  v1::Step next;
  next.set_step_id(6);
  AddSequence(&next, 2);
  AddSequence(&next, 1, Tokens("b"));
  AddSequence(&next, 3, {kEos});
  const v1::StepResult after = Step(next);
  ASSERT_EQ(after.sequences_size(), 3);
  EXPECT_EQ(after.sequences(0).error().code(),
            static_cast<int32_t>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(DecodeRows(after)[1][0], Reference(email, Tokens("ab")));
  EXPECT_TRUE(after.sequences(2).terminated());
}

// A step asking for more rows than allowed is refused as a whole, and
// advances nothing; a sequence asking for too many drafts fails alone.
TEST_F(DecodeSessionTest, LimitsRefuseTheStepOrTheSequenceNamingTheFlag) {
  DecodeOptions options;
  options.max_step_rows = 4;
  options.max_draft_tokens = 2;
  NewSession(options);
  const v1::Constraint email = Regex(kEmail);
  ASSERT_TRUE(OpenReady(1, email));
  ASSERT_TRUE(OpenReady(2, email));

  v1::Step rows;
  rows.set_step_id(1);
  AddSequence(&rows, 1, Tokens("a"), Tokens("bc"));
  AddSequence(&rows, 2, Tokens("a"), Tokens("b"));
  const v1::StepResult refused = Step(rows);
  EXPECT_EQ(refused.step_id(), 1u);
  EXPECT_EQ(refused.sequences_size(), 0);
  EXPECT_EQ(refused.error().code(),
            static_cast<int32_t>(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(refused.error().message().find(
                "step 1 asks for 5 mask rows; a step has at most 4 "
                "(--max_step_rows)"),
            std::string::npos)
      << refused.error().message();

  v1::Step drafts;
  drafts.set_step_id(2);
  AddSequence(&drafts, 1, Tokens("a"), Tokens("bca"));
  AddSequence(&drafts, 2, Tokens("a"));
  const v1::StepResult result = Step(drafts);
  ASSERT_EQ(result.sequences_size(), 2);
  EXPECT_EQ(result.sequences(0).error().code(),
            static_cast<int32_t>(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(result.sequences(0).error().message().find("(--max_draft_tokens)"),
            std::string::npos)
      << result.sequences(0).error().message();
  // Sequence 2 starts from "a": the refused step did not advance it.
  ASSERT_FALSE(result.sequences(1).has_error())
      << result.sequences(1).error().message();
  EXPECT_EQ(DecodeRows(result)[1][0], Reference(email, Tokens("a")));
}

// Opens and closes the session cannot honour are answered with a status
// naming the sequence; a step then reports the failed open.
TEST_F(DecodeSessionTest, RefusedOpensAndClosesAnswerWithStatuses) {
  v1::OpenSequence unknown = OpenRequest(1, Regex(kEmail));
  unknown.set_tokenizer("nosuch");
  session_->Open(unknown);
  const v1::SequenceStatus refused = writer_.TakeStatus(1);
  EXPECT_EQ(refused.state(), v1::GRAMMAR_STATE_FAILED);
  EXPECT_EQ(refused.error().code(),
            static_cast<int32_t>(absl::StatusCode::kNotFound));
  EXPECT_NE(refused.error().message().find("sequence 1: "), std::string::npos)
      << refused.error().message();

  session_->Open(OpenRequest(1, Regex(kEmail)));
  const v1::SequenceStatus twice = writer_.TakeStatus(1);
  EXPECT_EQ(twice.error().code(),
            static_cast<int32_t>(absl::StatusCode::kAlreadyExists));

  v1::CloseSequence close;
  close.set_sequence_id(8);
  session_->Close(close);
  const v1::SequenceStatus not_open = writer_.TakeStatus(8);
  EXPECT_EQ(not_open.error().code(),
            static_cast<int32_t>(absl::StatusCode::kNotFound));
  EXPECT_NE(
      not_open.error().message().find("sequence 8 is not open on this stream"),
      std::string::npos);

  v1::Step step;
  AddSequence(&step, 1);
  const v1::SequenceResult r = Step(step).sequences(0);
  EXPECT_EQ(r.error().code(), refused.error().code());
  EXPECT_EQ(r.error().message(), refused.error().message());
}

}  // namespace
}  // namespace grammard::service
