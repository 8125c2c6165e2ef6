// StronglyConnected: the strongly connected components of a directed graph
// (Tarjan's algorithm, iterative, so that a chain of a hundred thousand
// nodes cannot overflow the stack).
//
// Cost: O(nodes + edges) time and memory. Thread-safety: a pure function.
#ifndef GRAMMARD_GRAMMAR_BASE_SCC_H_
#define GRAMMARD_GRAMMAR_BASE_SCC_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace grammard::grammar::internal {

struct Components {
  // Per node, its component. Components are numbered in the order they
  // complete, which is reverse topological: whatever a component reaches
  // outside itself has a lower number.
  std::vector<int32_t> of;
  // The nodes, component by component in that order.
  std::vector<int32_t> order;
  std::vector<int32_t> size;  // per component
};

// The graph in CSR form: node v's successors are
// targets[begin[v] .. begin[v + 1]).
inline Components StronglyConnected(const std::vector<int32_t>& begin,
                                    const std::vector<int32_t>& targets) {
  const int32_t n = static_cast<int32_t>(begin.size()) - 1;
  Components out;
  out.of.assign(n, -1);
  std::vector<int32_t> index(n, -1), low(n, 0), stack;
  std::vector<char> on_stack(n, 0);
  int32_t counter = 0;
  // (node, its next successor to visit)
  std::vector<std::pair<int32_t, int32_t>> work;
  for (int32_t root = 0; root < n; ++root) {
    if (index[root] >= 0) continue;
    work.assign({{root, begin[root]}});
    index[root] = low[root] = counter++;
    stack.push_back(root);
    on_stack[root] = 1;
    while (!work.empty()) {
      auto& [v, next] = work.back();
      if (next < begin[v + 1]) {
        const int32_t w = targets[next++];
        if (index[w] < 0) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          on_stack[w] = 1;
          work.emplace_back(w, begin[w]);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        const int32_t id = static_cast<int32_t>(out.size.size());
        out.size.push_back(0);
        int32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          out.of[w] = id;
          ++out.size[id];
          out.order.push_back(w);
        } while (w != v);
      }
      const int32_t done = v;
      work.pop_back();
      if (!work.empty()) {
        low[work.back().first] = std::min(low[work.back().first], low[done]);
      }
    }
  }
  return out;
}

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_BASE_SCC_H_
