#include "service/compile_pool.h"

#include <map>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grammar/matcher.h"
#include "gtest/gtest.h"
#include "service/constraint.h"
#include "service/metrics/metrics.h"

namespace grammard::service {
namespace {

using grammard::v1::Constraint;
using Clock = std::chrono::steady_clock;

class CompilePoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto vocab = grammar::Vocabulary::FromTokens(
        {"a", "b", "{", "}", "\"", ":", ",", " ", "x", "1", "<eos>"}, {10},
        {10}, {"tiny", {}, 0});
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    tokenizer_ = std::make_shared<TokenizerEntry>();
    tokenizer_->name = "tiny";
    tokenizer_->compiler = std::make_shared<grammar::GrammarCompiler>(*vocab);
    tokenizer_->vocab = *vocab;
  }

  std::unique_ptr<CompilePool> Pool(CompilePool::Options options = {}) {
    return std::make_unique<CompilePool>(options, &cache_, &metrics_);
  }

  static Constraint Regex(const std::string& regex) {
    Constraint c;
    c.set_regex(regex);
    return c;
  }
  static Constraint Schema(const std::string& schema) {
    Constraint c;
    c.set_json_schema(schema);
    return c;
  }

  std::shared_ptr<const GrammarEntry> Finish(CompilePool& pool,
                                             const Constraint& c,
                                             bool* cache_hit = nullptr) {
    auto submitted = pool.Submit(tokenizer_, c);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok()) return nullptr;
    if (cache_hit != nullptr) *cache_hit = submitted->cache_hit;
    return submitted->job->WaitUntil(Clock::now() + std::chrono::seconds(30));
  }

  metrics::Registry metrics_registry_;
  ServiceMetrics metrics_{&metrics_registry_};
  GrammarCache cache_{size_t{1} << 30, &metrics_};
  std::shared_ptr<TokenizerEntry> tokenizer_;
};

TEST_F(CompilePoolTest, CompilesOnceForConcurrentRequestsThenHitsTheCache) {
  auto pool = Pool();
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back(
        [&] { EXPECT_NE(Finish(*pool, Regex("(ab)+")), nullptr); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(metrics_.CompileSeconds("regex")->Count(), 1u);
  bool hit = false;
  auto entry = Finish(*pool, Regex("(ab)+"), &hit);
  ASSERT_NE(entry, nullptr);
  EXPECT_TRUE(hit);
  EXPECT_TRUE(entry->status.ok());
  EXPECT_EQ(metrics_.CompileSeconds("regex")->Count(), 1u);
}

TEST_F(CompilePoolTest, EquivalentSchemasShareAnIdButPropertyOrderDoesNot) {
  auto pool = Pool();
  auto a = pool->Submit(
      tokenizer_, Schema(R"({"type": "object", "properties": {"a": {"type":
      "integer"}, "b": {"type": "string"}}, "required": ["a"]})"));
  auto b = pool->Submit(
      tokenizer_,
      Schema(
          R"({"required":["a"],"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"})"));
  auto c = pool->Submit(
      tokenizer_,
      Schema(
          R"({"required":["a"],"properties":{"b":{"type":"string"},"a":{"type":"integer"}},"type":"object"})"));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->job->id(), b->job->id());
  EXPECT_NE(a->job->id(), c->job->id());
  EXPECT_EQ(a->job->id().size(), 32u);
}

