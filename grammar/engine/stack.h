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
// Distinct rules (Pda::IsDistinct): a stepper that tracks them (a matcher's,
// Stepper::Track) keeps beside each node of its pool what the node's rule
// instance has seen (NodeSide, in a ValueLog): a distinct call's frame notes
// where the value begins in the text, and when the value ends the frame is
// copied into a record node holding the value's key (base/json_value_key.h),
// or, when an earlier record of the same instance holds that key, the stack
// ends there. The stepper then keeps the text read so far. Stepping, closing
// and reading are instantiated with and without tracking, so that the
// walks that classify tokens (and grammars without distinct rules) run the
// plain code.
//
// Counted members (Pda::MemberBit, RequiredMembers, Guard) are kept the
// same way: a node's side holds the bits its instance has seen; a return
// from a counted member sets its bit in the caller's frame (a copy of the
// frame node), a return from a rule with required members goes on only
// when its frame holds them all, and a guarded rule is not called where
// its guard's bits are all set. A dispatch's nodes hold its caller's bits,
// and what it calls returns to its caller's frame (tail calls).
//
// Characters counted (Pda::MaxChars) likewise: a node of a counted rule's
// frame holds the characters its string has read so far and where the last
// one stands (CharPhase); a byte is refused when the string could then no
// longer close within the bound (the count plus Pda::CharsToEnd of the
// state it leads to). Such frames never keep their node on a self-loop:
// each byte makes a node with its own count.
//
// Two parent values are not nodes: kBottom lies below the root rule (reaching
// it means the whole text may end here) and kOpen stands for an unknown
// caller (used when classifying tokens for one state in isolation; reaching
// it means the token leaves the state's rule with bytes still to read).
//
// Cost: one step is O(nodes in the set + pushes); sets are small for
// deterministic grammars. Thread-safety: a StackPool and a Stepper belong to
// one thread at a time; a Stepper only holds scratch space.
#ifndef GRAMMARD_GRAMMAR_ENGINE_STACK_H_
#define GRAMMARD_GRAMMAR_ENGINE_STACK_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/base/member_set.h"
#include "grammar/engine/pda.h"
#include "grammar/vocabulary.h"

namespace grammard::grammar::internal {

constexpr int32_t kBottom = -1;
constexpr int32_t kOpen = -2;

struct StackNode {
  int32_t state;
  int32_t parent;  // a node id, kBottom or kOpen
};

// What closing a set reached besides scan nodes.
struct CloseFlags {
  bool bottom = false;  // the whole text may end here
  bool open = false;    // left the classified state's rule (see kOpen)
  // More than kMaxScanNodes stacks: nothing was kept (a dead end).
  bool overflow = false;
};

// The most stacks one position may hold. Stacks are a tree, not a graph,
// so a grammar ambiguous at every nesting level doubles them per level
// (ebnf_fuzzer found one reaching millions, seconds per token); past this
// the position counts as dead. Real grammars hold a handful.
constexpr size_t kMaxScanNodes = 4096;

// The closure of one node when it is a plain chain (its state and those of
// the callers it ends into call nothing): the scan nodes and flags. Stepping
// inside a rule that may end after every byte (an identifier, a number)
// closes the same caller again and again; this remembers it.
struct ChainMemo {
  static constexpr int kMaxIds = 6;
  int8_t count = -1;  // -1: not known (or too long to keep)
  CloseFlags flags;
  int32_t ids[kMaxIds];
};

// What a node of a tracking stepper's pool knows of its rule's instance.
struct NodeSide {
  // The instance's latest record (a node), or -1: the values its distinct
  // calls returned so far, linked through `prev`.
  int32_t seen = -1;
  // A distinct call's frame: the text offset its value begins at.
  int32_t start = -1;
  // A record: the record before it, its key's hash and place in the log.
  int32_t prev = -1;
  uint64_t hash = 0;
  uint32_t key_begin = 0, key_end = 0;
  // The counted members the instance has seen (Pda::MemberBit).
  MemberSet members;
  // A counted rule's frame (Pda::MaxChars): the characters read and the
  // phase of the last one.
  int32_t chars = 0;
  int8_t phase = 0;
};

// Append-only; truncating to an earlier size undoes later pushes, which is
// how rollback and depth-first token walks release nodes (and their memos).
class StackPool {
 public:
  int32_t Add(int32_t state, int32_t parent) {
    nodes_.push_back({state, parent});
    memos_.emplace_back();
    return static_cast<int32_t>(nodes_.size()) - 1;
  }
  const StackNode& operator[](int32_t id) const { return nodes_[id]; }
  ChainMemo& memo(int32_t id) { return memos_[id]; }
  size_t size() const { return nodes_.size(); }
  void Truncate(size_t size) {
    nodes_.resize(size);
    memos_.resize(size);
  }
  void Clear() {
    nodes_.clear();
    memos_.clear();
  }
  // What the pool holds, by capacity.
  size_t MemoryBytes() const {
    return nodes_.capacity() * sizeof(StackNode) +
           memos_.capacity() * sizeof(ChainMemo);
  }

