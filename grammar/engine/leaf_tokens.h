// Leaf tokens: classifying the tokens of a state from which its rule calls
// nothing (inside a JSON string or number, a regex, whitespace), with the
// part that does not depend on the grammar shared by every grammar of one
// vocabulary.
//
// From such a state a token is read by a plain DFA. It ends alive
// (accepted, whatever the callers), or the DFA dies on it; then it is
// rejected unless the DFA could end the rule earlier with bytes left (a
// leaver, uncertain when the rule's callers can read the rest; see
// token_table.h). Which tokens are which depends only on the DFA from the
// state, and thousands of schemas have the same few of those (every
// `"type": "string"`), so the trie walk that sorts them, with no stacks, is
// kept per vocabulary under the DFA's canonical form. Per grammar only the
// leavers' rests are read by the callers, in byte order so that rests
// sharing a prefix step it once and a prefix that dies settles them all.
//
// Cost: the canonical form is O(reachable states x 256); a walk, on a miss,
// about 0.2 ms for a string state on 128K tokens; settling, O(1) per leaver
// plus the stack steps of the distinct live prefixes of the rests.
// Memory: a LeafCache holds at most its byte budget (least recently used
// walks dropped first).
// Thread-safety: LeafCache is safe from any thread (one mutex, not held
// while walking: threads missing the same form at once each walk it);
// ClassifyLeafState is a pure function but for the cache.
#ifndef GRAMMARD_GRAMMAR_ENGINE_LEAF_TOKENS_H_
#define GRAMMARD_GRAMMAR_ENGINE_LEAF_TOKENS_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grammar/engine/pda.h"
#include "grammar/engine/token_index.h"
#include "grammar/engine/token_table.h"

namespace grammard::grammar::internal {

// What the DFA from a state makes of every token, callers aside; or, for
// the walk of one first byte's subtree (see WalkLeaf), of the tokens there.
struct LeafWalk {
  TokenSet accepted;
  // A subtree's walk: its accepted tokens as ranges of index positions.
  std::vector<std::pair<int32_t, int32_t>> accepted_positions;
  // Leavers come in runs: the tokens below one trie node on which the DFA
  // dies, index positions [begin, end), all able to leave the rule after
  // the same numbers of bytes, offsets[offsets_begin, offsets_end).
  struct Run {
    int32_t begin, end;
    int32_t offsets_begin, offsets_end;
  };
  std::vector<Run> runs;
  std::vector<int32_t> offsets;

  size_t MemoryBytes() const;
};

// What a chain's link (see ReadAsLinks in token_table.h) makes of every
// token: per id, (whole strings read << 2) | LinkReading::End. Like a walk,
// it depends only on the link's DFA, the same `char` in every JSON schema
// with a maxLength, so it is kept per vocabulary.
struct LinkCodes {
  std::vector<uint32_t> by_id;

  size_t MemoryBytes() const;
};

// Walks and link codes by canonical DFA form (keys tagged apart by their
// makers), least recently used dropped past max_bytes.
class LeafCache {
 public:
  explicit LeafCache(size_t max_bytes) : max_bytes_(max_bytes) {}
  LeafCache(const LeafCache&) = delete;
  LeafCache& operator=(const LeafCache&) = delete;

  // Null when absent, or kept under `key` as the other type.
  template <typename T>
  std::shared_ptr<const T> Find(const std::string& key) {
    Value v = FindValue(key);
    auto* p = std::get_if<std::shared_ptr<const T>>(&v);
    return p == nullptr ? nullptr : *p;
  }
  // Keeps `value` unless it alone is over the budget.
  template <typename T>
  void Insert(const std::string& key, std::shared_ptr<const T> value) {
    const size_t size = value->MemoryBytes();
    InsertValue(key, Value(std::move(value)), size);
  }
  // A number for `key` (a long one, such as a DFA's form), the same for
  // equal keys while it stays cached and never given to another key, so
  // that keys made from it are short: a walk looks up one per first byte
  // and lane, and copying and hashing 4 KB forms there was a sixth of a
  // cold walk.
  uint64_t IdOf(const std::string& key);
  size_t bytes() const;
  size_t entries() const;

