// TokenTable: for every state of a Pda that reads bytes, which tokens are
// certainly allowed when a stack top in that state reads them, and which
// depend on what lies below it on the stack.
//
// A token is classified by reading it from the state with an unknown caller:
//   accepted  - some path consumes it all inside the state's own rule (or
//               ends the rule exactly at its last byte): allowed whatever
//               the stack below;
//   rejected  - every path dies, inside the rule or after leaving it into
//               any of the rule's return states: never allowed;
//   uncertain - the rest: it leaves the rule with bytes left and survives in
//               some caller. A matcher checks these against the real stack.
// Only paths that read their first byte from the state itself count: the
// rules it calls are scan nodes of their own in a matcher's position.
//
// Cost: a state is classified the first time a matcher asks for it, by one
// walk of the token trie, pruning where a prefix dies and settling at once a
// subtree whose bytes all lead back to the same stack sets (the inside of an
// identifier or a string): tens of microseconds for a state that allows few
// tokens, a few milliseconds for one that allows most. A state whose rule
// calls nothing from there on (most of the costly ones: inside a string)
// is classified from a walk shared by every grammar of the vocabulary
// instead (leaf_tokens.h), a fraction of a millisecond when new; one whose
// rule calls others only further on (an object key, then its value) by a
// DFA walk of its own up to those calls (a millisecond or two where the
// general walk takes 10 to 25). Classifying every state up front made a large
// schema's first mask wait seconds for states no output ever visits. States of
// call-free rules that behave alike share one table, found when the table is
// made (linear in the Pda per byte of the longest token, usually a few rounds).
// Memory: per classified table a bitset of the vocabulary or a list of ids,
// whichever is smaller, plus the uncertain ids.
// Thread-safety: For() may be called from any number of threads; each table
// is built once, by the first caller, while later ones for the same table
// wait. Everything else is immutable after Load.
#ifndef GRAMMARD_GRAMMAR_ENGINE_TOKEN_TABLE_H_
#define GRAMMARD_GRAMMAR_ENGINE_TOKEN_TABLE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/base/byte_io.h"
#include "grammar/base/deadline.h"
#include "grammar/base/lazy_array.h"
#include "grammar/engine/pda.h"
#include "grammar/engine/stack.h"
#include "grammar/engine/token_index.h"
#include "grammar/engine/token_set.h"

namespace grammard::grammar::internal {

class ContextsBelow;

// Uncertain tokens settled by what lies below a stack top: most tokens that
// leave a rule end inside its caller (`",` after a string in an array), so
// a few levels of known callers decide them.
struct ContextTokens {
  int32_t return_state;            // the caller's state at this level
  TokenSet accepted;               // allowed whatever lies further below
  std::vector<int32_t> uncertain;  // leave this caller's rule too
  // The contexts of the next caller down, one per return state of this
  // caller's rule, each built the first time a matcher asks for it (a
  // member called from a hundred objects has a hundred); null when nothing
  // is uncertain or past the depth limit, where the matcher reads the
  // tokens for real. Shared by copies (SameChainReading).
  std::shared_ptr<const ContextsBelow> below;

  // The next caller's context, or null; builds it on the first call (safe
  // from any number of threads, a context being built is waited for).
  const ContextTokens* Context(int32_t return_state) const;
};

struct StateTokens {
  TokenSet accepted;               // allowed whatever the stack below
  std::vector<int32_t> uncertain;  // token ids, in byte order
};

class TokenTable {
 public:
  // An empty table over `pda` and `index` (which must outlive it), filled
  // by Group() or Load() before any For().
  TokenTable(const Pda& pda, const TokenIndex& index);
  TokenTable(const TokenTable&) = delete;
  TokenTable& operator=(const TokenTable&) = delete;
  ~TokenTable();

  // Groups the states that classify alike, classifying none of them;
  // DeadlineExceeded once `deadline` passes.
  absl::Status Group(const Deadline& deadline);

  // Builds tables and their contexts ahead of any matcher, nearest the
  // root rule's start first, until `deadline` or until `*cancel` is set: a
  // small grammar is then complete and its first masks cost what later ones
  // do; a large one has the states its outputs begin with. Safe while
  // matchers use the table (a table being built is waited for, not built
  // twice).
  // True once every table and context a matcher can reach is built.
  bool Prebuild(std::chrono::steady_clock::time_point deadline,
                const std::atomic<bool>* cancel = nullptr) const;

