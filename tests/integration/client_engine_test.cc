// The client against the real grammard on 127.0.0.1, driven by a stand-in
// engine: seeded random logits on the host, masks applied with
// gpu::ApplyTokenMaskCpu, greedy sampling. Outputs must be valid under
// their constraints (parsed and checked), and a daemon killed (SIGKILL) and
// restarted mid-generation must change nothing but latency.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "gpu/token_mask.h"
#include "grammar/vocabulary.h"
#include "nlohmann/json.hpp"
#include "tests/support/daemon.h"
#include "tests/support/paths.h"

namespace grammard {
namespace {

namespace v1 = grammard::v1;
using client::Client;
using std::chrono::milliseconds;
using testing::Daemon;

// ------------------------------------------------------------ constraints

constexpr char kPersonSchema[] = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]},
             "maxItems": 3}
  },
  "required": ["name", "age"],
  "additionalProperties": false
})";

constexpr char kFlagSchema[] = R"({
  "type": "object",
  "properties": {"ok": {"type": "boolean"}, "n": {"enum": [1, 2, 3]}},
  "required": ["ok", "n"],
  "additionalProperties": false
})";

constexpr char kRegex[] = "[a-z]{2,5}@(x|y)\\.com";

constexpr char kEbnf[] =
    "root ::= \"(\" num tail \")\"\n"
    "tail ::= \"\" | \"+\" num | \"+\" num \"+\" num\n"
    "num ::= [0-9] | [0-9] [0-9]\n";

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Empty when `text` is valid, else why not.
using Validator = std::function<std::string(const std::string&)>;

std::string ValidPerson(const std::string& text) {
  const auto j =
      nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return "not a JSON object";
  for (const auto& [key, value] : j.items()) {
    if (key != "name" && key != "age" && key != "tags") return "key " + key;
  }
  if (!j.contains("name") || !j["name"].is_string() ||
      CodePoints(j["name"].get<std::string>()) > 8) {
    return "bad name";
  }
  // JSON Schema's integers are numbers without a fraction: 21.0 is one.
  if (!j.contains("age") || !j["age"].is_number() ||
      j["age"].get<double>() != std::floor(j["age"].get<double>()) ||
      j["age"].get<double>() < 0 || j["age"].get<double>() > 120) {
    return "bad age";
  }
  if (j.contains("tags")) {
    if (!j["tags"].is_array() || j["tags"].size() > 3) return "bad tags";
    for (const auto& t : j["tags"]) {
      if (!t.is_string() || (t != "a" && t != "b" && t != "c")) {
        return "bad tag";
      }
    }
  }
  return "";
}

std::string ValidFlag(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || j.size() != 2) return "not a 2-key object";
  if (!j.contains("ok") || !j["ok"].is_boolean()) return "bad ok";
  // JSON Schema compares numbers by value: 1.0 and 1e0 are the enum's 1.
  if (!j.contains("n") || !j["n"].is_number()) return "bad n";
  const double n = j["n"].get<double>();
  if (n != 1 && n != 2 && n != 3) return "bad n";
  return "";
}

Validator Matches(const std::string& pattern) {
  return [re = std::regex(pattern)](const std::string& text) {
    return std::regex_match(text, re) ? "" : "does not match";
  };
}

std::string ValidChoice(const std::string& text) {
  return text == "yes" || text == "no" || text == "maybe" ? "" : "not a choice";
}

struct Spec {
  uint64_t id;
  v1::Constraint constraint;
  Validator valid;
};

std::vector<Spec> MixedSpecs() {
  std::vector<Spec> specs;
  auto json = [](const char* schema) {
    v1::Constraint c;
    c.set_json_schema(schema);
    c.mutable_json_options()->set_whitespace(
        v1::JsonOptions::WHITESPACE_COMPACT);
    return c;
  };
  specs.push_back({11, json(kPersonSchema), ValidPerson});
  specs.push_back({12, json(kFlagSchema), ValidFlag});
  v1::Constraint regex;
  regex.set_regex(kRegex);
  specs.push_back({13, regex, Matches(kRegex)});
  v1::Constraint choice;
  for (const char* c : {"yes", "no", "maybe"}) {
    choice.mutable_choice()->add_choices(c);
  }
  specs.push_back({14, choice, ValidChoice});
  v1::Constraint ebnf;
  ebnf.mutable_grammar()->set_text(kEbnf);
  specs.push_back({15, ebnf, Matches(R"(\(\d{1,2}(\+\d{1,2}){0,2}\))")});
  specs.push_back({16, json(kPersonSchema), ValidPerson});
  return specs;
}

