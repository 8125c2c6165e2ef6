#include "grammar/engine/leaf_tokens.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "grammar/base/refine.h"
#include "grammar/engine/stack.h"

namespace grammard::grammar::internal {
namespace {

// States of a form worth keying: a string of bounded length has a few per
// character it may still read, and its classification is read from the
// first (longest token) bytes only, which Group() already shares. An
// object key that must differ from a set of names has a thousand or more
// (Glaive calculate_area's oneOf: 33 such rules met at once, 3 ms each by
// the general walk, 1.3 ms by a leaf walk).
constexpr int32_t kMaxFormStates = 4096;

void PutInt(int32_t v, std::string* out) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

// Reads the rests of a state's leavers in its callers, as ClassifyState's
// outer sets do. The tokens of one run share their bytes up to where the
// DFA died and are in byte order, so for one leaving offset their rests are
// in byte order too: each is stepped from where it parts from the one
// before (index.lcp), and a prefix that dies or escapes settles every rest
// below it in O(1).
class RestReader {
 public:
  RestReader(const Pda& pda, const TokenIndex& index, int32_t state,
             int64_t budget)
      : index_(index), stepper_(pda), budget_(budget) {
    landing_ = LandInCallers(pda, state, &pool_, &stepper_);
    Level root;
    root.nodes_end = landing_.nodes.size();
    root.pool_size = pool_.size();
    root.escaped = landing_.flags.open || !landing_.followed;
    levels_.push_back(root);
    nodes_ = landing_.nodes;
  }

  // Whether leaving the rule lands anywhere alive in the callers (or
  // escapes them), before any byte of a rest is read.
  bool LandsAlive() const { return levels_[0].escaped || Alive(levels_[0]); }

  // Marks uncertain[t - run.begin] for the tokens of `run` that some path
  // leaving the rule after `offset` bytes keeps readable: it reads the
  // whole rest and may go on or end there, or leaves the callers' rules too.
  void Read(const LeafWalk::Run& run, int32_t offset,
            std::vector<char>* uncertain) {
    for (int32_t t = run.begin; t < run.end; ++t) {
      const std::string_view rest = index_.bytes(t).substr(offset);
      // Levels 0..shared hold this rest's prefix already.
      size_t shared = 0;
      if (t > run.begin) {
        shared =
            static_cast<size_t>(std::max<int32_t>(0, index_.lcp(t) - offset));
        shared = std::min({shared, levels_.size() - 1, rest.size()});
      }
      Truncate(shared + 1);
      while (levels_.size() <= rest.size() && Alive(levels_.back()) &&
             !levels_.back().escaped && budget_ > 0) {
        Step(static_cast<uint8_t>(rest[levels_.size() - 1]));
      }
      const Level& last = levels_.back();
      // Alive with bytes left too: the budget ran out before this rest.
      if (last.escaped || Alive(last) ||
          (levels_.size() == rest.size() + 1 && last.ends)) {
        (*uncertain)[t - run.begin] = 1;
      }
      // A rest that died or escaped before its end settles the later rests
      // that share what it read, all longer: they die or escape there too
      // (a space's leavers: tens of thousands of words, each dying at its
      // first letter).
      const auto read = static_cast<int32_t>(levels_.size()) - 1;
      if (read < static_cast<int32_t>(rest.size()) &&
          (last.escaped || !Alive(last))) {
        const int32_t end =
            std::min(run.end, index_.SkipPast(t, offset + read));
        if (last.escaped) {
          std::fill(uncertain->begin() + (t + 1 - run.begin),
                    uncertain->begin() + (end - run.begin), 1);
        }
        t = end - 1;
      }
    }
    Truncate(1);
  }

 private:
  // After reading a prefix of a rest: the stack sets nodes_[nodes_begin,
  // nodes_end), whether some step (or the leaving) escaped, and whether
  // the text may end right after its last byte.
  struct Level {
    size_t nodes_begin = 0, nodes_end = 0;
    size_t pool_size = 0;
    bool escaped = false;
    bool ends = false;
  };
  static bool Alive(const Level& l) { return l.nodes_end > l.nodes_begin; }

  void Truncate(size_t levels) {
    levels_.resize(levels);
    nodes_.resize(levels_.back().nodes_end);
    pool_.Truncate(levels_.back().pool_size);
  }

  void Step(uint8_t byte) {
    const Level from = levels_.back();
    budget_ -= static_cast<int64_t>(from.nodes_end - from.nodes_begin);
    step_.clear();
    const CloseFlags f =
        stepper_.Step(&pool_, nodes_.data() + from.nodes_begin,
                      nodes_.data() + from.nodes_end, byte, &step_);
    Level next;
    next.nodes_begin = nodes_.size();
    nodes_.insert(nodes_.end(), step_.begin(), step_.end());
    next.nodes_end = nodes_.size();
    next.pool_size = pool_.size();
    next.escaped = from.escaped || f.open;
    next.ends = f.bottom;
    levels_.push_back(next);
  }