// Every PropertyOrder on the wire reaches the schema front end: seven
// declared properties written last-first, and one written twice.
TEST_F(CompilePoolTest, EveryPropertyOrderOfTheWireIsHonoured) {
  auto pool = Pool();
  const std::string schema = R"({"properties": {"p1": {}, "p2": {}, "p3": {},
      "p4": {}, "p5": {}, "p6": {}, "p7": {}}, "required": ["p7"],
      "additionalProperties": false})";
  struct Case {
    v1::JsonOptions::PropertyOrder order;
    bool reversed_ok, repeated_ok, declared_order_ok;
  };
  for (const Case& c : std::vector<Case>{
           {v1::JsonOptions::PROPERTY_ORDER_AS_WRITTEN, false, false, true},
           {v1::JsonOptions::PROPERTY_ORDER_REQUIRED_FIRST, true, false, false},
           {v1::JsonOptions::PROPERTY_ORDER_ANY, true, false, true},
           {v1::JsonOptions::PROPERTY_ORDER_ANY_WHEN_SMALL, false, false, true},
           {v1::JsonOptions::PROPERTY_ORDER_ANY_REPEATABLE, true, true,
            true}}) {
    SCOPED_TRACE(v1::JsonOptions::PropertyOrder_Name(c.order));
    Constraint constraint = Schema(schema);
    constraint.mutable_json_options()->set_property_order(c.order);
    constraint.mutable_json_options()->set_whitespace(
        v1::JsonOptions::WHITESPACE_COMPACT);
    auto entry = Finish(*pool, constraint);
    ASSERT_NE(entry, nullptr);
    ASSERT_TRUE(entry->status.ok()) << entry->status;
    auto accepts = [&](const std::string& text) {
      grammar::GrammarMatcher m(*entry->grammar);
      return m.AcceptString(text).ok() && m.CanTerminate();
    };
    EXPECT_EQ(accepts(R"({"p7":1,"p1":2})"), c.reversed_ok);
    EXPECT_EQ(accepts(R"({"p1":1,"p7":2,"p7":3})"), c.repeated_ok);
    EXPECT_EQ(accepts(R"({"p1":1,"p7":2})"), c.declared_order_ok);
  }
}

TEST_F(CompilePoolTest, FailuresAreCachedButDeadlinesAreNot) {
  auto pool = Pool();
  auto bad = Finish(*pool, Regex("(unclosed"));
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad->status.message().find("regex"), std::string::npos);
  bool hit = false;
  Finish(*pool, Regex("(unclosed"), &hit);
  EXPECT_TRUE(hit);

  CompilePool::Options options;
  options.timeout = std::chrono::milliseconds(0);
  auto hurried = Pool(options);
  auto late = Finish(*hurried, Regex("[ab]{1,40}x"));
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(late->status.message().find("deadline"), std::string::npos);
  Finish(*hurried, Regex("[ab]{1,40}x"), &hit);
  EXPECT_FALSE(hit);  // compiled again, not served from the cache
  EXPECT_EQ(metrics_.CompileSeconds("regex")->Count(), 3u);
}

// Ready after the automaton alone (nothing classified ahead), a grammar is
// then classified in the background, entirely; or not at all when asked.
TEST_F(CompilePoolTest, GrammarsAreClassifiedInTheBackground) {
  for (bool background : {true, false}) {
    // Another property name each time: another grammar, not a cache hit.
    const std::string schema = absl::StrCat(
        R"({"type":"object","properties":{")", background ? "a" : "b",
        R"(":{"type":"string"},"c":{"type":"array","items":{"type":"integer"}}}})");
    SCOPED_TRACE(background);
    CompilePool::Options options;
    options.classify_ahead = std::chrono::microseconds(0);
    options.classify_in_background = background;
    auto pool = Pool(options);
    auto entry = Finish(*pool, Schema(schema));
    ASSERT_NE(entry, nullptr);
    ASSERT_TRUE(entry->status.ok()) << entry->status;
    const grammar::CompiledGrammar& compiled = *entry->grammar;
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (background && !compiled.fully_classified() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!background) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(compiled.fully_classified(), background);
    EXPECT_EQ(compiled.num_classified() > 0, background);
    // What the classifier built is charged to the cache (after each slice,
    // the last one just after the table completes). The first round's
    // grammar is the only one cached then.
    if (background) {
      while (cache_.bytes() != entry->Bytes() && Clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      EXPECT_EQ(cache_.bytes(), entry->Bytes());
    }
  }
}