 private:
  std::vector<StackNode> nodes_;
  std::vector<ChainMemo> memos_;
};

// A NodeSide per node of a tracking stepper's pool, index for index, and
// the records' keys; truncated with the pool.
class ValueLog {
 public:
  NodeSide& side(int32_t id) { return sides_[id]; }
  const NodeSide& side(int32_t id) const { return sides_[id]; }
  std::string_view key(int32_t record) const {
    const NodeSide& side = sides_[record];
    return std::string_view(keys_).substr(side.key_begin,
                                          side.key_end - side.key_begin);
  }
  size_t size() const { return sides_.size(); }
  void Append(const NodeSide& side) { sides_.push_back(side); }
  // Appends the record of a value of the instance whose latest record is
  // `prev`; its id is size() before.
  void AppendRecord(int32_t prev, uint64_t hash, std::string_view key);
  void Truncate(size_t size);
  // The least size Truncate has left since MarkLowWater: entries below it
  // are the very ones that were there then (ids are reused past it).
  void MarkLowWater() { low_water_ = sides_.size(); }
  size_t low_water() const { return low_water_; }
  void Clear() {
    low_water_ = 0;
    sides_.clear();
    records_.clear();
    keys_.clear();
  }
  size_t MemoryBytes() const {
    return sides_.capacity() * sizeof(NodeSide) +
           records_.capacity() * sizeof(int32_t) + keys_.capacity();
  }

 private:
  size_t low_water_ = 0;
  std::vector<NodeSide> sides_;
  std::vector<int32_t> records_;  // record ids, ascending
  std::string keys_;              // their keys, in the same order
};

// A hash map from 64-bit keys to ids, emptied in O(1) by a generation
// stamp: closing a set uses two of these per byte step.
class StampedMap {
 public:
  StampedMap() : slots_(64) {}
  void Clear() {
    size_ = 0;
    if (++gen_ == 0) {  // wrapped: stale stamps could match again
      slots_.assign(slots_.size(), Slot{});
      gen_ = 1;
    }
  }
  // The value for `key`, or -1.
  int32_t Find(uint64_t key) const {
    for (size_t i = Hash(key);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& slot = slots_[i];
      if (slot.gen != gen_) return -1;
      if (slot.key == key) return slot.value;
    }
  }
  void Insert(uint64_t key, int32_t value);

 private:
  struct Slot {
    uint64_t key = 0;
    int32_t value = 0;
    uint32_t gen = 0;
  };
  size_t Hash(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) &
           (slots_.size() - 1);
  }
  std::vector<Slot> slots_;
  uint32_t gen_ = 1;
  size_t size_ = 0;
};

class Stepper {
 public:
  explicit Stepper(const Pda& pda) : pda_(&pda) {}

