#include "grammar/base/refine.h"

#include <map>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace grammard::grammar::internal {
namespace {

// A random automaton over a 4-symbol alphabet: per state, a target or -1 per
// symbol, and a class to start from.
struct Automaton {
  std::vector<std::vector<int32_t>> next;
  std::vector<int32_t> initial;
  int32_t classes = 0;
};

Automaton RandomAutomaton(std::mt19937* rng) {
  Automaton a;
  const int32_t n = 1 + (*rng)() % 40;
  a.classes = 1 + (*rng)() % 3;
  for (int32_t s = 0; s < n; ++s) {
    std::vector<int32_t> row(4);
    for (int32_t& t : row) {
      // Chains (s -> s + 1) as well as random edges, so that splits take
      // many rounds.
      const uint32_t pick = (*rng)() % 4;
      t = pick == 0 ? -1 : pick == 1 && s + 1 < n ? s + 1 : (*rng)() % n;
    }
    a.next.push_back(row);
    a.initial.push_back((*rng)() % a.classes);
  }
  return a;
}

// Moore's refinement as the textbook states it, round by round.
std::vector<int32_t> Moore(const Automaton& a, int rounds, bool* stable) {
  std::vector<int32_t> cls = a.initial;
  *stable = false;
  for (int r = 0; r <= rounds; ++r) {
    std::map<std::vector<int32_t>, int32_t> ids;
    std::vector<int32_t> next(cls.size());
    for (size_t s = 0; s < cls.size(); ++s) {
      std::vector<int32_t> sig{cls[s]};
      for (int32_t t : a.next[s]) sig.push_back(t < 0 ? -1 : cls[t]);
      next[s] =
          ids.emplace(sig, static_cast<int32_t>(ids.size())).first->second;
    }
    std::map<int32_t, int32_t> before;
    for (int32_t c : cls) before.emplace(c, 0);
    if (ids.size() == before.size()) {
      *stable = true;
      return cls;
    }
    if (r == rounds) break;
    cls = next;
  }
  return cls;
}

bool SamePartition(const std::vector<int32_t>& a,
                   const std::vector<int32_t>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = 0; j < a.size(); ++j) {
      if ((a[i] == a[j]) != (b[i] == b[j])) return false;
    }
  }
  return true;
}

Refinement RunRefine(const Automaton& a, int64_t rounds, int64_t max_work) {
  const int32_t n = static_cast<int32_t>(a.next.size());
  const Predecessors pred = PredecessorsOf(n, [&](int32_t s, auto&& f) {
    for (int32_t t : a.next[s]) {
      if (t >= 0) f(t);
    }
  });
  return Refine(a.initial, a.classes, pred, rounds, max_work,
                [&](int32_t s, const std::vector<int32_t>& cls,
                    std::vector<int32_t>* sig) {
                  for (int32_t t : a.next[s])
                    sig->push_back(t < 0 ? -1 : cls[t]);
                });
}

TEST(RefineTest, EveryRoundEqualsMoore) {
  std::mt19937 rng(7);
  int multi_round = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const Automaton a = RandomAutomaton(&rng);
    const int32_t n = static_cast<int32_t>(a.next.size());
    for (int rounds = 0; rounds <= n + 1; ++rounds) {
      bool stable = false;
      const std::vector<int32_t> want = Moore(a, rounds, &stable);
      const Refinement got = RunRefine(a, rounds, int64_t{1} << 30);
      ASSERT_TRUE(SamePartition(want, got.cls))
          << "trial " << trial << " rounds " << rounds;
      if (got.stable) {
        ASSERT_TRUE(stable) << "trial " << trial << " rounds " << rounds;
      }
      if (stable && rounds > 1) ++multi_round;
    }
    const Refinement all = RunRefine(a, int64_t{1} << 40, int64_t{1} << 30);
    ASSERT_TRUE(all.stable);
  }
  EXPECT_GT(multi_round, 1000);
}

TEST(RefineTest, AChainSplitsAStateARoundAtLinearCost) {
  // s0 -> s1 -> ... -> s(n-1), only the last one final: n classes after
  // n - 1 rounds, signing a couple of states a round.
  const int32_t n = 3000;
  Automaton a;
  a.classes = 2;
  for (int32_t s = 0; s < n; ++s) {
    a.next.push_back({s + 1 < n ? s + 1 : -1, -1, -1, -1});
    a.initial.push_back(s + 1 == n ? 1 : 0);
  }
  // Moore would sign n states a round: n^2 / 2 ints and more.
  const Refinement r = RunRefine(a, int64_t{1} << 40, int64_t{20} * n);
  ASSERT_TRUE(r.stable);
  std::vector<int32_t> seen(r.classes, 0);
  for (int32_t c : r.cls) ++seen[c];
  for (int32_t count : seen) EXPECT_LE(count, 1);
}

// Two signatures of four ints with one HashInts. It multiplies in one
// 64-bit word at a time, h = (h ^ word) * kMul from h = kMul ^ length, and
// its finalizer is a bijection: {1, 0, 0, 0} and {2, 0, z} agree once the
// second word z undoes, by its xor, where their first words left h.
std::pair<std::vector<int32_t>, std::vector<int32_t>> CollidingSignatures() {
  const uint64_t mul = 0x9E3779B97F4A7C15ull, seed = mul ^ 4;
  const uint64_t z = ((seed ^ 1) * mul) ^ ((seed ^ 2) * mul);
  return {{1, 0, 0, 0},
          {2, 0, static_cast<int32_t>(static_cast<uint32_t>(z)),
           static_cast<int32_t>(static_cast<uint32_t>(z >> 32))}};
}

TEST(RefineTest, SignaturesWhoseHashesCollideStillSplit) {
  const auto [a, b] = CollidingSignatures();
  ASSERT_FALSE(a.empty()) << "no colliding signatures found";
  ASSERT_NE(a, b);
  ASSERT_EQ(HashInts(a.data(), a.data() + a.size()),
            HashInts(b.data(), b.data() + b.size()));
  // One class; states 0 and 2 sign a, state 1 signs b. Grouped by hash
  // alone, the three would stay one class.
  const std::vector<std::vector<int32_t>> sigs{a, b, a};
  const Predecessors none = PredecessorsOf(3, [](int32_t, auto&&) {});
  const Refinement r = Refine(
      {0, 0, 0}, 1, none, int64_t{1} << 40, int64_t{1} << 30,
      [&](int32_t s, const std::vector<int32_t>&, std::vector<int32_t>* sig) {
        sig->insert(sig->end(), sigs[s].begin(), sigs[s].end());
      });
  ASSERT_TRUE(r.stable);
  EXPECT_EQ(r.cls[0], r.cls[2]);
  EXPECT_NE(r.cls[0], r.cls[1]);
}

TEST(RefineTest, StopsBeforePassingTheWorkBudget) {
  std::mt19937 rng(3);
  const Automaton a = RandomAutomaton(&rng);
  const Refinement r = RunRefine(a, int64_t{1} << 40, 0);
  EXPECT_FALSE(r.stable);
  EXPECT_EQ(r.rounds, 0);
  EXPECT_TRUE(SamePartition(r.cls, a.initial));
}

}  // namespace
}  // namespace grammard::grammar::internal