  const TokenIndex& index_;
  StackPool pool_;
  Stepper stepper_;
  CallerLanding landing_;
  std::vector<Level> levels_;
  std::vector<int32_t> nodes_, step_;
  int64_t budget_;  // stack nodes left to step
};

}  // namespace

size_t LeafWalk::MemoryBytes() const {
  return sizeof(*this) + accepted.MemoryBytes() +
         accepted_positions.size() * sizeof(accepted_positions[0]) +
         runs.size() * sizeof(Run) + offsets.size() * sizeof(int32_t);
}

size_t LinkCodes::MemoryBytes() const {
  return sizeof(*this) + by_id.size() * sizeof(uint32_t);
}

LeafCache::Value LeafCache::FindValue(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return {};
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->value;
}

void LeafCache::InsertValue(const std::string& key, Value value,
                            size_t value_bytes) {
  const size_t size = key.size() + value_bytes;
  if (size > max_bytes_) return;
  absl::MutexLock lock(&mu_);
  if (by_key_.count(key) > 0) return;  // another thread made it too
  AddLocked(key, std::move(value), size);
}

void LeafCache::AddLocked(const std::string& key, Value value, size_t size) {
  lru_.push_front({key, std::move(value), size});
  by_key_.emplace(key, lru_.begin());
  bytes_ += size;
  while (bytes_ > max_bytes_) {
    const Entry& last = lru_.back();
    bytes_ -= last.bytes;
    by_key_.erase(last.key);
    lru_.pop_back();
  }
}

uint64_t LeafCache::IdOf(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = by_key_.find(key);
  if (it != by_key_.end()) {
    if (auto* id = std::get_if<std::shared_ptr<const Id>>(&it->second->value)) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return (*id)->id;
    }
  }
  // Absent (or, by a maker's mistake, kept as another type): a fresh number,
  // kept only if the key fits, so that no number is ever given twice.
  const uint64_t id = next_id_++;
  const size_t size = key.size() + sizeof(Id);
  if (it == by_key_.end() && size <= max_bytes_) {
    AddLocked(key, std::make_shared<const Id>(Id{id}), size);
  }
  return id;
}

size_t LeafCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

size_t LeafCache::entries() const {
  absl::MutexLock lock(&mu_);
  return lru_.size();
}

std::optional<std::string> LeafForm(const Pda& pda, int32_t state,
                                    int32_t max_states, size_t max_bytes) {
  // State numbers, valid where their stamp is this call's: a map made per
  // call cost more than the form on large automata.
  thread_local std::vector<int32_t> number;
  thread_local std::vector<uint32_t> stamp_of;
  thread_local uint32_t stamp = 0;
  if (stamp_of.size() < static_cast<size_t>(pda.num_states())) {
    number.resize(pda.num_states());
    stamp_of.resize(pda.num_states(), 0);
  }
  if (++stamp == 0) {
    std::fill(stamp_of.begin(), stamp_of.end(), 0);
    stamp = 1;
  }
  std::vector<int32_t> order{state};
  number[state] = 0;
  stamp_of[state] = stamp;
  std::string form;
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t s = order[i];
    if (pda.CallsBegin(s) != pda.CallsEnd(s) || form.size() > max_bytes) {
      return std::nullopt;
    }
    PutInt(pda.IsFinal(s) ? -2 : -3, &form);
    int32_t prev = -4, prev_target = -5;
    for (int32_t c = 0; c < pda.num_byte_classes(); ++c) {
      const int b = pda.ClassByte(c);
      const int32_t t = pda.Next(s, static_cast<uint8_t>(b));
      if (t == prev_target) continue;  // a run of bytes with one target
      prev_target = t;
      int32_t n = -1;
      if (t != Pda::kDead) {
        if (stamp_of[t] != stamp) {
          if (static_cast<int32_t>(order.size()) >= max_states) {
            return std::nullopt;
          }
          stamp_of[t] = stamp;
          number[t] = static_cast<int32_t>(order.size());
          order.push_back(t);
        }
        n = number[t];
      }
      // Runs of bytes with one target: (first byte, target).
      if (n != prev) {
        PutInt(b, &form);
        PutInt(n, &form);
        prev = n;
      }
    }
  }
  if (form.size() > max_bytes) return std::nullopt;
  return form;
}