  // From now on keeps the values of distinct calls (see the file comment)
  // for one pool, which must be empty: a matcher's of a grammar with
  // distinct rules. Its nodes are then added with Add and truncated with
  // Truncate.
  void Track() {
    tracking_ = true;
    values_.Clear();
    text_.clear();
  }
  bool tracking() const { return tracking_; }
  int32_t Add(StackPool* pool, int32_t state, int32_t parent) {
    if (tracking_) values_.Append(NodeSide());
    return pool->Add(state, parent);
  }
  // Steps `byte` as a byte of the text read (see text()).
  CloseFlags Read(StackPool* pool, const int32_t* begin, const int32_t* end,
                  uint8_t byte, std::vector<int32_t>* scan) {
    if (tracking_) text_.push_back(static_cast<char>(byte));
    return Step(pool, begin, end, byte, scan);
  }
  // Back to a pool of `size` nodes and, while tracking, a text of
  // `text_size` bytes.
  void Truncate(StackPool* pool, size_t size, size_t text_size) {
    pool->Truncate(size);
    if (tracking_) {
      values_.Truncate(size);
      text_.resize(text_size);
    }
  }
  ValueLog& values() { return values_; }
  const ValueLog& values() const { return values_; }
  // The text read so far, which values are cut from: Read appends each
  // byte it steps, Truncate takes bytes off again, and ReadSorted appends
  // its tokens' bytes and takes them off.
  std::string& text() { return text_; }
  const std::string& text() const { return text_; }

  // Closes `seeds` (node ids, or kBottom / kOpen) into scan nodes appended to
  // `scan`, deduplicated; returns what else was reached. Past kMaxScanNodes
  // it appends nothing and returns only `overflow`.
  CloseFlags Close(StackPool* pool, const int32_t* seeds, size_t n,
                   std::vector<int32_t>* scan);

  // Advances the scan nodes in [begin, end) by `byte`, appending the closed
  // result to `scan` (which must not alias the input range).
  CloseFlags Step(StackPool* pool, const int32_t* begin, const int32_t* end,
                  uint8_t byte, std::vector<int32_t>* scan);

  // How far a token's bytes got from a scan set (see ReadSorted).
  struct TokenReach {
    bool read_all;    // every byte was stepped (else a prefix died first)
    bool alive;       // scan nodes remain after the last byte stepped
    CloseFlags last;  // what the last step reached besides scan nodes
    bool escaped;     // some step reached kOpen
    // Whether the token can be read: all of it consumed with a way to go
    // on, or with the text (or the frame) able to end.
    bool readable() const {
      return read_all && (alive || last.bottom || last.open);
    }
  };

  // Reads each of `ids`, but for its first `offset` bytes, from the scan
  // set [begin, end) and calls visit(id, reach), in `ids`' order. Those bytes
  // (in `vocab`) must come in ascending order so that tokens sharing a prefix
  // share its steps. Leaves the pool as it found it.
  void ReadSorted(StackPool* pool, const int32_t* begin, const int32_t* end,
                  const Vocabulary& vocab, const std::vector<int32_t>& ids,
                  const std::function<void(int32_t, const TokenReach&)>& visit,
                  size_t offset = 0);
  // ReadSorted, but a token whose first bytes read the set back into the
  // very ids it began with (a string's characters) ends as its remainder
  // would from there, so equal remainders are read once: for many tokens
  // that end a string the same way (`x",`). Not for distinct rules (the
  // values' keys hold text that is not in the ids). Costs a comparison of
  // sets per step, so small reads (classifying) do without it.
  void ReadSortedSharingRemainders(
      StackPool* pool, const int32_t* begin, const int32_t* end,
      const Vocabulary& vocab, const std::vector<int32_t>& ids,
      const std::function<void(int32_t, const TokenReach&)>& visit);

