#include "grammar/internal/pda.h"

#include <algorithm>

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