namespace {

// Tokens a walk leaves to the stack stepper: those below a trie node whose
// state calls other rules, index positions [begin, end), read from `state`
// after their first `depth` bytes; `left` when the rule could have ended
// on the way, `state` included (a way out to the callers with bytes left).
struct Deferred {
  int32_t begin, end;
  int32_t depth;
  int32_t state;
  bool left;
};

// Adds index positions [begin, end) to `out`'s accepted ranges.
void AcceptRange(LeafWalk* out, int32_t begin, int32_t end) {
  if (begin == end) return;
  std::vector<std::pair<int32_t, int32_t>>& r = out->accepted_positions;
  if (!r.empty() && r.back().second == begin) {
    r.back().second = end;
  } else {
    r.push_back({begin, end});
  }
}

// Adds to `out` the tokens at positions [begin, end), on which the DFA
// died, as leavers if it could have ended the rule after any of the
// `num_finals` depths in `finals`.
void AddRun(LeafWalk* out, int32_t begin, int32_t end, const int32_t* finals,
            int32_t num_finals) {
  if (num_finals == 0) return;
  const auto offsets = static_cast<int32_t>(out->offsets.size());
  out->offsets.insert(out->offsets.end(), finals, finals + num_finals);
  out->runs.push_back(
      {begin, end, offsets, static_cast<int32_t>(out->offsets.size())});
}

// Whether every byte of `below` (a subtree's bytes, subtree_bytes()) leads
// `state` back to itself, so that the subtree is accepted whole (the
// inside of a string).
bool LoopsOver(const Pda& pda, int32_t state, const uint64_t* below) {
  for (int w = 0; w < 4; ++w) {
    for (uint64_t bits = below[w]; bits != 0; bits &= bits - 1) {
      const auto byte = static_cast<uint8_t>(64 * w + __builtin_ctzll(bits));
      if (pda.Next(state, byte) != state) return false;
    }
  }
  return true;
}

// Whether `byte` is in the 256-bit set `bits` (bit b % 64 of word b / 64).
bool HasByte(const uint64_t* bits, uint8_t byte) {
  return bits[byte >> 6] >> (byte & 63) & 1;
}

// What a mixed walk leaves to stack steps, and for each calling state it
// met the bytes that state's callees may begin with (CalleeBytes).
struct Deferrals {
  std::vector<Deferred> tokens;
  std::unordered_map<int32_t, std::optional<std::array<uint64_t, 4>>> bytes;

  // Null unless no rule `state` calls may end before it reads a byte (its
  // start is not final, nor is that of any rule called from a start on the
  // way); else the bytes those rules may read first (bit b % 64 of word
  // b / 64): a token going on with another byte goes on by `state`'s own
  // bytes or not at all. Made once per state: a walk meets the same
  // calling state at many nodes of the token trie.
  const uint64_t* CalleeBytes(const Pda& pda, int32_t state) {
    auto [it, made] = bytes.try_emplace(state);
    if (made) it->second = Make(pda, state);
    return it->second ? it->second->data() : nullptr;
  }

 private:
  // Rule starts Make follows at most: a JSON value's start calls the
  // object, array and string rules, whose starts read their first byte.
  static constexpr size_t kMaxStarts = 64;

