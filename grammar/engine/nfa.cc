#include "grammar/engine/nfa.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "grammar/base/refine.h"

namespace grammard::grammar::internal {

int32_t Nfa::AddRule(std::string name) {
  int32_t rule = num_rules();
  rules_.push_back({std::move(name), -1, -1});
  rules_[rule].start = AddState(rule);
  rules_[rule].accept = AddState(rule);
  return rule;
}

int32_t Nfa::AddState(int32_t rule) {
  state_rule_.push_back(rule);
  return num_states() - 1;
}

template <typename T>
Nfa::Grouped<T> Nfa::Group(int32_t num_states,
                           std::vector<std::pair<int32_t, T>>* added) {
  Grouped<T> g;
  g.begin.assign(num_states + 1, 0);
  for (const auto& [from, edge] : *added) ++g.begin[from + 1];
  for (int32_t s = 0; s < num_states; ++s) g.begin[s + 1] += g.begin[s];
  g.edges.resize(added->size());
  std::vector<int32_t> at(g.begin.begin(), g.begin.end() - 1);
  for (const auto& [from, edge] : *added) g.edges[at[from]++] = edge;
  std::vector<std::pair<int32_t, T>>().swap(*added);
  return g;
}

template <typename T, typename Keep>
void Nfa::Filter(Grouped<T>* g, Keep keep) {
  const int32_t n = static_cast<int32_t>(g->begin.size()) - 1;
  int32_t kept = 0;
  for (int32_t s = 0; s < n; ++s) {
    const int32_t first = g->begin[s], last = g->begin[s + 1];
    g->begin[s] = kept;
    for (int32_t k = first; k < last; ++k) {
      if (keep(g->edges[k])) g->edges[kept++] = g->edges[k];
    }
  }
  g->begin[n] = kept;
  g->edges.resize(kept);
}

void Nfa::EpsilonClosure(const int32_t* begin, const int32_t* end,
                         ClosureScratch* scratch,
                         std::vector<int32_t>* out) const {
  std::vector<uint32_t>& mark = scratch->mark;
  if (mark.size() != state_rule_.size() || ++scratch->stamp == 0) {
    mark.assign(state_rule_.size(), 0);
    scratch->stamp = 1;
  }
  const uint32_t stamp = scratch->stamp;
  std::vector<int32_t>& work = scratch->work;
  work.clear();
  out->clear();
  for (const int32_t* p = begin; p != end; ++p) {
    if (mark[*p] != stamp) {
      mark[*p] = stamp;
      work.push_back(*p);
      out->push_back(*p);
    }
  }
  while (!work.empty()) {
    int32_t s = work.back();
    work.pop_back();
    for (int32_t t : epsilon(s)) {
      if (mark[t] != stamp) {
        mark[t] = stamp;
        out->push_back(t);
        work.push_back(t);
      }
    }
  }
  std::sort(out->begin(), out->end());
}

void Nfa::Seal() {
  if (sealed_) return;
  bytes_ = Group(num_states(), &added_bytes_);
  calls_ = Group(num_states(), &added_calls_);
  epsilon_ = Group(num_states(), &added_epsilon_);
  sealed_ = true;
}

absl::Status Nfa::PruneUnproductive(int32_t root) {
  Seal();
  const int32_t n = num_states();
  std::vector<char> productive(rules_.size(), 0);
  // Reverse edges, to walk back from each rule's end: (from, called rule or
  // -1) for state t at preds[begin[t] .. begin[t + 1]).
  std::vector<int32_t> begin(n + 1, 0);
  for (int32_t s = 0; s < n; ++s) {
    for (const ByteEdge& e : bytes(s)) ++begin[e.to + 1];
    for (int32_t t : epsilon(s)) ++begin[t + 1];
    for (const CallEdge& c : calls(s)) ++begin[c.to + 1];
  }
  for (int32_t s = 0; s < n; ++s) begin[s + 1] += begin[s];
  std::vector<std::pair<int32_t, int32_t>> preds(begin[n]);
  {
    std::vector<int32_t> at(begin.begin(), begin.end() - 1);
    for (int32_t s = 0; s < n; ++s) {
      for (const ByteEdge& e : bytes(s)) preds[at[e.to]++] = {s, -1};
      for (int32_t t : epsilon(s)) preds[at[t]++] = {s, -1};
      for (const CallEdge& c : calls(s)) preds[at[c.to]++] = {s, c.rule};
    }
  }
  // A state is live when its rule's end is reachable from it through bytes,
  // epsilons and calls of productive rules; a rule is productive once its
  // start is live. One backward walk: a call edge into a rule not yet
  // productive waits in that rule's list and is followed when it becomes so
  // (repeating the walk to a fixpoint instead was rules x states).
  std::vector<char> live(n, 0);
  std::vector<std::vector<int32_t>> waiting(rules_.size());
  std::vector<int32_t> work;
  auto revive = [&](int32_t s) {
    if (live[s]) return;
    live[s] = true;
    work.push_back(s);
  };
  for (const Rule& r : rules_) revive(r.accept);
  while (!work.empty()) {
    const int32_t t = work.back();
    work.pop_back();
    const int32_t own = state_rule_[t];
    if (t == rules_[own].start && !productive[own]) {
      productive[own] = true;
      for (int32_t from : waiting[own]) revive(from);
      waiting[own].clear();
    }
    for (int32_t k = begin[t]; k < begin[t + 1]; ++k) {
      const auto [from, rule] = preds[k];
      if (rule >= 0 && !productive[rule]) {
        waiting[rule].push_back(from);
      } else {
        revive(from);
      }
    }
  }
  if (!productive[root]) {
    return absl::InvalidArgumentError(
        absl::StrCat("the grammar accepts no string: rule '", rules_[root].name,
                     "' can never complete"));
  }
  Filter(&bytes_, [&](const ByteEdge& e) { return live[e.to]; });
  Filter(&epsilon_, [&](int32_t t) { return live[t]; });
  Filter(&calls_,
         [&](const CallEdge& c) { return live[c.to] && productive[c.rule]; });
  return absl::OkStatus();
}

namespace {

// Sets of ints, each interned once: kept back to back in one pool and found
// through an open-addressing table, so looking a set up allocates nothing
// (a map keyed by vectors was most of the subset construction's time).
class IntSets {
 public:
  int32_t size() const { return static_cast<int32_t>(value_.size()); }
  const int32_t* begin(int32_t k) const { return pool_.data() + begin_[k]; }
  const int32_t* end(int32_t k) const { return pool_.data() + begin_[k + 1]; }
  int32_t value(int32_t k) const { return value_[k]; }

