// Pda: the compiled form of a grammar that matchers run, a pushdown automaton
// whose rules are deterministic byte automata.
//
// Every rule of the (byte-level) grammar becomes a DFA over bytes; a state may
// also call other rules, each call naming the state to return to. A matcher
// position is a set of stack nodes (state, parent), where the parent node
// holds the caller's return state (see stack.h). Determinising each rule
// keeps those sets small; what nondeterminism remains comes from calls.
//
// Cost: O(states * byte classes) ints for transitions: bytes that no state
// tells apart share a column (a JSON Schema grammar has a few dozen such
// classes, so its table is several times smaller than 256 columns, which
// for the tens of thousands of states of a long `maxLength` string was most
// of a compile's time in filling and faulting pages). Thread-safety:
// immutable once built; shared by every matcher of a grammar.
#ifndef GRAMMARD_GRAMMAR_ENGINE_PDA_H_
#define GRAMMARD_GRAMMAR_ENGINE_PDA_H_

#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grammar/base/byte_io.h"
#include "grammar/base/member_set.h"
#include "grammar/base/refine.h"

namespace grammard::grammar::internal {

// Hashes a state's signature in a round of Moore's refinement (minimizing
// here, grouping states that classify alike in token_table.cc).
struct SignatureHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    return static_cast<size_t>(HashInts(v.data(), v.data() + v.size()));
  }
};

struct PdaCall {
  int32_t rule;          // the rule entered
  int32_t return_state;  // the caller's state once that rule completes
};

// What the subset construction (nfa.h) produces before equivalent states
// are merged. Byte moves are runs (first byte, target or Pda::kDead) that
// cover 0..255, not 256-int rows: most of these states are merged away, and
// minimizing reads runs anyway. State r is rule r's start.
struct RawPda {
  std::vector<std::string> rule_names;
  int32_t root_rule = 0;
  std::vector<int32_t> state_rule;
  std::vector<uint8_t> final;
  std::vector<std::pair<int32_t, int32_t>> runs;
  std::vector<int32_t> runs_begin{0};  // state s: [runs_begin[s], [s + 1])
  std::vector<PdaCall> calls;          // per state, sorted by rule
  std::vector<int32_t> calls_begin{0};
  int32_t num_states() const { return static_cast<int32_t>(final.size()); }
};

class Pda {
 public:
  static constexpr int32_t kDead = -1;

  int32_t num_states() const { return static_cast<int32_t>(final_.size()); }
  int32_t num_rules() const { return static_cast<int32_t>(rule_start_.size()); }
  int32_t root_rule() const { return root_rule_; }

  int32_t Next(int32_t state, uint8_t byte) const {
    return next_[static_cast<size_t>(state) * num_classes_ + byte_class_[byte]];
  }
  // Bytes every state moves alike on share a class; classes are ranges of
  // bytes numbered in byte order.
  int32_t num_byte_classes() const { return num_classes_; }
  int32_t ByteClass(uint8_t byte) const { return byte_class_[byte]; }
  // The lowest byte of class `c`: a loop over every byte's move reads one
  // byte per class.
  uint8_t ClassByte(int32_t c) const { return class_byte_[c]; }
  bool IsFinal(int32_t state) const { return final_[state] != 0; }
  // Whether any byte leads somewhere from `state`.
  bool HasBytes(int32_t state) const { return has_bytes_[state] != 0; }
  const PdaCall* CallsBegin(int32_t state) const {
    return calls_.data() + call_offsets_[state];
  }
  const PdaCall* CallsEnd(int32_t state) const {
    return calls_.data() + call_offsets_[state + 1];
  }
  int32_t RuleStart(int32_t rule) const { return rule_start_[rule]; }
  int32_t StateRule(int32_t state) const { return state_rule_[state]; }
  const std::string& RuleName(int32_t rule) const { return rule_names_[rule]; }
  // A state that only ends its rule (final, no bytes, no calls). A call
  // returning to one is a tail call: the callee returns straight to the
  // caller's own caller, so such frames are never pushed.
  bool IsTail(int32_t state) const {
    return IsFinal(state) && !HasBytes(state) &&
           CallsBegin(state) == CallsEnd(state);
  }
  // A call whose frame is never pushed: it returns to a tail state, and
  // neither its rule nor its caller's is distinct (a distinct call's frame
  // keeps its values; a distinct rule's values end in a return of their
  // own).
  // Nor does a call of or from a counted member (its own return sets a bit
  // of its caller's frame), or a call returning into a rule with required
  // members (which checks them at its own return), or a call of a dispatch
  // (its frame is its caller's, so it needs one); every call from a
  // dispatch is one (what it calls counts in that frame).
  bool IsTailCall(const PdaCall& c) const {
    return IsTail(c.return_state) &&
           (distinct_.empty() ||
            (!distinct_[c.rule] && !distinct_[StateRule(c.return_state)])) &&
           (member_bit_.empty() || IsDispatch(StateRule(c.return_state)) ||
            (member_bit_[c.rule] < 0 && !IsDispatch(c.rule) &&
             member_bit_[StateRule(c.return_state)] < 0 &&
             required_[StateRule(c.return_state)].empty()));
  }
  // Every state a stack top of `rule` may find right below it: the return
  // states of its calls, seen through tail calls.
  const std::vector<int32_t>& ReturnStates(int32_t rule) const {
    return return_states_[rule];
  }

