#include "grammar/base/scc.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace grammard::grammar::internal {
namespace {

// Random graphs against reachability by brute force: two nodes share a
// component exactly when each reaches the other, and every edge between
// components goes to a lower-numbered one.
TEST(StronglyConnectedTest, ComponentsAreMutualReachability) {
  std::mt19937 rng(11);
  for (int round = 0; round < 300; ++round) {
    const int32_t n = 1 + static_cast<int32_t>(rng() % 12);
    std::vector<std::vector<int32_t>> succ(n);
    const int edges = static_cast<int>(rng() % (2 * n + 1));
    for (int e = 0; e < edges; ++e) succ[rng() % n].push_back(rng() % n);
    std::vector<int32_t> begin{0}, targets;
    for (const auto& s : succ) {
      targets.insert(targets.end(), s.begin(), s.end());
      begin.push_back(static_cast<int32_t>(targets.size()));
    }
    const Components c = StronglyConnected(begin, targets);
    // reach[a][b]: a path (possibly empty) from a to b.
    std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
    for (int32_t a = 0; a < n; ++a) {
      std::vector<int32_t> work{a};
      reach[a][a] = true;
      while (!work.empty()) {
        const int32_t v = work.back();
        work.pop_back();
        for (int32_t w : succ[v]) {
          if (!reach[a][w]) {
            reach[a][w] = true;
            work.push_back(w);
          }
        }
      }
    }
    ASSERT_EQ(c.order.size(), static_cast<size_t>(n));
    std::vector<int32_t> count(c.size.size(), 0);
    for (int32_t a = 0; a < n; ++a) {
      ++count[c.of[a]];
      for (int32_t b = 0; b < n; ++b) {
        ASSERT_EQ(c.of[a] == c.of[b], reach[a][b] && reach[b][a])
            << "round " << round << " nodes " << a << ", " << b;
      }
      for (int32_t w : succ[a]) ASSERT_LE(c.of[w], c.of[a]);
    }
    EXPECT_EQ(count, c.size);
    // `order` lists the components one after another, in number order.
    for (size_t k = 1; k < c.order.size(); ++k) {
      ASSERT_LE(c.of[c.order[k - 1]], c.of[c.order[k]]);
    }
  }
}

}  // namespace
}  // namespace grammard::grammar::internal