  static std::optional<std::array<uint64_t, 4>> Make(const Pda& pda,
                                                     int32_t state) {
    // Counted strings' chains keep the steps they had: their first masks
    // are bounded by the catalogue of hostile inputs (a step of 1,000
    // characters under 100 ms), and there the change took the slowest of
    // them from 70 to 80 ms.
    if (pda.has_counted_chars()) return std::nullopt;
    std::array<uint64_t, 4> out{};
    std::vector<int32_t> starts;
    const auto add_calls = [&](int32_t from) {
      for (const PdaCall* c = pda.CallsBegin(from); c != pda.CallsEnd(from);
           ++c) {
        const int32_t start = pda.RuleStart(c->rule);
        if (std::find(starts.begin(), starts.end(), start) == starts.end()) {
          starts.push_back(start);
        }
      }
    };
    add_calls(state);
    for (size_t i = 0; i < starts.size(); ++i) {
      const int32_t start = starts[i];
      if (pda.IsFinal(start) || starts.size() > kMaxStarts) {
        return std::nullopt;
      }
      // Byte classes are ranges in byte order: one move per class.
      for (int32_t k = 0; k < pda.num_byte_classes(); ++k) {
        if (pda.Next(start, pda.ClassByte(k)) == Pda::kDead) continue;
        const int last =
            k + 1 < pda.num_byte_classes() ? pda.ClassByte(k + 1) - 1 : 255;
        for (int b = pda.ClassByte(k); b <= last; ++b) {
          out[b >> 6] |= uint64_t{1} << (b & 63);
        }
      }
      add_calls(start);
    }
    return out;
  }
};

// Appends to `out` what the DFA makes of the tokens at and below node
// `first` (depth 1), `to` being its state after that node's byte: accepted
// tokens as ranges of index positions, leavers as runs. The scratch vectors:
// scratch of max_token_length() + 1 ints each, reused across subtrees.
// Without `deferred` no state on the way may call a rule; with it, the
// tokens below a state that does are appended there instead.
void WalkSubtree(const Pda& pda, const TokenIndex& index, int32_t first,
                 int32_t first_to, std::vector<int32_t>* at_scratch,
                 std::vector<int32_t>* finals_scratch, LeafWalk* out,
                 Deferrals* deferred = nullptr) {
  std::vector<int32_t>& at = *at_scratch;
  std::vector<int32_t>& finals = *finals_scratch;
  // at[d]: the DFA's state after the first d bytes of the current trie
  // path; finals[0, num_finals): the depths d >= 1 on it where the rule may
  // end. Fixed arrays, not vectors that grow: with no call that might
  // reallocate on the common path, a walk takes a sixth less time.
  int32_t num_finals = 0;
  const int32_t stop = index.node_end(first);
  for (int32_t node = first; node < stop;) {
    const int32_t depth = index.node_depth(node);
    while (num_finals > 0 && finals[num_finals - 1] >= depth) --num_finals;
    const int32_t end = index.node_end(node);
    if (node != first && deferred != nullptr &&
        pda.CallsBegin(at[depth - 1]) != pda.CallsEnd(at[depth - 1])) {
      // Below a calling state with bytes of its own: the branches a callee
      // may begin were left to stack steps there.
      if (HasByte(deferred->CalleeBytes(pda, at[depth - 1]),
                  index.node_byte(node))) {
        node = end;
        continue;
      }
    }
    const int32_t to = node == first
                           ? first_to
                           : pda.Next(at[depth - 1], index.node_byte(node));
    if (to == Pda::kDead) {
      AddRun(out, index.node_tokens_begin(node), index.node_tokens_begin(end),
             finals.data(), num_finals);
      node = end;
      continue;
    }
    at[depth] = to;
    if (pda.IsFinal(to)) finals[num_finals++] = depth;
    AcceptRange(out, index.node_tokens_begin(node),
                index.node_tokens_end(node));
    if (deferred != nullptr && pda.CallsBegin(to) != pda.CallsEnd(to)) {
      const int32_t below = index.node_tokens_end(node);
      const int32_t below_end = index.node_tokens_begin(end);
      const uint64_t* first_bytes = below < below_end && num_finals == 0
                                        ? deferred->CalleeBytes(pda, to)
                                        : nullptr;
      if (first_bytes != nullptr) {
        // Only the branches a callee may begin are read by stack steps; the
        // others go on by the state's own bytes, walked on here (the loop
        // skips the branches left to stack steps), or die (no way to have
        // left the rule on the path). A names trie calls a member where its
        // name parts from the others: every token on the parting byte was
        // read that way (369 us a state on MaskBench in any order, where a
        // member's own name walks in 38). Where the rule may have ended on
        // the path the others would leave it with bytes left, and they are
        // stepped as before: followed into the callers as leavers they cost
        // more (MaskBench's Snowplow sp_335, any_repeatable: masks 1.19
        // times as long).
        for (int32_t child = node + 1; child < end;
             child = index.node_end(child)) {
          const int32_t from = index.node_tokens_begin(child);
          const int32_t to_end = index.node_tokens_begin(index.node_end(child));
          if (HasByte(first_bytes, index.node_byte(child))) {
            deferred->tokens.push_back({from, to_end, depth, to, false});
          }
        }
        if (pda.HasBytes(to)) {
          ++node;
          continue;
        }
      } else if (below < below_end) {
        deferred->tokens.push_back(
            {below, below_end, depth, to, num_finals > 0});
      }
      node = end;
      continue;
    }
    // A large subtree whose every byte loops on this state is accepted
    // whole without walking it.
    const uint64_t* below = index.subtree_bytes(node);
    if (below != nullptr && LoopsOver(pda, to, below)) {
      AcceptRange(out, index.node_tokens_end(node),
                  index.node_tokens_begin(end));
      node = end;
      continue;
    }
    ++node;
  }
}

// WalkSubtree for several DFA states after node `first`'s byte at once
// (lanes, at most 64): one pass over the subtree in which each node steps
// only the lanes still alive above it, and a branch is skipped once every
// lane died or settled it. The traversal, not the steps, is most of a
// walk's cost: four walks together take about half the time of four alone.
void WalkSubtreeLanes(const Pda& pda, const TokenIndex& index, int32_t first,
                      const std::vector<int32_t>& first_to,
                      const std::vector<LeafWalk*>& outs) {
  const auto lanes = static_cast<int32_t>(first_to.size());
  const size_t levels = index.max_token_length() + 1;
  // Per lane, as in WalkSubtree: states by depth, and the final depths.
  std::vector<int32_t> at(lanes * levels), finals(lanes * levels);
  std::vector<int32_t> num_finals(lanes, 0);
  // alive[d]: the lanes alive after the first d bytes of the current path.
  std::vector<uint64_t> alive(levels, 0);
  alive[0] = lanes == 64 ? ~uint64_t{0} : (uint64_t{1} << lanes) - 1;
  const int32_t stop = index.node_end(first);
  for (int32_t node = first; node < stop;) {
    const int32_t depth = index.node_depth(node);
    const int32_t end = index.node_end(node);
    const uint8_t byte = index.node_byte(node);
    const uint64_t* below = index.subtree_bytes(node);
    uint64_t next = 0;
    for (uint64_t m = alive[depth - 1]; m != 0; m &= m - 1) {
      const int32_t lane = __builtin_ctzll(m);
      int32_t* lane_at = &at[lane * levels];
      int32_t* lane_finals = &finals[lane * levels];
      int32_t& n = num_finals[lane];
      while (n > 0 && lane_finals[n - 1] >= depth) --n;
      const int32_t to =
          node == first ? first_to[lane] : pda.Next(lane_at[depth - 1], byte);
      LeafWalk* out = outs[lane];
      if (to == Pda::kDead) {
        AddRun(out, index.node_tokens_begin(node), index.node_tokens_begin(end),
               lane_finals, n);
        continue;
      }
      lane_at[depth] = to;
      if (pda.IsFinal(to)) lane_finals[n++] = depth;
      AcceptRange(out, index.node_tokens_begin(node),
                  index.node_tokens_end(node));
      if (below != nullptr && LoopsOver(pda, to, below)) {
        AcceptRange(out, index.node_tokens_end(node),
                    index.node_tokens_begin(end));
        continue;
      }
      next |= uint64_t{1} << lane;
    }
    if (next == 0) {
      node = end;
    } else {
      alive[depth] = next;
      ++node;
    }
  }
}

// Several lanes' DFA states read as one: a state per tuple of lane states
// met so far, whose transitions (per byte class) are found the first time a
// walk reads them. Lanes of one mask are mostly alike (an object's keys
// that must avoid some names and match some patterns, an anyOf of
// patterns), so their tuples are few: a walk then steps one state per trie
// node instead of one per lane. Past `max_states` tuples, Of and Next give
// -1 and the caller walks the lanes apart.
class LaneProduct {
 public:
  LaneProduct(const Pda& pda, int32_t lanes, int32_t max_states)
      : pda_(pda), lanes_(lanes), max_states_(max_states) {}

