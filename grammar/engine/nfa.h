// Nfa: per-rule nondeterministic byte automata with rule calls, the step
// between a grammar's expressions and the Pda matchers run.
//
// Each rule gets a fragment of states with byte-range edges, call edges (read
// a whole string of another rule, then continue) and epsilon edges.
// Determinize() turns every rule into a DFA by the subset construction, where
// calls count as symbols of their own: two call edges for the same rule from
// one subset merge into one call whose return state is the subset of their
// targets. The result is a Pda (pda.h).
//
// Cost: subset construction is exponential in the worst case; `max_states`
// bounds it and the build fails cleanly past it. Thread-safety: a builder
// belongs to one thread.
#ifndef GRAMMARD_GRAMMAR_ENGINE_NFA_H_
#define GRAMMARD_GRAMMAR_ENGINE_NFA_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/base/deadline.h"
#include "grammar/engine/pda.h"

namespace grammard::grammar::internal {

// The edges of one kind out of one state: a view into the automaton.
template <typename T>
struct EdgeRange {
  const T* first;
  const T* last;
  const T* begin() const { return first; }
  const T* end() const { return last; }
  bool empty() const { return first == last; }
  size_t size() const { return static_cast<size_t>(last - first); }
};

class Nfa {
 public:
  // A rule with a start and an accept state of its own.
  int32_t AddRule(std::string name);
  int32_t rule_start(int32_t rule) const { return rules_[rule].start; }
  int32_t rule_accept(int32_t rule) const { return rules_[rule].accept; }
  int32_t num_rules() const { return static_cast<int32_t>(rules_.size()); }

  // A fresh state inside `rule`.
  int32_t AddState(int32_t rule);
  int32_t num_states() const {
    return static_cast<int32_t>(state_rule_.size());
  }

  // Edges are kept in one list per kind while the automaton grows, and
  // grouped by state once it is complete (Seal): a vector per state and
  // kind made a compile allocate and free about three per state, a tenth of
  // its time.
  void AddBytes(int32_t from, uint8_t lo, uint8_t hi, int32_t to) {
    added_bytes_.push_back({from, {lo, hi, to}});
  }
  void AddCall(int32_t from, int32_t rule, int32_t to) {
    added_calls_.push_back({from, {rule, to}});
  }
  void AddEpsilon(int32_t from, int32_t to) {
    added_epsilon_.push_back({from, to});
  }

  // Ends the building: groups the edges by state, so that bytes(), calls()
  // and epsilon() may be read. No edge may be added afterwards.
  void Seal();

  // Seals if need be, then drops what can never be part of a complete
  // string: calls to rules that cannot complete, and states from which the
  // rule's end is out of reach. Afterwards every path a matcher can take
  // still leads to a complete string, so a matcher is never stuck with no
  // allowed byte. Fails with InvalidArgument, naming the rule, if `root` can
  // never complete.
  absl::Status PruneUnproductive(int32_t root);

  // Determinizes every rule; `root` is the grammar's start rule. Fails with
  // ResourceExhausted past max_states DFA states in all, DeadlineExceeded
  // once `deadline` passes; FailedPrecondition before Seal.
  absl::StatusOr<Pda> Determinize(int32_t root, int32_t max_states,
                                  const Deadline& deadline = {}) const;

  struct ByteEdge {
    uint8_t lo, hi;
    int32_t to;
  };
  struct CallEdge {
    int32_t rule;
    int32_t to;
  };
  // A state's rule and edges; the edges only once sealed.
  int32_t state_rule(int32_t s) const { return state_rule_[s]; }
  EdgeRange<ByteEdge> bytes(int32_t s) const { return Range(bytes_, s); }
  EdgeRange<CallEdge> calls(int32_t s) const { return Range(calls_, s); }
  EdgeRange<int32_t> epsilon(int32_t s) const { return Range(epsilon_, s); }

 private:
  struct Rule {
    std::string name;
    int32_t start;
    int32_t accept;
  };
  // Per state, its edges of one kind: edges[begin[s] .. begin[s + 1]).
  template <typename T>
  struct Grouped {
    std::vector<int32_t> begin;
    std::vector<T> edges;
  };
  template <typename T>
  static EdgeRange<T> Range(const Grouped<T>& g, int32_t s) {
    return {g.edges.data() + g.begin[s], g.edges.data() + g.begin[s + 1]};
  }
  // The edges of `added` by state, in the order they were added.
  template <typename T>
  static Grouped<T> Group(int32_t num_states,
                          std::vector<std::pair<int32_t, T>>* added);
  // Keeps the edges `keep(edge)` accepts, in order.
  template <typename T, typename Keep>
  static void Filter(Grouped<T>* g, Keep keep);

  // Marks for EpsilonClosure, reused across calls: a state is in the set
  // being closed when its mark equals the call's stamp, so no call clears a
  // vector of every state (quadratic over a large grammar's subsets).
  struct ClosureScratch {
    std::vector<uint32_t> mark;
    uint32_t stamp = 0;
    std::vector<int32_t> work;
  };
  // Into `out`, sorted and duplicate-free: the states reachable from
  // [begin, end) by epsilon.
  void EpsilonClosure(const int32_t* begin, const int32_t* end,
                      ClosureScratch* scratch, std::vector<int32_t>* out) const;

  std::vector<int32_t> state_rule_;
  std::vector<Rule> rules_;
  std::vector<std::pair<int32_t, ByteEdge>> added_bytes_;
  std::vector<std::pair<int32_t, CallEdge>> added_calls_;
  std::vector<std::pair<int32_t, int32_t>> added_epsilon_;
  bool sealed_ = false;
  Grouped<ByteEdge> bytes_;
  Grouped<CallEdge> calls_;
  Grouped<int32_t> epsilon_;
};

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_ENGINE_NFA_H_