  size_t MemoryBytes() const;

  // Distinct rules (grammar_ir.h's Rule::distinct): within one frame of a
  // caller, their values must differ. Inside(rule): the rule is distinct or
  // a distinct rule reaches it by calls, so a stack top of it may be inside
  // such a value. has_distinct(): some rule is.
  bool IsDistinct(int32_t rule) const {
    return !distinct_.empty() && distinct_[rule] != 0;
  }
  bool InsideDistinct(int32_t rule) const {
    return !inside_distinct_.empty() && inside_distinct_[rule] != 0;
  }
  bool has_distinct() const { return !distinct_.empty(); }
  // Marks the distinct rules (per rule, nonzero: distinct); none leaves the
  // Pda as it was.
  void MarkDistinct(const std::vector<uint8_t>& distinct);

  // Members counted at run time (grammar_ir.h's Rule::member_bit,
  // required_members and member_guard): a return from a rule with a member
  // bit sets it in the caller's frame; a rule with required members returns
  // only once its frame has them all; a call of a guarded rule is refused
  // where every member of its guard is set already. A dispatch (a trie of
  // member names) reads its caller's members and calls at its ends only. Rules
  // with required members and rules calling guarded ones are "checking" ones:
  // their frames hold what the tables cannot know. InsideChecking(rule): a
  // checking rule reaches it by calls (or it is one), so a stack of it may be
  // inside such a frame. MayReadChecked(rule): reading bytes from a state of
  // the rule, without leaving it, may end a rule with required members or call
  // a guarded one (it is checking, or calls one), so its own tables cannot
  // tell. has_members(): some rule counts or is counted.
  int MemberBit(int32_t rule) const {
    return member_bit_.empty() ? -1 : member_bit_[rule];
  }
  const MemberSet& RequiredMembers(int32_t rule) const {
    return required_.empty() ? kNoMembers : required_[rule];
  }
  bool IsGuarded(int32_t rule) const {
    return !guard_.empty() && !guard_[rule].empty();
  }
  const MemberSet& Guard(int32_t rule) const {
    return guard_.empty() ? kNoMembers : guard_[rule];
  }
  bool IsDispatch(int32_t rule) const {
    return !dispatch_.empty() && dispatch_[rule] != 0;
  }
  bool CallsGuarded(int32_t rule) const {
    return !calls_guarded_.empty() && calls_guarded_[rule] != 0;
  }
  bool InsideChecking(int32_t rule) const {
    return !inside_checking_.empty() && inside_checking_[rule] != 0;
  }
  bool MayReadChecked(int32_t rule) const {
    return !may_read_checked_.empty() && may_read_checked_[rule] != 0;
  }
  bool has_members() const { return !member_bit_.empty(); }
  // Characters counted at run time (grammar_ir.h's Rule::max_chars): such a
  // rule reads the rest of a JSON string, with the rules it reaches by
  // calls (tail calls only: a long pattern's automaton keeps some states as
  // rules), and their frames count the characters read (CharPhase below).
  // MaxChars(rule): the bound of the string a rule reads, or -1.
  // CharsToEnd(state, phase): the fewest characters that still take a
  // counted rule's state, at that phase of a character, to the rule's end
  // (kNoEnd: none); a stack whose count plus that passes the bound can
  // never close its string. MaxCharJump(rule): the most one byte can add
  // to that sum (count + CharsToEnd), so a token of n bytes adds at most n
  // times it: the tokens a mask must read for real near the bound are the
  // long ones. has_counted_chars(): some rule counts.
  static constexpr int32_t kNoEnd = INT32_MAX / 4;
  int32_t MaxChars(int32_t rule) const {
    return bound_.empty() ? -1 : bound_[rule];
  }
  int32_t CharsToEnd(int32_t state, int8_t phase) const {
    return chars_to_end_[static_cast<size_t>(chars_base_[state]) + phase];
  }
  int32_t MaxCharJump(int32_t rule) const { return max_char_jump_[rule]; }
  bool has_counted_chars() const { return !max_chars_.empty(); }
  // Marks them (per rule: -1 or the bound); none leaves the Pda as it was.
  // InvalidArgument when a rule reading a counted string calls another
  // before its end, is called from outside it or reads two of them, or
  // when a counted string cannot close within its bound.
  absl::Status MarkCountedChars(const std::vector<int32_t>& max_chars);
  // Whether some return or call is checked at run time (distinct rules,
  // counted members or characters): a matcher's stepper must then track
  // (stack.h).
  bool has_run_time_checks() const {
    return has_distinct() || has_members() || has_counted_chars();
  }
  // Whether a return from `rule` is more than a pop: a distinct value's end,
  // a member counted or members required.
  bool ReturnIsChecked(int32_t rule) const {
    return IsDistinct(rule) ||
           (!member_bit_.empty() &&
            (member_bit_[rule] >= 0 || !required_[rule].empty()));
  }
  // Marks them (per rule: -1 or the bit; the required bits; the guard;
  // nonzero: a dispatch); none leaves the Pda as it was.
  void MarkMembers(const std::vector<int16_t>& member_bit,
                   const std::vector<MemberSet>& required,
                   const std::vector<MemberSet>& guard,
                   const std::vector<uint8_t>& dispatch);

