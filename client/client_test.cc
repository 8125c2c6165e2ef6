// The client against FakeGrammard: rows in batch order, drafts, rollback,
// per-sequence errors, deadlines, and replay across restarts of the server
// (rows are checked against the fake's mask of the full token history, so a
// lost or repeated token during a replay would show).
#include "client/client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "client/testing/fake_grammard.h"

namespace grammard::client {
namespace {

using std::chrono::milliseconds;
using testing::FakeGrammard;

constexpr int32_t kWords = (FakeGrammard::kVocabSize + 31) / 32;

grammard::v1::Constraint Regex(const std::string& regex) {
  grammard::v1::Constraint c;
  c.set_regex(regex);
  return c;
}

ClientOptions Options(const FakeGrammard& fake) {
  ClientOptions o;
  o.target = fake.target();
  o.tokenizer = FakeGrammard::kTokenizer;
  o.connect_timeout = milliseconds(20000);
  o.step_timeout = milliseconds(20000);
  o.outage_timeout = milliseconds(30000);
  o.backoff_initial = milliseconds(10);
  o.backoff_max = milliseconds(200);
  return o;
}

std::unique_ptr<Client> MustConnect(const ClientOptions& options) {
  auto client = Client::Connect(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

std::vector<uint32_t> Row(const uint32_t* words) {
  return std::vector<uint32_t>(words, words + kWords);
}

// A token the row allows, chosen by `rng`, EOS only when nothing else is.
int32_t Pick(const uint32_t* row, std::mt19937* rng) {
  std::vector<int32_t> allowed;
  for (int32_t t = 0; t < FakeGrammard::kEos; ++t) {
    if ((row[t / 32] >> (t % 32)) & 1) allowed.push_back(t);
  }
  if (allowed.empty()) return FakeGrammard::kEos;
  return allowed[(*rng)() % allowed.size()];
}

// Sequences driven by an engine loop; `history` is what the server must
// have accepted, so every row must equal FakeGrammard::Mask(history + the
// drafts before it).
struct Driven {
  uint64_t id;
  std::vector<int32_t> history;
  std::vector<int32_t> next;  // to report at the next step
};

class Engine {
 public:
  Engine(Client* client, std::vector<uint64_t> ids, uint32_t seed)
      : client_(client), rng_(seed) {
    for (uint64_t id : ids) seqs_.push_back({id, {}, {}});
  }

  void OpenAll() {
    std::vector<uint64_t> ids;
    for (const Driven& d : seqs_) {
      ASSERT_TRUE(client_->Open(d.id, Regex("x")).ok());
      ids.push_back(d.id);
    }
    ASSERT_TRUE(client_->WaitReady(ids).ok());
  }

  void Submit() {
    std::vector<StepInput> batch;
    drafts_.assign(seqs_.size(), {});
    for (size_t i = 0; i < seqs_.size(); ++i) {
      // Every other step, the first sequence verifies two drafts: its next
      // token twice (the second may be refused; its row is then all
      // allowed on the real server, the fake's mask on the fake).
      if (i == 0 && step_ % 2 == 1 && !seqs_[i].next.empty()) {
        drafts_[i] = {seqs_[i].next[0], seqs_[i].next[0]};
      }
      StepInput in;
      in.sequence_id = seqs_[i].id;
      in.accepted = seqs_[i].next;
      in.drafts = drafts_[i];
      batch.push_back(in);
    }
    ASSERT_TRUE(client_->SubmitStep(batch).ok());
  }

  void Wait() {
    const int64_t rows = client_->PendingRows();
    std::vector<uint32_t> buffer(static_cast<size_t>(rows) * kWords + 3);
    std::vector<SequenceMasks> results;
    absl::Status s =
        client_->WaitMasks({buffer.data(), kWords, rows}, &results);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(results.size(), seqs_.size());
    for (size_t i = 0; i < seqs_.size(); ++i) {
      Driven& d = seqs_[i];
      const SequenceMasks& r = results[i];
      ASSERT_TRUE(r.status.ok()) << r.status;
      ASSERT_EQ(r.sequence_id, d.id);
      ASSERT_EQ(r.num_rows, 1 + static_cast<int32_t>(drafts_[i].size()));
      d.history.insert(d.history.end(), d.next.begin(), d.next.end());
      std::vector<int32_t> prefix = d.history;
      for (int k = 0; k < r.num_rows; ++k) {
        if (k > 0) prefix.push_back(drafts_[i][static_cast<size_t>(k - 1)]);
        ASSERT_EQ(Row(&buffer[static_cast<size_t>(r.first_row + k) * kWords]),
                  FakeGrammard::Mask(prefix))
            << "sequence " << d.id << " step " << step_ << " row " << k;
      }
      d.next = {
          Pick(&buffer[static_cast<size_t>(r.first_row) * kWords], &rng_)};
    }
    ++step_;
  }

  const std::vector<Driven>& seqs() const { return seqs_; }

 private:
  Client* const client_;
  std::mt19937 rng_;
  std::vector<Driven> seqs_;
  std::vector<std::vector<int32_t>> drafts_;
  int step_ = 0;
};

TEST(ClientTest, ConnectErrorsSayWhatIsWrong) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  ClientOptions o = Options(*fake);
  o.tokenizer = "llama9";
  auto c = Client::Connect(o);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("\"llama9\" (it serves: fake)"),
            std::string::npos)
      << c.status();

  o = Options(*fake);
  o.outage_timeout = milliseconds(0);
  EXPECT_EQ(Client::Connect(o).status().code(),
            absl::StatusCode::kInvalidArgument);

  o = Options(*fake);
  o.tls = true;
  o.tls_ca_file = "/nonexistent/ca.pem";
  c = Client::Connect(o);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("/nonexistent/ca.pem"),
            std::string::npos);

