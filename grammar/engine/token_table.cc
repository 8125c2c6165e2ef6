#include "grammar/engine/token_table.h"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "grammar/base/refine.h"
#include "grammar/engine/leaf_tokens.h"
#include "grammar/engine/stack.h"

namespace grammard::grammar::internal {
namespace {

// What lies below a frame of `rule` when nothing else is known: nothing at
// all for a root rule no one calls (so leaving it ends the text), else an
// unknown caller.
int32_t Below(const Pda& pda, int32_t rule) {
  return rule == pda.root_rule() && pda.ReturnStates(rule).empty() ? kBottom
                                                                   : kOpen;
}

// One byte deeper in the token trie: the stack sets after reading the
// prefix so far. `inner` nodes still have the classified state's frame below
// them (their stacks end in kBottom); `outer` nodes have left it into one of
// its rule's return states (their stacks end in kOpen or, for a root rule,
// kBottom). A level's nodes are inner[inner_begin, inner_end) and likewise.
struct Level {
  uint32_t inner_begin, inner_end;
  uint32_t outer_begin, outer_end;
  uint32_t pool_size;
  bool left_here;  // the frame was left right after this level's byte
  bool escaped;    // some path left the return state's rule too
  bool ended;      // some path left and ended the whole text right here
  bool dead;       // nothing can read a further byte
  // Which Loops entry describes this level's sets: levels with the very same
  // nodes share one.
  uint32_t loops;
};

// For a level's sets, per byte: not known yet, known to lead elsewhere, or
// known to lead back to the very same sets (an identifier or a string read
// on inside a fixed context, most of any trie walk), with the flags the
// step set. Such steps cost nothing after the first.
struct Loops {
  enum : uint8_t { kUnknown = 0, kElsewhere = 1, kSame = 2 };
  enum : uint8_t { kLeftHere = 4, kEnded = 8 };
  uint8_t by_byte[256] = {};
  uint8_t set[256];  // the bytes of by_byte that are set, to clear cheaply
  int n_set = 0;