 private:
  struct Id {
    uint64_t id;
  };
  using Value =
      std::variant<std::shared_ptr<const LeafWalk>,
                   std::shared_ptr<const LinkCodes>, std::shared_ptr<const Id>>;
  struct Entry {
    std::string key;
    Value value;
    size_t bytes;  // key and value
  };
  Value FindValue(const std::string& key);
  void InsertValue(const std::string& key, Value value, size_t value_bytes);
  // Under mu_, `key` absent and `size` (key and value) within max_bytes_:
  // keeps the entry as the most recent, then drops the least recently used
  // entries past max_bytes_.
  void AddLocked(const std::string& key, Value value, size_t size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_bytes_;
  mutable absl::Mutex mu_;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> by_key_
      ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
};

// The canonical form of the DFA reachable from `state` by bytes (states
// numbered in the order a breadth-first walk by byte meets them); nullopt
// when a state there calls a rule, or past `max_states` states or
// `max_bytes` bytes.
std::optional<std::string> LeafForm(const Pda& pda, int32_t state,
                                    int32_t max_states,
                                    size_t max_bytes = SIZE_MAX);

// The DFA's walk from `state` (which must have a LeafForm), one first byte's
// subtree at a time. With `share_subtrees` (false only for tests' walks
// that keep nothing), each subtree's walk is kept in `cache` under the byte
// and the form of the state that byte leads to, where that form is small:
// DFAs that differ only in their first bytes' states (a key other than the
// declared names: after one byte, mostly any string) share the rest, about
// nine tenths of a walk's tokens on MaskBench, however many names.
LeafWalk WalkLeaf(const Pda& pda, const TokenIndex& index, int32_t state,
                  LeafCache* cache, bool share_subtrees);

// Tuples of lane states one subtree's walk in WalkLeaves may meet before
// it steps its lanes one by one instead: transition rows of a few hundred
// kilobytes at most.
inline constexpr int32_t kMaxProductStates = 2048;

// Walks of `states` (each with a LeafForm; share_subtrees per state, as
// above) in one pass over the token trie. Each node steps one state of the
// DFAs' product, found as the walk first meets it (up to
// `max_product_states` per subtree, past which each node steps the DFAs
// still alive there): a mask that first meets several leaf states at once
// (an object's pattern property keys, an anyOf of string patterns: 4 to 27
// walks of 1 to 2.5 ms each on llama3) pays about what one walk does.
std::vector<LeafWalk> WalkLeaves(
    const Pda& pda, const TokenIndex& index, const std::vector<int32_t>& states,
    const std::vector<char>& share_subtrees, LeafCache* cache,
    int32_t max_product_states = kMaxProductStates);

// Keeps in `cache` the walks of those `states` with a LeafForm whose walk
// it lacks, made together by WalkLeaves when there are two or more (else
// left to ClassifyLeafState, which makes the same walk).
void WalkLeavesTogether(const Pda& pda, const TokenIndex& index,
                        const std::vector<int32_t>& states, LeafCache* cache);

// Stack nodes that following a state's leavers into its callers may step
// (about 35 ns each) before the leavers not read yet are left uncertain,
// for contexts to settle: a character counted in a string of bounded
// length leaves into dozens of positions on every token (llama3: 4.6 M
// steps, 161 ms, to reject 7 % of the leavers).
inline constexpr int64_t kLeafFollowBudget = int64_t{1} << 17;

// ClassifyState(pda, index, state) for a state with a LeafForm, its walk
// taken from `cache` when another grammar (or state) of the same form made
// it; nullopt for other states. Exactly ClassifyState's result while
// following the leavers stays within `follow_budget`; past it, the same
// accepted tokens and more uncertain ones.
std::optional<StateTokens> ClassifyLeafState(
    const Pda& pda, const TokenIndex& index, int32_t state, LeafCache* cache,
    int64_t follow_budget = kLeafFollowBudget);

// ClassifyState's accepted tokens for a state whose rule calls others
// further on (an object key's string, then its value) or has too many
// states for a form (a pattern counted by maxLength), and at least its
// uncertain ones: the DFA walk of WalkLeaf, not kept, up to each state
// that calls a rule, below which the tokens are read by stack steps (only
// those going on with a byte a callee may begin, where no callee, nor a
// rule a callee's start calls, may end before it reads a byte: a names
// trie's parting byte, a value's first byte after whitespace; the state's
// own bytes are walked on); those leaving the rule there are left
// uncertain rather than followed. Nullopt when more than `max_deferred`
// tokens would be read that way (a state whose first bytes lead to calls
// at once), which the general walk settles faster. Cost: a walk (about
// 1 ms for most of llama3's tokens) plus the stack steps of the deferred
// tokens' rests.
std::optional<StateTokens> ClassifyMixedState(const Pda& pda,
                                              const TokenIndex& index,
                                              int32_t state,
                                              int64_t follow_budget,
                                              int32_t max_deferred);

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_ENGINE_LEAF_TOKENS_H_
