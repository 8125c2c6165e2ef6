#include "grammar/internal/token_table.h"

#include "grammar/internal/stack.h"

namespace grammard::grammar::internal {
namespace {

// One byte deeper in the token trie: the stack sets after reading the
// prefix so far. `inner` nodes still have the classified state's frame below
// them (their stacks end in kBottom); `outer` nodes have left it into one of
// its rule's return states (their stacks end in kOpen).
struct Level {
  size_t inner_end;
  size_t outer_end;
  size_t pool_size;
  bool left_here;  // the frame was left right after this level's byte
  bool escaped;    // some path left the return state's rule too
  bool dead;       // nothing can read a further byte
};

}  // namespace

StateTokens ClassifyState(const Pda& pda, const TokenIndex& index,
                          int32_t state) {
  StateTokens out;
  const Vocabulary& vocab = index.vocab();
  out.accepted.assign((vocab.size() + 31) / 32, 0);

  StackPool pool;
  Stepper stepper(pda);
  std::vector<int32_t> inner{pool.Add(state, kBottom)};
  std::vector<int32_t> outer;
  std::vector<int32_t> scratch;
  std::vector<int32_t> contexts;
  const std::vector<int32_t>& returns = pda.ReturnStates(pda.StateRule(state));
  std::vector<Level> levels{
      {inner.size(), 0, pool.size(), false, false, false}};
  // Level d's inner nodes are inner[levels[d-1].inner_end,
  // levels[d].inner_end).
  auto range_begin = [&](size_t d, bool is_inner) -> size_t {
    if (d == 0) return 0;
    return is_inner ? levels[d - 1].inner_end : levels[d - 1].outer_end;
  };

  for (int32_t i = 0; i < index.size(); ++i) {
    std::string_view bytes = index.bytes(i);
    size_t depth =
        std::min<size_t>(static_cast<size_t>(index.lcp(i)), levels.size() - 1);
    levels.resize(depth + 1);
    inner.resize(levels[depth].inner_end);
    outer.resize(levels[depth].outer_end);
    pool.Truncate(levels[depth].pool_size);
    while (depth < bytes.size() && !levels[depth].dead) {
      const Level& from = levels[depth];
      const uint8_t byte = static_cast<uint8_t>(bytes[depth]);
      Level next{};
      next.escaped = from.escaped;
      scratch.clear();
      CloseFlags fi =
          stepper.Step(&pool, inner.data() + range_begin(depth, true),
                       inner.data() + from.inner_end, byte, &scratch);
      inner.insert(inner.end(), scratch.begin(), scratch.end());
      scratch.clear();
      CloseFlags fo =
          stepper.Step(&pool, outer.data() + range_begin(depth, false),
                       outer.data() + from.outer_end, byte, &scratch);
      next.escaped |= fo.open;
      if (fi.bottom) {
        next.left_here = true;
        contexts.clear();
        for (int32_t r : returns) contexts.push_back(pool.Add(r, kOpen));
        CloseFlags fc =
            stepper.Close(&pool, contexts.data(), contexts.size(), &scratch);
        next.escaped |= fc.open;
      }
      outer.insert(outer.end(), scratch.begin(), scratch.end());
      next.inner_end = inner.size();
      next.outer_end = outer.size();
      next.pool_size = pool.size();
      next.dead = next.inner_end == from.inner_end &&
                  next.outer_end == from.outer_end && !next.escaped;
      levels.push_back(next);
      ++depth;
    }
    if (depth < bytes.size()) continue;  // died before its last byte
    const Level& end = levels[depth];
    const bool inner_alive = end.inner_end > range_begin(depth, true);
    const bool outer_alive = end.outer_end > range_begin(depth, false);
    const int32_t id = index.id(i);
    if (inner_alive || end.left_here) {
      out.accepted[id >> 5] |= 1u << (id & 31);
    } else if (outer_alive || end.escaped) {
      out.uncertain.push_back(id);
    }
  }
  return out;
}

TokenTable::TokenTable(const Pda& pda, const TokenIndex& index) {
  slot_.assign(pda.num_states(), -1);
  for (int32_t s = 0; s < pda.num_states(); ++s) {
    if (!pda.HasBytes(s)) continue;
    slot_[s] = static_cast<int32_t>(tables_.size());
    tables_.push_back(ClassifyState(pda, index, s));
  }
}

size_t TokenTable::MemoryBytes() const {
  size_t bytes = slot_.size() * sizeof(int32_t);
  for (const StateTokens& t : tables_) {
    bytes += t.accepted.size() * sizeof(uint32_t) +
             t.uncertain.size() * sizeof(int32_t);
  }
  return bytes;
}

}  // namespace grammard::grammar::internal
