#include "service/sequence.h"

#include <vector>

#include "grammar/compiler.h"
#include "gtest/gtest.h"

namespace grammard::service {
namespace {

// Ids: 0 "a", 1 "b", 2 "ab", 3 "{", 4 "}", 5 "<eos>", 6 "</think>".
class SequenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto vocab = grammar::Vocabulary::FromTokens(
        {"a", "b", "ab", "{", "}", "<eos>", "</think>"}, {5, 6}, {5}, {});
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    grammar::GrammarCompiler compiler(*vocab);
    auto g = compiler.CompileRegex("\\{(ab)*\\}");
    ASSERT_TRUE(g.ok()) << g.status();
    grammar_.emplace(*g);
  }

  // The allowed ids of a row.
  static std::vector<int32_t> Allowed(const uint32_t* row, int32_t n) {
    std::vector<int32_t> ids;
    for (int32_t i = 0; i < n; ++i) {
      if ((row[i / 32] >> (i % 32)) & 1) ids.push_back(i);
    }
    return ids;
  }

  std::vector<int32_t> Mask(Sequence& seq) {
    std::vector<uint32_t> row(seq.mask_words());
    seq.FillRows({}, row.data());
    return Allowed(row.data(), seq.vocab_size());
  }

  std::optional<grammar::CompiledGrammar> grammar_;
};

using Ids = std::vector<int32_t>;

TEST_F(SequenceTest, AdvancesRollsBackAndTerminates) {
  Sequence seq(1, *grammar_, {});
  EXPECT_EQ(Mask(seq), Ids({3}));
  ASSERT_TRUE(seq.Advance(0, {3, 0, 1}).ok());
  EXPECT_EQ(Mask(seq), Ids({0, 2, 4}));
  ASSERT_TRUE(seq.Advance(2, {}).ok());  // back to after "{"
  EXPECT_EQ(Mask(seq), Ids({0, 2, 4}));
  ASSERT_TRUE(seq.Advance(0, {4}).ok());
  EXPECT_TRUE(seq.CanTerminate());
  EXPECT_EQ(Mask(seq), Ids({5}));
  ASSERT_TRUE(seq.Advance(0, {5}).ok());
  EXPECT_TRUE(seq.IsTerminated());
}

// Keys name rows: two sequences at one position share a key, a thinking
// sequence's all-allowed row has a key of its own, and equal keys come
// with equal rows.
TEST_F(SequenceTest, EqualRowKeysMeanEqualRows) {
  Sequence a(1, *grammar_, {});
  Sequence b(2, *grammar_, {});
  Sequence thinking(3, *grammar_, {true, 6});
  ASSERT_TRUE(a.Advance(0, {3, 2}).ok());     // "{ab"
  ASSERT_TRUE(b.Advance(0, {3, 0, 1}).ok());  // "{" "a" "b"
  std::vector<uintptr_t> key_a, key_b, key_thinking;
  ASSERT_TRUE(a.NextRowKey(&key_a));
  ASSERT_TRUE(b.NextRowKey(&key_b));
  ASSERT_TRUE(thinking.NextRowKey(&key_thinking));
  EXPECT_EQ(key_a, key_b);
  EXPECT_EQ(Mask(a), Mask(b));
  EXPECT_NE(key_thinking, key_a);
  EXPECT_EQ(Mask(thinking).size(), 7u);
  ASSERT_TRUE(b.Advance(0, {0}).ok());  // "{aba": inside a pair now
  ASSERT_TRUE(b.NextRowKey(&key_b));
  EXPECT_NE(key_a, key_b);
  EXPECT_NE(Mask(a), Mask(b));
}

TEST_F(SequenceTest, RefusedTokenNamesSequenceAndToken) {
  Sequence seq(42, *grammar_, {});
  absl::Status s = seq.Advance(0, {3, 1});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sequence 42"), std::string::npos) << s;
  EXPECT_NE(s.message().find("id 1"), std::string::npos) << s;
  Sequence other(43, *grammar_, {});
  EXPECT_FALSE(other.Advance(5, {}).ok());
  EXPECT_FALSE(other.Advance(0, {99}).ok());
}