 private:
  // Appends the closure of `seed` when it is a plain chain (see ChainMemo),
  // remembering it for the seed's parent; false, with `scan` partly
  // appended, at the first call on the way.
  // Instantiated without tracking (the original walk, for classifying and
  // for grammars without distinct rules) and with it.
  template <bool kTracking>
  bool CloseChain(StackPool* pool, int32_t seed, std::vector<int32_t>* scan,
                  CloseFlags* flags);
  template <bool kTracking>
  CloseFlags CloseT(StackPool* pool, const int32_t* seeds, size_t n,
                    std::vector<int32_t>* scan);
  template <bool kTracking, bool kRemainders>
  void ReadSortedT(StackPool* pool, const int32_t* begin, const int32_t* end,
                   const Vocabulary& vocab, const std::vector<int32_t>& ids,
                   const std::function<void(int32_t, const TokenReach&)>& visit,
                   size_t offset);
  template <bool kTracking>
  CloseFlags StepT(StackPool* pool, const int32_t* begin, const int32_t* end,
                   uint8_t byte, std::vector<int32_t>* scan);
  // The key of (state, parent) in made_.
  static uint64_t NodeKey(int32_t state, int32_t parent) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(state)) << 32) |
           static_cast<uint32_t>(parent);
  }
  // The node (state, parent) made during the current step, or a new one.
  int32_t Intern(StackPool* pool, int32_t state, int32_t parent);
  // While tracking: a node of the instance of node `from` (or, with `from`
  // -1, of a new one), and the same interned (a frame of a distinct call
  // when `start` >= 0).
  int32_t AddLike(StackPool* pool, int32_t state, int32_t parent, int32_t from);
  int32_t InternLike(StackPool* pool, int32_t state, int32_t parent,
                     int32_t from, int32_t start);
  // Whether `state` belongs to a rule counting characters.
  bool Counted(int32_t state) const {
    return pda_->has_counted_chars() &&
           pda_->MaxChars(pda_->StateRule(state)) >= 0;
  }
  // While tracking, the node a byte move from `from` to `state` makes in a
  // frame counting characters, or -1 when the string could no longer close
  // within its bound.
  int32_t CountedMove(StackPool* pool, int32_t from, int32_t state,
                      uint8_t byte);
  // The record of a value of `frame`'s distinct call ending here, or -1
  // when the instance has seen that value (see the file comment).
  int32_t Record(StackPool* pool, int32_t frame);
  // Where node `id`, in a final state of a rule whose return is checked
  // (Pda::ReturnIsChecked), returns to: its parent, a record or a copy of
  // the parent with the member counted; false when the stack ends there.
  bool Return(StackPool* pool, int32_t id, int32_t* to);
  // `frame` with member `bit` counted: the very node when it was already.
  int32_t CountMember(StackPool* pool, int32_t frame, int bit);
  // Whether the records from `head` down hold `key`. The records of the
  // last list asked about are kept by hash, so a mask that reads many
  // tokens ending values into one array compares each with O(1) records,
  // not all the array's.
  bool Seen(int32_t head, uint64_t hash, std::string_view key);

  const Pda* pda_;
  StampedMap made_;  // (state, parent) -> node made in the current step
  StampedMap seen_;  // node ids already closed in the current Close
  std::vector<int32_t> work_;
  std::vector<int32_t> seeds_;
  bool tracking_ = false;
  ValueLog values_;
  std::string text_;
  std::string key_;  // Record's scratch
  // Seen's records by hash: those from seen_head_ down, valid while the
  // log's low water stays above seen_head_.
  int32_t seen_head_ = -1;
  std::unordered_multimap<uint64_t, int32_t> seen_hashes_;
  struct Move {
    int32_t state, parent;
    int32_t from;  // the moving node (kept when it loops to its own state)
  };
  std::vector<Move> moves_;
  std::vector<int32_t> step_out_;  // ReadSorted's step results
  // ReadSorted's levels: the sets after each byte of the last token read.
  struct SortedLevel {
    size_t sets_begin;  // into sorted_sets_
    size_t pool_size;   // before the level's step
    CloseFlags flags;   // what the step reached besides scan nodes
    bool escaped;       // some step up to this one reached kOpen
    bool root;          // the very ids ReadSorted began from
  };
  std::vector<SortedLevel> sorted_levels_;
  std::vector<int32_t> sorted_sets_;
  // ReadSorted's reaches of token remainders read from the sets it began
  // with (see ReadSortedT).
  std::unordered_map<std::string_view, TokenReach> remainders_;
};

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_ENGINE_STACK_H_