  void Set(uint8_t byte, uint8_t value) {
    by_byte[byte] = value;
    set[n_set++] = byte;
  }
  void Clear() {
    for (int i = 0; i < n_set; ++i) by_byte[set[i]] = kUnknown;
    n_set = 0;
  }
};

// Whether v[a, a_end) and v[b, b_end) hold the same ids, in any order: a
// set closed the first time comes out in another order than when a loop
// reads it back.
bool SameSet(const std::vector<int32_t>& v, uint32_t a, uint32_t a_end,
             uint32_t b, uint32_t b_end, std::vector<int32_t>* sort_a,
             std::vector<int32_t>* sort_b) {
  if (a_end - a != b_end - b) return false;
  bool in_order = true;
  for (uint32_t i = 0; i < a_end - a && in_order; ++i)
    in_order = v[a + i] == v[b + i];
  if (in_order) return true;
  if (a_end - a == 1) return false;
  sort_a->assign(v.begin() + a, v.begin() + a_end);
  sort_b->assign(v.begin() + b, v.begin() + b_end);
  std::sort(sort_a->begin(), sort_a->end());
  std::sort(sort_b->begin(), sort_b->end());
  return *sort_a == *sort_b;
}

// A rule called from many places (a string in a large schema) lands in a
// set too large to step at every trie node that leaves it: seconds for one
// state.
constexpr size_t kMaxLandingNodes = 32;

}  // namespace

CallerLanding LandInCallers(const Pda& pda, int32_t state, StackPool* pool,
                            Stepper* stepper) {
  std::vector<int32_t> contexts;
  for (int32_t r : pda.ReturnStates(pda.StateRule(state))) {
    contexts.push_back(pool->Add(r, Below(pda, pda.StateRule(r))));
  }
  CallerLanding out;
  out.flags =
      stepper->Close(pool, contexts.data(), contexts.size(), &out.nodes);
  out.followed = out.nodes.size() <= kMaxLandingNodes;
  return out;
}

StateTokens ClassifyState(const Pda& pda, const TokenIndex& index,
                          int32_t state) {
  StateTokens out;
  const Vocabulary& vocab = index.vocab();
  std::vector<uint32_t> accepted((vocab.size() + 31) / 32, 0);

  StackPool pool;
  Stepper stepper(pda);
  std::vector<int32_t> inner{pool.Add(state, kBottom)};
  std::vector<int32_t> outer;
  std::vector<int32_t> scratch;
  // Leaving the frame always lands in the same set, closed once here (below
  // every level, so never truncated).
  const CallerLanding landing = LandInCallers(pda, state, &pool, &stepper);
  // levels[d]: after reading the first d bytes of the current trie path.
  std::vector<Level> levels(1);
  levels[0] = {0,     1,     0,     0,     static_cast<uint32_t>(pool.size()),
               false, false, false, false, 0};
  // loops[d] belongs to the level at depth d whose sets were computed anew.
  std::vector<Loops> loops(1);
  std::vector<int32_t> sort_a, sort_b;

  // Reads `byte` from the sets of `from`, which end inner, outer and the
  // pool, appending the sets of `next`.
  auto step = [&](const Level& from, uint8_t byte, uint32_t depth,
                  Level* next) {
    *next = {
        from.inner_end, from.inner_end, from.outer_end, from.outer_end, 0,
        false,          from.escaped,   false,          false,          depth};
    // Most of the walk: a single stack top in a state without calls, the
    // classified frame itself. Moving it needs no closing (a self-loop
    // keeps the very node); ending it leaves into the landing set.
    CloseFlags fi;
    bool inner_done = false;
    if (from.inner_end - from.inner_begin == 1) {
      const int32_t top_id = inner[from.inner_begin];
      const StackNode top = pool[top_id];
      const int32_t to = pda.Next(top.state, byte);
      if (to == Pda::kDead) {
        inner_done = true;
      } else if (pda.CallsBegin(to) == pda.CallsEnd(to) &&
                 (!pda.IsFinal(to) || top.parent == kBottom)) {
        inner.push_back(to == top.state ? top_id : pool.Add(to, top.parent));
        fi.bottom = pda.IsFinal(to);
        inner_done = true;
      }
      if (inner_done && from.outer_end == from.outer_begin && !from.escaped &&
          !fi.bottom) {
        next->inner_end = static_cast<uint32_t>(inner.size());
        next->dead = next->inner_end == next->inner_begin;
        return;
      }
    }
    if (!inner_done) {
      scratch.clear();
      fi = stepper.Step(&pool, inner.data() + from.inner_begin,
                        inner.data() + from.inner_end, byte, &scratch);
      inner.insert(inner.end(), scratch.begin(), scratch.end());
    }
    scratch.clear();
    if (from.outer_end != from.outer_begin) {
      CloseFlags fo =
          stepper.Step(&pool, outer.data() + from.outer_begin,
                       outer.data() + from.outer_end, byte, &scratch);
      next->escaped |= fo.open;
      next->ended |= fo.bottom;
    }
    if (fi.bottom) {
      next->left_here = true;
      if (landing.followed) {
        scratch.insert(scratch.end(), landing.nodes.begin(),
                       landing.nodes.end());
        next->escaped |= landing.flags.open;
        next->ended |= landing.flags.bottom;
      } else {
        next->escaped = true;
      }
    }
    outer.insert(outer.end(), scratch.begin(), scratch.end());
    next->inner_end = static_cast<uint32_t>(inner.size());
    next->outer_end = static_cast<uint32_t>(outer.size());
    next->dead = next->inner_end == next->inner_begin &&
                 next->outer_end == next->outer_begin && !next->escaped;
  };
  // What `next`, just stepped from `from`, says of its byte (see Loops).
  auto loop_code = [&](const Level& from, const Level& next) -> uint8_t {
    const bool same =
        !next.dead && next.escaped == from.escaped &&
        SameSet(inner, from.inner_begin, from.inner_end, next.inner_begin,
                next.inner_end, &sort_a, &sort_b) &&
        SameSet(outer, from.outer_begin, from.outer_end, next.outer_begin,
                next.outer_end, &sort_a, &sort_b);
    if (!same) return Loops::kElsewhere;
    return Loops::kSame | (next.left_here ? Loops::kLeftHere : 0) |
           (next.ended ? Loops::kEnded : 0);
  };
  // Drops what was appended after `level`'s sets.
  auto truncate_to = [&](const Level& level) {
    inner.resize(level.inner_end);
    outer.resize(level.outer_end);
    pool.Truncate(level.pool_size);
  };
  // `from` again, one byte deeper, after a byte that read it back.
  auto again = [](const Level& from, uint8_t code) {
    Level next = from;
    next.left_here = code & Loops::kLeftHere;
    next.ended = code & Loops::kEnded;
    return next;
  };
  auto classify = [&](int32_t begin, int32_t end, const Level& level) {
    const bool inner_alive = level.inner_end > level.inner_begin;
    const bool outer_alive = level.outer_end > level.outer_begin;
    for (int32_t t = begin; t < end; ++t) {
      const int32_t id = index.id(t);
      if (inner_alive || level.left_here) {
        accepted[id >> 5] |= 1u << (id & 31);
      } else if (outer_alive || level.escaped || level.ended) {
        out.uncertain.push_back(id);
      }
    }
  };

  for (int32_t node = 1; node < index.num_nodes();) {
    const int32_t depth = index.node_depth(node);
    if (static_cast<size_t>(depth) >= levels.size()) {
      levels.resize(depth + 1);
      loops.resize(depth + 1);
    }
    const Level& from = levels[depth - 1];
    Level& next = levels[depth];
    truncate_to(from);
    const uint8_t byte = index.node_byte(node);
    const uint8_t known = loops[from.loops].by_byte[byte];
    if (known & Loops::kSame) {
      next = again(from, known);
    } else {
      step(from, byte, static_cast<uint32_t>(depth), &next);
      next.pool_size = static_cast<uint32_t>(pool.size());
      if (known == Loops::kUnknown) {
        const uint8_t code = loop_code(from, next);
        loops[from.loops].Set(byte, code);
        if (code & Loops::kSame) {
          truncate_to(from);
          next = again(from, code);
        }
      }
    }
    if (next.loops == static_cast<uint32_t>(depth)) loops[depth].Clear();
    classify(index.node_tokens_begin(node), index.node_tokens_end(node), next);
    if (next.dead) {
      node = index.node_end(node);
      continue;
    }
    // A large subtree all of whose bytes read these sets back into
    // themselves (identifiers inside an identifier loop) is classified
    // like this node without walking it. Bytes not known yet are tried.
    if (const uint64_t* below = index.subtree_bytes(node)) {
      Loops& l = loops[next.loops];
      bool all_same = true;
      for (int w = 0; w < 4 && all_same; ++w) {
        for (uint64_t bits = below[w]; bits != 0 && all_same;
             bits &= bits - 1) {
          const uint8_t b =
              static_cast<uint8_t>(64 * w + __builtin_ctzll(bits));
          uint8_t code = l.by_byte[b];
          if (code == Loops::kUnknown) {
            Level probe;
            step(next, b, static_cast<uint32_t>(depth + 1), &probe);
            code = loop_code(next, probe);
            l.Set(b, code);
            truncate_to(next);
          }
          all_same = code & Loops::kSame;
        }
      }
      if (all_same) {
        // Below this node the frame is not left again (or inner sets would
        // not be the same), so only liveness decides.
        Level settled = next;
        settled.left_here = settled.ended = false;
        classify(index.node_tokens_end(node),
                 index.node_tokens_begin(index.node_end(node)), settled);
        node = index.node_end(node);
        continue;
      }
    }
    ++node;
  }
  out.accepted = TokenSet::FromBits(std::move(accepted));
  return out;
}

// States of a rule ReadAsLinks checks before taking it for a chain's link
// (JSON's `char` has about two dozen).
constexpr int32_t kMaxChainLinkStates = 64;

namespace {

// Whether `state` starts a rule that ReadAsLinks can read: the rule calls
// nothing, never comes back to its start and ends only where no byte
// follows, so that a token splits into its strings one way only and
// `state` marks the places between them.
bool StartsChainLink(const Pda& pda, int32_t state) {
  if (pda.RuleStart(pda.StateRule(state)) != state || pda.IsFinal(state)) {
    return false;
  }
  std::vector<int32_t> seen{state};
  for (size_t k = 0; k < seen.size(); ++k) {
    const int32_t s = seen[k];
    if (pda.CallsBegin(s) != pda.CallsEnd(s) ||
        (pda.IsFinal(s) && pda.HasBytes(s))) {
      return false;
    }
    for (int32_t c = 0; c < pda.num_byte_classes(); ++c) {
      const int32_t t = pda.Next(s, pda.ClassByte(c));
      if (t == state) return false;
      if (t == Pda::kDead ||
          std::find(seen.begin(), seen.end(), t) != seen.end()) {
        continue;
      }
      if (static_cast<int32_t>(seen.size()) >= kMaxChainLinkStates) {
        return false;
      }
      seen.push_back(t);
    }
  }
  return true;
}

// LinkCodes of the chain's link starting at `state`: one walk of the whole
// trie, since a token of the link's strings never dies (llama3: 2.4 ms).
LinkCodes ReadLinkCodes(const Pda& pda, const TokenIndex& index,
                        int32_t state) {
  LinkCodes codes;
  codes.by_id.assign(index.vocab().size(), 0);
  auto mark = [&](int32_t begin, int32_t end, int32_t strings,
                  LinkReading::End how) {
    const uint32_t code = (static_cast<uint32_t>(strings) << 2) | how;
    for (int32_t t = begin; t < end; ++t) codes.by_id[index.id(t)] = code;
  };
  // Per depth of the trie path: the rule's state (`state` between strings)
  // and the strings read whole so far.
  struct Level {
    int32_t in, strings;
  };
  std::vector<Level> levels(index.max_token_length() + 1);
  levels[0] = {state, 0};
  for (int32_t node = 1; node < index.num_nodes();) {
    const int32_t depth = index.node_depth(node);
    const Level from = levels[depth - 1];
    const int32_t end = index.node_end(node);
    const int32_t to = pda.Next(from.in, index.node_byte(node));
    if (to == Pda::kDead) {
      // Nothing of the first string is the callers' (and a token dying in
      // it is no one's uncertain token).
      if (from.strings > 0) {
        mark(index.node_tokens_begin(node), index.node_tokens_begin(end),
             from.strings,
             from.in == state ? LinkReading::kLeaves : LinkReading::kDies);
      }
      node = end;
      continue;
    }
    Level& here = levels[depth];
    here = pda.IsFinal(to) ? Level{state, from.strings + 1}
                           : Level{to, from.strings};
    if (here.strings > 0) {
      mark(index.node_tokens_begin(node), index.node_tokens_end(node),
           here.strings,
           here.in == state ? LinkReading::kBetween : LinkReading::kInside);
    }
    ++node;
  }
  return codes;
}

}  // namespace

std::optional<LinkReading> ReadAsLinks(const Pda& pda, const TokenIndex& index,
                                       int32_t state,
                                       const std::vector<int32_t>& uncertain) {
  if (!StartsChainLink(pda, state)) return std::nullopt;
  // The codes depend only on the link's DFA: every grammar of the
  // vocabulary with the same link (JSON's `char`) reads them from the cache.
  const std::optional<std::string> form =
      LeafForm(pda, state, kMaxChainLinkStates);
  const std::string key = form ? "L" + *form : std::string();
  std::shared_ptr<const LinkCodes> codes;
  if (!key.empty()) codes = index.leaf_cache()->Find<LinkCodes>(key);
  if (codes == nullptr) {
    codes = std::make_shared<const LinkCodes>(ReadLinkCodes(pda, index, state));
    if (!key.empty()) index.leaf_cache()->Insert(key, codes);
  }
  LinkReading out;
  out.strings.reserve(uncertain.size());
  out.end.reserve(uncertain.size());
  out.words = (index.vocab().size() + 31) / 32;
  std::vector<uint32_t> within(out.words, 0);
  for (size_t k = 0; k < uncertain.size(); ++k) {
    // A token the trie walk did not mark cannot be uncertain; read as one
    // that leaves after no string, it is left unsettled.
    const int32_t id = uncertain[k];
    const uint32_t code = codes->by_id[id];
    const auto n = static_cast<uint16_t>(code >> 2);
    const auto how = static_cast<LinkReading::End>(code & 3);
    out.strings.push_back(n);
    out.end.push_back(how);
    out.longest = std::max<int32_t>(out.longest, n);
    if (n == 0 || how == LinkReading::kLeaves) {
      out.leaving.push_back(static_cast<int32_t>(k));
    } else if (how == LinkReading::kDies) {
      out.dying.push_back(static_cast<int32_t>(k));
    } else {
      within[id >> 5] |= 1u << (id & 31);
    }
  }
  out.within = TokenSet::FromBits(std::move(within));
  return out;
}

size_t LinkReading::MemoryBytes() const {
  return strings.size() * sizeof(uint16_t) + end.size() * sizeof(End) +
         within.MemoryBytes() +
         (leaving.size() + dying.size()) * sizeof(int32_t);
}

bool SameChainReading(const Pda& pda, int32_t state, int32_t a, int32_t b,
                      int32_t longest) {
  const int32_t rule = pda.StateRule(state);
  // Rules apart, leaving them lands in different callers.
  if (pda.StateRule(a) != pda.StateRule(b)) return false;
  for (int32_t i = 0; i < longest; ++i) {
    if (a == b) return true;  // the same from here on
    if (pda.IsFinal(a) != pda.IsFinal(b)) return false;
    for (int32_t c = 0; c < pda.num_byte_classes(); ++c) {
      const uint8_t byte = pda.ClassByte(c);
      if (pda.Next(a, byte) != pda.Next(b, byte)) return false;
    }
    const PdaCall *ca = pda.CallsBegin(a), *cb = pda.CallsBegin(b);
    if (pda.CallsEnd(a) - ca != pda.CallsEnd(b) - cb) return false;
    int32_t next_a = -1, next_b = -1;
    for (; ca != pda.CallsEnd(a); ++ca, ++cb) {
      if (ca->rule != cb->rule) return false;
      if (ca->rule == rule) {
        next_a = ca->return_state;
        next_b = cb->return_state;
      } else if (ca->return_state != cb->return_state) {
        return false;
      }
    }
    if (next_a < 0) return true;  // the chain ends at both
    a = next_a;
    b = next_b;
  }
  return true;
}

ChainSplit SplitByCallChain(const Pda& pda, int32_t state, int32_t return_state,
                            const std::vector<int32_t>& uncertain,
                            const LinkReading& reading) {
  const int32_t rule = pda.StateRule(state);
  const int32_t longest = reading.longest;
  // The chain: at[i] is the callers' state after i + 1 of the rule's
  // strings. It is followed up to the first state that does not call the
  // rule again (`missing`), or as far as the longest token reaches.
  // forced[i]: at[0..i] can read a string of the rule in no other way (not
  // final, no other calls, no byte the rule may start with), so that a
  // token dying there dies in every reading.
  std::vector<char> forced;
  int32_t missing = longest;
  for (int32_t at = return_state, i = 0; i < longest; ++i) {
    int32_t next = -1;
    bool alone = !pda.IsFinal(at) && (i == 0 || forced[i - 1]);
    for (const PdaCall* c = pda.CallsBegin(at); c != pda.CallsEnd(at); ++c) {
      if (c->rule == rule) {
        next = c->return_state;
      } else {
        alone = false;
      }
    }
    for (int32_t c = 0; c < pda.num_byte_classes() && alone; ++c) {
      alone = pda.Next(state, pda.ClassByte(c)) == Pda::kDead ||
              pda.Next(at, pda.ClassByte(c)) == Pda::kDead;
    }
    forced.push_back(alone);
    if (next < 0) {
      missing = i;
      break;
    }
    at = next;
  }
  ChainSplit out;
  out.far = missing == longest;
  if (out.far) {
    // Far from the chain's end: what ReadAsLinks sorted out, but for the
    // tokens that die, by where they die.
    out.accepted = reading.within;
    std::vector<int32_t> at;
    std::merge(reading.leaving.begin(), reading.leaving.end(),
               reading.dying.begin(), reading.dying.end(),
               std::back_inserter(at));
    for (int32_t k : at) {
      if (reading.end[k] != LinkReading::kDies || reading.strings[k] == 0 ||
          !forced[reading.strings[k] - 1]) {
        out.unsettled.push_back(uncertain[k]);
      }
    }
    return out;
  }
  std::vector<int32_t> accepted_ids;
  for (size_t k = 0; k < uncertain.size(); ++k) {
    const int32_t n = reading.strings[k];
    const LinkReading::End how = reading.end[k];
    // The chain state the token's last part is read from, and the last
    // one it needs to call the rule again.
    const int32_t last = n - 1;
    const int32_t needs =
        how == LinkReading::kInside || how == LinkReading::kDies ? last
                                                                 : last - 1;
    bool accepted = false, unsettled = false;
    if (n == 0) {
      unsettled = true;
    } else if (missing <= needs) {
      unsettled = !forced[missing];
    } else if (how == LinkReading::kDies) {
      unsettled = !forced[last];
    } else if (how == LinkReading::kLeaves) {
      unsettled = true;
    } else {
      accepted = true;
    }
    if (accepted) accepted_ids.push_back(uncertain[k]);
    if (unsettled) out.unsettled.push_back(uncertain[k]);
  }
  out.accepted = TokenSet::FromIds(std::move(accepted_ids), reading.words);
  return out;
}

// A state whose DFA walk would leave more than this share of the vocabulary
// to stack steps (ClassifyMixedState) is walked by ClassifyState instead.
constexpr int32_t kMixedVocabShare = 16;

namespace {

const ContextTokens* FindContext(const std::vector<ContextTokens>& contexts,
                                 int32_t return_state) {
  auto it = std::lower_bound(
      contexts.begin(), contexts.end(), return_state,
      [](const ContextTokens& c, int32_t r) { return c.return_state < r; });
  return it != contexts.end() && it->return_state == return_state ? &*it
                                                                  : nullptr;
}

// How many callers deep contexts go, and how many a state may hold in all:
// enough for JSON's `"},` (string, object, array) and for expression
// grammars, where `))*` after a number climbs factor, term, expression and
// parentheses (arith: 67 -> 9 us a mask going from 3 to 6 levels), without
// letting grammars with many call sites grow without bound.
constexpr int kMaxContextDepth = 6;
// Contexts below one first-level context (which are built on demand).
constexpr int kMaxNestedContexts = 64;
// How many bytes ahead return states are compared for sharing contexts:
// most tokens are shorter, and the few longer ones are read for real.
constexpr int32_t kAlikeDepth = 32;
// Rule states x levels compared at most (about 90 ns each, 1.5 ms in all),
// and the fewest levels worth comparing: a large rule gets fewer levels, and
// a rule of thousands of states none (an object's 4,343 took a mask 5.8 ms
// for 14 levels), its contexts read in full.
constexpr int64_t kAlikeWork = int64_t{1} << 14;
constexpr int32_t kMinAlikeDepth = 8;
// Contexts of fewer uncertain tokens than this share of the vocabulary
// (4096 of llama3's) are read in full, a few hundred microseconds: less
// than comparing the states of a large rule.
constexpr size_t kAlikeVocabShare = 32;

// Marks `ids` in `bits` (one bit per id of the vocabulary).
void MarkIds(const std::vector<int32_t>& ids, std::vector<uint32_t>* bits) {
  for (int32_t id : ids) (*bits)[id >> 5] |= 1u << (id & 31);
}
bool Has(const std::vector<uint32_t>& bits, int32_t id) {
  return (bits[id >> 5] >> (id & 31)) & 1u;
}

// Reads `uncertain` tokens of `state` with `chain` as its callers (chain[0]
// the nearest) and, below the last, whatever its rule may find. With
// `like`, the same context built for a return state whose next `alike`
// bytes read as chain.back()'s do (Pda::AlikeUpTo), tokens that leave at
// most `alike` bytes to the callers are taken from it and only longer ones
// are read: the positions of a counted string far from its bounds differ
// only for tokens longer than their distance to them. `known`: tokens
// already known to be accepted (not in `uncertain`).
ContextTokens ClassifyInContext(const Pda& pda, const TokenIndex& index,
                                int32_t state,
                                const std::vector<int32_t>& chain,
                                const std::vector<int32_t>& uncertain,
                                int* budget, const ContextTokens* like,
                                int32_t alike,
                                const TokenSet* known = nullptr) {
  ContextTokens out{chain.back(), {}, {}, {}};
  const int32_t words = (index.vocab().size() + 31) / 32;
  std::vector<int32_t> accepted;
  std::vector<int32_t> longer;  // the tokens read when `like` is given
  if (like != nullptr) {
    // A token reads its first byte in `state`'s rule, so the callers read
    // at most all but one.
    for (int32_t id : uncertain) {
      if (static_cast<int32_t>(index.vocab().bytes(id).size()) > alike + 1)
        longer.push_back(id);
    }
  }
  StackPool pool;
  Stepper stepper(pda);
  int32_t below = Below(pda, pda.StateRule(chain.back()));
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    below = pool.Add(*it, below);
  const int32_t top = pool.Add(state, below);
  std::vector<int32_t> escaped;
  stepper.ReadSorted(&pool, &top, &top + 1, index.vocab(),
                     like ? longer : uncertain,
                     [&](int32_t id, const Stepper::TokenReach& r) {
                       // Leaving on the last byte ends the token in the callers
                       // below (readable); leaving earlier leaves bytes for
                       // them.
                       if (r.readable()) {
                         accepted.push_back(id);
                       } else if (r.escaped) {
                         escaped.push_back(id);
                       }
                     });
  if (like != nullptr) {
    // Merged in `uncertain`'s byte order: the shorter tokens as in `like`,
    // the longer ones as just read.
    std::vector<uint32_t> now_accepted(words, 0), now_escaped(words, 0);
    bool clean = false;
    like->accepted.AddTo(now_accepted.data(), words, &clean);
    MarkIds(like->uncertain, &now_escaped);
    for (int32_t id : longer) {
      now_accepted[id >> 5] &= ~(1u << (id & 31));
      now_escaped[id >> 5] &= ~(1u << (id & 31));
    }
    MarkIds(accepted, &now_accepted);
    MarkIds(escaped, &now_escaped);
    accepted.clear();
    escaped.clear();
    for (int32_t id : uncertain) {
      if (Has(now_accepted, id)) {
        accepted.push_back(id);
      } else if (Has(now_escaped, id)) {
        escaped.push_back(id);
      }
    }
  }
  out.uncertain = std::move(escaped);
  if (known == nullptr) {
    out.accepted = TokenSet::FromIds(std::move(accepted), words);
  } else {
    std::vector<uint32_t> bits(words, 0);
    bool clean = true;
    known->AddTo(bits.data(), words, &clean);
    MarkIds(accepted, &bits);
    out.accepted = TokenSet::FromBits(std::move(bits));
  }
  if (out.uncertain.empty() ||
      static_cast<int>(chain.size()) >= kMaxContextDepth)
    return out;
  std::vector<int32_t> deeper = chain;
  deeper.push_back(0);
  for (int32_t r : pda.ReturnStates(pda.StateRule(chain.back()))) {
    if (--*budget < 0) break;
    deeper.back() = r;
    // Below an alike return state, the same callers read alike too.
    const ContextTokens* below_like =
        like != nullptr ? like->Context(r) : nullptr;
    out.contexts.push_back(ClassifyInContext(
        pda, index, state, deeper, out.uncertain, budget, below_like, alike));
  }
  return out;
}

}  // namespace

const ContextTokens* ContextTokens::Context(int32_t return_state) const {
  return FindContext(contexts, return_state);
}

namespace {

// Setting a bit per id costs about as much as merging a few words, so ids
// win while they are fewer than a quarter of the words.
bool IdsAreCheaper(int64_t count, int64_t words) { return count * 4 < words; }

}  // namespace

TokenSet TokenSet::FromBits(std::vector<uint32_t> bits) {
  // Ids are collected as found and given up at the first one too many, not
  // counted first: without -mpopcnt, __builtin_popcount is a libgcc call
  // per word, and counting a dense walk's 4,000 words was 7% of the slowest
  // masks' time.
  TokenSet set;
  const auto words = static_cast<int64_t>(bits.size());
  for (size_t w = 0; w < bits.size(); ++w) {
    for (uint32_t b = bits[w]; b != 0; b &= b - 1) {
      if (!IdsAreCheaper(static_cast<int64_t>(set.ids_.size()) + 1, words)) {
        std::vector<int32_t>().swap(set.ids_);
        set.bits_ = std::move(bits);
        return set;
      }
      set.ids_.push_back(static_cast<int32_t>(32 * w) + __builtin_ctz(b));
    }
  }
  return set;
}

TokenSet TokenSet::FromIds(std::vector<int32_t> ids, int32_t words) {
  TokenSet set;
  if (IdsAreCheaper(static_cast<int64_t>(ids.size()), words)) {
    set.ids_ = std::move(ids);
    return set;
  }
  set.bits_.assign(words, 0);
  for (int32_t id : ids) set.bits_[id >> 5] |= 1u << (id & 31);
  return set;
}

void TokenSet::AddTo(uint32_t* row, int32_t words, bool* clean) const {
  if (!bits_.empty()) {
    if (*clean) {
      std::copy(bits_.begin(), bits_.begin() + words, row);
    } else {
      for (int32_t w = 0; w < words; ++w) row[w] |= bits_[w];
    }
    *clean = false;
    return;
  }
  if (*clean) std::fill(row, row + words, 0u);
  *clean = false;
  for (int32_t id : ids_) row[id >> 5] |= 1u << (id & 31);
}

size_t TokenSet::MemoryBytes() const {
  return bits_.size() * sizeof(uint32_t) + ids_.size() * sizeof(int32_t);
}

namespace {

// Groups states whose tables must be equal, so each group is classified
// once. States of rules that call nothing read tokens inside their own
// automaton until they leave it (into the same return states, for the same
// rule), so two that agree on finality and on every move for the first
// max_len + 1 bytes (Moore's refinement for that many rounds) classify every
// token alike. A bounded repeat (`[a-z]{0,2048}`) has thousands of distinct
// states but only max_len + 1 such groups. Other states stand alone.
// Empty past `deadline`.
std::vector<int32_t> ShareGroups(const Pda& pda, int32_t max_len,
                                 const Deadline& deadline) {
  const int32_t n = pda.num_states();
  std::vector<bool> leaf_rule(pda.num_rules(), true);
  for (int32_t s = 0; s < n; ++s) {
    if (pda.CallsBegin(s) != pda.CallsEnd(s))
      leaf_rule[pda.StateRule(s)] = false;
  }
  // The states of leaf rules, numbered among themselves, with their moves
  // as runs of bytes with one target (-1: dead).
  std::vector<int32_t> local(n, -1), states;
  for (int32_t s = 0; s < n; ++s) {
    if (leaf_rule[pda.StateRule(s)]) {
      local[s] = static_cast<int32_t>(states.size());
      states.push_back(s);
    }
  }
  const int32_t m = static_cast<int32_t>(states.size());
  std::vector<std::pair<int32_t, int32_t>> runs;
  std::vector<int32_t> runs_begin(m + 1, 0);
  for (int32_t i = 0; i < m; ++i) {
    // A leaf rule's moves stay in the rule, so every target has a number.
    AppendRuns(
        pda, states[i], [&](int32_t t) { return local[t]; }, &runs);
    runs_begin[i + 1] = static_cast<int32_t>(runs.size());
  }
  const Predecessors pred = PredecessorsOf(m, [&](int32_t i, auto&& f) {
    for (int32_t k = runs_begin[i]; k < runs_begin[i + 1]; ++k) {
      if (runs[k].second >= 0) f(runs[k].second);
    }
  });
  std::vector<int32_t> initial(m);
  for (int32_t i = 0; i < m; ++i) {
    initial[i] =
        2 * pda.StateRule(states[i]) + (pda.IsFinal(states[i]) ? 1 : 0);
  }
  constexpr int64_t kMaxWork = int64_t{1} << 24;  // signature ints
  const int64_t rounds = int64_t{max_len} + 1;
  Refinement refined =
      Refine(std::move(initial), 2 * pda.num_rules(), pred, rounds, kMaxWork,
             [&](int32_t i, const std::vector<int32_t>& cls,
                 std::vector<int32_t>* sig) {
               AppendRunClasses(
                   runs, runs_begin[i], runs_begin[i + 1],
                   [&](int32_t t) { return cls[t]; }, sig);
             });
  if (deadline.Passed()) return {};
  std::vector<int32_t> group(n);
  int32_t alone = 0;
  const bool done = refined.stable || refined.rounds == rounds;
  for (int32_t s = 0; s < n; ++s) {
    group[s] = local[s] >= 0 && done ? refined.cls[local[s]] : -1 - alone++;
  }
  return group;
}

size_t ContextBytes(const ContextTokens& c) {
  size_t bytes = sizeof(c) + c.accepted.MemoryBytes() +
                 c.uncertain.size() * sizeof(int32_t);
  for (const ContextTokens& d : c.contexts) bytes += ContextBytes(d);
  return bytes;
}

}  // namespace

struct TokenTable::LazyContext {
  std::once_flag once;
  std::atomic<bool> built{false};  // tokens may be read without `once`
  ContextTokens tokens;
};

struct TokenTable::RuleAlike {
  std::once_flag once;
  Pda::Alike alike;
};

struct TokenTable::Slot {
  std::once_flag once;
  std::atomic<bool> built{false};  // tokens may be read without `once`
  StateTokens tokens;
  // Once built with uncertain tokens: one per return state of the rule,
  // made as outputs meet them (a string counted to 65535 has that many).
  std::unique_ptr<LazyArray<LazyContext>> contexts;
  // For a chain's link, its uncertain tokens read as the link's strings,
  // made by the first context that needs them.
  std::once_flag links_once;
  std::optional<LinkReading> links;
  // The first context built far from the chain's end, which the contexts
  // of positions that read alike (SameChainReading) copy.
  std::atomic<const LazyContext*> chain_model{nullptr};
};

TokenTable::TokenTable(const Pda& pda, const TokenIndex& index)
    : pda_(pda), index_(index) {}

TokenTable::~TokenTable() = default;

void TokenTable::Init(std::vector<int32_t> slot,
                      std::vector<int32_t> first_state) {
  slot_ = std::move(slot);
  first_state_ = std::move(first_state);
  slots_ = std::make_unique<LazyArray<Slot>>(first_state_.size());
  alike_ = std::make_unique<RuleAlike[]>(pda_.num_rules());
}

TokenTable::Slot& TokenTable::SlotAt(size_t i) const { return slots_->At(i); }

const TokenTable::Slot* TokenTable::FindSlot(size_t i) const {
  return slots_->Find(i);
}

absl::Status TokenTable::Group(const Deadline& deadline) {
  const std::vector<int32_t> group =
      ShareGroups(pda_, index_.max_token_length(), deadline);
  if (group.empty() && pda_.num_states() > 0) {
    return absl::DeadlineExceededError("grouping automaton states");
  }
  std::vector<int32_t> slot(pda_.num_states(), -1), first;
  std::unordered_map<int32_t, int32_t> group_slot;
  for (int32_t s = 0; s < pda_.num_states(); ++s) {
    if (!pda_.HasBytes(s)) continue;
    if (group[s] >= 0) {
      auto [it, added] =
          group_slot.emplace(group[s], static_cast<int32_t>(first.size()));
      slot[s] = it->second;
      if (!added) continue;
    } else {
      slot[s] = static_cast<int32_t>(first.size());
    }
    first.push_back(s);
  }
  Init(std::move(slot), std::move(first));
  return absl::OkStatus();
}

bool TokenTable::Prebuild(std::chrono::steady_clock::time_point deadline,
                          const std::atomic<bool>* cancel) const {
  const int32_t n = pda_.num_states();
  if (complete() || n == 0) return true;
  std::vector<char> seen(n, 0);
  std::vector<int32_t> order{pda_.RuleStart(pda_.root_rule())};
  seen[order[0]] = 1;
  auto visit = [&](int32_t t) {
    if (t != Pda::kDead && !seen[t]) {
      seen[t] = 1;
      order.push_back(t);
    }
  };
  // Breadth first over bytes, calls and returns: the order outputs meet them.
  auto stop = [&] {
    return std::chrono::steady_clock::now() > deadline ||
           (cancel != nullptr && cancel->load(std::memory_order_relaxed));
  };
  for (size_t k = 0; k < order.size(); ++k) {
    if (stop()) return false;
    const int32_t s = order[k];
    for (int32_t c = 0; c < pda_.num_byte_classes(); ++c) {
      visit(pda_.Next(s, pda_.ClassByte(c)));
    }
    for (const PdaCall* c = pda_.CallsBegin(s); c != pda_.CallsEnd(s); ++c) {
      visit(pda_.RuleStart(c->rule));
      visit(c->return_state);
    }
    const StateTokens* t = For(s);
    if (t == nullptr || t->uncertain.empty()) continue;
    for (int32_t r : pda_.ReturnStates(pda_.StateRule(s))) {
      if (stop()) return false;
      Context(s, r);
    }
  }
  complete_.store(true, std::memory_order_release);
  return true;
}

const StateTokens* TokenTable::For(int32_t state) const {
  const int32_t i = slot_[state];
  if (i < 0) return nullptr;
  Slot& slot = SlotAt(i);
  if (slot.built.load(std::memory_order_acquire)) return &slot.tokens;
  std::call_once(slot.once, [&] {
    // A chain's link leaves after every string into every count of every
    // chain; following its leavers there is futile (llama3: 10 ms to
    // reject 0.4 % of them) where each context splits them in a few.
    const int32_t s = first_state_[i];
    std::optional<StateTokens> leaf =
        ClassifyLeafState(pda_, index_, s, index_.leaf_cache(),
                          StartsChainLink(pda_, s) ? 0 : kLeafFollowBudget);
    if (!leaf) {
      leaf = ClassifyMixedState(pda_, index_, s, kLeafFollowBudget,
                                index_.vocab().size() / kMixedVocabShare);
    }
    Publish(i, leaf ? *std::move(leaf) : ClassifyState(pda_, index_, s));
  });
  return &slot.tokens;
}

void TokenTable::WalkTogether(const int32_t* states, size_t count) const {
  std::vector<int32_t> unbuilt;
  for (size_t k = 0; k < count; ++k) {
    const int32_t i = slot_[states[k]];
    if (i < 0) continue;
    const Slot* slot = FindSlot(i);
    if (slot != nullptr && slot->built.load(std::memory_order_acquire)) {
      continue;
    }
    unbuilt.push_back(first_state_[i]);
  }
  if (unbuilt.size() < 2) return;
  std::sort(unbuilt.begin(), unbuilt.end());
  unbuilt.erase(std::unique(unbuilt.begin(), unbuilt.end()), unbuilt.end());
  WalkLeavesTogether(pda_, index_, unbuilt, index_.leaf_cache());
}

void TokenTable::Publish(size_t i, StateTokens tokens) const {
  Slot& slot = SlotAt(i);
  slot.tokens = std::move(tokens);
  if (!slot.tokens.uncertain.empty()) {
    slot.contexts = std::make_unique<LazyArray<LazyContext>>(Returns(i).size());
  }
  built_bytes_.fetch_add(SlotBytes(i), std::memory_order_relaxed);
  slot.built.store(true, std::memory_order_release);
}

void TokenTable::Publish(LazyContext* context, ContextTokens tokens) const {
  context->tokens = std::move(tokens);
  built_bytes_.fetch_add(ContextBytes(context->tokens),
                         std::memory_order_relaxed);
  context->built.store(true, std::memory_order_release);
}

TokenTable::LazyContext& TokenTable::ContextAt(Slot* slot, size_t k) const {
  bool made = false;
  LazyContext& c = slot->contexts->At(k, &made);
  if (made) {
    built_bytes_.fetch_add(LazyArray<LazyContext>::ChunkBytes(),
                           std::memory_order_relaxed);
  }
  return c;
}

const ContextTokens* TokenTable::Context(int32_t state,
                                         int32_t return_state) const {
  const int32_t i = slot_[state];
  Slot& slot = SlotAt(i);
  if (!slot.contexts) return nullptr;
  const std::vector<int32_t>& returns = Returns(i);
  auto it = std::lower_bound(returns.begin(), returns.end(), return_state);
  if (it == returns.end() || *it != return_state) return nullptr;
  LazyContext& c = ContextAt(&slot, it - returns.begin());
  if (c.built.load(std::memory_order_acquire)) return &c.tokens;
  std::call_once(c.once, [&] {
    int budget = kMaxNestedContexts;
    int32_t alike = 0;
    std::call_once(slot.links_once, [&] {
      slot.links =
          ReadAsLinks(pda_, index_, first_state_[i], slot.tokens.uncertain);
      if (slot.links) {
        built_bytes_.fetch_add(slot.links->MemoryBytes(),
                               std::memory_order_relaxed);
      }
    });
    // Most positions of a counted string read every token alike: those
    // copy the first such context built (llama3: 30 us where building one
    // takes 0.5 to 2 ms).
    const LazyContext* model = slot.chain_model.load(std::memory_order_acquire);
    if (slot.links && model != nullptr &&
        SameChainReading(pda_, first_state_[i], model->tokens.return_state,
                         return_state, slot.links->longest)) {
      ContextTokens copy = model->tokens;
      copy.return_state = return_state;
      Publish(&c, std::move(copy));
      return;
    }
    // A position of a counted string far from its bounds reads the tokens
    // the chain leaves unsettled (a few thousand: `",` after some
    // characters) as a position built before does (llama3: 2 ms each read).
    const ContextTokens* like = AlikeContext(i, return_state, &alike);
    if (slot.links) {
      ChainSplit split = SplitByCallChain(pda_, first_state_[i], return_state,
                                          slot.tokens.uncertain, *slot.links);
      Publish(&c, ClassifyInContext(pda_, index_, first_state_[i],
                                    {return_state}, split.unsettled, &budget,
                                    like, alike, &split.accepted));
      if (split.far) {
        const LazyContext* none = nullptr;
        slot.chain_model.compare_exchange_strong(none, &c,
                                                 std::memory_order_acq_rel);
      }
      return;
    }
    Publish(&c, ClassifyInContext(pda_, index_, first_state_[i], {return_state},
                                  slot.tokens.uncertain, &budget, like, alike));
  });
  return &c.tokens;
}

const ContextTokens* TokenTable::AlikeContext(size_t i, int32_t return_state,
                                              int32_t* alike) const {
  const Slot& slot = SlotAt(i);
  *alike = 0;
  if (slot.tokens.uncertain.size() * kAlikeVocabShare <
      static_cast<size_t>(index_.vocab().size())) {
    return nullptr;
  }
  const std::vector<int32_t>& returns = Returns(i);
  const int32_t rule = pda_.StateRule(return_state);
  // The built contexts of the same rule, found before comparing its states:
  // the first context of a rule has none to share (comparing a counted
  // string's 258 states cost its first mask 0.6 ms).
  std::vector<size_t> built;
  for (size_t j = 0; j < returns.size(); ++j) {
    const LazyContext* other = slot.contexts->Find(j);
    if (other != nullptr && other->built.load(std::memory_order_acquire) &&
        pda_.StateRule(returns[j]) == rule) {
      built.push_back(j);
    }
  }
  if (built.empty()) return nullptr;
  RuleAlike& a = alike_[rule];
  std::call_once(a.once, [&] {
    a.alike = pda_.AlikeUpTo(rule, kAlikeDepth, kAlikeWork, kMinAlikeDepth);
    alike_bytes_.fetch_add(a.alike.MemoryBytes(), std::memory_order_relaxed);
  });
  const ContextTokens* like = nullptr;
  for (size_t j : built) {
    const int32_t depth = a.alike.SharedDepth(returns[j], return_state);
    if (depth > *alike) {
      *alike = depth;
      like = &slot.contexts->Find(j)->tokens;
    }
  }
  return like;
}

size_t TokenTable::SlotBytes(size_t i) const {
  const Slot& slot = SlotAt(i);
  const StateTokens& t = slot.tokens;
  size_t bytes =
      t.accepted.MemoryBytes() + t.uncertain.size() * sizeof(int32_t);
  if (slot.contexts) bytes += slot.contexts->MemoryBytes();
  return bytes;
}

size_t TokenTable::MemoryBytes() const {
  return (slot_.size() + first_state_.size()) * sizeof(int32_t) +
         (slots_ != nullptr ? slots_->MemoryBytes() : 0) +
         built_bytes_.load(std::memory_order_relaxed) + alike_bytes() +
         pda_.num_rules() * sizeof(RuleAlike);
}

const std::vector<int32_t>& TokenTable::Returns(size_t slot) const {
  return pda_.ReturnStates(pda_.StateRule(first_state_[slot]));
}

int32_t TokenTable::num_built() const {
  int32_t n = 0;
  for (size_t i = 0; i < first_state_.size(); ++i) {
    const Slot* slot = FindSlot(i);
    n += slot != nullptr && slot->built.load(std::memory_order_acquire);
  }
  return n;
}

}  // namespace grammard::grammar::internal