  o = Options(*fake);
  o.auth_token_file = "/some/token";
  EXPECT_EQ(Client::Connect(o).status().code(),
            absl::StatusCode::kInvalidArgument);  // a token in plaintext
  o.tls = true;
  o.tls_cert_file = "/some/cert.pem";
  c = Client::Connect(o);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("go together"), std::string::npos);

  // A TLS client cannot talk to a plaintext server: it never answers.
  o = Options(*fake);
  o.tls = true;
  o.connect_timeout = milliseconds(300);
  c = Client::Connect(o);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();

  const std::string target = fake->target();
  fake.reset();
  o.tls = false;
  o.target = target;
  const auto start = std::chrono::steady_clock::now();
  c = Client::Connect(o);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("did not answer within 300 ms"),
            std::string::npos)
      << c.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(ClientTest, RowsComeInBatchOrderWithDraftRows) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  auto client = MustConnect(Options(*fake));
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->vocab_size(), FakeGrammard::kVocabSize);
  EXPECT_EQ(client->words_per_row(), kWords);
  EXPECT_EQ(client->tokenizer_fingerprint(), FakeGrammard::kFingerprint);
  EXPECT_EQ(client->eos_token_ids(), std::vector<int32_t>{FakeGrammard::kEos});
  Engine engine(client.get(), {30, 10, 20}, 1);
  engine.OpenAll();
  for (int step = 0; step < 12; ++step) {
    engine.Submit();
    engine.Wait();
    if (::testing::Test::HasFatalFailure()) return;
  }
  const ClientMetrics m = client->Metrics();
  EXPECT_EQ(m.steps, 12u);
  EXPECT_EQ(m.step_latency.count, 12u);
  EXPECT_EQ(m.wait_time.count, 12u);
  EXPECT_EQ(m.reconnects, 0u);
}

TEST(ClientTest, RollbackUndoesAcceptedTokens) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  auto client = MustConnect(Options(*fake));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Open(1, Regex("x")).ok());
  ASSERT_TRUE(client->WaitReady({1}).ok());
  std::vector<uint32_t> row(kWords);
  std::vector<SequenceMasks> results;
  std::mt19937 rng(5);
  std::vector<int32_t> history;
  std::vector<int32_t> next;
  auto step = [&](int32_t rollback) {
    StepInput in{1, rollback, next, {}};
    ASSERT_TRUE(client->SubmitStep({in}).ok());
    ASSERT_TRUE(client->WaitMasks({row.data(), kWords, 1}, &results).ok());
    ASSERT_TRUE(results[0].status.ok()) << results[0].status;
    history.resize(history.size() - static_cast<size_t>(rollback));
    history.insert(history.end(), next.begin(), next.end());
    ASSERT_EQ(row, FakeGrammard::Mask(history));
  };
  step(0);
  for (int i = 0; i < 3; ++i) {
    next = {Pick(row.data(), &rng)};
    step(0);
  }
  next.clear();
  step(2);  // the engine rejected the last two tokens it reported
  next = {Pick(row.data(), &rng)};
  step(0);
  EXPECT_EQ(history.size(), 2u);
}

