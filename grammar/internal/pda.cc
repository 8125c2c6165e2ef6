#include "grammar/internal/pda.h"

#include <algorithm>
#include <map>

namespace grammard::grammar::internal {

int32_t Pda::AddRule(std::string name) {
  rule_names_.push_back(std::move(name));
  rule_start_.push_back(-1);
  return static_cast<int32_t>(rule_names_.size()) - 1;
}

int32_t Pda::AddState(int32_t rule, bool final) {
  int32_t id = num_states();
  final_.push_back(final ? 1 : 0);
  state_rule_.push_back(rule);
  next_.resize(next_.size() + 256, kDead);
  if (rule_start_[rule] < 0) rule_start_[rule] = id;
  return id;
}

void Pda::Finish() {
  has_bytes_.assign(num_states(), 0);
  for (int32_t s = 0; s < num_states(); ++s) {
    const int32_t* row = next_.data() + static_cast<size_t>(s) * 256;
    has_bytes_[s] =
        std::any_of(row, row + 256, [](int32_t t) { return t != kDead; });
  }
  std::stable_sort(pending_calls_.begin(), pending_calls_.end(),
                   [](const PendingCall& a, const PendingCall& b) {
                     return a.state < b.state;
                   });
  call_offsets_.assign(num_states() + 1, 0);
  calls_.clear();
  size_t k = 0;
  for (int32_t s = 0; s < num_states(); ++s) {
    call_offsets_[s] = static_cast<uint32_t>(calls_.size());
    for (; k < pending_calls_.size() && pending_calls_[k].state == s; ++k) {
      calls_.push_back(pending_calls_[k].call);
    }
  }
  call_offsets_[num_states()] = static_cast<uint32_t>(calls_.size());
  pending_calls_.clear();
  pending_calls_.shrink_to_fit();

  // Return states seen through tail calls: a rule tail-called from R finds
  // whatever R finds below it. Grows to a fixpoint (tail calls may cycle).
  return_states_.assign(num_rules(), {});
  std::vector<std::vector<int32_t>> tail_callers(num_rules());
  for (int32_t s = 0; s < num_states(); ++s) {
    for (const PdaCall* c = CallsBegin(s); c != CallsEnd(s); ++c) {
      if (IsTail(c->return_state)) {
        tail_callers[c->rule].push_back(StateRule(s));
      } else {
        return_states_[c->rule].push_back(c->return_state);
      }
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < num_rules(); ++r) {
      std::vector<int32_t>& mine = return_states_[r];
      const size_t before = mine.size();
      for (int32_t caller : tail_callers[r]) {
        const std::vector<int32_t>& theirs = return_states_[caller];
        mine.insert(mine.end(), theirs.begin(), theirs.end());
      }
      std::sort(mine.begin(), mine.end());
      mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
      changed |= mine.size() != before;
    }
  }
}

Pda Pda::Minimized() const {
  const int32_t n = num_states();
  std::vector<int32_t> cls(n), next_cls(n);
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<int32_t> sig;
  auto classify = [&](auto&& signature) {
    ids.clear();
    for (int32_t s = 0; s < n; ++s) {
      signature(s);
      next_cls[s] =
          ids.emplace(sig, static_cast<int32_t>(ids.size())).first->second;
    }
    return static_cast<int32_t>(ids.size());
  };
  int32_t count = classify([&](int32_t s) {
    sig.assign({StateRule(s), final_[s]});
  });
  // Each round splits at least one class, so a long chain of distinct
  // states (a repeat counted to 2048) takes as many rounds as it has states.
  // Past a budget merging is not worth its time: keep the automaton as is.
  constexpr int64_t kMaxWork = int64_t{1} << 18;  // rounds * states
  for (int64_t rounds = 1;; ++rounds) {
    if (rounds * n > kMaxWork) return *this;
    cls = next_cls;
    int32_t refined = classify([&](int32_t s) {
      sig.assign({cls[s]});
      // Byte moves, run-length encoded: (first byte of a run, target class).
      int32_t prev = -2;
      for (int b = 0; b < 256; ++b) {
        int32_t t = Next(s, static_cast<uint8_t>(b));
        int32_t c = t == kDead ? -1 : cls[t];
        if (c != prev) {
          sig.push_back(b);
          sig.push_back(c);
          prev = c;
        }
      }
      std::vector<std::pair<int32_t, int32_t>> calls;
      for (const PdaCall* c = CallsBegin(s); c != CallsEnd(s); ++c) {
        calls.push_back({c->rule, cls[c->return_state]});
      }
      std::sort(calls.begin(), calls.end());
      sig.push_back(-3);
      for (auto [rule, ret] : calls) {
        sig.push_back(rule);
        sig.push_back(ret);
      }
    });
    if (refined == count) break;
    count = refined;
  }
  cls = next_cls;

  Pda out;
  for (const std::string& name : rule_names_) out.AddRule(name);
  out.SetRoot(root_rule_);
  std::vector<int32_t> state_of(count, -1), rep(count, -1);
  for (int32_t s = 0; s < n; ++s) {
    if (rep[cls[s]] < 0) rep[cls[s]] = s;
  }
  // Each rule's start first, so it stays the rule's first state.
  for (int32_t r = 0; r < num_rules(); ++r) {
    int32_t c = cls[RuleStart(r)];
    if (state_of[c] < 0) state_of[c] = out.AddState(r, IsFinal(rep[c]));
  }
  for (int32_t c = 0; c < count; ++c) {
    if (state_of[c] < 0)
      state_of[c] = out.AddState(StateRule(rep[c]), IsFinal(rep[c]));
  }
  for (int32_t c = 0; c < count; ++c) {
    const int32_t s = rep[c];
    for (int b = 0; b < 256; ++b) {
      int32_t t = Next(s, static_cast<uint8_t>(b));
      if (t != kDead)
        out.SetNext(state_of[c], static_cast<uint8_t>(b), state_of[cls[t]]);
    }
    for (const PdaCall* call = CallsBegin(s); call != CallsEnd(s); ++call) {
      out.AddCall(state_of[c], {call->rule, state_of[cls[call->return_state]]});
    }
  }
  out.Finish();
  return out;
}

size_t Pda::MemoryBytes() const {
  size_t bytes = next_.size() * sizeof(int32_t) + final_.size() +
                 has_bytes_.size() + calls_.size() * sizeof(PdaCall) +
                 call_offsets_.size() * sizeof(uint32_t) +
                 (rule_start_.size() + state_rule_.size()) * sizeof(int32_t);
  for (const auto& r : return_states_) bytes += r.size() * sizeof(int32_t);
  for (const auto& n : rule_names_) bytes += n.size();
  return bytes;
}

}  // namespace grammard::grammar::internal
