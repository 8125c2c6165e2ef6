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
// Cost: O(sum over rounds of (signed states x signature)) expected time (a
// hash table per round); O(states + edges) memory. Thread-safety: a pure
// function.
#ifndef GRAMMARD_GRAMMAR_BASE_REFINE_H_
#define GRAMMARD_GRAMMAR_BASE_REFINE_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace grammard::grammar::internal {

// A hash of the ints [begin, end): two at a time (one multiply per 64-bit
// word, which halved the cost of hashing signatures), then murmur's
// finalizer, so that the low bits the tables index by depend on them all.
inline uint64_t HashInts(const int32_t* begin, const int32_t* end) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = kMul ^ static_cast<uint64_t>(end - begin);
  const int32_t* p = begin;
  for (; end - p >= 2; p += 2) {
    uint64_t word;
    std::memcpy(&word, p, sizeof(word));
    h = (h ^ word) * kMul;
  }
  if (p != end) h = (h ^ static_cast<uint32_t>(*p)) * kMul;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  return h ^ (h >> 33);
}

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
  std::vector<int32_t> sig, sig_begin, changed;
  // A part: the signed states of one class with one signature.
  struct Part {
    int32_t cls;
    int32_t first;  // a signed state's index, for its signature
    int32_t size;
    int32_t id;  // the class it ends in
    uint64_t hash;
  };
  std::vector<Part> parts;
  std::vector<int32_t> part_of, table;
  // Per class touched this round (stamp == round + 1): signed states and
  // the largest part (the first part met, on a tie).
  std::vector<int64_t> stamp(classes, 0);
  std::vector<int32_t> class_signed(classes), class_largest(classes);
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
    auto sig_equal = [&](int32_t i, int32_t j) {
      return std::equal(
          sig.begin() + sig_begin[i], sig.begin() + sig_begin[i + 1],
          sig.begin() + sig_begin[j], sig.begin() + sig_begin[j + 1]);
    };
    // Parts through an open-addressing table on (class, signature hash),
    // comparing whole signatures, so a hash collision makes two parts:
    // linear in the signed states where sorting them was a tenth of a
    // compile.
    size_t slots = 16;
    while (slots < 2 * static_cast<size_t>(m)) slots *= 2;
    table.assign(slots, -1);
    parts.clear();
    part_of.resize(m);
    for (int32_t i = 0; i < m; ++i) {
      const int32_t c = cls[signed_now[i]];
      const uint64_t h =
          HashInts(sig.data() + sig_begin[i], sig.data() + sig_begin[i + 1]);
      size_t slot = (h ^ (static_cast<uint64_t>(c) * 0x9E3779B97F4A7C15ull)) &
                    (slots - 1);
      int32_t p = -1;
      for (; table[slot] >= 0; slot = (slot + 1) & (slots - 1)) {
        const Part& q = parts[table[slot]];
        if (q.cls == c && q.hash == h && sig_equal(q.first, i)) {
          p = table[slot];
          break;
        }
      }
      if (p < 0) {
        p = static_cast<int32_t>(parts.size());
        parts.push_back({c, i, 0, c, h});
        table[slot] = p;
      }
      ++parts[p].size;
      part_of[i] = p;
    }
    for (int32_t p = 0; p < static_cast<int32_t>(parts.size()); ++p) {
      const int32_t c = parts[p].cls;
      if (stamp[c] != round + 1) {
        stamp[c] = round + 1;
        class_signed[c] = 0;
        class_largest[c] = p;
      }
      class_signed[c] += parts[p].size;
      if (parts[p].size > parts[class_largest[c]].size) class_largest[c] = p;
    }
    // A class keeps its id for its unsigned states, else for its largest
    // part (its only one, when it does not split); its other parts get new
    // ids.
    for (int32_t p = 0; p < static_cast<int32_t>(parts.size()); ++p) {
      const int32_t c = parts[p].cls;
      if (class_signed[c] == size[c] && class_largest[c] == p) continue;
      parts[p].id = classes++;
      size.push_back(0);
      stamp.push_back(0);
      class_signed.push_back(0);
      class_largest.push_back(0);
    }
    changed.clear();
    for (int32_t i = 0; i < m; ++i) {
      const Part& part = parts[part_of[i]];
      if (part.id == part.cls) continue;
      const int32_t s = signed_now[i];
      --size[part.cls];
      ++size[part.id];
      cls[s] = part.id;
      changed.push_back(s);
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

#endif  // GRAMMARD_GRAMMAR_BASE_REFINE_H_
