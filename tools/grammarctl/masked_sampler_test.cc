#include "tools/grammarctl/masked_sampler.h"

#include <set>

#include "gtest/gtest.h"

namespace grammard::grammarctl {
namespace {

TEST(MaskedSamplerTest, PicksOnlyAllowedTokens) {
  std::vector<uint32_t> words(4, 0);
  const std::set<int32_t> allowed = {3, 31, 32, 100};
  for (int32_t id : allowed) words[id / 32] |= 1u << (id % 32);
  std::mt19937 rng(7);
  std::set<int32_t> uniform, softmax;
  for (int i = 0; i < 400; ++i) {
    uniform.insert(UniformAllowed(words, &rng));
    softmax.insert(SampleRandomLogits(words, &rng));
  }
  EXPECT_EQ(uniform, allowed);  // 400 draws reach all four
  EXPECT_EQ(softmax, allowed);
  EXPECT_TRUE(Allowed(words, 100));
  EXPECT_FALSE(Allowed(words, 101));
  EXPECT_FALSE(Allowed(words, 128));
}

TEST(MaskedSamplerTest, NothingAllowed) {
  std::vector<uint32_t> words(4, 0);
  std::mt19937 rng(7);
  EXPECT_EQ(UniformAllowed(words, &rng), -1);
  EXPECT_EQ(SampleRandomLogits(words, &rng), -1);
}

}  // namespace
}  // namespace grammard::grammarctl
