#include "grammar/internal/stack.h"

#include <algorithm>

namespace grammard::grammar::internal {

int32_t Stepper::Intern(StackPool* pool, int32_t state, int32_t parent) {
  // Equal stacks must be one node, or sets would grow with every ambiguity;
  // nodes made during one step are the only candidates.
  for (int32_t id : made_) {
    const StackNode& node = (*pool)[id];
    if (node.state == state && node.parent == parent) return id;
  }
  int32_t id = pool->Add(state, parent);
  made_.push_back(id);
  return id;
}

CloseFlags Stepper::Close(StackPool* pool_in, const int32_t* seeds, size_t n,
                          std::vector<int32_t>* scan) {
  StackPool& pool = *pool_in;
  const Pda& pda = *pda_;
  CloseFlags flags;
  work_.assign(seeds, seeds + n);
  seen_.clear();
  while (!work_.empty()) {
    int32_t id = work_.back();
    work_.pop_back();
    if (id == kBottom) {
      flags.bottom = true;
      continue;
    }
    if (id == kOpen) {
      flags.open = true;
      continue;
    }
    if (std::find(seen_.begin(), seen_.end(), id) != seen_.end()) continue;
    seen_.push_back(id);
    const StackNode node = pool[id];
    if (pda.HasBytes(node.state)) scan->push_back(id);
    if (pda.IsFinal(node.state)) work_.push_back(node.parent);
    for (const PdaCall* c = pda.CallsBegin(node.state);
         c != pda.CallsEnd(node.state); ++c) {
      // A tail call returns straight to this node's parent.
      int32_t ret = pda.IsTail(c->return_state)
                        ? node.parent
                        : Intern(&pool, c->return_state, node.parent);
      work_.push_back(Intern(&pool, pda.RuleStart(c->rule), ret));
    }
  }
  made_.clear();
  return flags;
}

CloseFlags Stepper::Step(StackPool* pool, const int32_t* begin,
                         const int32_t* end, uint8_t byte,
                         std::vector<int32_t>* scan) {
  if (end - begin == 1) {
    // One stack top moving to a state that neither calls nor ends needs no
    // closing; a self-loop keeps the very node.
    const StackNode node = (*pool)[*begin];
    const int32_t next = pda_->Next(node.state, byte);
    if (next == Pda::kDead) return {};
    if (!pda_->IsFinal(next) &&
        pda_->CallsBegin(next) == pda_->CallsEnd(next)) {
      scan->push_back(next == node.state ? *begin
                                         : pool->Add(next, node.parent));
      return {};
    }
  }
  seeds_.clear();
  made_.clear();
  for (const int32_t* it = begin; it != end; ++it) {
    const StackNode node = (*pool)[*it];
    int32_t next = pda_->Next(node.state, byte);
    if (next != Pda::kDead) seeds_.push_back(Intern(pool, next, node.parent));
  }
  return Close(pool, seeds_.data(), seeds_.size(), scan);
}

bool Stepper::CanRead(StackPool* pool, const int32_t* begin, const int32_t* end,
                      std::string_view bytes) {
  const size_t mark = pool->size();
  buf_a_.assign(begin, end);
  bool ok = begin != end;
  for (size_t i = 0; ok && i < bytes.size(); ++i) {
    buf_b_.clear();
    CloseFlags flags = Step(pool, buf_a_.data(), buf_a_.data() + buf_a_.size(),
                            static_cast<uint8_t>(bytes[i]), &buf_b_);
    bool last = i + 1 == bytes.size();
    ok = !buf_b_.empty() || (last && (flags.bottom || flags.open));
    buf_a_.swap(buf_b_);
  }
  pool->Truncate(mark);
  return ok;
}

}  // namespace grammard::grammar::internal