TEST_F(CompilePoolTest, FullQueueAndMalformedConstraintsAreRefused) {
  CompilePool::Options options;
  options.max_queue = 0;
  auto pool = Pool(options);
  auto full = pool->Submit(tokenizer_, Regex("a"));
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  auto empty = pool->Submit(tokenizer_, Constraint());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  auto not_json = pool->Submit(tokenizer_, Schema("{nope"));
  EXPECT_EQ(not_json.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CompilePoolTest, FindsQueuedAndCachedGrammarsById) {
  auto pool = Pool();
  auto entry = Finish(*pool, Regex("ab"));
  ASSERT_NE(entry, nullptr);
  auto job = pool->Find(entry->id);
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->result(), entry);
  EXPECT_EQ(pool->Find("0123"), nullptr);
}

TEST(GrammarCacheTest, EvictsLeastRecentlyUsedWithinTheBudget) {
  metrics::Registry registry;
  ServiceMetrics metrics(&registry);
  auto make = [](std::string id) {
    auto e = std::make_shared<GrammarEntry>();
    e->id = std::move(id);
    e->status = absl::InvalidArgumentError(std::string(1000, 'x'));
    return e;
  };
  const size_t one = make("a")->Bytes();
  GrammarCache cache(3 * one, &metrics);
  cache.Insert(make("a"));
  cache.Insert(make("b"));
  cache.Insert(make("c"));
  EXPECT_NE(cache.Find("a"), nullptr);  // now b is the least recent
  cache.Insert(make("d"));
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.Find("b"), nullptr);
  EXPECT_NE(cache.Find("a"), nullptr);
  EXPECT_NE(cache.Find("c"), nullptr);
  EXPECT_NE(cache.Find("d"), nullptr);
  EXPECT_EQ(metrics.cache_evictions->Value(), 1);
  EXPECT_EQ(metrics.cache_misses->Value(), 1);
  EXPECT_EQ(metrics.cache_bytes->Value(), 3.0 * one);
  GrammarCache tiny(one / 2, &metrics);
  tiny.Insert(make("big"));
  EXPECT_EQ(tiny.size(), 0u);
}

// A grammar ("[ab]+x", nothing classified ahead) whose first mask makes it
// grow, to show how the cache charges growth.
class GrammarCacheGrowthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto vocab = grammar::Vocabulary::FromTokens({"a", "b", "ab", "x", "<eos>"},
                                                 {4}, {4}, {"tiny", {}, 0});
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    compiler_ = std::make_unique<grammar::GrammarCompiler>(*vocab);
  }

  std::shared_ptr<GrammarEntry> Entry(std::string id) const {
    grammar::CompileOptions on_demand;
    on_demand.classify_ahead = std::chrono::microseconds(0);
    auto entry = std::make_shared<GrammarEntry>();
    entry->id = std::move(id);
    entry->grammar = *compiler_->CompileRegex("[ab]+x", on_demand);
    return entry;
  }

  // Builds the grammar's first tables (and the slots they live in).
  static void FirstMask(const GrammarEntry& entry) {
    grammar::GrammarMatcher matcher(*entry.grammar);
    std::vector<uint32_t> row(entry.grammar->mask_words());
    matcher.FillNextTokenMask(row.data());
  }

  // What an entry with an id of `id_bytes` bytes holds after its first mask.
  size_t GrownBytes(size_t id_bytes) const {
    auto twin = Entry(std::string(id_bytes, 't'));
    FirstMask(*twin);
    return twin->Bytes();
  }

  metrics::Registry registry_;
  ServiceMetrics metrics_{&registry_};
  std::unique_ptr<grammar::GrammarCompiler> compiler_;
};

