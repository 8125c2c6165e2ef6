#include "tools/grammarctl/masked_sampler.h"

#include <cmath>

namespace grammard::grammarctl {

int32_t SampleRandomLogits(const std::vector<uint32_t>& words,
                           std::mt19937* rng) {
  // Disallowed tokens have weight exp(-inf) = 0, so only allowed ones draw a
  // logit; their weights are kept to sample from in a second pass.
  std::uniform_real_distribution<double> logit(0.0, 1.0);
  std::vector<std::pair<int32_t, double>> weights;
  double total = 0;
  for (size_t w = 0; w < words.size(); ++w) {
    for (uint32_t bits = words[w]; bits != 0; bits &= bits - 1) {
      const double weight = std::exp(logit(*rng));
      weights.emplace_back(static_cast<int32_t>(w * 32) + __builtin_ctz(bits),
                           weight);
      total += weight;
    }
  }
  if (weights.empty()) return -1;
  double r = std::uniform_real_distribution<double>(0.0, total)(*rng);
  for (const auto& [id, weight] : weights) {
    if (r < weight) return id;
    r -= weight;
  }
  return weights.back().first;  // rounding left r just past the last weight
}

int32_t UniformAllowed(const std::vector<uint32_t>& words, std::mt19937* rng) {
  int64_t count = 0;
  for (uint32_t word : words) count += __builtin_popcount(word);
  if (count == 0) return -1;
  int64_t k = std::uniform_int_distribution<int64_t>(0, count - 1)(*rng);
  for (size_t w = 0; w < words.size(); ++w) {
    const int ones = __builtin_popcount(words[w]);
    if (k >= ones) {
      k -= ones;
      continue;
    }
    uint32_t bits = words[w];
    for (; k > 0; --k) bits &= bits - 1;  // drop the k lowest set bits
    return static_cast<int32_t>(w * 32) + __builtin_ctz(bits);
  }
  return -1;  // unreachable: k < count
}

}  // namespace grammard::grammarctl
