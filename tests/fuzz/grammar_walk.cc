#include "tests/fuzz/grammar_walk.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "grammar/matcher.h"

namespace grammard::fuzz {

void WalkGrammar(const grammar::CompiledGrammar& grammar,
                 const uint8_t* choices, size_t size) {
  grammar::GrammarMatcher matcher(grammar);
  std::vector<uint32_t> mask(static_cast<size_t>(grammar.mask_words()));
  for (size_t i = 0; i < size && !matcher.IsTerminated(); ++i) {
    matcher.FillNextTokenMask(mask.data());
    std::vector<int32_t> allowed;
    for (size_t w = 0; w < mask.size(); ++w) {
      for (uint32_t bits = mask[w]; bits != 0; bits &= bits - 1) {
        allowed.push_back(static_cast<int32_t>(w * 32) + __builtin_ctz(bits));
      }
    }
    if (allowed.empty()) std::abort();  // a live matcher always has a token
    if (choices[i] == 0xff && matcher.num_accepted() > 0) {
      if (!matcher.Rollback(1).ok()) std::abort();
      continue;
    }
    if (choices[i] == 0xfe) {
      // A fork stands where the matcher stands: the same mask, and what
      // jump-forward forces is accepted there.
      grammar::GrammarMatcher fork = matcher.Fork();
      std::vector<uint32_t> forked(mask.size());
      fork.FillNextTokenMask(forked.data());
      if (forked != mask) {
        std::fprintf(stderr, "a fork's mask differs\n");
        std::abort();
      }
      const grammar::ForcedContinuation forced = fork.JumpForward();
      const absl::Status read = fork.AcceptString(forced.bytes);
      if (read.code() == absl::StatusCode::kResourceExhausted) return;
      if (!read.ok()) {
        std::fprintf(stderr, "forced bytes refused: %s\n",
                     read.ToString().c_str());
        std::abort();
      }
      continue;
    }
    // An allowed token must be accepted.
    const absl::Status accepted =
        matcher.AcceptToken(allowed[choices[i] % allowed.size()]);
    // By design past kMaxScanNodes parse stacks (grammar/engine/stack.h):
    // the grammar is refused as too ambiguous rather than stalling.
    if (accepted.code() == absl::StatusCode::kResourceExhausted) return;
    if (!accepted.ok()) {
      std::fprintf(stderr, "allowed token refused: %s\n",
                   accepted.ToString().c_str());
      std::abort();
    }
  }
}

void CompileAndWalk(const uint8_t* data, size_t size,
                    const CompileText& compile) {
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t text_size = nul == nullptr ? size : size_t(nul - data);
  grammar::CompileOptions options;
  options.max_states = 2000;
  options.deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  auto compiled =
      compile(std::string_view(reinterpret_cast<const char*>(data), text_size),
              options);
  if (compiled.ok() && nul != nullptr) {
    WalkGrammar(*compiled, nul + 1, size - text_size - 1);
  }
}

}  // namespace grammard::fuzz