// The cache charges the growth at the next hit and evicts others to stay
// within its budget.
TEST_F(GrammarCacheGrowthTest, AGrammarsGrowthIsChargedAtItsNextHit) {
  auto entry = Entry("g");
  auto other = std::make_shared<GrammarEntry>();
  other->id = "other";
  other->status = absl::InvalidArgumentError("bad");
  const size_t before = entry->Bytes();
  const size_t grown = GrownBytes(1);
  ASSERT_GT(grown, before);
  // Fits both entries before g grows, and g alone after.
  GrammarCache cache(grown + other->Bytes() - 1, &metrics_);
  cache.Insert(entry);
  cache.Insert(other);
  EXPECT_EQ(cache.size(), 2u);
  FirstMask(*entry);
  ASSERT_EQ(entry->Bytes(), grown);
  EXPECT_EQ(cache.Find("g"), entry);
  EXPECT_EQ(cache.bytes(), grown);
  EXPECT_EQ(cache.size(), 1u);  // "other" made room
  EXPECT_EQ(metrics_.cache_bytes->Value(), static_cast<double>(grown));
}

// Growth without a hit (a grammar classified in the background, or one whose
// only sequence has closed) is charged by Recharge, which neither counts a
// hit nor makes the entry recent; past the budget the least recent go.
TEST_F(GrammarCacheGrowthTest, RechargeChargesGrowthWithoutCountingAHit) {
  auto g = Entry("g"), h = Entry("h");
  const size_t small = g->Bytes();
  const size_t grown = GrownBytes(1);
  ASSERT_GT(grown, small);
  // Room for g grown and h small, not for both grown.
  GrammarCache cache(grown + small, &metrics_);
  cache.Insert(g);
  cache.Insert(h);
  FirstMask(*g);
  cache.Recharge("g");
  EXPECT_EQ(cache.bytes(), grown + small);
  EXPECT_EQ(metrics_.cache_bytes->Value(), static_cast<double>(grown + small));
  EXPECT_EQ(metrics_.cache_hits->Value(), 0);
  EXPECT_EQ(metrics_.cache_evictions->Value(), 0);
  FirstMask(*h);
  cache.Recharge("h");  // over the budget: g, still the least recent, goes
  EXPECT_FALSE(cache.Contains("g"));
  EXPECT_TRUE(cache.Contains("h"));
  EXPECT_EQ(cache.bytes(), grown);
  cache.Recharge("gone");  // not cached: nothing to charge
  EXPECT_EQ(cache.bytes(), grown);
}

// An in-memory shared tier: a map, leases that never lapse, and a switch
// that makes every call fail as an unreachable Redis would.
class FakeSharedCache : public SharedCache {
 public:
  absl::StatusOr<std::optional<std::string>> Get(
      const std::string& id) override {
    absl::MutexLock lock(&mu_);
    if (down_) return absl::UnavailableError("down");
    auto it = values_.find(id);
    if (it == values_.end()) return std::nullopt;
    return it->second;
  }
  absl::Status Put(const std::string& id, std::string_view value,
                   std::chrono::milliseconds) override {
    absl::MutexLock lock(&mu_);
    if (down_) return absl::UnavailableError("down");
    values_[id] = std::string(value);
    return absl::OkStatus();
  }
  absl::StatusOr<bool> AcquireLease(const std::string& id) override {
    absl::MutexLock lock(&mu_);
    if (down_) return absl::UnavailableError("down");
    return leases_.insert(id).second;
  }
  absl::StatusOr<bool> LeaseHeld(const std::string& id) override {
    absl::MutexLock lock(&mu_);
    if (down_) return absl::UnavailableError("down");
    return leases_.count(id) > 0;
  }
  void ReleaseLease(const std::string& id) override {
    absl::MutexLock lock(&mu_);
    leases_.erase(id);
  }

  absl::Mutex mu_;
  bool down_ = false;
  std::map<std::string, std::string> values_;
  std::set<std::string> leases_;
};