TEST(ClientTest, PerSequenceErrorsLeaveTheRestOfTheBatch) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  auto client = MustConnect(Options(*fake));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Open(1, Regex("x")).ok());
  ASSERT_TRUE(client->Open(2, Regex("fail")).ok());
  ASSERT_TRUE(client->Open(3, Regex("hold")).ok());
  ASSERT_TRUE(client->Open(4, Regex("x")).ok());
  EXPECT_EQ(client->Open(4, Regex("x")).code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(client->WaitReady({1, 2, 4}).ok());
  absl::Status held = client->WaitReady({3}, milliseconds(100));
  EXPECT_EQ(held.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(held.message().find("sequence(s) 3 still compiling"),
            std::string::npos)
      << held;
  EXPECT_EQ(client->State(2)->state, GrammarState::kFailed);
  EXPECT_NE(client->State(2)->error.message().find("bad regex"),
            std::string::npos);
  const Readiness readiness = client->GetReadiness({1, 2, 3, 4, 99});
  EXPECT_EQ(readiness.ready, (std::vector<uint64_t>{1, 4}));
  EXPECT_EQ(readiness.failed, std::vector<uint64_t>{2});

  // Sequence 4 reports a token its mask forbids.
  const std::vector<uint32_t> first = FakeGrammard::Mask({});
  int32_t forbidden = 0;
  while ((first[static_cast<size_t>(forbidden / 32)] >> (forbidden % 32)) & 1) {
    ++forbidden;
  }
  const std::vector<int32_t> bad = {forbidden};
  std::vector<uint32_t> rows(5 * kWords);
  std::vector<SequenceMasks> results;
  ASSERT_TRUE(client
                  ->SubmitStep({{1, 0, {}, {}},
                                {2, 0, {}, {}},
                                {3, 0, {}, {}},
                                {4, 0, bad, {}},
                                {77, 0, {}, {}}})
                  .ok());
  ASSERT_TRUE(client->WaitMasks({rows.data(), kWords, 5}, &results).ok());
  ASSERT_EQ(results.size(), 5u);
  EXPECT_TRUE(results[0].status.ok());
  EXPECT_EQ(Row(&rows[0]), FakeGrammard::Mask({}));
  EXPECT_EQ(results[1].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(results[2].status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(results[3].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(results[3].status.message().find("is not allowed"),
            std::string::npos);
  EXPECT_EQ(results[4].status.code(), absl::StatusCode::kNotFound);
  std::vector<uint32_t> all(kWords, ~0u);
  all.back() = (1u << (FakeGrammard::kVocabSize % 32)) - 1;
  for (int r = 1; r < 5; ++r) {
    EXPECT_EQ(Row(&rows[static_cast<size_t>(r) * kWords]), all) << r;
  }
  EXPECT_EQ(client->State(4)->state, GrammarState::kFailed);
  EXPECT_EQ(client->State(3)->state, GrammarState::kCompiling);
  EXPECT_TRUE(client->Close(4).ok());
  EXPECT_EQ(client->Close(4).code(), absl::StatusCode::kNotFound);
}

// A step the server refuses as a whole (too many sequences) gives every
// sequence of it that error and all-allowed rows.
TEST(ClientTest, AStepRefusedAsAWholeFailsEachOfItsSequences) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  auto client = MustConnect(Options(*fake));
  ASSERT_NE(client, nullptr);
  const int n = FakeGrammard::kMaxStepSequences + 1;
  std::vector<uint64_t> ids;
  std::vector<StepInput> batch;
  for (int i = 1; i <= n; ++i) {
    ASSERT_TRUE(client->Open(static_cast<uint64_t>(i), Regex("x")).ok());
    ids.push_back(static_cast<uint64_t>(i));
    batch.push_back({static_cast<uint64_t>(i), 0, {}, {}});
  }
  ASSERT_TRUE(client->WaitReady(ids).ok());
  ASSERT_TRUE(client->SubmitStep(batch).ok());
  std::vector<uint32_t> rows(static_cast<size_t>(n) * kWords);
  std::vector<SequenceMasks> results;
  ASSERT_TRUE(client->WaitMasks({rows.data(), kWords, n}, &results).ok());
  ASSERT_EQ(results.size(), static_cast<size_t>(n));
  std::vector<uint32_t> all(kWords, ~0u);
  all.back() = (1u << (FakeGrammard::kVocabSize % 32)) - 1;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(results[i].status.code(), absl::StatusCode::kResourceExhausted)
        << results[i].status;
    EXPECT_NE(results[i].status.message().find("step lists"),
              std::string::npos);
    EXPECT_EQ(Row(&rows[static_cast<size_t>(i) * kWords]), all) << i;
  }
}

TEST(ClientTest, MisuseIsRefused) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  auto client = MustConnect(Options(*fake));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Open(1, Regex("x")).ok());
  ASSERT_TRUE(client->WaitReady({1}).ok());
  std::vector<uint32_t> rows(2 * kWords);
  std::vector<SequenceMasks> results;
  EXPECT_EQ(client->WaitMasks({rows.data(), kWords, 2}, &results).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client->SubmitStep({{1, 0, {}, {}}, {1, 0, {}, {}}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->SubmitStep({{1, -1, {}, {}}}).code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<int32_t> drafts = {5};
  ASSERT_TRUE(client->SubmitStep({{1, 0, {}, drafts}}).ok());
  EXPECT_EQ(client->PendingRows(), 2);
  EXPECT_EQ(client->SubmitStep({{1, 0, {}, {}}}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client->WaitMasks({rows.data(), kWords, 1}, &results).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->WaitMasks({rows.data(), kWords - 1, 2}, &results).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(client->WaitMasks({rows.data(), kWords, 2}, &results).ok());
  EXPECT_EQ(client->PendingRows(), 0);
  SequenceOptions reasoning;
  reasoning.reasoning = true;
  EXPECT_EQ(client->Open(2, Regex("x"), reasoning).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ClientTest, ASlowStepTimesOutAndCanBeWaitedForAgain) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  auto client = MustConnect(Options(*fake));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Open(1, Regex("x")).ok());
  ASSERT_TRUE(client->WaitReady({1}).ok());
  fake->SetStalled(true);
  ASSERT_TRUE(client->SubmitStep({{1, 0, {}, {}}}).ok());
  std::vector<uint32_t> row(kWords);
  std::vector<SequenceMasks> results;
  absl::Status s =
      client->WaitMasks({row.data(), kWords, 1}, &results, milliseconds(100));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("still in flight"), std::string::npos) << s;
  fake->SetStalled(false);
  ASSERT_TRUE(client->WaitMasks({row.data(), kWords, 1}, &results).ok());
  EXPECT_EQ(row, FakeGrammard::Mask({}));
}

TEST(ClientTest, MasksContinueExactlyAcrossServerRestarts) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  const int port = fake->port();
  auto client = MustConnect(Options(*fake));
  ASSERT_NE(client, nullptr);
  Engine engine(client.get(), {1, 2, 3}, 7);
  engine.OpenAll();
  ASSERT_TRUE(client->Open(9, Regex("hold")).ok());  // compiling throughout
  int restarts = 0;
  auto restart = [&] {
    fake.reset();
    fake = FakeGrammard::Start(port);
    ASSERT_NE(fake, nullptr) << "port " << port << " taken";
    ++restarts;
  };
  for (int step = 0; step < 16; ++step) {
    if (step == 4) restart();  // idle: the break is found by SubmitStep
    // Stalled before the step is sent, so the server surely holds it.
    if (step == 12) fake->SetStalled(true);
    engine.Submit();
    if (step == 8 || step == 9) restart();  // a step in flight
    if (step == 12) {
      // A restart while WaitMasks blocks on a step the server holds.
      std::thread restarter([&] {
        fake->AwaitHeldStep();
        restart();
      });
      engine.Wait();
      restarter.join();
    } else {
      engine.Wait();
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
  const ClientMetrics m = client->Metrics();
  // The restarts at steps 8 and 9 may both pass before the client notices
  // the first: one reconnect then covers both.
  EXPECT_LE(m.reconnects, static_cast<uint64_t>(restarts));
  EXPECT_GE(m.reconnects, static_cast<uint64_t>(restarts - 1));
  EXPECT_EQ(m.outages_given_up, 0u);
  EXPECT_EQ(m.replayed_sequences, 4u * m.reconnects);
  EXPECT_GT(m.replayed_tokens, 0u);
  EXPECT_EQ(client->State(9)->state, GrammarState::kCompiling);
  // The last server saw one stream, on which every history was replayed.
  EXPECT_EQ(fake->streams(), 1);
  size_t tokens = 0;
  for (const Driven& d : engine.seqs()) tokens += d.history.size();
  EXPECT_EQ(fake->accepted_tokens(), static_cast<int64_t>(tokens));
}

// The daemon writes statuses from another thread than step replies, so a
// step's reply may come before its sequence's READY status; a restart in
// between must still replay the tokens that step accepted.
TEST(ClientTest, TokensAcceptedBeforeTheReadyStatusAreReplayed) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  const int port = fake->port();
  auto client = MustConnect(Options(*fake));
  ASSERT_NE(client, nullptr);
  fake->SetStatusesMuted(true);
  ASSERT_TRUE(client->Open(1, Regex("x")).ok());
  std::vector<int32_t> history;
  std::vector<uint32_t> row(kWords);
  std::vector<SequenceMasks> results;
  std::mt19937 rng(3);
  auto step = [&](std::vector<int32_t> accepted) {
    StepInput in;
    in.sequence_id = 1;
    in.accepted = accepted;
    ASSERT_TRUE(client->SubmitStep({in}).ok());
    ASSERT_TRUE(client->WaitMasks({row.data(), kWords, 1}, &results).ok());
    ASSERT_TRUE(results[0].status.ok()) << results[0].status;
    history.insert(history.end(), accepted.begin(), accepted.end());
    ASSERT_EQ(row, FakeGrammard::Mask(history))
        << "after " << history.size() << " tokens";
  };
  step({});
  for (int i = 0; i < 3 && !HasFatalFailure(); ++i) {
    step({Pick(row.data(), &rng)});
  }
  // Its answered steps prove its grammar ready, status or not.
  EXPECT_EQ(client->State(1)->state, GrammarState::kReady);
  fake.reset();
  fake = FakeGrammard::Start(port);
  ASSERT_NE(fake, nullptr) << "port " << port << " taken";
  for (int i = 0; i < 3 && !HasFatalFailure(); ++i) {
    step({Pick(row.data(), &rng)});
  }
  EXPECT_EQ(fake->accepted_tokens(), static_cast<int64_t>(history.size()));
  EXPECT_EQ(client->Metrics().replayed_tokens, 3u);
}

// A compile issued while the daemon restarts (an engine admitting a request
// then) waits for it as a step would, instead of failing the request.
TEST(ClientTest, UnaryCallsRideOutARestart) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  const int port = fake->port();
  auto client = MustConnect(Options(*fake));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Compile(Regex("x"), /*wait=*/true).ok());
  fake.reset();
  std::thread restarter([&] {
    std::this_thread::sleep_for(milliseconds(300));
    fake = FakeGrammard::Start(port);
  });
  auto compiled = client->Compile(Regex("y"), /*wait=*/true);
  auto listed = client->ListTokenizers();
  restarter.join();
  ASSERT_NE(fake, nullptr) << "port " << port << " taken";
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(compiled->grammar_id, "fake:y");
  EXPECT_EQ(compiled->state, GrammarState::kReady);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 1u);
}

