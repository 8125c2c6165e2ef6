// Picking a token under a decoded mask row (packed words: bit i % 32 of word
// i / 32 set = token i allowed), for clients that stand in for a model:
// grammarctl's random "model" and the load benchmark.
//
// Cost: linear in the vocabulary (one random draw per allowed token for
// SampleRandomLogits, a popcount pass for UniformAllowed). Thread-safety:
// pure functions; the generator is the caller's.
#ifndef GRAMMARD_TOOLS_GRAMMARCTL_MASKED_SAMPLER_H_
#define GRAMMARD_TOOLS_GRAMMARCTL_MASKED_SAMPLER_H_

#include <cstdint>
#include <random>
#include <vector>

namespace grammard::grammarctl {

// Whether token `id` is allowed by the row.
inline bool Allowed(const std::vector<uint32_t>& words, int32_t id) {
  return id >= 0 && static_cast<size_t>(id / 32) < words.size() &&
         ((words[static_cast<size_t>(id / 32)] >> (id % 32)) & 1u) != 0;
}

// A stand-in model: every token gets a logit drawn uniformly from [0, 1),
// disallowed tokens -inf, and the token is sampled from the softmax. -1 when
// no token is allowed.
int32_t SampleRandomLogits(const std::vector<uint32_t>& words,
                           std::mt19937* rng);

// A token drawn uniformly from the allowed ones; -1 when none is.
int32_t UniformAllowed(const std::vector<uint32_t>& words, std::mt19937* rng);

}  // namespace grammard::grammarctl

#endif  // GRAMMARD_TOOLS_GRAMMARCTL_MASKED_SAMPLER_H_
