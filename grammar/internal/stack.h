// Stack sets of a Pda: how a matcher position is represented and advanced by
// one byte.
//
// A position is a set of "scan" nodes: stack tops that can read a byte. A
// node is (state, parent), the parent being the node that holds the caller's
// return state, so stacks share their tails (a tree of nodes in a pool).
// Advancing by a byte moves every scan node along its byte edge, then closes
// the result: a node in a final state also stands for its parent (the rule
// may end), and a node with calls also stands for each called rule's start.
// Left recursion is rejected when compiling, so closing always terminates.
//
// Two parent values are not nodes: kBottom lies below the root rule (reaching
// it means the whole text may end here) and kOpen stands for an unknown
// caller (used when classifying tokens for one state in isolation; reaching
// it means the token leaves the state's rule with bytes still to read).
//
// Cost: one step is O(nodes in the set + pushes); sets are small for
// deterministic grammars. Thread-safety: a StackPool and a Stepper belong to
// one thread at a time; a Stepper only holds scratch space.
#ifndef GRAMMARD_GRAMMAR_INTERNAL_STACK_H_
#define GRAMMARD_GRAMMAR_INTERNAL_STACK_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "grammar/internal/pda.h"

namespace grammard::grammar::internal {

constexpr int32_t kBottom = -1;
constexpr int32_t kOpen = -2;

struct StackNode {
  int32_t state;
  int32_t parent;  // a node id, kBottom or kOpen
};

// Append-only; truncating to an earlier size undoes later pushes, which is
// how rollback and depth-first token walks release nodes.
class StackPool {
 public:
  int32_t Add(int32_t state, int32_t parent) {
    nodes_.push_back({state, parent});
    return static_cast<int32_t>(nodes_.size()) - 1;
  }
  const StackNode& operator[](int32_t id) const { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }
  void Truncate(size_t size) { nodes_.resize(size); }
  void Clear() { nodes_.clear(); }

 private:
  std::vector<StackNode> nodes_;
};

// What closing a set reached besides scan nodes.
struct CloseFlags {
  bool bottom = false;  // the whole text may end here
  bool open = false;    // left the classified state's rule (see kOpen)
};

class Stepper {
 public:
  explicit Stepper(const Pda& pda) : pda_(&pda) {}

  // Closes `seeds` (node ids, or kBottom / kOpen) into scan nodes appended to
  // `scan`, deduplicated; returns what else was reached.
  CloseFlags Close(StackPool* pool, const int32_t* seeds, size_t n,
                   std::vector<int32_t>* scan);

  // Advances the scan nodes in [begin, end) by `byte`, appending the closed
  // result to `scan` (which must not alias the input range).
  CloseFlags Step(StackPool* pool, const int32_t* begin, const int32_t* end,
                  uint8_t byte, std::vector<int32_t>* scan);

  // Whether `bytes` can be read from the scan set `start` (the whole of it
  // consumed with at least one way to go on, or with the text able to end).
  // Leaves the pool as it found it.
  bool CanRead(StackPool* pool, const int32_t* begin, const int32_t* end,
               std::string_view bytes);

 private:
  // The node (state, parent) made during the current step, or a new one.
  int32_t Intern(StackPool* pool, int32_t state, int32_t parent);

  const Pda* pda_;
  std::vector<int32_t> made_;
  std::vector<int32_t> work_;
  std::vector<int32_t> seen_;
  std::vector<int32_t> seeds_;
  std::vector<int32_t> buf_a_, buf_b_;
};

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_INTERNAL_STACK_H_