  // The tuple `states` (one per lane, Pda::kDead for a dead lane).
  int32_t Of(const int32_t* states) {
    // Open addressing over the tuples themselves, no key made per lookup:
    // the lanes of a counted string meet a new tuple at many nodes.
    if (slots_.empty()) slots_.assign(64, -1);
    const size_t mask = slots_.size() - 1;
    size_t k = Hash(states) & mask;
    for (; slots_[k] >= 0; k = (k + 1) & mask) {
      if (std::equal(states, states + lanes_,
                     &tuples_[static_cast<size_t>(slots_[k]) * lanes_])) {
        return slots_[k];
      }
    }
    if (num_states() >= max_states_) return -1;
    const int32_t id = num_states();
    slots_[k] = id;
    uint64_t alive = 0, finals = 0;
    for (int32_t l = 0; l < lanes_; ++l) {
      tuples_.push_back(states[l]);
      if (states[l] == Pda::kDead) continue;
      alive |= uint64_t{1} << l;
      if (pda_.IsFinal(states[l])) finals |= uint64_t{1} << l;
    }
    alive_.push_back(alive);
    finals_.push_back(finals);
    next_.resize(next_.size() + pda_.num_byte_classes(), kUnknown);
    if (2 * static_cast<size_t>(num_states()) > slots_.size()) Rehash();
    return id;
  }
  int32_t Next(int32_t p, uint8_t byte) {
    const size_t k =
        static_cast<size_t>(p) * pda_.num_byte_classes() + pda_.ByteClass(byte);
    if (next_[k] == kUnknown) {
      scratch_.resize(lanes_);
      for (int32_t l = 0; l < lanes_; ++l) {
        const int32_t s = tuples_[static_cast<size_t>(p) * lanes_ + l];
        scratch_[l] = s == Pda::kDead ? Pda::kDead : pda_.Next(s, byte);
      }
      const int32_t q = Of(scratch_.data());
      if (q < 0) return -1;
      next_[k] = q;  // after Of, which may have grown next_
    }
    return next_[k];
  }
  uint64_t alive(int32_t p) const { return alive_[p]; }
  uint64_t finals(int32_t p) const { return finals_[p]; }
  // Whether every byte of `below` leads each live lane of `p` back to its
  // own state (see LoopsOver), so `p` to itself.
  bool LoopsOver(int32_t p, const uint64_t* below) const {
    for (uint64_t m = alive_[p]; m != 0; m &= m - 1) {
      const int32_t lane = __builtin_ctzll(m);
      const int32_t s = tuples_[static_cast<size_t>(p) * lanes_ + lane];
      if (!internal::LoopsOver(pda_, s, below)) return false;
    }
    return true;
  }

 private:
  static constexpr int32_t kUnknown = -2;
  int32_t num_states() const { return static_cast<int32_t>(alive_.size()); }
  size_t Hash(const int32_t* states) const {
    return static_cast<size_t>(HashInts(states, states + lanes_));
  }
  // Doubles the slots, putting every tuple back.
  void Rehash() {
    slots_.assign(2 * slots_.size(), -1);
    const size_t mask = slots_.size() - 1;
    for (int32_t id = 0; id < num_states(); ++id) {
      size_t k = Hash(&tuples_[static_cast<size_t>(id) * lanes_]) & mask;
      while (slots_[k] >= 0) k = (k + 1) & mask;
      slots_[k] = id;
    }
  }

