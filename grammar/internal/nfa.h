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
#ifndef GRAMMARD_GRAMMAR_INTERNAL_NFA_H_
#define GRAMMARD_GRAMMAR_INTERNAL_NFA_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/internal/pda.h"

namespace grammard::grammar::internal {

class Nfa {
 public:
  // A rule with a start and an accept state of its own.
  int32_t AddRule(std::string name);
  int32_t rule_start(int32_t rule) const { return rules_[rule].start; }
  int32_t rule_accept(int32_t rule) const { return rules_[rule].accept; }
  int32_t num_rules() const { return static_cast<int32_t>(rules_.size()); }

  // A fresh state inside `rule`.
  int32_t AddState(int32_t rule);
  int32_t num_states() const { return static_cast<int32_t>(states_.size()); }

  void AddBytes(int32_t from, uint8_t lo, uint8_t hi, int32_t to) {
    states_[from].bytes.push_back({lo, hi, to});
  }
  void AddCall(int32_t from, int32_t rule, int32_t to) {
    states_[from].calls.push_back({rule, to});
  }
  void AddEpsilon(int32_t from, int32_t to) {
    states_[from].epsilon.push_back(to);
  }

  // Drops what can never be part of a complete string: calls to rules that
  // cannot complete, and states from which the rule's end is out of reach.
  // Afterwards every path a matcher can take still leads to a complete
  // string, so a matcher is never stuck with no allowed byte. Fails with
  // InvalidArgument, naming the rule, if `root` can never complete.
  absl::Status PruneUnproductive(int32_t root);

  // Determinizes every rule; `root` is the grammar's start rule. Fails with
  // ResourceExhausted past max_states DFA states in all, DeadlineExceeded
  // past `deadline`.
  absl::StatusOr<Pda> Determinize(
      int32_t root, int32_t max_states,
      std::chrono::steady_clock::time_point deadline =
          std::chrono::steady_clock::time_point::max()) const;

  struct ByteEdge {
    uint8_t lo, hi;
    int32_t to;
  };
  struct CallEdge {
    int32_t rule;
    int32_t to;
  };
  struct State {
    int32_t rule;
    std::vector<ByteEdge> bytes;
    std::vector<CallEdge> calls;
    std::vector<int32_t> epsilon;
  };
  const State& state(int32_t s) const { return states_[s]; }

 private:
  struct Rule {
    std::string name;
    int32_t start;
    int32_t accept;
  };

  // Marks for EpsilonClosure, reused across calls: a state is in the set
  // being closed when its mark equals the call's stamp, so no call clears a
  // vector of every state (quadratic over a large grammar's subsets).
  struct ClosureScratch {
    std::vector<uint32_t> mark;
    uint32_t stamp = 0;
    std::vector<int32_t> work;
  };
  // Sorted, duplicate-free set of the states reachable from `set` by epsilon.
  std::vector<int32_t> EpsilonClosure(std::vector<int32_t> set,
                                      ClosureScratch* scratch) const;

  std::vector<State> states_;
  std::vector<Rule> rules_;
};

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_INTERNAL_NFA_H_
