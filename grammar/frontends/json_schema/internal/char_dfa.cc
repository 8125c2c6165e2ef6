#include "grammar/frontends/json_schema/internal/char_dfa.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grammar/base/refine.h"
#include "grammar/base/scc.h"
#include "grammar/base/status_macros.h"
#include "grammar/frontends/regex/regex_parser.h"

namespace grammard::grammar::json_schema_internal {
namespace {

constexpr uint64_t kAlphabetEnd = uint64_t{kMaxCodepoint} + 1;

absl::Status TooManyStates(const DfaLimits& limits) {
  return absl::ResourceExhaustedError(
      absl::StrCat("a string or number constraint needs more than ",
                   limits.max_states, " automaton states"));
}

// An edge of a product, before its target pair gets an id.
struct PairEdge {
  uint32_t lo;
  uint32_t hi;
  int32_t a;  // -1: dead
  int32_t b;
};

// The elementary intervals of two sorted edge lists, with each side's target
// (-1 where it has no edge). Intervals where both are dead are left out.
template <typename EdgeA, typename EdgeB>
std::vector<PairEdge> Overlay(const std::vector<EdgeA>& ea,
                              const std::vector<EdgeB>& eb) {
  std::vector<uint64_t> points;
  points.reserve(2 * (ea.size() + eb.size()));
  for (const auto& e : ea) {
    points.push_back(e.lo);
    points.push_back(uint64_t{e.hi} + 1);
  }
  for (const auto& e : eb) {
    points.push_back(e.lo);
    points.push_back(uint64_t{e.hi} + 1);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  std::vector<PairEdge> out;
  size_t ia = 0, ib = 0;
  for (size_t i = 0; i + 1 < points.size(); ++i) {
    uint64_t lo = points[i];
    uint64_t hi = points[i + 1] - 1;
    while (ia < ea.size() && ea[ia].hi < lo) ++ia;
    while (ib < eb.size() && eb[ib].hi < lo) ++ib;
    int32_t ta = ia < ea.size() && ea[ia].lo <= lo ? ea[ia].to : -1;
    int32_t tb = ib < eb.size() && eb[ib].lo <= lo ? eb[ib].to : -1;
    if (ta < 0 && tb < 0) continue;
    out.push_back(
        {static_cast<uint32_t>(lo), static_cast<uint32_t>(hi), ta, tb});
  }
  return out;
}

void AddMergedEdge(std::vector<CharDfa::Edge>* edges, uint32_t lo, uint32_t hi,
                   int32_t to) {
  if (!edges->empty() && edges->back().to == to &&
      uint64_t{edges->back().hi} + 1 == lo) {
    edges->back().hi = hi;
    return;
  }
  edges->push_back({lo, hi, to});
}

enum class ProductOp { kAnd, kOr, kAndNot };

absl::StatusOr<CharDfa> Product(const CharDfa& a, const CharDfa& b,
                                ProductOp op, const DfaLimits& limits) {
  CharDfa out;
  std::map<std::pair<int32_t, int32_t>, int32_t> ids;
  std::deque<std::pair<int32_t, int32_t>> queue;
  auto id_of = [&](int32_t x, int32_t y) -> int32_t {
    auto [it, inserted] = ids.emplace(std::make_pair(x, y), out.num_states());
    if (inserted) {
      bool acc_a = x >= 0 && a.accepting[x];
      bool acc_b = y >= 0 && b.accepting[y];
      bool acc = op == ProductOp::kAnd  ? acc_a && acc_b
                 : op == ProductOp::kOr ? acc_a || acc_b
                                        : acc_a && !acc_b;
      out.edges.emplace_back();
      out.accepting.push_back(acc);
      queue.emplace_back(x, y);
    }
    return it->second;
  };
  static const std::vector<CharDfa::Edge> kNone;
  id_of(0, 0);
  int32_t next = 0;
  while (!queue.empty()) {
    if (out.num_states() > limits.max_states) return TooManyStates(limits);
    if ((next & 255) == 0) {
      GRAMMARD_RETURN_IF_ERROR(limits.CheckDeadline());
    }
    auto [x, y] = queue.front();
    queue.pop_front();
    const int32_t self = next++;
    const auto& ex = x >= 0 ? a.edges[x] : kNone;
    const auto& ey = y >= 0 ? b.edges[y] : kNone;
    for (const PairEdge& e : Overlay(ex, ey)) {
      if (op == ProductOp::kAnd && (e.a < 0 || e.b < 0)) continue;
      if (op == ProductOp::kAndNot && e.a < 0) continue;
      int32_t to = id_of(e.a, e.b);
      AddMergedEdge(&out.edges[self], e.lo, e.hi, to);
    }
  }
  return MinimizeWithin(out, limits, /*merge_states=*/true);
}

}  // namespace

absl::Status DfaLimits::CheckDeadline() const {
  if (deadline.Passed()) {
    return absl::DeadlineExceededError(
        "the schema took longer to convert than its deadline allows");
  }
  return absl::OkStatus();
}

int32_t CharNfa::AddState() {
  edges_.emplace_back();
  epsilon_.emplace_back();
  return num_states() - 1;
}

void CharNfa::AddEdge(int32_t from, uint32_t lo, uint32_t hi, int32_t to) {
  edges_[from].push_back({lo, hi, to});
}

void CharNfa::AddEpsilon(int32_t from, int32_t to) {
  epsilon_[from].push_back(to);
}

CharNfa::Fragment CharNfa::AddAnyString() {
  int32_t s = AddState();
  AddEdge(s, 0, kMaxCodepoint, s);
  return {s, s};
}

absl::StatusOr<CharNfa::Fragment> CharNfa::AddExpr(const Grammar& grammar,
                                                   int32_t expr,
                                                   const DfaLimits& limits) {
  Fragment f{AddState(), AddState()};
  GRAMMARD_RETURN_IF_ERROR(Build(grammar, expr, f.start, f.accept, limits, 0));
  return f;
}

absl::Status CharNfa::Build(const Grammar& g, int32_t expr, int32_t from,
                            int32_t to, const DfaLimits& limits, int depth) {
  // NFA states are cheap next to DFA states; allow a few per DFA state.
  if (num_states() > 4 * int64_t{limits.max_states}) {
    return TooManyStates(limits);
  }
  if (depth > kMaxExprDepth) {
    return absl::ResourceExhaustedError("expression nested too deeply");
  }
  const Expr& e = g.exprs[expr];
  switch (e.kind) {
    case ExprKind::kBytes: {
      std::vector<uint32_t> cps;
      size_t pos = 0;
      while (pos < e.bytes.size()) {
        uint32_t cp;
        if (!DecodeUtf8(e.bytes, &pos, &cp)) {
          return absl::InvalidArgumentError("invalid UTF-8 in a literal");
        }
        cps.push_back(cp);
      }
      if (cps.empty()) {
        AddEpsilon(from, to);
        return absl::OkStatus();
      }
      int32_t cur = from;
      for (size_t i = 0; i < cps.size(); ++i) {
        int32_t next = i + 1 == cps.size() ? to : AddState();
        AddEdge(cur, cps[i], cps[i], next);
        cur = next;
      }
      return absl::OkStatus();
    }
    case ExprKind::kCharClass:
      for (const CharRange& r : e.ranges) AddEdge(from, r.lo, r.hi, to);
      return absl::OkStatus();
    case ExprKind::kSequence: {
      int32_t cur = from;
      for (size_t i = 0; i < e.children.size(); ++i) {
        int32_t next = i + 1 == e.children.size() ? to : AddState();
        GRAMMARD_RETURN_IF_ERROR(
            Build(g, e.children[i], cur, next, limits, depth + 1));
        cur = next;
      }
      return absl::OkStatus();
    }
    case ExprKind::kChoice:
      for (int32_t child : e.children) {
        int32_t a = AddState(), b = AddState();
        AddEpsilon(from, a);
        AddEpsilon(b, to);
        GRAMMARD_RETURN_IF_ERROR(Build(g, child, a, b, limits, depth + 1));
      }
      return absl::OkStatus();
    case ExprKind::kRepeat: {
      int32_t cur = from;
      for (int32_t i = 0; i < e.min; ++i) {
        int32_t next = AddState();
        GRAMMARD_RETURN_IF_ERROR(
            Build(g, e.children[0], cur, next, limits, depth + 1));
        cur = next;
      }
      if (e.max == kUnbounded) {
        int32_t a = AddState(), b = AddState();
        AddEpsilon(cur, a);
        AddEpsilon(a, to);
        AddEpsilon(b, a);
        return Build(g, e.children[0], a, b, limits, depth + 1);
      }
      for (int32_t i = e.min; i < e.max; ++i) {
        AddEpsilon(cur, to);
        int32_t next = AddState();
        GRAMMARD_RETURN_IF_ERROR(
            Build(g, e.children[0], cur, next, limits, depth + 1));
        cur = next;
      }
      AddEpsilon(cur, to);
      return absl::OkStatus();
    }
    case ExprKind::kRuleRef: {
      const std::string& name = g.rules[e.rule].name;
      if (name == kStartAnchorRule || name == kEndAnchorRule) {
        const uint32_t anchor =
            name == kStartAnchorRule ? kStartAnchor : kEndAnchor;
        AddEdge(from, anchor, anchor, to);
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(
          "only code point level regular expressions become automata");
    }
    case ExprKind::kByteClass:
      return absl::InvalidArgumentError(
          "only code point level regular expressions become automata");
  }
  return absl::InternalError("unknown expression kind");
}

absl::StatusOr<CharNfa::Fragment> CharNfa::ResolveAnchors(
    Fragment f, const DfaLimits& limits) {
  const int32_t n = num_states();
  if (4 * int64_t{n} + 2 > 4 * int64_t{limits.max_states}) {
    return TooManyStates(limits);
  }
  // Phase 0: nothing read yet (^ holds); 1: reading; 2: past a $ (nothing
  // more may be read).
  const int32_t base = n;
  for (int32_t i = 0; i < 3 * n; ++i) AddState();
  auto at = [&](int32_t s, int phase) { return base + 3 * s + phase; };
  for (int32_t s = 0; s < n; ++s) {
    for (int phase = 0; phase < 3; ++phase) {
      for (size_t i = 0; i < edges_[s].size(); ++i) {
        const Edge e = edges_[s][i];
        if (e.lo == kStartAnchor) {
          if (phase == 0) AddEpsilon(at(s, 0), at(e.to, 0));
        } else if (e.lo == kEndAnchor) {
          AddEpsilon(at(s, phase), at(e.to, 2));
        } else if (phase < 2) {
          AddEdge(at(s, phase), e.lo, e.hi, at(e.to, 1));
        }
      }
      for (size_t i = 0; i < epsilon_[s].size(); ++i) {
        AddEpsilon(at(s, phase), at(epsilon_[s][i], phase));
      }
    }
  }
  Fragment out{AddState(), AddState()};
  AddEpsilon(out.start, at(f.start, 0));
  for (int phase = 0; phase < 3; ++phase) {
    AddEpsilon(at(f.accept, phase), out.accept);
  }
  return out;
}

absl::StatusOr<CharDfa> Determinize(const CharNfa& nfa,
                                    CharNfa::Fragment fragment,
                                    const DfaLimits& limits) {
  auto closure = [&](std::vector<int32_t> states) {
    std::vector<char> seen(nfa.num_states(), 0);
    std::vector<int32_t> stack;
    for (int32_t s : states) {
      if (!seen[s]) {
        seen[s] = 1;
        stack.push_back(s);
      }
    }
    std::vector<int32_t> out;
    while (!stack.empty()) {
      int32_t s = stack.back();
      stack.pop_back();
      out.push_back(s);
      for (int32_t t : nfa.epsilon(s)) {
        if (!seen[t]) {
          seen[t] = 1;
          stack.push_back(t);
        }
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  CharDfa dfa;
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> subsets;
  auto id_of = [&](std::vector<int32_t> set) -> int32_t {
    auto [it, inserted] = ids.emplace(set, dfa.num_states());
    if (inserted) {
      bool acc = std::binary_search(set.begin(), set.end(), fragment.accept);
      dfa.edges.emplace_back();
      dfa.accepting.push_back(acc);
      subsets.push_back(std::move(set));
    }
    return it->second;
  };
  id_of(closure({fragment.start}));
  for (int32_t cur = 0; cur < dfa.num_states(); ++cur) {
    if (dfa.num_states() > limits.max_states) return TooManyStates(limits);
    if ((cur & 255) == 0) {
      GRAMMARD_RETURN_IF_ERROR(limits.CheckDeadline());
    }
    // Sweep over the edge endpoints of the subset, keeping the targets of
    // the edges that cover the current point.
    struct Event {
      uint64_t pos;
      int32_t delta;
      int32_t to;
    };
    std::vector<Event> events;
    for (int32_t s : subsets[cur]) {
      for (const CharNfa::Edge& e : nfa.edges(s)) {
        events.push_back({e.lo, +1, e.to});
        events.push_back({uint64_t{e.hi} + 1, -1, e.to});
      }
    }
    if (events.empty()) continue;
    std::sort(events.begin(), events.end(),
              [](const Event& x, const Event& y) { return x.pos < y.pos; });
    std::map<int32_t, int32_t> active;
    for (size_t i = 0; i < events.size();) {
      uint64_t pos = events[i].pos;
      for (; i < events.size() && events[i].pos == pos; ++i) {
        int32_t& n = active[events[i].to];
        n += events[i].delta;
        if (n == 0) active.erase(events[i].to);
      }
      if (active.empty() || i == events.size()) continue;
      uint64_t end = events[i].pos;  // exclusive
      std::vector<int32_t> targets;
      targets.reserve(active.size());
      for (const auto& [t, n] : active) targets.push_back(t);
      int32_t to = id_of(closure(std::move(targets)));
      AddMergedEdge(&dfa.edges[cur], static_cast<uint32_t>(pos),
                    static_cast<uint32_t>(end - 1), to);
    }
  }
  return MinimizeWithin(dfa, limits, /*merge_states=*/true);
}

CharDfa EmptyDfa() {
  CharDfa d;
  d.edges.emplace_back();
  d.accepting.push_back(0);
  return d;
}

CharDfa AnyStringDfa() {
  CharDfa d;
  d.edges.push_back({{0, kMaxCodepoint, 0}});
  d.accepting.push_back(1);
  return d;
}

absl::StatusOr<CharDfa> LiteralsDfa(const std::vector<std::string>& words) {
  CharDfa trie = EmptyDfa();
  for (const std::string& w : words) {
    int32_t cur = 0;
    size_t pos = 0;
    while (pos < w.size()) {
      uint32_t cp;
      if (!DecodeUtf8(w, &pos, &cp)) {
        return absl::InvalidArgumentError(
            absl::StrCat("invalid UTF-8 in \"", w, "\""));
      }
      auto& edges = trie.edges[cur];
      auto it =
          std::find_if(edges.begin(), edges.end(),
                       [cp](const CharDfa::Edge& e) { return e.lo == cp; });
      if (it != edges.end()) {
        cur = it->to;
        continue;
      }
      int32_t next = trie.num_states();
      trie.edges.emplace_back();
      trie.accepting.push_back(0);
      trie.edges[cur].push_back({cp, cp, next});
      cur = next;
    }
    trie.accepting[cur] = 1;
  }
  for (auto& edges : trie.edges) {
    std::sort(edges.begin(), edges.end(),
              [](const CharDfa::Edge& x, const CharDfa::Edge& y) {
                return x.lo < y.lo;
              });
  }
  return Minimize(trie);
}

CharDfa LengthDfa(int64_t min, int64_t max) {
  CharDfa d;
  const int64_t last = max >= 0 ? max : min;
  for (int64_t i = 0; i <= last; ++i) {
    d.edges.emplace_back();
    d.accepting.push_back(i >= min);
    if (i < last) {
      d.edges[i].push_back({0, kMaxCodepoint, static_cast<int32_t>(i + 1)});
    } else if (max < 0) {
      d.edges[i].push_back({0, kMaxCodepoint, static_cast<int32_t>(i)});
    }
  }
  return Minimize(d);
}

absl::StatusOr<CharDfa> Intersect(const CharDfa& a, const CharDfa& b,
                                  const DfaLimits& limits) {
  return Product(a, b, ProductOp::kAnd, limits);
}

absl::StatusOr<CharDfa> Union(const CharDfa& a, const CharDfa& b,
                              const DfaLimits& limits) {
  return Product(a, b, ProductOp::kOr, limits);
}

absl::StatusOr<CharDfa> Subtract(const CharDfa& a, const CharDfa& b,
                                 const DfaLimits& limits) {
  return Product(a, b, ProductOp::kAndNot, limits);
}

CharDfa Complement(const CharDfa& a) {
  CharDfa out = a;
  const int32_t dead = out.num_states();
  out.edges.push_back({{0, kMaxCodepoint, dead}});
  out.accepting.push_back(0);
  for (int32_t s = 0; s < dead; ++s) {
    std::vector<CharDfa::Edge> full;
    uint64_t next = 0;
    for (const CharDfa::Edge& e : out.edges[s]) {
      if (e.lo > next) {
        full.push_back({static_cast<uint32_t>(next), e.lo - 1, dead});
      }
      full.push_back(e);
      next = uint64_t{e.hi} + 1;
    }
    if (next < kAlphabetEnd) {
      full.push_back({static_cast<uint32_t>(next), kMaxCodepoint, dead});
    }
    out.edges[s] = std::move(full);
  }
  for (auto& acc : out.accepting) acc = !acc;
  return Minimize(out);
}

absl::StatusOr<CharDfa> LimitLength(const CharDfa& a, int64_t min, int64_t max,
                                    const DfaLimits& limits) {
  if (max >= 0 && max < min) return EmptyDfa();
  const int64_t cap = max >= 0 ? max : min;
  // The product has up to a's states times the counts.
  if ((cap + 1) * a.num_states() > limits.max_states) {
    return TooManyStates(limits);
  }
  CharDfa out;
  std::map<std::pair<int32_t, int64_t>, int32_t> ids;
  std::deque<std::pair<int32_t, int64_t>> queue;
  auto id_of = [&](int32_t q, int64_t k) {
    auto [it, inserted] = ids.emplace(std::make_pair(q, k), out.num_states());
    if (inserted) {
      out.edges.emplace_back();
      out.accepting.push_back(a.accepting[q] && k >= min);
      queue.emplace_back(q, k);
    }
    return it->second;
  };
  id_of(0, 0);
  int32_t next = 0;
  while (!queue.empty()) {
    if (out.num_states() > limits.max_states) return TooManyStates(limits);
    if ((next & 255) == 0) {
      GRAMMARD_RETURN_IF_ERROR(limits.CheckDeadline());
    }
    auto [q, k] = queue.front();
    queue.pop_front();
    const int32_t self = next++;
    int64_t nk = k + 1;
    if (max >= 0 && nk > max) continue;
    if (max < 0 && nk > min) nk = min;
    for (const CharDfa::Edge& e : a.edges[q]) {
      int32_t to = id_of(e.to, nk);
      out.edges[self].push_back({e.lo, e.hi, to});
    }
  }
  // Merging states of a long counting chain takes as many refinement
  // rounds as the chain is long; the product of a minimal automaton and a
  // counter is only trimmed.
  return MinimizeWithin(out, limits, /*merge_states=*/false);
}

absl::StatusOr<CharDfa> MinimizeWithin(const CharDfa& dfa,
                                       const DfaLimits& limits,
                                       bool merge_states) {
  const int32_t n = dfa.num_states();
  // Trim: reachable from the start and able to reach acceptance.
  std::vector<char> reach(n, 0), live(n, 0);
  std::vector<int32_t> stack{0};
  reach[0] = 1;
  while (!stack.empty()) {
    int32_t s = stack.back();
    stack.pop_back();
    for (const auto& e : dfa.edges[s]) {
      if (!reach[e.to]) {
        reach[e.to] = 1;
        stack.push_back(e.to);
      }
    }
  }
  // Predecessors as one array (a vector per state was a fifth of this
  // function's time, in allocations).
  const internal::Predecessors reverse =
      internal::PredecessorsOf(n, [&](int32_t s, auto&& f) {
        for (const auto& e : dfa.edges[s]) f(e.to);
      });
  for (int32_t s = 0; s < n; ++s) {
    if (dfa.accepting[s] && reach[s]) {
      live[s] = 1;
      stack.push_back(s);
    }
  }
  while (!stack.empty()) {
    int32_t s = stack.back();
    stack.pop_back();
    for (int32_t k = reverse.begin[s]; k < reverse.begin[s + 1]; ++k) {
      const int32_t p = reverse.preds[k];
      if (reach[p] && !live[p]) {
        live[p] = 1;
        stack.push_back(p);
      }
    }
  }
  if (!live[0]) return EmptyDfa();

  // Moore's refinement over the live states (refine.h: only states whose
  // targets changed class are signed again, so a chain of a few thousand
  // counts costs its length, and a trie of keys its size, not rounds x
  // states).
  std::vector<int32_t> local(n, -1), states;
  for (int32_t s = 0; s < n; ++s) {
    if (live[s]) {
      local[s] = static_cast<int32_t>(states.size());
      states.push_back(s);
    }
  }
  std::vector<int32_t> cls(n, -1);
  int32_t num_classes = 0;
  if (merge_states) {
    GRAMMARD_RETURN_IF_ERROR(limits.CheckDeadline());
    const int32_t m = static_cast<int32_t>(states.size());
    const internal::Predecessors pred =
        internal::PredecessorsOf(m, [&](int32_t i, auto&& f) {
          for (const auto& e : dfa.edges[states[i]]) {
            if (live[e.to]) f(local[e.to]);
          }
        });
    std::vector<int32_t> initial(m);
    for (int32_t i = 0; i < m; ++i) initial[i] = dfa.accepting[states[i]];
    // A signature: (lo, hi, class) per range of code points whose targets
    // share a class, neighbouring ranges of one class merged.
    internal::Refinement refined = internal::Refine(
        std::move(initial), 2, pred, std::numeric_limits<int64_t>::max(),
        std::numeric_limits<int64_t>::max(),
        [&](int32_t i, const std::vector<int32_t>& by_local,
            std::vector<int32_t>* sig) {
          const size_t begin = sig->size();
          for (const auto& e : dfa.edges[states[i]]) {
            if (!live[e.to]) continue;
            const int32_t c = by_local[local[e.to]];
            const size_t k = sig->size();
            if (k - begin >= 3 && (*sig)[k - 1] == c &&
                static_cast<int64_t>(static_cast<uint32_t>((*sig)[k - 2])) +
                        1 ==
                    e.lo) {
              (*sig)[k - 2] = static_cast<int32_t>(e.hi);
              continue;
            }
            sig->push_back(static_cast<int32_t>(e.lo));
            sig->push_back(static_cast<int32_t>(e.hi));
            sig->push_back(c);
          }
        });
    num_classes = refined.classes;
    for (int32_t i = 0; i < m; ++i) cls[states[i]] = refined.cls[i];
  } else {
    for (int32_t s = 0; s < n; ++s) cls[s] = live[s] ? num_classes++ : -1;
  }
  // Renumber classes in breadth-first order from the start.
  std::vector<int32_t> order(num_classes, -1);
  std::vector<int32_t> representative(num_classes, -1);
  for (int32_t s = 0; s < n; ++s) {
    if (live[s] && representative[cls[s]] < 0) representative[cls[s]] = s;
  }
  CharDfa out;
  std::deque<int32_t> queue{cls[0]};
  order[cls[0]] = 0;
  out.edges.emplace_back();
  out.accepting.push_back(dfa.accepting[representative[cls[0]]]);
  while (!queue.empty()) {
    int32_t c = queue.front();
    queue.pop_front();
    int32_t s = representative[c];
    int32_t id = order[c];
    for (const auto& e : dfa.edges[s]) {
      if (!live[e.to]) continue;
      int32_t tc = cls[e.to];
      if (order[tc] < 0) {
        order[tc] = out.num_states();
        out.edges.emplace_back();
        out.accepting.push_back(dfa.accepting[representative[tc]]);
        queue.push_back(tc);
      }
      AddMergedEdge(&out.edges[id], e.lo, e.hi, order[tc]);
    }
  }
  return out;
}

CharDfa Minimize(const CharDfa& dfa) {
  // Without a deadline the refinement always finishes.
  return *MinimizeWithin(dfa, DfaLimits{}, /*merge_states=*/true);
}

bool Matches(const CharDfa& dfa, std::string_view text) {
  int32_t s = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    uint32_t cp;
    if (!DecodeUtf8(text, &pos, &cp)) return false;
    const auto& edges = dfa.edges[s];
    auto it = std::upper_bound(
        edges.begin(), edges.end(), cp,
        [](uint32_t v, const CharDfa::Edge& e) { return v < e.lo; });
    if (it == edges.begin()) return false;
    --it;
    if (cp > it->hi) return false;
    s = it->to;
  }
  return dfa.accepting[s];
}

bool Example(const CharDfa& dfa, std::string* out) {
  const int32_t n = dfa.num_states();
  std::vector<int32_t> parent(n, -2);
  std::vector<uint32_t> via(n, 0);
  std::deque<int32_t> queue{0};
  parent[0] = -1;
  while (!queue.empty()) {
    int32_t s = queue.front();
    queue.pop_front();
    if (dfa.accepting[s]) {
      std::vector<uint32_t> cps;
      for (int32_t c = s; parent[c] >= 0; c = parent[c]) cps.push_back(via[c]);
      out->clear();
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) AppendUtf8(*it, out);
      return true;
    }
    for (const auto& e : dfa.edges[s]) {
      if (parent[e.to] != -2) continue;
      parent[e.to] = s;
      // Prefer a printable ASCII character when the edge has one.
      uint32_t cp = e.lo;
      if (cp < 0x21 && e.hi >= 0x21) cp = std::min<uint32_t>(e.hi, 'a');
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = e.hi > 0xDFFF ? 0xE000 : e.lo;
      via[e.to] = cp;
      queue.push_back(e.to);
    }
  }
  return false;
}

int64_t CodepointCount(std::string_view text) {
  int64_t n = 0;
  size_t pos = 0;
  uint32_t cp;
  while (pos < text.size()) {
    if (!DecodeUtf8(text, &pos, &cp)) return -1;
    ++n;
  }
  return n;
}

bool AlwaysGrows(const CharDfa& dfa) {
  const int32_t n = dfa.num_states();
  if (n == 0) return false;
  // Live states: reachable from the start and able to accept.
  std::vector<std::vector<int32_t>> preds(n);
  for (int32_t q = 0; q < n; ++q) {
    for (const CharDfa::Edge& e : dfa.edges[q]) preds[e.to].push_back(q);
  }
  std::vector<char> reach(n, 0), accept(n, 0);
  std::vector<int32_t> work = {0};
  reach[0] = 1;
  while (!work.empty()) {
    const int32_t q = work.back();
    work.pop_back();
    for (const CharDfa::Edge& e : dfa.edges[q]) {
      if (!reach[e.to]) {
        reach[e.to] = 1;
        work.push_back(e.to);
      }
    }
  }
  for (int32_t q = 0; q < n; ++q) {
    if (dfa.accepting[q] && reach[q]) {
      accept[q] = 1;
      work.push_back(q);
    }
  }
  while (!work.empty()) {
    const int32_t q = work.back();
    work.pop_back();
    for (int32_t p : preds[q]) {
      if (reach[p] && !accept[p]) {
        accept[p] = 1;
        work.push_back(p);
      }
    }
  }
  // Among live states, those on a cycle (an edge of more than one code
  // point counts as many strings, so a wide edge to an accepting future
  // is not enough: only cycles give infinitely many), and those that
  // reach one.
  std::vector<int32_t> begin(n + 1, 0), targets;
  for (int32_t q = 0; q < n; ++q) {
    begin[q] = static_cast<int32_t>(targets.size());
    if (!accept[q]) continue;
    for (const CharDfa::Edge& e : dfa.edges[q]) {
      if (accept[e.to]) targets.push_back(e.to);
    }
  }
  begin[n] = static_cast<int32_t>(targets.size());
  const internal::Components c = internal::StronglyConnected(begin, targets);
  std::vector<char> grows(n, 0);
  for (int32_t q = 0; q < n; ++q) {
    if (!accept[q]) continue;
    bool cyclic = c.size[c.of[q]] > 1;
    for (int32_t k = begin[q]; k < begin[q + 1] && !cyclic; ++k) {
      cyclic = targets[k] == q;
    }
    if (cyclic) {
      grows[q] = 1;
      work.push_back(q);
    }
  }
  while (!work.empty()) {
    const int32_t q = work.back();
    work.pop_back();
    for (int32_t p : preds[q]) {
      if (accept[p] && !grows[p]) {
        grows[p] = 1;
        work.push_back(p);
      }
    }
  }
  if (!accept[0]) return false;
  for (int32_t q = 0; q < n; ++q) {
    if (accept[q] && !grows[q]) return false;
  }
  return true;
}

}  // namespace grammard::grammar::json_schema_internal