  const Pda& pda_;
  const int32_t lanes_;
  const int32_t max_states_;
  std::vector<int32_t> slots_;   // tuple ids by hash, -1 where free
  std::vector<int32_t> tuples_;  // lanes_ per state
  std::vector<uint64_t> alive_, finals_;
  std::vector<int32_t> next_;  // num_byte_classes() per state
  std::vector<int32_t> scratch_;
};

// WalkSubtreeLanes by one LaneProduct state per node; false when the
// product outgrew its cap (what it added to `outs` is then to be dropped).
// Accepted ranges are collected for all lanes at once, as runs of positions
// with the lanes that accept them, and handed out to each lane at the end.
bool WalkSubtreeProduct(const TokenIndex& index, int32_t first,
                        const std::vector<int32_t>& first_to,
                        const std::vector<LeafWalk*>& outs,
                        LaneProduct* product) {
  const size_t levels = index.max_token_length() + 1;
  // at[d]: the product state after the first d bytes of the current path;
  // final_at[d]: the lanes that may end the rule there.
  std::vector<int32_t> at(levels), offsets(levels);
  std::vector<uint64_t> final_at(levels, 0);
  struct Span {
    int32_t begin, end;
    uint64_t lanes;
  };
  std::vector<Span> spans;
  auto accept = [&](int32_t begin, int32_t end, uint64_t lanes) {
    if (begin == end) return;
    if (!spans.empty() && spans.back().end == begin &&
        spans.back().lanes == lanes) {
      spans.back().end = end;
    } else {
      spans.push_back({begin, end, lanes});
    }
  };
  const auto lanes = static_cast<int32_t>(first_to.size());
  const uint64_t all = lanes == 64 ? ~uint64_t{0} : (uint64_t{1} << lanes) - 1;
  const int32_t stop = index.node_end(first);
  for (int32_t node = first; node < stop;) {
    const int32_t depth = index.node_depth(node);
    const int32_t end = index.node_end(node);
    const uint64_t above = node == first ? all : product->alive(at[depth - 1]);
    const int32_t q = node == first
                          ? product->Of(first_to.data())
                          : product->Next(at[depth - 1], index.node_byte(node));
    if (q < 0) return false;
    const uint64_t live = product->alive(q);
    for (uint64_t died = above & ~live; died != 0; died &= died - 1) {
      const int32_t lane = __builtin_ctzll(died);
      int32_t n = 0;
      for (int32_t d = 1; d < depth; ++d) {
        if ((final_at[d] >> lane) & 1) offsets[n++] = d;
      }
      AddRun(outs[lane], index.node_tokens_begin(node),
             index.node_tokens_begin(end), offsets.data(), n);
    }
    if (live == 0) {
      node = end;
      continue;
    }
    at[depth] = q;
    final_at[depth] = product->finals(q);
    accept(index.node_tokens_begin(node), index.node_tokens_end(node), live);
    const uint64_t* below = index.subtree_bytes(node);
    if (below != nullptr && product->LoopsOver(q, below)) {
      accept(index.node_tokens_end(node), index.node_tokens_begin(end), live);
      node = end;
      continue;
    }
    ++node;
  }
  for (const Span& s : spans) {
    for (uint64_t m = s.lanes; m != 0; m &= m - 1) {
      AcceptRange(outs[__builtin_ctzll(m)], s.begin, s.end);
    }
  }
  return true;
}

// A subtree's walk is kept under the form of the state its first byte leads
// to when that form has at most this many bytes: the inside of any string
// (where most first bytes of a key lead, whatever names it must avoid) or
// of a string of bounded length. A larger target (the rest of many names)
// is walked afresh: finding its form would cost about what keeping it
// saves.
constexpr size_t kMaxSubtreeFormBytes = 4096;

// The ids of the tokens at the index positions in `ranges` (sorted,
// disjoint), one bit per id of the vocabulary. A bit is set per token, or,
// where most tokens are in, every token's bit is taken from the index and
// those of the tokens between the ranges cleared: the inside of a string
// accepts about 120K of llama3's 128K tokens, and setting their bits one
// by one was a tenth of the slowest masks' time.
std::vector<uint32_t> BitsOfPositions(
    const TokenIndex& index,
    const std::vector<std::pair<int32_t, int32_t>>& ranges) {
  int64_t in = 0;
  for (const auto& [begin, end] : ranges) in += end - begin;
  if (2 * in <= index.size()) {
    std::vector<uint32_t> bits((index.vocab().size() + 31) / 32, 0);
    for (const auto& [begin, end] : ranges) {
      for (int32_t t = begin; t < end; ++t) {
        const int32_t id = index.id(t);
        bits[id >> 5] |= 1u << (id & 31);
      }
    }
    return bits;
  }
  std::vector<uint32_t> bits = index.all_bits();
  auto clear = [&](int32_t begin, int32_t end) {
    for (int32_t t = begin; t < end; ++t) {
      const int32_t id = index.id(t);
      bits[id >> 5] &= ~(1u << (id & 31));
    }
  };
  int32_t from = 0;
  for (const auto& [begin, end] : ranges) {
    clear(from, begin);
    from = end;
  }
  clear(from, index.size());
  return bits;
}

// Reads the rests of `walk`'s leavers (walked from `state`) in the state's
// callers within `follow_budget` (see RestReader), appending the index
// positions of those left uncertain to `uncertain`, in byte order.
void ReadLeavers(const Pda& pda, const TokenIndex& index, int32_t state,
                 const LeafWalk& walk, int64_t follow_budget,
                 std::vector<int32_t>* uncertain) {
  if (walk.runs.empty()) return;
  RestReader reader(pda, index, state, follow_budget);
  if (follow_budget <= 0) {
    // No byte may be read in the callers, so every leaver lands as any
    // other: all uncertain, or all rejected. Reading them one by one cost
    // a chain's link (121K leavers on llama3) 2.5 ms.
    if (reader.LandsAlive()) {
      for (const LeafWalk::Run& run : walk.runs) {
        for (int32_t t = run.begin; t < run.end; ++t) uncertain->push_back(t);
      }
    }
    return;
  }
  std::vector<char> flags;
  for (const LeafWalk::Run& run : walk.runs) {
    flags.assign(run.end - run.begin, 0);
    for (int32_t k = run.offsets_begin; k < run.offsets_end; ++k) {
      reader.Read(run, walk.offsets[k], &flags);
    }
    for (int32_t t = run.begin; t < run.end; ++t) {
      if (flags[t - run.begin]) uncertain->push_back(t);
    }
  }
}

}  // namespace