  // Null for states that read no byte; otherwise the state's table, built
  // now if no caller has asked for it before.
  const StateTokens* For(int32_t state) const;
  // Before For() on each of `states` (a mask's stack tops): the leaf walks
  // that the tables not built yet would each make, made in one pass
  // (WalkLeavesTogether). O(states) when they are built.
  void WalkTogether(const int32_t* states, size_t count) const;
  // The uncertain tokens of `state` (For(state) was called) settled by the
  // caller's state `return_state` right below it, built now if no caller
  // has asked for this pair before: a few hundred microseconds, paid only
  // for the callers an output meets (a string rule called from a thousand
  // places in a large schema would otherwise pay a thousand). The
  // character of a string with a maxLength is read along its chain of
  // counts (SplitByCallChain; llama3: about 1.5 ms for its first context,
  // where a full read takes 15 to 35 ms), and a count whose chain reads
  // alike to one built far from the chain's end copies it
  // (SameChainReading; tens of microseconds). Any other context whose
  // return state reads its next bytes as that of one built before does
  // (Pda::AlikeUpTo) reads only the tokens longer than that; the others it
  // copies. Null when nothing is uncertain or `return_state` is not one of
  // the rule's return states; with no caller at all (the root rule's frame
  // at the bottom) every uncertain token is rejected: nothing may follow.
  const ContextTokens* Context(int32_t state, int32_t return_state) const;

  // Tables in all (states that classify alike share one), those built so
  // far (contexts not counted), and the bytes they, their contexts, the
  // grouping and the rules' alike classes (Pda::AlikeUpTo) occupy; of
  // these, Save carries all but the alike classes, which a loaded table
  // makes again when a new context needs them.
  int32_t num_tables() const {
    return static_cast<int32_t>(first_state_.size());
  }
  int32_t num_built() const;
  // Whether a Prebuild has run to the end.
  bool complete() const { return complete_.load(std::memory_order_acquire); }
  size_t MemoryBytes() const;
  size_t alike_bytes() const {
    return alike_bytes_.load(std::memory_order_relaxed);
  }

  // The table in serialize.h's form: the grouping and the tables built so
  // far (the others are built on demand after loading, as here). Load
  // checks every index, and that exactly the states that read bytes have a
  // table.
  void Save(ByteWriter* out) const;
  absl::Status Load(ByteReader* in);

 private:
  struct Slot;
  struct LazyContext;
  struct RuleAlike;
  void Init(std::vector<int32_t> slot, std::vector<int32_t> first_state);
  // Return states of the rule of slot `slot`'s states: one context each.
  const std::vector<int32_t>& Returns(size_t slot) const;
  // Stores a table (or context) just built or loaded and marks it built;
  // runs inside its once_flag.
  void Publish(size_t slot, StateTokens tokens) const;
  void Publish(LazyContext* context, ContextTokens tokens) const;
  // A built context of slot `slot` whose return state reads its next
  // `*alike` bytes as `return_state` does, worth building from; or null.
  const ContextTokens* AlikeContext(size_t slot, int32_t return_state,
                                    int32_t* alike) const;
  // What a built slot holds, its contexts not counted.
  size_t SlotBytes(size_t slot) const;
  // Slot `i`, making its chunk if no slot of it was needed before.
  Slot& SlotAt(size_t i) const;
  // The context of `slot`'s k-th return state, counting its chunk's memory
  // when this call made it.
  LazyContext& ContextAt(Slot* slot, size_t k) const;
  // Slot `i`, or null when no slot of its chunk was ever needed (so none
  // is built).
  const Slot* FindSlot(size_t i) const;

  const Pda& pda_;
  const TokenIndex& index_;
  std::vector<int32_t> slot_;
  // Per slot, the first state that maps to it: the one classified.
  std::vector<int32_t> first_state_;
  // Made a chunk at a time: a grammar of tens of thousands of states (a
  // long maxLength string counts its characters) has most of them never
  // visited, and making them all was a tenth of its compile.
  std::unique_ptr<LazyArray<Slot>> slots_;
  // Per rule, built when a context first needs it.
  std::unique_ptr<RuleAlike[]> alike_;
  // What For() and Context() have built so far, so MemoryBytes is cheap.
  mutable std::atomic<size_t> built_bytes_{0};
  mutable std::atomic<size_t> alike_bytes_{0};
  mutable std::atomic<bool> complete_{false};
};

// Classifies every token of `index` for `state` by one walk of the token
// trie, whatever the state (leaf_tokens.h has a faster way for states whose
// rule calls nothing from there on).
StateTokens ClassifyState(const Pda& pda, const TokenIndex& index,
                          int32_t state);

// Contexts read the short way: `state` starts a rule that calls nothing
// and cannot go on once it may end (JSON's counted `char`), and the
// callers call that rule again and again, one count per call (a string's
// maxLength). A token then reads as a run of the rule's strings, each
// moving the caller one step along a chain of its states, with no stacks.
//
// LinkReading: how each of `state`'s uncertain tokens splits into the
// rule's strings, whatever the callers; nullopt when `state` does not start
// such a rule. One walk of the token trie per link and vocabulary (llama3:
// about 2.5 ms; kept in the vocabulary's cache), then O(uncertain tokens);
// memory 3 bytes per uncertain token and a bitset of the vocabulary.
struct LinkReading {
  enum End : uint8_t {
    kBetween,  // ends right after its last whole string
    kInside,   // ends inside one more string
    kDies,     // a byte no string of the rule can read next
    kLeaves,   // a byte the rule cannot start a string with: the callers'
  };
  // Per token of the uncertain list (same order): whole strings read
  // (at least 1) and how it goes on from there.
  std::vector<uint16_t> strings;
  std::vector<End> end;
  // What every position far enough from the chain's end makes of them
  // (most of a counted string's): the tokens that end between or inside
  // strings are accepted, and those that read no string or leave into the
  // callers (positions in the uncertain list, ascending) are unsettled,
  // as those that die are where the chain does not force them dead.
  int32_t longest = 0;  // the most strings a token reads
  int32_t words = 0;    // of a row of the vocabulary, for the sets made
  TokenSet within;
  std::vector<int32_t> leaving, dying;