namespace grammard::grammar::internal {
namespace {

// Contexts nest one level per caller; a bound keeps a malformed buffer from
// recursing deep.
constexpr int kMaxLoadDepth = 64;

bool LoadIds(ByteReader* in, int32_t vocab_size, std::vector<int32_t>* ids) {
  if (!in->GetVector(ids)) return false;
  for (int32_t id : *ids) {
    if (id < 0 || id >= vocab_size) return in->Fail();
  }
  return true;
}

void SaveContext(const ContextTokens& c, ByteWriter* out) {
  out->Put<int32_t>(c.return_state);
  c.accepted.Save(out);
  out->PutVector(c.uncertain);
  out->Put<uint64_t>(c.contexts.size());
  for (const ContextTokens& d : c.contexts) SaveContext(d, out);
}

bool LoadContexts(ByteReader* in, int32_t states, int32_t vocab_size, int depth,
                  std::vector<ContextTokens>* out);

bool LoadContext(ByteReader* in, int32_t states, int32_t vocab_size, int depth,
                 ContextTokens* c) {
  if (!in->Get(&c->return_state) || c->return_state < 0 ||
      c->return_state >= states || !c->accepted.Load(in, vocab_size) ||
      !LoadIds(in, vocab_size, &c->uncertain) ||
      !LoadContexts(in, states, vocab_size, depth + 1, &c->contexts)) {
    return in->Fail();
  }
  return true;
}

bool LoadContexts(ByteReader* in, int32_t states, int32_t vocab_size, int depth,
                  std::vector<ContextTokens>* out) {
  uint64_t n = 0;
  if (!in->Get(&n)) return false;
  if (n > 0 && depth >= kMaxLoadDepth) return in->Fail();
  for (uint64_t i = 0; i < n; ++i) {
    ContextTokens c;
    if (!LoadContext(in, states, vocab_size, depth, &c)) return false;
    // Context() finds them by binary search.
    if (!out->empty() && out->back().return_state >= c.return_state) {
      return in->Fail();
    }
    out->push_back(std::move(c));
  }
  return true;
}

}  // namespace

void TokenSet::Save(ByteWriter* out) const {
  out->PutVector(bits_);
  out->PutVector(ids_);
}

bool TokenSet::Load(ByteReader* in, int32_t vocab_size) {
  if (!in->GetVector(&bits_) || !LoadIds(in, vocab_size, &ids_)) return false;
  const size_t words = (static_cast<size_t>(vocab_size) + 31) / 32;
  if (!bits_.empty() && bits_.size() != words) return in->Fail();
  return true;
}

void TokenTable::Save(ByteWriter* out) const {
  out->PutVector(slot_);
  for (size_t i = 0; i < first_state_.size(); ++i) {
    const Slot* slot = FindSlot(i);
    const bool built =
        slot != nullptr && slot->built.load(std::memory_order_acquire);
    out->Put<uint8_t>(built);
    if (!built) continue;
    slot->tokens.accepted.Save(out);
    out->PutVector(slot->tokens.uncertain);
    if (!slot->contexts) continue;
    for (size_t k = 0, n = Returns(i).size(); k < n; ++k) {
      const LazyContext* c = slot->contexts->Find(k);
      const bool context_built =
          c != nullptr && c->built.load(std::memory_order_acquire);
      out->Put<uint8_t>(context_built);
      if (context_built) SaveContext(c->tokens, out);
    }
  }
}

absl::Status TokenTable::Load(ByteReader* in) {
  const int32_t vocab_size = index_.vocab().size();
  std::vector<int32_t> slot;
  if (!in->GetVector(&slot) ||
      slot.size() != static_cast<size_t>(pda_.num_states())) {
    return in->Malformed();
  }
  // Slots are numbered in order of their first state, as Group() makes them.
  std::vector<int32_t> first;
  for (int32_t s = 0; s < pda_.num_states(); ++s) {
    // The matcher looks up a table for exactly the states that read bytes.
    if ((slot[s] >= 0) != pda_.HasBytes(s) ||
        slot[s] > static_cast<int32_t>(first.size())) {
      return in->Malformed();
    }
    if (slot[s] == static_cast<int32_t>(first.size())) first.push_back(s);
  }
  Init(std::move(slot), std::move(first));
  for (size_t i = 0; i < first_state_.size(); ++i) {
    uint8_t built = 0;
    if (!in->Get(&built) || built > 1) return in->Malformed();
    if (!built) continue;
    StateTokens t;
    if (!t.accepted.Load(in, vocab_size) ||
        !LoadIds(in, vocab_size, &t.uncertain)) {
      return in->Malformed();
    }
    Slot& target = SlotAt(i);
    std::call_once(target.once, [&] { Publish(i, std::move(t)); });
    if (!target.contexts) continue;
    const std::vector<int32_t>& returns = Returns(i);
    for (size_t k = 0; k < returns.size(); ++k) {
      uint8_t context_built = 0;
      if (!in->Get(&context_built) || context_built > 1) return in->Malformed();
      if (!context_built) continue;
      ContextTokens c;
      if (!LoadContext(in, pda_.num_states(), vocab_size, 1, &c) ||
          c.return_state != returns[k]) {
        return in->Malformed();
      }
      LazyContext& lazy = ContextAt(&target, k);
      std::call_once(lazy.once, [&] { Publish(&lazy, std::move(c)); });
    }
  }
  return absl::OkStatus();
}

}  // namespace grammard::grammar::internal
