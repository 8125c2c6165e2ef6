#include "grammar/internal/nfa.h"

#include <algorithm>
#include <deque>
#include <map>
#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace grammard::grammar::internal {

int32_t Nfa::AddRule(std::string name) {
  int32_t rule = num_rules();
  rules_.push_back({std::move(name), -1, -1});
  rules_[rule].start = AddState(rule);
  rules_[rule].accept = AddState(rule);
  return rule;
}

int32_t Nfa::AddState(int32_t rule) {
  states_.push_back({rule, {}, {}, {}});
  return num_states() - 1;
}

std::vector<int32_t> Nfa::EpsilonClosure(std::vector<int32_t> set,
                                         ClosureScratch* scratch) const {
  std::vector<uint32_t>& mark = scratch->mark;
  if (mark.size() != states_.size() || ++scratch->stamp == 0) {
    mark.assign(states_.size(), 0);
    scratch->stamp = 1;
  }
  const uint32_t stamp = scratch->stamp;
  std::vector<int32_t>& work = scratch->work;
  work.clear();
  for (int32_t s : set) {
    if (mark[s] != stamp) {
      mark[s] = stamp;
      work.push_back(s);
    }
  }
  while (!work.empty()) {
    int32_t s = work.back();
    work.pop_back();
    for (int32_t t : states_[s].epsilon) {
      if (mark[t] != stamp) {
        mark[t] = stamp;
        set.push_back(t);
        work.push_back(t);
      }
    }
  }
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  return set;
}

absl::Status Nfa::PruneUnproductive(int32_t root) {
  const int32_t n = num_states();
  std::vector<bool> productive(rules_.size(), false);
  // Reverse edges, to walk back from each rule's end.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> preds(
      n);  // (from, called rule or -1)
  for (int32_t s = 0; s < n; ++s) {
    for (const ByteEdge& e : states_[s].bytes) preds[e.to].push_back({s, -1});
    for (int32_t t : states_[s].epsilon) preds[t].push_back({s, -1});
    for (const CallEdge& c : states_[s].calls)
      preds[c.to].push_back({s, c.rule});
  }
  // A state is live when its rule's end is reachable from it through bytes,
  // epsilons and calls of productive rules; a rule is productive once its
  // start is live. One backward walk: a call edge into a rule not yet
  // productive waits in that rule's list and is followed when it becomes so
  // (repeating the walk to a fixpoint instead was rules x states).
  std::vector<bool> live(n, false);
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
    const int32_t own = states_[t].rule;
    if (t == rules_[own].start && !productive[own]) {
      productive[own] = true;
      for (int32_t from : waiting[own]) revive(from);
      waiting[own].clear();
    }
    for (auto [from, rule] : preds[t]) {
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
  for (State& st : states_) {
    auto dead_byte = [&](const ByteEdge& e) { return !live[e.to]; };
    st.bytes.erase(std::remove_if(st.bytes.begin(), st.bytes.end(), dead_byte),
                   st.bytes.end());
    auto dead_eps = [&](int32_t t) { return !live[t]; };
    st.epsilon.erase(
        std::remove_if(st.epsilon.begin(), st.epsilon.end(), dead_eps),
        st.epsilon.end());
    auto dead_call = [&](const CallEdge& c) {
      return !live[c.to] || !productive[c.rule];
    };
    st.calls.erase(std::remove_if(st.calls.begin(), st.calls.end(), dead_call),
                   st.calls.end());
  }
  return absl::OkStatus();
}

absl::StatusOr<Pda> Nfa::Determinize(
    int32_t root, int32_t max_states,
    std::chrono::steady_clock::time_point deadline) const {
  RawPda raw;
  for (const Rule& r : rules_) raw.rule_names.push_back(r.name);
  raw.root_rule = root;

  // Subsets are numbered as they are found and expanded in that order, so
  // the queue holds the subsets themselves (map keys keep their address).
  std::unordered_map<std::vector<int32_t>, int32_t, SignatureHash> ids;
  ClosureScratch scratch;
  std::deque<const std::vector<int32_t>*> queue;
  absl::Status status;
  auto intern = [&](std::vector<int32_t> subset) -> int32_t {
    auto [it, fresh] = ids.try_emplace(std::move(subset), raw.num_states());
    if (!fresh) return it->second;
    if (raw.num_states() >= max_states) {
      status = absl::ResourceExhaustedError(absl::StrCat(
          "the grammar needs more than ", max_states, " automaton states"));
      return Pda::kDead;
    }
    const std::vector<int32_t>& set = it->first;
    const int32_t rule = states_[set[0]].rule;
    raw.state_rule.push_back(rule);
    raw.final.push_back(
        std::binary_search(set.begin(), set.end(), rules_[rule].accept));
    queue.push_back(&set);
    return it->second;
  };
  // The same targets (before closing over epsilons) come back from many
  // subsets and pieces; their subset is looked up, not closed again.
  std::unordered_map<std::vector<int32_t>, int32_t, SignatureHash> by_targets;
  auto step = [&](std::vector<int32_t>& targets) -> int32_t {
    std::sort(targets.begin(), targets.end());
    targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
    auto it = by_targets.find(targets);
    if (it != by_targets.end()) return it->second;
    const int32_t to = intern(EpsilonClosure(targets, &scratch));
    if (status.ok()) by_targets.emplace(targets, to);
    return to;
  };
  // Every rule's start subset first, so that state r is rule r's start.
  for (const Rule& r : rules_) intern(EpsilonClosure({r.start}, &scratch));

  std::vector<int> cuts;
  std::vector<ByteEdge> edges, open;
  std::vector<int32_t> targets;
  std::map<int32_t, std::vector<int32_t>> calls;
  int64_t expanded = 0;
  while (!queue.empty() && status.ok()) {
    if (++expanded % 64 == 0 && std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(raw.num_states(), " automaton states so far"));
    }
    const std::vector<int32_t>& subset = *queue.front();
    queue.pop_front();
    // Split the byte range at every edge boundary; within a piece every byte
    // leads to the same subset, that of the edges open over it (a sweep
    // over the edges sorted by first byte).
    edges.clear();
    cuts.assign({0, 256});
    for (int32_t s : subset) {
      for (const ByteEdge& e : states_[s].bytes) {
        edges.push_back(e);
        cuts.push_back(e.lo);
        cuts.push_back(e.hi + 1);
      }
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::sort(edges.begin(), edges.end(),
              [](const ByteEdge& a, const ByteEdge& b) { return a.lo < b.lo; });
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
      const int32_t to = targets.empty() ? Pda::kDead : step(targets);
      if (!status.ok()) break;
      if (to != prev) raw.runs.push_back({lo, to});
      prev = to;
    }
    raw.runs_begin.push_back(static_cast<int32_t>(raw.runs.size()));
    calls.clear();
    for (int32_t s : subset) {
      for (const CallEdge& c : states_[s].calls) calls[c.rule].push_back(c.to);
    }
    for (auto& [rule, tos] : calls) {
      const int32_t to = step(tos);
      if (!status.ok()) break;
      raw.calls.push_back({rule, to});
    }
    raw.calls_begin.push_back(static_cast<int32_t>(raw.calls.size()));
  }
  if (!status.ok()) return status;
  return Pda::Minimize(raw);
}

}  // namespace grammard::grammar::internal