  static uint64_t Hash(const std::vector<int32_t>& set) {
    return HashInts(set.data(), set.data() + set.size());
  }
  // The set equal to `set`, whose Hash is `h`, or -1.
  int32_t Find(const std::vector<int32_t>& set, uint64_t h) const {
    if (slots_.empty()) return -1;
    for (size_t i = h & (slots_.size() - 1);;
         i = (i + 1) & (slots_.size() - 1)) {
      const int32_t k = slots_[i];
      if (k < 0) return -1;
      if (hash_[k] == h && std::equal(begin(k), end(k), set.begin(), set.end()))
        return k;
    }
  }
  // Adds `set` (not present yet; its Hash is `h`) with `value`; returns its
  // number.
  int32_t Add(const std::vector<int32_t>& set, uint64_t h, int32_t value) {
    if (2 * (value_.size() + 1) > slots_.size()) Grow();
    const int32_t k = size();
    pool_.insert(pool_.end(), set.begin(), set.end());
    begin_.push_back(static_cast<int32_t>(pool_.size()));
    value_.push_back(value);
    hash_.push_back(h);
    Place(k);
    return k;
  }

 private:
  void Place(int32_t k) {
    size_t i = hash_[k] & (slots_.size() - 1);
    while (slots_[i] >= 0) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = k;
  }
  void Grow() {
    slots_.assign(std::max<size_t>(64, 2 * slots_.size()), -1);
    for (int32_t k = 0; k < size(); ++k) Place(k);
  }

  std::vector<int32_t> pool_;
  std::vector<int32_t> begin_{0};
  std::vector<int32_t> value_;
  std::vector<uint64_t> hash_;
  std::vector<int32_t> slots_;
};

}  // namespace

absl::StatusOr<Pda> Nfa::Determinize(int32_t root, int32_t max_states,
                                     const Deadline& deadline) const {
  if (!sealed_) {
    return absl::FailedPreconditionError("Determinize before Seal");
  }
  RawPda raw;
  for (const Rule& r : rules_) raw.rule_names.push_back(r.name);
  raw.root_rule = root;

  // DFA state k is subset k (see `intern`); states are expanded in the order
  // found.
  IntSets subsets;
  ClosureScratch scratch;
  absl::Status status;
  // A subset moves and ends by its states' bytes, calls and rule ends
  // alone; states with only epsilon edges (most of what the Thompson
  // construction makes) are dropped, so that subsets that differ only in
  // them are one state, and hashing, comparing and sweeping them is cheap.
  // A rule's start from which nothing else is left (a rule that cannot
  // complete) stands for itself: a state with no moves.
  std::vector<int32_t> kept;
  auto intern = [&](const std::vector<int32_t>& closed) -> int32_t {
    kept.clear();
    for (int32_t s : closed) {
      if (!bytes(s).empty() || !calls(s).empty() ||
          s == rules_[state_rule_[s]].accept) {
        kept.push_back(s);
      }
    }
    if (kept.empty()) kept.push_back(closed[0]);
    const std::vector<int32_t>& subset = kept;
    const uint64_t h = IntSets::Hash(subset);
    if (int32_t k = subsets.Find(subset, h); k >= 0) return k;
    if (raw.num_states() >= max_states) {
      status = absl::ResourceExhaustedError(absl::StrCat(
          "the grammar needs more than ", max_states, " automaton states"));
      return Pda::kDead;
    }
    const int32_t rule = state_rule_[subset[0]];
    raw.state_rule.push_back(rule);
    raw.final.push_back(
        std::binary_search(subset.begin(), subset.end(), rules_[rule].accept));
    return subsets.Add(subset, h, 0);
  };
  // The same targets (before closing over epsilons) come back from many
  // subsets and pieces; their subset is looked up, not closed again.
  IntSets by_targets;
  std::vector<int32_t> closed;
  // `targets`: sorted, no duplicates.
  auto step = [&](const std::vector<int32_t>& targets) -> int32_t {
    const uint64_t h = IntSets::Hash(targets);
    if (int32_t k = by_targets.Find(targets, h); k >= 0) {
      return by_targets.value(k);
    }
    EpsilonClosure(targets.data(), targets.data() + targets.size(), &scratch,
                   &closed);
    const int32_t to = intern(closed);
    if (status.ok()) by_targets.Add(targets, h, to);
    return to;
  };
  auto sort_unique = [](std::vector<int32_t>* v) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  };
  // Every rule's start subset first, so that state r is rule r's start.
  for (const Rule& r : rules_) {
    EpsilonClosure(&r.start, &r.start + 1, &scratch, &closed);
    intern(closed);
  }