TEST_F(SequenceTest, DraftRowsMatchStepwiseMasksAndLeaveStateAlone) {
  Sequence seq(1, *grammar_, {});
  ASSERT_TRUE(seq.Advance(0, {3}).ok());
  const int32_t w = seq.mask_words();
  // "a", "b" and "}" are fine; "a" after "}" is refused.
  const Ids drafts = {0, 1, 4, 0};
  std::vector<uint32_t> rows((drafts.size() + 1) * w);
  seq.FillRows(drafts, rows.data());
  EXPECT_EQ(Allowed(&rows[0 * w], seq.vocab_size()), Ids({0, 2, 4}));
  EXPECT_EQ(Allowed(&rows[1 * w], seq.vocab_size()), Ids({1}));
  EXPECT_EQ(Allowed(&rows[2 * w], seq.vocab_size()), Ids({0, 2, 4}));
  EXPECT_EQ(Allowed(&rows[3 * w], seq.vocab_size()), Ids({5}));
  // Draft 3 ("a" after "}") is refused: the row after it is all allowed.
  EXPECT_EQ(Allowed(&rows[4 * w], seq.vocab_size()).size(), 7u);
  EXPECT_EQ(Mask(seq), Ids({0, 2, 4}));
}

TEST_F(SequenceTest, ReasoningAllowsEverythingUntilThinkEnd) {
  Sequence seq(1, *grammar_, {true, 6});
  EXPECT_TRUE(seq.thinking());
  EXPECT_EQ(Mask(seq).size(), 7u);
  EXPECT_FALSE(seq.CanTerminate());
  // Anything goes while thinking, then the grammar starts.
  ASSERT_TRUE(seq.Advance(0, {1, 1, 4, 6}).ok());
  EXPECT_FALSE(seq.thinking());
  EXPECT_EQ(Mask(seq), Ids({3}));
  ASSERT_TRUE(seq.Advance(0, {3, 0}).ok());
  // Rolling back over the grammar's tokens and the think-end token
  // re-enters the thinking section.
  ASSERT_TRUE(seq.Advance(3, {}).ok());
  EXPECT_TRUE(seq.thinking());
  ASSERT_TRUE(seq.Advance(3, {6, 3}).ok());
  EXPECT_EQ(Mask(seq), Ids({0, 2, 4}));
  // Accepted now: the think-end token and "{".
  EXPECT_FALSE(seq.Advance(3, {}).ok());
}

TEST_F(SequenceTest, DraftsCrossingThinkEnd) {
  Sequence seq(1, *grammar_, {true, 6});
  const int32_t w = seq.mask_words();
  const Ids drafts = {0, 6, 3};
  std::vector<uint32_t> rows((drafts.size() + 1) * w);
  seq.FillRows(drafts, rows.data());
  EXPECT_EQ(Allowed(&rows[0 * w], seq.vocab_size()).size(), 7u);
  EXPECT_EQ(Allowed(&rows[1 * w], seq.vocab_size()).size(), 7u);
  EXPECT_EQ(Allowed(&rows[2 * w], seq.vocab_size()), Ids({3}));
  EXPECT_EQ(Allowed(&rows[3 * w], seq.vocab_size()), Ids({0, 2, 4}));
  EXPECT_TRUE(seq.thinking());
  EXPECT_EQ(Mask(seq).size(), 7u);
}

// A sequence holds at most max_tokens tokens; the step that would pass the
// limit is refused before any of its tokens is read.
TEST_F(SequenceTest, TokensPastTheLimitAreRefused) {
  SequenceLimits limits;
  limits.max_tokens = 4;
  Sequence seq(1, *grammar_, {}, limits);
  ASSERT_TRUE(seq.Advance(0, {3, 0, 1}).ok());
  const absl::Status s = seq.Advance(0, {0, 1});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("--max_sequence_tokens"), std::string::npos) << s;
  EXPECT_EQ(Mask(seq), Ids({0, 2, 4}));  // nothing of it was accepted
  EXPECT_TRUE(seq.Advance(0, {0}).ok());
}

// Every sequence's matcher is charged to one budget: growth past it fails
// the step, and a closed sequence gives back all it held.
TEST_F(SequenceTest, MatcherMemoryIsChargedToTheBudget) {
  ByteBudget budget(16 << 10);
  SequenceLimits limits;
  limits.memory = &budget;
  {
    Sequence seq(1, *grammar_, {}, limits);
    EXPECT_GT(budget.used(), 0);
    std::vector<int32_t> tokens = {3};
    for (int i = 0; i < 2000; ++i) tokens.push_back(2);  // "ab" each
    const absl::Status s = seq.Advance(0, tokens);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_NE(s.message().find("--max_sequence_memory_mb"), std::string::npos)
        << s;
    EXPECT_LE(budget.used(), budget.limit());
  }
  EXPECT_EQ(budget.used(), 0);
}

}  // namespace
}  // namespace grammard::service
