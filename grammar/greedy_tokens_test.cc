#include "grammar/greedy_tokens.h"

#include <vector>

#include "grammar/compiler.h"
#include "grammar/matcher.h"
#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

TEST(GreedyTokensTest, TakesTheLongestAllowedPrefix) {
  // Ids 1 and 4 have the same bytes.
  auto vocab = *Vocabulary::FromTokens({"a", "ab", "abc", "b", "ab", "</s>"},
                                       {5}, {5}, {});
  auto grammar = GrammarCompiler(vocab).CompileEbnf(R"(root ::= "ab" "c"?)");
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  std::vector<uint32_t> mask(grammar->mask_words(), 0);
  GrammarMatcher(*grammar).FillNextTokenMask(mask.data());
  EXPECT_EQ(LongestAllowedToken(*grammar, mask.data(), "abcd"), 2);
  EXPECT_EQ(LongestAllowedToken(*grammar, mask.data(), "ab"), 1);
  mask[0] &= ~((1u << 1) | (1u << 2));  // neither "abc" nor the first "ab"
  EXPECT_EQ(LongestAllowedToken(*grammar, mask.data(), "abcd"), 4);
  mask[0] &= ~(1u << 4);
  EXPECT_EQ(LongestAllowedToken(*grammar, mask.data(), "abcd"), 0);
  EXPECT_EQ(LongestAllowedToken(*grammar, mask.data(), "b"), -1);
  EXPECT_EQ(LongestAllowedToken(*grammar, mask.data(), ""), -1);
}

}  // namespace
}  // namespace grammard::grammar