  // Which states of `rule` read alike for their next few bytes, whatever
  // lies below them: for k = 0..depth, states of one class at level k accept,
  // reject and leave the rule on the same strings of at most k bytes, at
  // the same places. A bounded repeat (`char{0,300}`) has a state per count
  // that Minimized() must keep apart, yet counts far from both ends read
  // any token alike. Sufficient, not exact: a call of a rule that may match
  // nothing returns alike only to the very same state.
  // Levels past `max_work` / (rule states) are not compared (depth is then
  // less than asked); with work for fewer than `min_depth` + 1 levels, none
  // is (depth -1, no states: level 0 alone tells nothing worth sharing, and
  // a few levels of a large rule cost more than they save).
  // Cost: O(states) to count the rule's, then O(rule states x (256 + depth
  // x moves)) time, on demand; memory a few ints per state of the rule (the
  // classes as a tree of splits).
  struct Alike {
    std::vector<int32_t> states;  // the rule's states, ascending
    int32_t depth = 0;
    // The largest k <= depth at which states `a` and `b` (both of the rule)
    // share a class, or -1 when they differ even at level 0 or nothing was
    // compared; O(depth).
    int32_t SharedDepth(int32_t a, int32_t b) const;
    size_t MemoryBytes() const;

    // states[i]'s class at the last level; per class, the class it split
    // from and the level it split off at.
    std::vector<int32_t> leaf, node_parent, node_level;
  };
  Alike AlikeUpTo(int32_t rule, int32_t depth,
                  int64_t max_work = int64_t{1} << 30,
                  int32_t min_depth = 1) const;

  // The Pda of `raw` with equivalent states of each rule merged (Moore's
  // partition refinement): states that end alike, move alike on every byte
  // and call alike (every state is kept when merging would take more than
  // a work budget, see pda.cc).
  // Fewer states means fewer token classifications, and the
  // subset construction leaves many duplicates (inside a JSON string after a
  // plain character, after an escape, after \uXXXX, ...).
  static Pda Minimize(const RawPda& raw);

  // The finished Pda in serialize.h's form, and back. Load checks every
  // index it reads, so a malformed buffer is DataLoss, never a Pda that
  // reads out of bounds.
  void Save(ByteWriter* out) const;
  static absl::StatusOr<Pda> Load(ByteReader* in);

 private:
  // byte_class_ and num_classes_ from where runs of bytes begin
  // (starts[b]: some run begins at byte b); next_ all dead for `states`.
  void SetByteClasses(const std::array<bool, 256>& starts, int32_t states);
  // Fills state `s`'s row for the bytes lo..hi with `target`.
  void SetRun(int32_t s, int lo, int hi, int32_t target);
  // has_bytes_ from next_.
  void ComputeHasBytes();
  // return_states_ from the calls.
  void FindReturnStates();
  // The rules `from` marks, with those they reach by calls (callees) or
  // that reach them (callers otherwise).
  std::vector<uint8_t> Reached(const std::vector<uint8_t>& from,
                               bool callees) const;

