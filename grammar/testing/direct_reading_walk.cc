#include "grammar/testing/direct_reading_walk.h"

#include "grammar/matcher.h"
#include "gtest/gtest.h"

namespace grammard::grammar::testing {
namespace {

bool Bit(const std::vector<uint32_t>& row, int32_t id) {
  return (row[id >> 5] >> (id & 31)) & 1;
}

// One walk; gtest's ASSERTs return from it alone.
void Walk(const CompiledGrammar& checked, const CompiledGrammar& plain,
          const DirectReadingWalk& walk,
          const std::function<bool(const std::string&)>& can_go_on,
          const std::string& what, std::mt19937& rng, int* ended,
          int* narrowed) {
  const Vocabulary& vocab = checked.vocabulary();
  GrammarMatcher p(plain), c(checked);
  std::vector<uint32_t> prow(plain.mask_words()), crow(checked.mask_words());
  ASSERT_TRUE(p.AcceptString(walk.start).ok() &&
              c.AcceptString(walk.start).ok())
      << what;
  std::string text = walk.start;
  for (int step = 0; step < walk.steps && !c.IsTerminated(); ++step) {
    p.FillNextTokenMask(prow.data());
    c.FillNextTokenMask(crow.data());
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < vocab.size(); ++id) {
      bool want = Bit(prow, id);
      if (want && !vocab.is_eos(id)) {
        want = can_go_on(text + std::string(vocab.bytes(id)));
        *narrowed += !want;
      }
      ASSERT_EQ(Bit(crow, id), want) << what << " after '" << text
                                     << "' token '" << vocab.bytes(id) << "'";
      if (want) allowed.push_back(id);
    }
    ASSERT_FALSE(allowed.empty()) << what << " after '" << text << "'";
    const int32_t pick = walk.pick(allowed, step, rng);
    ASSERT_TRUE(c.AcceptToken(pick).ok());
    ASSERT_TRUE(p.AcceptToken(pick).ok());
    if (!vocab.is_eos(pick)) text += vocab.bytes(pick);
  }
  if (c.IsTerminated()) {
    ++*ended;
    EXPECT_TRUE(can_go_on(text)) << what << ": " << text;
  }
}

}  // namespace

void WalkAgainstADirectReading(
    const CompiledGrammar& checked, const CompiledGrammar& plain,
    const DirectReadingWalk& walk,
    const std::function<bool(const std::string&)>& can_go_on,
    const std::string& what) {
  std::mt19937 rng(walk.seed);
  int ended = 0, narrowed = 0;
  for (int i = 0; i < walk.walks && !::testing::Test::HasFatalFailure(); ++i) {
    Walk(checked, plain, walk, can_go_on, what, rng, &ended, &narrowed);
  }
  EXPECT_GT(ended, 0) << what;
  EXPECT_GT(narrowed, 0) << what;
}

}  // namespace grammard::grammar::testing
