#include "service/compile_pool.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"
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

}  // namespace
}  // namespace grammard::service