// ----------------------------------------------------------------- engine

// SplitMix64: a fast, seedable stream for logits.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15u;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9u;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBu;
  return x ^ (x >> 31);
}

struct Output {
  std::vector<int32_t> tokens;
  bool terminated = false;
};

struct Generation {
  std::map<uint64_t, Output> outputs;
  // Per step, a digest of which logits the masks set to -inf.
  std::vector<uint64_t> mask_digests;
};

enum class Moment { kBeforeSubmit, kAfterSubmit };

// Decodes every spec to its end: each step reports the last sampled tokens,
// makes the "forward pass" (random logits seeded by seed, sequence and
// step) while the server fills masks, waits for the masks on the logits and
// samples greedily. `hook` runs at each step's two moments.
Generation Generate(Client* client, const std::vector<Spec>& specs,
                    uint64_t seed,
                    const std::function<void(int, Moment)>& hook) {
  Generation run;
  std::vector<uint64_t> ids;
  for (const Spec& s : specs) {
    EXPECT_TRUE(client->Open(s.id, s.constraint).ok());
    ids.push_back(s.id);
  }
  absl::Status ready = client->WaitReady(ids, milliseconds(120000));
  EXPECT_TRUE(ready.ok()) << ready;
  for (const Spec& s : specs) {
    EXPECT_EQ(client->State(s.id)->state, client::GrammarState::kReady)
        << s.id << ": " << client->State(s.id)->error;
  }
  const int64_t vocab = client->vocab_size();
  std::map<uint64_t, std::vector<int32_t>> next;
  std::vector<uint64_t> live = ids;
  for (int step = 0; !live.empty() && step < 200; ++step) {
    hook(step, Moment::kBeforeSubmit);
    std::vector<client::StepInput> batch;
    for (uint64_t id : live) batch.push_back({id, 0, next[id], {}});
    absl::Status submitted = client->SubmitStep(batch);
    EXPECT_TRUE(submitted.ok()) << submitted;
    hook(step, Moment::kAfterSubmit);
    std::vector<float> logits(live.size() * static_cast<size_t>(vocab));
    for (size_t i = 0; i < live.size(); ++i) {
      uint64_t state = Mix(seed ^ Mix(live[i] * 1000003u + step));
      for (int64_t t = 0; t < vocab; ++t) {
        state = Mix(state);
        logits[i * vocab + t] = static_cast<float>(state >> 40) / (1 << 24);
      }
    }
    std::vector<client::SequenceMasks> results;
    absl::Status waited = client->WaitAndApplyCpu(
        gpu::MakeLogitsView(logits.data(), static_cast<int64_t>(live.size()),
                            vocab, vocab),
        nullptr, &results, milliseconds(120000));
    EXPECT_TRUE(waited.ok()) << "step " << step << ": " << waited;
    if (!waited.ok()) return run;
    uint64_t digest = 0;
    std::vector<uint64_t> still_live;
    for (size_t i = 0; i < live.size(); ++i) {
      const uint64_t id = live[i];
      EXPECT_TRUE(results[i].status.ok()) << id << ": " << results[i].status;
      Output& out = run.outputs[id];
      if (results[i].terminated) {
        out.terminated = true;
        EXPECT_TRUE(client->Close(id).ok());
        continue;
      }
      const float* row = &logits[i * vocab];
      int32_t best = -1;
      for (int64_t t = 0; t < vocab; ++t) {
        if (std::isinf(row[t])) {
          digest = Mix(digest ^ static_cast<uint64_t>(t));
        } else if (best < 0 || row[t] > row[best]) {
          best = static_cast<int32_t>(t);
        }
      }
      EXPECT_GE(best, 0) << "sequence " << id << ": every token masked";
      out.tokens.push_back(best);
      next[id] = {best};
      still_live.push_back(id);
    }
    run.mask_digests.push_back(digest);
    live = std::move(still_live);
  }
  EXPECT_TRUE(live.empty()) << live.size() << " sequences never ended";
  return run;
}

// The text of a finished output: its tokens' bytes, EOS excluded.
std::string Text(const grammar::Vocabulary& vocab, const Output& out) {
  std::string text;
  for (int32_t t : out.tokens) {
    if (!vocab.is_eos(t)) text += std::string(vocab.bytes(t));
  }
  return text;
}

