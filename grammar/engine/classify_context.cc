#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "grammar/base/lazy_array.h"
#include "grammar/engine/stack.h"
#include "grammar/engine/token_table.h"

namespace grammard::grammar::internal {

namespace {

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

// The contexts below one context: one per return state of its caller's
// rule, each built by the first matcher that meets it. Building them with
// their context (as many as a budget allowed) read, for a member called
// from a hundred objects, a hundred contexts no output would meet, and left
// the rest to be read for real at every mask.
class ContextsBelow {
 public:
  ContextsBelow(const Pda& pda, const TokenIndex& index, int32_t state,
                std::vector<int32_t> chain, const ContextTokens* like,
                int32_t alike, std::atomic<size_t>* bytes)
      : pda_(pda),
        index_(index),
        state_(state),
        chain_(std::move(chain)),
        like_(like),
        alike_(alike),
        bytes_(bytes),
        below_(Returns().size()),
        own_bytes_(sizeof(*this) + chain_.size() * sizeof(int32_t) +
                   below_.MemoryBytes()) {}

  // `uncertain`: the tokens of the context this lies below (equal in the
  // copies that share it).
  const ContextTokens* Context(int32_t return_state,
                               const std::vector<int32_t>& uncertain) const {
    const int64_t k = Index(return_state);
    if (k < 0) return nullptr;
    Entry& e = At(k);
    if (e.built.load(std::memory_order_acquire)) return &e.tokens;
    std::call_once(e.once, [&] {
      std::vector<int32_t> deeper = chain_;
      deeper.push_back(return_state);
      // Below an alike return state, the same callers read alike too.
      const ContextTokens* like = like_ != nullptr && like_->below != nullptr
                                      ? like_->below->BuiltContext(return_state)
                                      : nullptr;
      Publish(&e, ClassifyInContext(pda_, index_, state_, deeper, uncertain,
                                    like, alike_, bytes_));
    });
    return &e.tokens;
  }

  const ContextTokens* BuiltContext(int32_t return_state) const {
    const int64_t k = Index(return_state);
    if (k < 0) return nullptr;
    const Entry* e = below_.Find(k);
    return e != nullptr && e->built.load(std::memory_order_acquire) ? &e->tokens
                                                                    : nullptr;
  }

  std::vector<const ContextTokens*> Built() const {
    std::vector<const ContextTokens*> out;
    for (size_t k = 0; k < below_.size(); ++k) {
      const Entry* e = below_.Find(k);
      if (e != nullptr && e->built.load(std::memory_order_acquire)) {
        out.push_back(&e->tokens);
      }
    }
    return out;
  }

  bool Put(ContextTokens child) const {
    const int64_t k = Index(child.return_state);
    if (k < 0) return false;
    Entry& e = At(k);
    bool put = false;
    std::call_once(e.once, [&] {
      std::vector<int32_t> deeper = chain_;
      deeper.push_back(child.return_state);
      PrepareLoadedContext(pda_, index_, state_, deeper, bytes_, &child);
      Publish(&e, std::move(child));
      put = true;
    });
    return put;
  }

  // Without the contexts below, counted as they are made.
  size_t Bytes() const { return own_bytes_; }

 private:
  struct Entry {
    std::once_flag once;
    std::atomic<bool> built{false};  // tokens may be read without `once`
    ContextTokens tokens;
  };

  const std::vector<int32_t>& Returns() const {
    return pda_.ReturnStates(pda_.StateRule(chain_.back()));
  }
  int64_t Index(int32_t return_state) const {
    const std::vector<int32_t>& returns = Returns();
    auto it = std::lower_bound(returns.begin(), returns.end(), return_state);
    if (it == returns.end() || *it != return_state) return -1;
    return it - returns.begin();
  }
  Entry& At(size_t k) const {
    bool made = false;
    Entry& e = below_.At(k, &made);
    if (made) {
      bytes_->fetch_add(Below::ChunkBytes(), std::memory_order_relaxed);
    }
    return e;
  }
  void Publish(Entry* e, ContextTokens tokens) const {
    e->tokens = std::move(tokens);
    bytes_->fetch_add(ContextsBelowAccess::Bytes(e->tokens),
                      std::memory_order_relaxed);
    e->built.store(true, std::memory_order_release);
  }

  const Pda& pda_;
  const TokenIndex& index_;
  const int32_t state_;
  const std::vector<int32_t> chain_;  // the callers down to this level
  const ContextTokens* const like_;
  const int32_t alike_;
  std::atomic<size_t>* const bytes_;
  // By index in Returns(). Most callers' rules return to a few states: a
  // chunk of 64 contexts (7 KB) per context doubled a small grammar's
  // memory.
  using Below = LazyArray<Entry, 4>;
  Below below_;
  const size_t own_bytes_;
};

namespace {

// The contexts below a context of `state` with callers `chain` and
// `uncertain` tokens left: none when nothing is left or past the depth.
std::shared_ptr<const ContextsBelow> MakeBelow(
    const Pda& pda, const TokenIndex& index, int32_t state,
    const std::vector<int32_t>& chain, const std::vector<int32_t>& uncertain,
    const ContextTokens* like, int32_t alike, std::atomic<size_t>* bytes) {
  if (uncertain.empty() || static_cast<int>(chain.size()) >= kMaxContextDepth)
    return nullptr;
  return std::make_shared<const ContextsBelow>(pda, index, state, chain, like,
                                               alike, bytes);
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
                                const ContextTokens* like, int32_t alike,
                                std::atomic<size_t>* bytes,
                                const TokenSet* known) {
  ContextTokens out{chain.back(), {}, {}, nullptr};
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
  out.below =
      MakeBelow(pda, index, state, chain, out.uncertain, like, alike, bytes);
  return out;
}

void PrepareLoadedContext(const Pda& pda, const TokenIndex& index,
                          int32_t state, const std::vector<int32_t>& chain,
                          std::atomic<size_t>* bytes, ContextTokens* c) {
  c->below =
      MakeBelow(pda, index, state, chain, c->uncertain, nullptr, 0, bytes);
}

const ContextTokens* ContextTokens::Context(int32_t return_state) const {
  return below != nullptr ? below->Context(return_state, uncertain) : nullptr;
}

std::vector<const ContextTokens*> ContextsBelowAccess::Built(
    const ContextTokens& c) {
  if (c.below == nullptr) return {};
  return c.below->Built();
}

bool ContextsBelowAccess::Put(const ContextTokens& c, ContextTokens child) {
  return c.below != nullptr && c.below->Put(std::move(child));
}

size_t ContextsBelowAccess::Bytes(const ContextTokens& c) {
  return sizeof(c) + c.accepted.MemoryBytes() +
         c.uncertain.size() * sizeof(int32_t) +
         (c.below != nullptr ? c.below->Bytes() : 0);
}

}  // namespace grammard::grammar::internal
