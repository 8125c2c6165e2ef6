#include <algorithm>
#include <vector>

#include "grammar/engine/stack.h"
#include "grammar/engine/token_table.h"

namespace grammard::grammar::internal {

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

// Marks `ids` in `bits` (one bit per id of the vocabulary).
void MarkIds(const std::vector<int32_t>& ids, std::vector<uint32_t>* bits) {
  for (int32_t id : ids) (*bits)[id >> 5] |= 1u << (id & 31);
}
bool Has(const std::vector<uint32_t>& bits, int32_t id) {
  return (bits[id >> 5] >> (id & 31)) & 1u;
}

}  // namespace

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
                                int32_t alike, const TokenSet* known) {
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

const ContextTokens* ContextTokens::Context(int32_t return_state) const {
  return FindContext(contexts, return_state);
}

}  // namespace grammard::grammar::internal