// ------------------------------------------------------------------ tests

class ClientEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto dir = testing::TokenizerDir("llama3");
    if (!dir)
      GTEST_SKIP() << testing::MissingDataMessage("the llama3 tokenizer");
    grammar::VocabularyOptions options;
    options.name = "llama3";
    auto vocab = grammar::Vocabulary::FromDirectory(*dir, options);
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    vocab_ = *vocab;
    auto daemon = Daemon::Start({});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
  }

  std::unique_ptr<Client> Connect(milliseconds outage_timeout) {
    client::ClientOptions options;
    options.target = daemon_->target();
    options.tokenizer = "llama3";
    options.connect_timeout = milliseconds(60000);
    options.step_timeout = milliseconds(120000);
    options.outage_timeout = outage_timeout;
    auto connected = Client::Connect(options);
    EXPECT_TRUE(connected.ok()) << connected.status();
    return connected.ok() ? *std::move(connected) : nullptr;
  }

  std::shared_ptr<const grammar::Vocabulary> vocab_;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(ClientEngineTest, MixedConstraintsYieldOnlyValidOutputs) {
  auto client = Connect(milliseconds(60000));
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->vocab_size(), vocab_->size());
  const std::vector<Spec> specs = MixedSpecs();
  for (uint64_t seed : {1, 2}) {
    std::vector<Spec> round = specs;
    for (Spec& s : round) s.id += 100 * seed;  // fresh ids per round
    const Generation run =
        Generate(client.get(), round, seed, [](int, Moment) {});
    for (const Spec& s : round) {
      const Output& out = run.outputs.at(s.id);
      const std::string text = Text(*vocab_, out);
      EXPECT_TRUE(out.terminated) << s.id << ": " << text;
      EXPECT_EQ(s.valid(text), "")
          << "seed " << seed << " sequence " << s.id << ": " << text;
    }
  }
  const client::ClientMetrics m = client->Metrics();
  EXPECT_GT(m.steps, 0u);
  EXPECT_EQ(m.step_latency.count, m.steps);
  EXPECT_EQ(m.reconnects, 0u);
}

TEST_F(ClientEngineTest, KillAndRestartMidGenerationChangesNothingButLatency) {
  const std::vector<Spec> specs = MixedSpecs();
  Generation uninterrupted;
  {
    auto client = Connect(milliseconds(120000));
    ASSERT_NE(client, nullptr);
    uninterrupted = Generate(client.get(), specs, 7, [](int, Moment) {});
  }
  ASSERT_GE(uninterrupted.mask_digests.size(), 8u)
      << "outputs too short to restart the daemon thrice within them";

  auto client = Connect(milliseconds(120000));
  ASSERT_NE(client, nullptr);
  std::thread restarter;
  const Generation restarted =
      Generate(client.get(), specs, 7, [&](int step, Moment moment) {
        auto restart = [&] {
          absl::Status s = daemon_->Restart();
          ASSERT_TRUE(s.ok()) << s;
        };
        // Between steps: the client finds the stream broken on submit.
        if (step == 2 && moment == Moment::kBeforeSubmit) restart();
        // A step in flight whose reply never comes.
        if (step == 4 && moment == Moment::kAfterSubmit) restart();
        // Killed and restarted while the client waits for the masks.
        if (step == 6 && moment == Moment::kAfterSubmit) {
          restarter = std::thread(restart);
        }
        if (step == 7 && moment == Moment::kBeforeSubmit) restarter.join();
      });
  if (restarter.joinable()) restarter.join();
  EXPECT_EQ(restarted.mask_digests, uninterrupted.mask_digests);
  for (const Spec& s : specs) {
    const Output& a = uninterrupted.outputs.at(s.id);
    const Output& b = restarted.outputs.at(s.id);
    EXPECT_EQ(b.tokens, a.tokens) << s.id;
    EXPECT_EQ(b.terminated, a.terminated) << s.id;
    EXPECT_EQ(s.valid(Text(*vocab_, b)), "") << Text(*vocab_, b);
  }
  const client::ClientMetrics m = client->Metrics();
  EXPECT_GE(m.reconnects, 2u);  // restarts at steps 4 and 6 may merge
  EXPECT_EQ(m.outages_given_up, 0u);
  EXPECT_GT(m.replayed_tokens, 0u);
  EXPECT_GT(m.outage_seconds, 0.0);
}

