#include <algorithm>
#include <string>
#include <vector>

#include "grammar/engine/stack.h"
#include "grammar/engine/token_table.h"

namespace grammard::grammar::internal {

// What lies below a frame of `rule` when nothing else is known: nothing at
// all for a root rule no one calls (so leaving it ends the text), else an
// unknown caller.
int32_t Below(const Pda& pda, int32_t rule) {
  return rule == pda.root_rule() && pda.ReturnStates(rule).empty() ? kBottom
                                                                   : kOpen;
}

namespace {

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

}  // namespace grammard::grammar::internal
