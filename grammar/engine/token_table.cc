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

// A state whose DFA walk would leave more than this share of the vocabulary
// to stack steps (ClassifyMixedState) is walked by ClassifyState instead.
constexpr int32_t kMixedVocabShare = 16;

// Contexts below one first-level context that Prebuild builds with it (a
// matcher builds the others as it meets them).
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

namespace {

// Rules of fewer states are not grouped (ShareGroups).
constexpr int32_t kMinSharedRuleStates = 64;

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
  std::vector<int32_t> rule_states(pda.num_rules(), 0);
  for (int32_t s = 0; s < n; ++s) {
    ++rule_states[pda.StateRule(s)];
    if (pda.CallsBegin(s) != pda.CallsEnd(s))
      leaf_rule[pda.StateRule(s)] = false;
  }
  // A small rule's alike states share little (their tables are walks the
  // leaf cache shares anyway), and refining them cost kAny's grammars,
  // where each member with a scalar value is such a rule, five times the
  // work of the rest.
  for (int32_t r = 0; r < pda.num_rules(); ++r) {
    if (rule_states[r] < kMinSharedRuleStates) leaf_rule[r] = false;
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
      // With the contexts below it, nearest first, as many as a matcher
      // would likely meet.
      std::vector<const ContextTokens*> level{Context(s, r)};
      int budget = kMaxNestedContexts;
      for (size_t k = 0; k < level.size() && budget > 0; ++k) {
        if (level[k] == nullptr || level[k]->below == nullptr) continue;
        for (int32_t below :
             pda_.ReturnStates(pda_.StateRule(level[k]->return_state))) {
          if (stop()) return false;
          if (--budget < 0) break;
          level.push_back(level[k]->Context(below));
        }
      }
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
  built_bytes_.fetch_add(ContextsBelowAccess::Bytes(context->tokens),
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
                                    {return_state}, split.unsettled, like,
                                    alike, &built_bytes_, &split.accepted));
      if (split.far) {
        const LazyContext* none = nullptr;
        slot.chain_model.compare_exchange_strong(none, &c,
                                                 std::memory_order_acq_rel);
      }
      return;
    }
    Publish(&c, ClassifyInContext(pda_, index_, first_state_[i], {return_state},
                                  slot.tokens.uncertain, like, alike,
                                  &built_bytes_));
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

void SaveContext(const ContextTokens& c, ByteWriter* out) {
  out->Put<int32_t>(c.return_state);
  c.accepted.Save(out);
  out->PutVector(c.uncertain);
  const std::vector<const ContextTokens*> below = ContextsBelowAccess::Built(c);
  out->Put<uint64_t>(below.size());
  for (const ContextTokens* d : below) SaveContext(*d, out);
}

// A context's own fields; the contexts below it follow (LoadBelow), once
// it is placed.
bool LoadFields(ByteReader* in, int32_t states, int32_t vocab_size,
                ContextTokens* c) {
  return in->Get(&c->return_state) && c->return_state >= 0 &&
         c->return_state < states && c->accepted.Load(in, vocab_size) &&
         LoadTokenIds(in, vocab_size, &c->uncertain);
}

// The contexts below `c`, in return-state order; those of return states
// not of c's caller's rule, or past the depth contexts go to, fail it
// (which also bounds the recursion).
bool LoadBelow(ByteReader* in, int32_t states, int32_t vocab_size,
               const ContextTokens& c) {
  uint64_t n = 0;
  if (!in->Get(&n)) return false;
  int32_t last = -1;
  for (uint64_t i = 0; i < n; ++i) {
    ContextTokens child;
    if (!LoadFields(in, states, vocab_size, &child) ||
        child.return_state <= last) {
      return in->Fail();
    }
    last = child.return_state;
    if (!ContextsBelowAccess::Put(c, std::move(child))) return in->Fail();
    const ContextTokens* placed = c.Context(last);
    if (!LoadBelow(in, states, vocab_size, *placed)) return false;
  }
  return true;
}

}  // namespace

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
        !LoadTokenIds(in, vocab_size, &t.uncertain)) {
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
      if (!LoadFields(in, pda_.num_states(), vocab_size, &c) ||
          c.return_state != returns[k]) {
        return in->Malformed();
      }
      PrepareLoadedContext(pda_, index_, first_state_[i], {returns[k]},
                           &built_bytes_, &c);
      LazyContext& lazy = ContextAt(&target, k);
      std::call_once(lazy.once, [&] { Publish(&lazy, std::move(c)); });
      if (!LoadBelow(in, pda_.num_states(), vocab_size, lazy.tokens)) {
        return in->Malformed();
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace grammard::grammar::internal