TEST_F(CompilePoolTest, SharedTierServesAnotherReplicaWithoutCompiling) {
  FakeSharedCache shared;
  metrics::Registry registry_a, registry_b;
  ServiceMetrics metrics_a(&registry_a), metrics_b(&registry_b);
  GrammarCache cache_a(size_t{1} << 30, &metrics_a);
  GrammarCache cache_b(size_t{1} << 30, &metrics_b);
  CompilePool a({}, &cache_a, &metrics_a, &shared);
  CompilePool b({}, &cache_b, &metrics_b, &shared);
  auto compiled = a.Submit(tokenizer_, Regex("(ab)+x"));
  ASSERT_TRUE(compiled.ok());
  auto entry_a =
      compiled->job->WaitUntil(Clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(entry_a->status.ok());
  EXPECT_TRUE(shared.leases_.empty());  // released after the compile
  auto loaded = b.Submit(tokenizer_, Regex("(ab)+x"));
  ASSERT_TRUE(loaded.ok());
  auto entry_b =
      loaded->job->WaitUntil(Clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(entry_b->status.ok());
  EXPECT_EQ(entry_b->grammar->num_states(), entry_a->grammar->num_states());
  EXPECT_EQ(metrics_b.redis_hits->Value(), 1);
  EXPECT_EQ(metrics_b.CompileSeconds("regex")->Count(), 0);
  EXPECT_EQ(metrics_a.CompileSeconds("regex")->Count(), 1);
}

TEST_F(CompilePoolTest, WaitsForTheLeaseHolderThenTakesOverWhenItGoes) {
  FakeSharedCache shared;
  CompilePool pool({}, &cache_, &metrics_, &shared);
  const std::string id = GrammarId(tokenizer_->vocab->fingerprint(),
                                   ParseConstraint(Regex("a+b"))->canonical);
  shared.leases_.insert(id);  // another replica compiles it
  auto submitted = pool.Submit(tokenizer_, Regex("a+b"));
  ASSERT_TRUE(submitted.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(submitted->job->result(), nullptr);  // waiting
  EXPECT_EQ(metrics_.redis_remote_waits->Value(), 1);
  shared.ReleaseLease(id);  // it went away without a result
  auto entry =
      submitted->job->WaitUntil(Clock::now() + std::chrono::seconds(30));
  ASSERT_NE(entry, nullptr);
  EXPECT_TRUE(entry->status.ok());
  EXPECT_EQ(metrics_.CompileSeconds("regex")->Count(), 1);
  EXPECT_EQ(shared.values_.count(id), 1u);
}

TEST_F(CompilePoolTest, FailingSharedTierFallsBackToLocalCompiles) {
  FakeSharedCache shared;
  shared.down_ = true;
  CompilePool pool({}, &cache_, &metrics_, &shared);
  auto entry = Finish(pool, Regex("x+"));
  ASSERT_NE(entry, nullptr);
  EXPECT_TRUE(entry->status.ok());
  // A damaged value is rejected, compiled again and replaced.
  shared.down_ = false;
  const std::string id = GrammarId(tokenizer_->vocab->fingerprint(),
                                   ParseConstraint(Regex("1+"))->canonical);
  shared.values_[id] = "damaged";
  entry = Finish(pool, Regex("1+"));
  ASSERT_NE(entry, nullptr);
  EXPECT_TRUE(entry->status.ok());
  EXPECT_EQ(metrics_.redis_rejected->Value(), 1);
  EXPECT_NE(shared.values_[id], "damaged");
}

// A grammar whose compile takes seconds in little memory: a chain of
// 40,000 rules, each copied into the one before (choosing what to copy
// walks the chain once a rule). It stops at its deadline or when
// cancelled. `salt` makes each its own compile.
Constraint Slow(int salt) {
  std::string text = "root ::= r0\n";
  for (int i = 0; i < 40000; ++i) {
    absl::StrAppend(&text, "r", i, " ::= r", i + 1, "\n");
  }
  absl::StrAppend(&text, "r40000 ::= \"a", salt, "\"\n");
  Constraint c;
  c.mutable_grammar()->set_text(text);
  return c;
}

CompilePool::Options SlowOptions(int threads) {
  CompilePool::Options o;
  o.threads = threads;
  o.timeout = std::chrono::seconds(60);
  o.classify_in_background = false;
  return o;
}

// Waits (up to 10 s) until `n` compiles run.
bool AwaitRunning(ServiceMetrics& metrics, int n) {
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (metrics.compiles_running->Value() < n) {
    if (Clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// CancelAll (on SIGTERM) stops a running compile at once and fails the
// queued ones, none of them cached.
TEST_F(CompilePoolTest, CancelAllStopsRunningAndQueuedCompiles) {
  auto pool = Pool(SlowOptions(1));
  auto running = pool->Submit(tokenizer_, Slow(1), "a");
  auto queued = pool->Submit(tokenizer_, Slow(2), "a");
  ASSERT_TRUE(running.ok() && queued.ok());
  ASSERT_TRUE(AwaitRunning(metrics_, 1));
  const auto start = Clock::now();
  pool->CancelAll();
  for (const auto* s : {&running, &queued}) {
    auto entry = (*s)->job->WaitUntil(Clock::now() + std::chrono::seconds(5));
    ASSERT_NE(entry, nullptr);
    EXPECT_EQ(entry->status.code(), absl::StatusCode::kCancelled)
        << entry->status;
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(cache_.Find(running->job->id()), nullptr);
  EXPECT_EQ(pool->Submit(tokenizer_, Regex("a"), "b").status().code(),
            absl::StatusCode::kUnavailable);
}

// With every compile thread held by one client's slow compiles, another
// client's compile still starts at once (on one of the extra threads), and
// the first client's next compile waits its turn.
TEST_F(CompilePoolTest, OneClientsSlowCompilesDoNotHoldBackAnother) {
  auto pool = Pool(SlowOptions(1));
  std::vector<std::shared_ptr<CompileJob>> slow;
  for (int i = 0; i < 3; ++i) {
    auto s = pool->Submit(tokenizer_, Slow(10 + i), "hog");
    ASSERT_TRUE(s.ok()) << s.status();
    slow.push_back(s->job);
  }
  ASSERT_TRUE(AwaitRunning(metrics_, 1));
  auto quick = pool->Submit(tokenizer_, Regex("[ab]{3}"), "other");
  ASSERT_TRUE(quick.ok());
  auto entry = quick->job->WaitUntil(Clock::now() + std::chrono::seconds(10));
  ASSERT_NE(entry, nullptr);
  EXPECT_TRUE(entry->status.ok()) << entry->status;
  // The hog's second compile is still waiting: one thread is its share.
  EXPECT_EQ(slow[1]->result(), nullptr);
  EXPECT_EQ(metrics_.compiles_running->Value(), 1);
  pool->CancelAll();
}

// A client may queue max_queue_per_client compiles; another client still
// may; and the text of everything queued has a byte budget.
TEST_F(CompilePoolTest, QueuesAreBoundedPerClientAndInBytes) {
  CompilePool::Options o = SlowOptions(1);
  o.max_queue_per_client = 2;
  o.max_queue_bytes = 4 << 20;
  auto pool = Pool(o);
  ASSERT_TRUE(pool->Submit(tokenizer_, Slow(20), "a").ok());
  ASSERT_TRUE(AwaitRunning(metrics_, 1));
  // Each client gets an extra thread when it has none running: fill those.
  ASSERT_TRUE(pool->Submit(tokenizer_, Slow(21), "b").ok());
  ASSERT_TRUE(AwaitRunning(metrics_, 2));
  ASSERT_TRUE(pool->Submit(tokenizer_, Slow(22), "a").ok());
  ASSERT_TRUE(pool->Submit(tokenizer_, Slow(23), "a").ok());
  const absl::Status full = pool->Submit(tokenizer_, Slow(24), "a").status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_NE(full.message().find("--compile_queue_per_client"),
            std::string::npos)
      << full;
  EXPECT_TRUE(pool->Submit(tokenizer_, Slow(25), "b").ok());
  // Six chains of 500 KB each are queued or compiling.
  const absl::Status bytes =
      pool->Submit(tokenizer_, Regex(std::string(1500000, 'a')), "c").status();
  EXPECT_EQ(bytes.code(), absl::StatusCode::kResourceExhausted) << bytes;
  EXPECT_NE(bytes.message().find("--compile_queue_bytes"), std::string::npos)
      << bytes;
  pool.reset();  // cancels and waits for the running compiles
  // Everything given back: the budget is free again.
  EXPECT_EQ(metrics_.compile_queue_bytes->Value(), 0);
}

// A constraint larger than max_constraint_bytes is refused before it is
// read.
TEST_F(CompilePoolTest, OversizedConstraintsAreRefusedUnread) {
  CompilePool::Options o;
  o.max_constraint_bytes = 100;
  auto pool = Pool(o);
  // Not even valid JSON: the size is all that is looked at.
  const absl::Status s =
      pool->Submit(tokenizer_, Schema("{" + std::string(200, ' '))).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("--max_constraint_bytes"), std::string::npos) << s;
}

// A queued schema is kept parsed, not as text: the budget counts the parsed
// document, which is several times the text, and gives it back when the
// compile is done.
TEST_F(CompilePoolTest, TheBudgetCountsTheParsedDocumentAQueuedSchemaKeeps) {
  std::string schema = R"({"enum": [0)";
  for (int i = 1; i < 20000; ++i) schema += "," + std::to_string(i);
  schema += "]}";
  const int64_t parsed = ParseConstraint(Schema(schema))->bytes;
  ASSERT_GT(parsed, 2 * static_cast<int64_t>(schema.size()));
  CompilePool::Options o;
  o.max_queue_bytes = (static_cast<int64_t>(schema.size()) + parsed) / 2;
  auto pool = Pool(o);
  const absl::Status s = pool->Submit(tokenizer_, Schema(schema)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("--compile_queue_bytes"), std::string::npos) << s;
  EXPECT_EQ(metrics_.compile_queue_bytes->Value(), 0);
  o.max_queue_bytes = parsed;
  pool = Pool(o);
  EXPECT_NE(Finish(*pool, Schema(schema)), nullptr);
  pool.reset();  // the job's result comes before its charge is given back
  EXPECT_EQ(metrics_.compile_queue_bytes->Value(), 0);
}

// A large document whose least parsed size cannot be charged is refused
// before it is built: the text below ends in a byte that is not JSON, which
// building it would have reported instead.
TEST_F(CompilePoolTest, ALargeDocumentThatCannotFitIsRefusedUnbuilt) {
  std::string schema = R"({"enum": ["v0")";
  for (int i = 1; schema.size() < (2 << 20); ++i) {
    schema += ",\"v" + std::to_string(i) + "\"";
  }
  schema += "]}";
  const int64_t least = LeastParsedBytes(Schema(schema));
  ASSERT_GT(least, 2 * static_cast<int64_t>(schema.size()));
  CompilePool::Options o;
  o.max_queue_bytes = (static_cast<int64_t>(schema.size()) + least) / 2;
  auto pool = Pool(o);
  const absl::Status s =
      pool->Submit(tokenizer_, Schema(schema + "x")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("once parsed"), std::string::npos) << s;
  EXPECT_EQ(metrics_.compile_queue_bytes->Value(), 0);
  // With room for it, the same text is read, and its error reported.
  o.max_queue_bytes = int64_t{1} << 30;
  pool = Pool(o);
  EXPECT_EQ(pool->Submit(tokenizer_, Schema(schema + "x")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace grammard::service