  std::vector<int> cuts;
  std::vector<ByteEdge> edges, open;
  std::vector<int32_t> subset, targets;
  std::vector<std::pair<int32_t, int32_t>> out_calls;  // (rule, return state)
  for (int32_t expanded = 0; expanded < subsets.size() && status.ok();
       ++expanded) {
    if (expanded % 64 == 63 && deadline.Passed()) {
      return absl::DeadlineExceededError(
          absl::StrCat(raw.num_states(), " automaton states so far"));
    }
    // A copy: interning new subsets may move the pool.
    subset.assign(subsets.begin(expanded), subsets.end(expanded));
    // Split the byte range at every edge boundary; within a piece every byte
    // leads to the same subset, that of the edges open over it (a sweep
    // over the edges sorted by first byte).
    // The boundaries as bits, 0 and 256 always: sorting them per subset was
    // a tenth of the construction.
    edges.clear();
    std::array<uint64_t, 5> cut_bits{1, 0, 0, 0, 1};
    for (int32_t s : subset) {
      for (const ByteEdge& e : bytes(s)) {
        edges.push_back(e);
        cut_bits[e.lo >> 6] |= uint64_t{1} << (e.lo & 63);
        cut_bits[(e.hi + 1) >> 6] |= uint64_t{1} << ((e.hi + 1) & 63);
      }
    }
    cuts.clear();
    for (int w = 0; w < 5; ++w) {
      for (uint64_t bits = cut_bits[w]; bits != 0; bits &= bits - 1) {
        cuts.push_back(64 * w + __builtin_ctzll(bits));
      }
    }
    if (edges.size() > 1) {
      std::sort(
          edges.begin(), edges.end(),
          [](const ByteEdge& a, const ByteEdge& b) { return a.lo < b.lo; });
    }
    open.clear();
    size_t next_edge = 0;
    int32_t prev = -2;
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      const int lo = cuts[k];
      open.erase(std::remove_if(open.begin(), open.end(),
                                [&](const ByteEdge& e) { return e.hi < lo; }),
                 open.end());
      while (next_edge < edges.size() && edges[next_edge].lo == lo) {
        open.push_back(edges[next_edge++]);
      }
      targets.clear();
      for (const ByteEdge& e : open) targets.push_back(e.to);
      if (targets.size() > 1) sort_unique(&targets);
      const int32_t to = targets.empty() ? Pda::kDead : step(targets);
      if (!status.ok()) break;
      if (to != prev) raw.runs.push_back({lo, to});
      prev = to;
    }
    raw.runs_begin.push_back(static_cast<int32_t>(raw.runs.size()));
    out_calls.clear();
    for (int32_t s : subset) {
      for (const CallEdge& c : calls(s)) out_calls.push_back({c.rule, c.to});
    }
    std::sort(out_calls.begin(), out_calls.end());
    for (size_t i = 0; i < out_calls.size() && status.ok();) {
      const int32_t rule = out_calls[i].first;
      targets.clear();
      for (; i < out_calls.size() && out_calls[i].first == rule; ++i) {
        if (targets.empty() || targets.back() != out_calls[i].second)
          targets.push_back(out_calls[i].second);
      }
      const int32_t to = step(targets);
      if (!status.ok()) break;
      raw.calls.push_back({rule, to});
    }
    raw.calls_begin.push_back(static_cast<int32_t>(raw.calls.size()));
  }
  if (!status.ok()) return status;
  return Pda::Minimize(raw);
}

}  // namespace grammard::grammar::internal