  // An allocator whose resize leaves ints unset: the transition table is
  // filled by memset right after (zeroing it first doubled the cost of
  // making a table of five million cells, a string counted to 65535).
  template <typename T>
  struct UnsetAllocator : std::allocator<T> {
    template <typename U>
    struct rebind {
      using other = UnsetAllocator<U>;
    };
    UnsetAllocator() = default;
    template <typename U>
    UnsetAllocator(const UnsetAllocator<U>&) {}  // NOLINT: as std::allocator
    template <typename U>
    void construct(U* p) {
      ::new (static_cast<void*>(p)) U;
    }
    template <typename U, typename... Args>
    void construct(U* p, Args&&... args) {
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
  };

  std::array<uint8_t, 256> byte_class_{};
  std::array<uint8_t, 256> class_byte_{};
  int32_t num_classes_ = 1;
  std::vector<int32_t, UnsetAllocator<int32_t>> next_;  // states x classes
  std::vector<uint8_t> final_;
  std::vector<uint8_t> has_bytes_;
  std::vector<PdaCall> calls_;
  std::vector<uint32_t> call_offsets_;
  std::vector<int32_t> rule_start_;
  std::vector<int32_t> state_rule_;
  std::vector<std::string> rule_names_;
  std::vector<std::vector<int32_t>> return_states_;
  int32_t root_rule_ = 0;
  // Per rule when some rule is distinct, else empty.
  std::vector<uint8_t> distinct_;
  std::vector<uint8_t> inside_distinct_;
  // Per rule when some rule counts members or is counted, else empty.
  static constexpr MemberSet kNoMembers{};
  std::vector<int16_t> member_bit_;
  std::vector<MemberSet> required_;
  std::vector<MemberSet> guard_;
  std::vector<uint8_t> dispatch_;
  std::vector<uint8_t> calls_guarded_;
  std::vector<uint8_t> inside_checking_;
  std::vector<uint8_t> may_read_checked_;
  // Per rule when some rule counts characters, else empty; per state of a
  // rule reading a counted string, where its CharPhase::kCount entries of
  // chars_to_end_ begin (-1 elsewhere).
  std::vector<int32_t> max_chars_;  // as marked
  std::vector<int32_t> bound_;      // MaxChars
  std::vector<int32_t> max_char_jump_;
  std::vector<int32_t> chars_base_;
  std::vector<int32_t> chars_to_end_;
};

// Where a byte of a JSON string leaves the count of its characters (a code
// point, or an escape, counts one): kBetween after a character, or inside
// a UTF-8 sequence; kAfterBackslash; then 4..1 hex digits of \u to go.
struct CharPhase {
  static constexpr int8_t kBetween = 0;
  static constexpr int8_t kAfterBackslash = 5;
  static constexpr int8_t kCount = 6;
  // The phase after `byte` from `phase`, and whether it begins a character
  // (the closing quote, read between characters, begins none).
  static int8_t Step(int8_t phase, uint8_t byte, bool* begins) {
    *begins = false;
    if (phase == kAfterBackslash) return byte == 'u' ? 4 : kBetween;
    if (phase != kBetween) return static_cast<int8_t>(phase - 1);
    if (byte == '"' || (byte & 0xC0) == 0x80) return kBetween;
    *begins = true;
    return byte == '\\' ? kAfterBackslash : kBetween;
  }
};

// Byte moves of `s` as runs with one target, (first byte, to(target)), a
// dead byte's target -1: most states move on a few ranges, so a round of
// refinement reads a handful of runs instead of 256 bytes.
template <typename To>
void AppendRuns(const Pda& pda, int32_t s, To to,
                std::vector<std::pair<int32_t, int32_t>>* runs) {
  int32_t prev = -2;
  for (int32_t c = 0; c < pda.num_byte_classes(); ++c) {
    const uint8_t b = pda.ClassByte(c);
    const int32_t t = pda.Next(s, b);
    const int32_t mapped = t == Pda::kDead ? -1 : to(t);
    if (mapped != prev) runs->push_back({b, mapped});
    prev = mapped;
  }
}

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_ENGINE_PDA_H_