// Past outage_timeout a unary call fails, naming the outage.
TEST(ClientTest, AUnaryCallGivesUpAfterTheOutageTimeout) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  ClientOptions options = Options(*fake);
  options.outage_timeout = milliseconds(500);
  auto client = MustConnect(options);
  ASSERT_NE(client, nullptr);
  fake.reset();
  const auto start = std::chrono::steady_clock::now();
  auto compiled = client->Compile(Regex("y"), /*wait=*/true);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(compiled.status().message().find("outage_timeout (500 ms)"),
            std::string::npos)
      << compiled.status();
  EXPECT_GE(took, milliseconds(500));
  EXPECT_LT(took, milliseconds(500) + std::chrono::seconds(10));
}

TEST(ClientTest, AnOutageLongerThanTheDeadlineIsUnavailable) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  const int port = fake->port();
  ClientOptions options = Options(*fake);
  options.outage_timeout = milliseconds(1000);
  auto client = MustConnect(options);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Open(1, Regex("x")).ok());
  ASSERT_TRUE(client->WaitReady({1}).ok());
  fake.reset();
  ASSERT_TRUE(client->SubmitStep({{1, 0, {}, {}}}).ok());
  std::vector<uint32_t> row(kWords);
  std::vector<SequenceMasks> results;
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = client->WaitMasks({row.data(), kWords, 1}, &results);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("unreachable: an outage of"), std::string::npos)
      << s;
  EXPECT_NE(s.message().find("outage_timeout (1000 ms)"), std::string::npos)
      << s;
  EXPECT_GE(took, milliseconds(1000));
  EXPECT_LT(took, milliseconds(1000) + std::chrono::seconds(10));
  EXPECT_EQ(client->Metrics().outages_given_up, 1u);
  EXPECT_EQ(client->PendingRows(), 0);  // the step was dropped

  // The daemon comes back: the next step reconnects and replays.
  fake = FakeGrammard::Start(port);
  ASSERT_NE(fake, nullptr);
  ASSERT_TRUE(client->SubmitStep({{1, 0, {}, {}}}).ok());
  ASSERT_TRUE(client->WaitMasks({row.data(), kWords, 1}, &results).ok());
  EXPECT_TRUE(results[0].status.ok()) << results[0].status;
  EXPECT_EQ(row, FakeGrammard::Mask({}));
}

