// Random walks that check the masks of a grammar with run-time conditions
// (distinct items, counted members) token by token: each mask against the
// mask of the same grammar without them, narrowed by a direct reading of
// the text so far (a brute-force check the test writes). Every mask must
// be non-empty, every text a walk ends must pass the reading, and the
// narrowing must bite somewhere, or the test proved nothing.
//
// Cost: walks x steps x vocabulary calls of the reading. Thread-safety:
// test code, one thread.
#ifndef GRAMMARD_GRAMMAR_TESTING_DIRECT_READING_WALK_H_
#define GRAMMARD_GRAMMAR_TESTING_DIRECT_READING_WALK_H_

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"

namespace grammard::grammar::testing {

struct DirectReadingWalk {
  uint32_t seed = 1;
  int walks = 30;
  int steps = 40;
  // Text both grammars read before each walk (the walk's text begins with
  // it).
  std::string start;
  // The token a walk takes among those allowed at `step`: the test's bias
  // (toward tokens that end things, so that the conditions bite).
  std::function<int32_t(const std::vector<int32_t>& allowed, int step,
                        std::mt19937& rng)>
      pick;
};

// `can_go_on(text)`: whether `text`, in `plain`'s language, may still end
// in `checked`'s. `what` names the case in failures (gtest's).
void WalkAgainstADirectReading(
    const CompiledGrammar& checked, const CompiledGrammar& plain,
    const DirectReadingWalk& walk,
    const std::function<bool(const std::string&)>& can_go_on,
    const std::string& what);

}  // namespace grammard::grammar::testing

#endif  // GRAMMARD_GRAMMAR_TESTING_DIRECT_READING_WALK_H_