  size_t MemoryBytes() const;
};
std::optional<LinkReading> ReadAsLinks(const Pda& pda, const TokenIndex& index,
                                       int32_t state,
                                       const std::vector<int32_t>& uncertain);

// The context of `return_state` for `uncertain` (state's, read by
// ReadAsLinks into `reading`): `accepted` are allowed there whatever lies
// further below, `unsettled` must be read for real (they leave the chain
// or meet a state that does more than call the rule again; in `uncertain`'s
// order) and the rest are rejected. 256 steps per chain state the longest
// token reaches, plus O(unsettled tokens) where the chain goes on past the
// longest token, else O(uncertain tokens).
struct ChainSplit {
  TokenSet accepted;
  std::vector<int32_t> unsettled;
  bool far = false;  // the chain goes on past the longest token
};
ChainSplit SplitByCallChain(const Pda& pda, int32_t state, int32_t return_state,
                            const std::vector<int32_t>& uncertain,
                            const LinkReading& reading);

// Whether return states `a` and `b` of the chain's link starting at `state`
// read the link's tokens alike, so that their contexts are the same: of one
// rule, and along the chain, for as many strings as the longest token
// reads, their states end alike, read every byte into the same state and
// call the same rules, the link aside (which moves both along), or meet.
// Positions of a counted string far from its bounds all do. O(longest x byte
// classes).
bool SameChainReading(const Pda& pda, int32_t state, int32_t a, int32_t b,
                      int32_t longest);

// Where a token lands when it leaves `state`'s rule with bytes left: the
// closed set of the rule's return states (each above an unknown caller, or
// above nothing for a root rule no one calls), made in `pool`. Not
// `followed` when that set is too large to step at every leaving (a rule
// called from many places, such as a string in a large schema): such
// tokens are then uncertain, for contexts or the matcher to settle.
struct CallerLanding {
  std::vector<int32_t> nodes;
  CloseFlags flags;
  bool followed = false;
};
CallerLanding LandInCallers(const Pda& pda, int32_t state, StackPool* pool,
                            Stepper* stepper);

// What lies below a frame of `rule` when nothing else is known: kBottom for
// a root rule no one calls (leaving it ends the text), else kOpen.
int32_t Below(const Pda& pda, int32_t rule);

// Whether `state` starts a rule that ReadAsLinks can read (a chain's link).
bool StartsChainLink(const Pda& pda, int32_t state);

// The context of `uncertain` tokens of `state` below the callers `chain`
// (chain[0] the nearest), its own contexts below left to be built on
// demand up to six callers (kMaxContextDepth). With `like` (a context
// whose return state reads its next `alike` bytes as chain.back()'s does),
// only tokens longer than that are read; the others are copied, and so
// below it from what `like` has built by then. `known`: tokens already
// known to be accepted (not in `uncertain`). Contexts built later add
// their bytes to `*bytes` (the table's count, which must outlive them).
ContextTokens ClassifyInContext(const Pda& pda, const TokenIndex& index,
                                int32_t state,
                                const std::vector<int32_t>& chain,
                                const std::vector<int32_t>& uncertain,
                                const ContextTokens* like, int32_t alike,
                                std::atomic<size_t>* bytes,
                                const TokenSet* known = nullptr);

// What a context and what lies below it hold, for Save, Load and memory
// accounting; `c` was made by ClassifyInContext (or by LoadBelow).
struct ContextsBelowAccess {
  // The contexts below `c` built so far, in return-state order.
  static std::vector<const ContextTokens*> Built(const ContextTokens& c);
  // Puts a loaded context below `c` (its return state one of c's rule's,
  // not yet built), with the ones below it to be built on demand: false
  // when its return state is not one of them.
  static bool Put(const ContextTokens& c, ContextTokens child);
  // `c` and its share of what lies below, built or not (contexts built
  // later are counted as they are built).
  static size_t Bytes(const ContextTokens& c);
};

// Makes `*c` (loaded: its return state, accepted and uncertain tokens) a
// context of `state` below `chain`, with its contexts below to be built on
// demand, as ClassifyInContext would.
void PrepareLoadedContext(const Pda& pda, const TokenIndex& index,
                          int32_t state, const std::vector<int32_t>& chain,
                          std::atomic<size_t>* bytes, ContextTokens* c);

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_ENGINE_TOKEN_TABLE_H_