std::vector<LeafWalk> WalkLeaves(const Pda& pda, const TokenIndex& index,
                                 const std::vector<int32_t>& states,
                                 const std::vector<char>& share_subtrees,
                                 LeafCache* cache, int32_t max_product_states) {
  const size_t k = states.size();
  std::vector<LeafWalk> walks(k);
  // Each walk's accepted positions (only accepted_positions used), gathered
  // in byte order from its subtrees' walks.
  std::vector<LeafWalk> accepted(k);
  // The ids of the forms of the states the first bytes lead to (none where
  // too large to key a subtree), each found once.
  std::unordered_map<int32_t, std::optional<uint64_t>> form_ids;
  std::vector<int32_t> at(index.max_token_length() + 1), finals(at.size());
  std::vector<std::shared_ptr<const LeafWalk>> subs(k);
  std::vector<std::string> keys(k);
  // Per subtree, the distinct states still to walk, and each lane's.
  std::vector<int32_t> fresh_to;
  std::vector<std::shared_ptr<LeafWalk>> fresh;
  std::vector<int32_t> lane_of(k);
  for (int32_t first = 1; first < index.num_nodes();
       first = index.node_end(first)) {
    const uint8_t byte = index.node_byte(first);
    fresh_to.clear();
    fresh.clear();
    for (size_t j = 0; j < k; ++j) {
      subs[j] = nullptr;
      keys[j].clear();
      lane_of[j] = -1;
      const int32_t to = pda.Next(states[j], byte);
      if (to == Pda::kDead) continue;  // nothing read: no leaver either
      if (share_subtrees[j]) {
        auto [it, added] = form_ids.try_emplace(to);
        if (added) {
          const std::optional<std::string> form =
              LeafForm(pda, to, kMaxFormStates, kMaxSubtreeFormBytes);
          // Tagged apart from whole walks' keys, which start with a
          // state's finality (-2 or -3), and from the subtrees' keys.
          if (form) {
            it->second = cache->IdOf("F" + *form);
          }
        }
        if (it->second) {
          keys[j].assign(1, 'S');
          keys[j] += static_cast<char>(byte);
          keys[j].append(reinterpret_cast<const char*>(&*it->second),
                         sizeof(uint64_t));
          subs[j] = cache->Find<LeafWalk>(keys[j]);
        }
      }
      if (subs[j] != nullptr) continue;
      auto same = std::find(fresh_to.begin(), fresh_to.end(), to);
      lane_of[j] = static_cast<int32_t>(same - fresh_to.begin());
      if (same == fresh_to.end()) {
        fresh_to.push_back(to);
        fresh.push_back(std::make_shared<LeafWalk>());
      }
    }
    if (fresh.size() == 1 || fresh.size() > 64) {
      for (size_t f = 0; f < fresh.size(); ++f) {
        WalkSubtree(pda, index, first, fresh_to[f], &at, &finals,
                    fresh[f].get());
      }
    } else if (!fresh.empty()) {
      std::vector<LeafWalk*> outs;
      for (const auto& f : fresh) outs.push_back(f.get());
      LaneProduct product(pda, static_cast<int32_t>(fresh.size()),
                          max_product_states);
      if (!WalkSubtreeProduct(index, first, fresh_to, outs, &product)) {
        for (LeafWalk* out : outs) *out = LeafWalk();
        WalkSubtreeLanes(pda, index, first, fresh_to, outs);
      }
    }
    for (size_t j = 0; j < k; ++j) {
      if (lane_of[j] >= 0) {
        subs[j] = fresh[lane_of[j]];
        if (!keys[j].empty()) cache->Insert(keys[j], subs[j]);
      }
      const LeafWalk* sub = subs[j].get();
      if (sub == nullptr) continue;
      for (const auto& [begin, end] : sub->accepted_positions) {
        AcceptRange(&accepted[j], begin, end);
      }
      LeafWalk& walk = walks[j];
      const auto base = static_cast<int32_t>(walk.offsets.size());
      walk.offsets.insert(walk.offsets.end(), sub->offsets.begin(),
                          sub->offsets.end());
      for (const LeafWalk::Run& r : sub->runs) {
        walk.runs.push_back(
            {r.begin, r.end, base + r.offsets_begin, base + r.offsets_end});
      }
    }
  }
  for (size_t j = 0; j < k; ++j) {
    walks[j].accepted = TokenSet::FromBits(
        BitsOfPositions(index, accepted[j].accepted_positions));
  }
  return walks;
}