TEST(ClientTest, WaitAndApplyCpuMasksTheIndexedRows) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  auto client = MustConnect(Options(*fake));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Open(1, Regex("x")).ok());
  ASSERT_TRUE(client->WaitReady({1}).ok());
  // Three logits rows, padded to 1024 columns; the sequence is row 2.
  constexpr int64_t kCols = 1024;
  std::vector<float> logits(3 * kCols, 1.0f);
  const int32_t index = 2;
  ASSERT_TRUE(client->SubmitStep({{1, 0, {}, {}}}).ok());
  std::vector<SequenceMasks> results;
  ASSERT_TRUE(
      client
          ->WaitAndApplyCpu(gpu::MakeLogitsView(logits.data(), 3, kCols, kCols),
                            &index, &results)
          .ok());
  const std::vector<uint32_t> mask = FakeGrammard::Mask({});
  for (int64_t c = 0; c < kCols; ++c) {
    EXPECT_EQ(logits[static_cast<size_t>(c)], 1.0f);
    const bool allowed = c < FakeGrammard::kVocabSize &&
                         ((mask[static_cast<size_t>(c / 32)] >> (c % 32)) & 1);
    EXPECT_EQ(std::isinf(logits[static_cast<size_t>(2 * kCols + c)]), !allowed)
        << c;
  }
}

TEST(LatencyHistogramTest, BucketsDoubleFrom50Microseconds) {
  LatencyHistogram h;
  h.Observe(40e-6);
  h.Observe(50e-6);
  h.Observe(60e-6);
  h.Observe(5.0);
  EXPECT_EQ(h.buckets[0], 2u);
  EXPECT_EQ(h.buckets[1], 1u);
  EXPECT_EQ(h.buckets[LatencyHistogram::kBuckets], 1u);
  EXPECT_EQ(h.count, 4u);
  EXPECT_DOUBLE_EQ(h.max_seconds, 5.0);
  EXPECT_DOUBLE_EQ(LatencyHistogram::UpperBound(14), 50e-6 * 16384);
}

}  // namespace
}  // namespace grammard::client
