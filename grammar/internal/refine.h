// Refine: Moore's partition refinement over automaton states (or rules),
// signing again only the states whose targets changed class.
//
// Round k splits every class by the states' signatures (what each byte and
// call leads to, as classes after round k-1), exactly as Moore's algorithm
// does, so a caller may stop after any number of rounds and get Moore's
// partition for that depth. A class that splits keeps its id for one part
// (the states not signed again, else the largest part); only the other
// parts get new ids, and only their predecessors are signed in the next
// round. The states that were not signed again still share one signature:
// none of their targets changed id. A long chain of distinct states (a
// repeat counted to 2048) splits one state a round, so it costs the chain's
// length, not its square.
//
// Cost: O(sum over rounds of (signed states x (signature + log))) time;
// O(states + edges) memory. Thread-safety: a pure function.
#ifndef GRAMMARD_GRAMMAR_INTERNAL_REFINE_H_
#define GRAMMARD_GRAMMAR_INTERNAL_REFINE_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace grammard::grammar::internal {

// Appends (first byte of a run, class_of(target)) for runs[begin, end),
// runs of one class merged so that targets of one class compare equal
// however they were split.
template <typename ClassOf>
void AppendRunClasses(const std::vector<std::pair<int32_t, int32_t>>& runs,
                      int32_t begin, int32_t end, ClassOf class_of,
                      std::vector<int32_t>* sig) {
  int32_t prev = -2;
  for (int32_t k = begin; k < end; ++k) {
    const auto [b, t] = runs[k];
    const int32_t c = t < 0 ? -1 : class_of(t);
    if (c != prev) {
      sig->push_back(b);
      sig->push_back(c);
      prev = c;
    }
  }
}

// Per state t, the states with an edge to t (a move, a call's return, a
// reference), as CSR: preds[begin[t] .. begin[t + 1]).
struct Predecessors {
  std::vector<int32_t> begin;
  std::vector<int32_t> preds;
};

// `each_edge(s, f)` calls f(t) for every edge s -> t of the n states.
template <typename EachEdge>
Predecessors PredecessorsOf(int32_t n, EachEdge each_edge) {
  Predecessors p;
  p.begin.assign(n + 1, 0);
  for (int32_t s = 0; s < n; ++s) {
    each_edge(s, [&](int32_t t) { ++p.begin[t + 1]; });
  }
  for (int32_t s = 0; s < n; ++s) p.begin[s + 1] += p.begin[s];
  p.preds.resize(p.begin[n]);
  std::vector<int32_t> at(p.begin.begin(), p.begin.end() - 1);
  for (int32_t s = 0; s < n; ++s) {
    each_edge(s, [&](int32_t t) { p.preds[at[t]++] = s; });
  }
  return p;
}

struct Refinement {
  std::vector<int32_t> cls;  // per state, in [0, classes)
  int32_t classes = 0;
  int64_t rounds = 0;   // rounds done
  bool stable = false;  // a further round would split nothing
};

// `cls`: the initial classes, ids in [0, classes). `pred`: every edge
// that a signature reads, backwards. `sign(s, cls, &sig)` appends s's signature
// under the current classes, without s's own class. Stops after
// `max_rounds` rounds, or before a round that would take the signature ints
// signed in all past `max_work`; `rounds` and `stable` tell which.
template <typename Sign>
Refinement Refine(std::vector<int32_t> cls, int32_t classes,
                  const Predecessors& pred, int64_t max_rounds,
                  int64_t max_work, Sign sign) {
  const int32_t n = static_cast<int32_t>(cls.size());
  Refinement out;
  std::vector<int32_t> size(classes, 0);
  for (int32_t s = 0; s < n; ++s) ++size[cls[s]];
  std::vector<int32_t> signed_now(n);  // round 1 signs every state
  for (int32_t s = 0; s < n; ++s) signed_now[s] = s;
  std::vector<uint8_t> mark(n, 0);
  std::vector<int32_t> sig, sig_begin, order, changed, part_sizes;
  int64_t work = 0;
  for (int64_t round = 0; round < max_rounds; ++round) {
    if (signed_now.empty()) {
      out.stable = true;
      break;
    }
    const int32_t m = static_cast<int32_t>(signed_now.size());
    sig.clear();
    sig_begin.assign(1, 0);
    for (int32_t s : signed_now) {
      sign(s, cls, &sig);
      sig_begin.push_back(static_cast<int32_t>(sig.size()));
    }
    work += static_cast<int64_t>(sig.size()) + m;
    if (work > max_work) break;
    auto same_sig = [&](int32_t i, int32_t j) {
      return std::equal(
          sig.begin() + sig_begin[i], sig.begin() + sig_begin[i + 1],
          sig.begin() + sig_begin[j], sig.begin() + sig_begin[j + 1]);
    };
    auto less = [&](int32_t i, int32_t j) {
      const int32_t ci = cls[signed_now[i]], cj = cls[signed_now[j]];
      if (ci != cj) return ci < cj;
      return std::lexicographical_compare(
          sig.begin() + sig_begin[i], sig.begin() + sig_begin[i + 1],
          sig.begin() + sig_begin[j], sig.begin() + sig_begin[j + 1]);
    };
    order.resize(m);
    for (int32_t i = 0; i < m; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), less);
    changed.clear();
    for (int32_t lo = 0; lo < m;) {
      const int32_t c = cls[signed_now[order[lo]]];
      int32_t hi = lo;
      while (hi < m && cls[signed_now[order[hi]]] == c) ++hi;
      // Parts of class c among the signed states: runs of equal signature.
      part_sizes.clear();
      for (int32_t k = lo; k < hi; ++k) {
        if (k == lo || !same_sig(order[k - 1], order[k])) {
          part_sizes.push_back(0);
        }
        ++part_sizes.back();
      }
      const bool all_signed = hi - lo == size[c];
      if (!(all_signed && part_sizes.size() == 1)) {
        // The part that keeps id c: the unsigned states, else the largest.
        int32_t keep = -1;
        if (all_signed) {
          keep = static_cast<int32_t>(
              std::max_element(part_sizes.begin(), part_sizes.end()) -
              part_sizes.begin());
        }
        int32_t part = -1, id = c;
        for (int32_t k = lo; k < hi; ++k) {
          if (k == lo || !same_sig(order[k - 1], order[k])) {
            ++part;
            id = part == keep ? c : classes++;
            if (id != c) size.push_back(0);
          }
          const int32_t s = signed_now[order[k]];
          if (id != c) {
            --size[c];
            ++size[id];
            cls[s] = id;
            changed.push_back(s);
          }
        }
      }
      lo = hi;
    }
    ++out.rounds;
    // Next round signs the predecessors of states that changed id.
    signed_now.clear();
    for (int32_t t : changed) {
      for (int32_t k = pred.begin[t]; k < pred.begin[t + 1]; ++k) {
        const int32_t p = pred.preds[k];
        if (!mark[p]) {
          mark[p] = 1;
          signed_now.push_back(p);
        }
      }
    }
    for (int32_t p : signed_now) mark[p] = 0;
  }
  out.stable = out.stable || signed_now.empty();
  out.cls = std::move(cls);
  out.classes = classes;
  return out;
}

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_INTERNAL_REFINE_H_