// Under load: four clients of 18 sequences each step while the daemon is
// killed and restarted three times. Every sequence of every client ends as
// it would have without the kills (none lost, none changed).
TEST_F(ClientEngineTest, KillsUnderLoadLoseNoSequence) {
  constexpr int kClients = 4;
  std::vector<std::vector<Spec>> specs(kClients);
  for (int c = 0; c < kClients; ++c) {
    for (int copy = 0; copy < 3; ++copy) {
      for (Spec s : MixedSpecs()) {
        s.id += 1000 * static_cast<uint64_t>(c) + 100 * copy;
        specs[c].push_back(std::move(s));
      }
    }
  }
  std::atomic<int> steps{0};
  // All clients at once, each on its own stream; kills happen meanwhile if
  // `kill` is set.
  auto run_all = [&](bool kill) {
    std::vector<Generation> runs(kClients);
    std::vector<std::unique_ptr<Client>> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.push_back(Connect(milliseconds(120000)));
      if (clients.back() == nullptr) return runs;
    }
    steps = 0;
    std::atomic<bool> done{false};
    std::thread killer([&] {
      for (int k = 1; kill && k <= 3; ++k) {
        // Every client a few steps further than at the previous kill.
        while (!done && steps < k * 3 * kClients) {
          std::this_thread::sleep_for(milliseconds(1));
        }
        if (done) break;
        absl::Status s = daemon_->Restart();
        EXPECT_TRUE(s.ok()) << s;
      }
    });
    std::vector<std::thread> threads;
    for (int c = 0; c < kClients; ++c) {
      threads.emplace_back([&, c] {
        runs[c] = Generate(clients[c].get(), specs[c], 40 + c,
                           [&](int, Moment moment) {
                             if (moment == Moment::kBeforeSubmit) ++steps;
                           });
      });
    }
    for (std::thread& t : threads) t.join();
    done = true;
    killer.join();
    uint64_t reconnects = 0;
    for (const auto& client : clients) {
      reconnects += client->Metrics().reconnects;
      EXPECT_EQ(client->Metrics().outages_given_up, 0u);
    }
    EXPECT_EQ(reconnects > 0, kill) << reconnects << " reconnects";
    return runs;
  };
  const std::vector<Generation> calm = run_all(false);
  const std::vector<Generation> killed = run_all(true);
  int sequences = 0;
  for (int c = 0; c < kClients; ++c) {
    EXPECT_EQ(killed[c].mask_digests, calm[c].mask_digests) << "client " << c;
    for (const Spec& s : specs[c]) {
      const auto a = calm[c].outputs.find(s.id);
      const auto b = killed[c].outputs.find(s.id);
      ASSERT_NE(a, calm[c].outputs.end()) << s.id;
      ASSERT_NE(b, killed[c].outputs.end()) << s.id << " lost";
      EXPECT_TRUE(b->second.terminated) << s.id;
      EXPECT_EQ(b->second.tokens, a->second.tokens) << s.id;
      EXPECT_EQ(s.valid(Text(*vocab_, b->second)), "")
          << s.id << ": " << Text(*vocab_, b->second);
      ++sequences;
    }
  }
  EXPECT_EQ(sequences, kClients * 18);
}

TEST_F(ClientEngineTest, AnOutageLongerThanTheDeadlineIsAClearError) {
  constexpr milliseconds kOutage(2000);
  auto client = Connect(kOutage);
  ASSERT_NE(client, nullptr);
  v1::Constraint regex;
  regex.set_regex(kRegex);
  ASSERT_TRUE(client->Open(1, regex).ok());
  ASSERT_TRUE(client->WaitReady({1}).ok());
  daemon_->Kill();
  ASSERT_TRUE(client->SubmitStep({{1, 0, {}, {}}}).ok());
  std::vector<uint32_t> row(static_cast<size_t>(client->words_per_row()));
  std::vector<client::SequenceMasks> results;
  const auto start = std::chrono::steady_clock::now();
  const absl::Status s =
      client->WaitMasks({row.data(), client->words_per_row(), 1}, &results);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find(daemon_->target() + " unreachable: an outage of"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("outage_timeout (2000 ms)"), std::string::npos)
      << s;
  EXPECT_GE(took, kOutage);
  EXPECT_LT(took, kOutage + std::chrono::seconds(15));
  EXPECT_EQ(client->Metrics().outages_given_up, 1u);
}

}  // namespace
}  // namespace grammard