LeafWalk WalkLeaf(const Pda& pda, const TokenIndex& index, int32_t state,
                  LeafCache* cache, bool share_subtrees) {
  return std::move(WalkLeaves(pda, index, {state}, {share_subtrees}, cache)[0]);
}

void WalkLeavesTogether(const Pda& pda, const TokenIndex& index,
                        const std::vector<int32_t>& states, LeafCache* cache) {
  // Those with a form whose walk no grammar made yet, one per form.
  std::vector<int32_t> todo;
  std::vector<std::string> forms;
  for (int32_t s : states) {
    std::optional<std::string> form = LeafForm(pda, s, kMaxFormStates);
    if (!form || cache->Find<LeafWalk>(*form) != nullptr ||
        std::find(forms.begin(), forms.end(), *form) != forms.end()) {
      continue;
    }
    todo.push_back(s);
    forms.push_back(*std::move(form));
  }
  if (todo.size() < 2) return;  // nothing to share
  std::vector<LeafWalk> walks =
      WalkLeaves(pda, index, todo, std::vector<char>(todo.size(), 1), cache);
  for (size_t j = 0; j < walks.size(); ++j) {
    cache->Insert(forms[j],
                  std::make_shared<const LeafWalk>(std::move(walks[j])));
  }
}

std::optional<StateTokens> ClassifyLeafState(const Pda& pda,
                                             const TokenIndex& index,
                                             int32_t state, LeafCache* cache,
                                             int64_t follow_budget) {
  std::optional<std::string> form = LeafForm(pda, state, kMaxFormStates);
  if (!form) return std::nullopt;
  std::shared_ptr<const LeafWalk> walk = cache->Find<LeafWalk>(*form);
  if (walk == nullptr) {
    walk = std::make_shared<const LeafWalk>(
        WalkLeaf(pda, index, state, cache, /*share_subtrees=*/true));
    cache->Insert(*form, walk);
  }
  StateTokens out;
  out.accepted = walk->accepted;
  ReadLeavers(pda, index, state, *walk, follow_budget, &out.uncertain);
  for (int32_t& t : out.uncertain) t = index.id(t);
  return out;
}

std::optional<StateTokens> ClassifyMixedState(const Pda& pda,
                                              const TokenIndex& index,
                                              int32_t state,
                                              int64_t follow_budget,
                                              int32_t max_deferred) {
  LeafWalk walk;
  Deferrals deferrals;
  std::vector<int32_t> at(index.max_token_length() + 1), finals(at.size());
  for (int32_t first = 1; first < index.num_nodes();
       first = index.node_end(first)) {
    const int32_t to = pda.Next(state, index.node_byte(first));
    if (to == Pda::kDead) continue;
    WalkSubtree(pda, index, first, to, &at, &finals, &walk, &deferrals);
  }
  const std::vector<Deferred>& deferred = deferrals.tokens;
  int64_t num_deferred = 0;
  for (const Deferred& d : deferred) num_deferred += d.end - d.begin;
  if (num_deferred > max_deferred) return std::nullopt;

  std::vector<uint32_t> accepted =
      BitsOfPositions(index, walk.accepted_positions);
  // Uncertain tokens as index positions, sorted at the end into byte order.
  std::vector<int32_t> uncertain;
  ReadLeavers(pda, index, state, walk, follow_budget, &uncertain);
  if (!deferred.empty()) {
    StackPool pool;
    Stepper stepper(pda);
    std::vector<int32_t> ids, scan;
    for (const Deferred& d : deferred) {
      ids.clear();
      for (int32_t t = d.begin; t < d.end; ++t) ids.push_back(index.id(t));
      // Above an unknown caller: ending the rule reaches the open bottom.
      const int32_t top = pool.Add(d.state, kOpen);
      scan.clear();
      // A call of a rule that may match nothing may end the rule at once.
      const bool left = stepper.Close(&pool, &top, 1, &scan).open || d.left;
      // Visited in `ids`' order: position d.begin, d.begin + 1, ...
      int32_t t = d.begin;
      stepper.ReadSorted(
          &pool, scan.data(), scan.data() + scan.size(), index.vocab(), ids,
          [&](int32_t id, const Stepper::TokenReach& r) {
            if (r.readable()) {
              accepted[id >> 5] |= 1u << (id & 31);
            } else if (r.escaped || left) {
              uncertain.push_back(t);
            }
            ++t;
          },
          d.depth);
      pool.Truncate(0);
    }
  }
  std::sort(uncertain.begin(), uncertain.end());
  StateTokens out;
  out.accepted = TokenSet::FromBits(std::move(accepted));
  out.uncertain.reserve(uncertain.size());
  for (int32_t t : uncertain) out.uncertain.push_back(index.id(t));
  return out;
}

}  // namespace grammard::grammar::internal
