#include "grammar/engine/stack.h"

#include <algorithm>
#include <functional>
#include <string_view>

#include "grammar/base/json_value_key.h"

namespace grammard::grammar::internal {

void ValueLog::AppendRecord(int32_t prev, uint64_t hash, std::string_view key) {
  NodeSide side;
  side.seen = static_cast<int32_t>(sides_.size());
  side.prev = prev;
  side.hash = hash;
  side.key_begin = static_cast<uint32_t>(keys_.size());
  keys_.append(key);
  side.key_end = static_cast<uint32_t>(keys_.size());
  records_.push_back(side.seen);
  sides_.push_back(side);
}

void ValueLog::Truncate(size_t size) {
  low_water_ = std::min(low_water_, size);
  sides_.resize(size);
  while (!records_.empty() && static_cast<size_t>(records_.back()) >= size) {
    records_.pop_back();
  }
  keys_.resize(records_.empty() ? 0 : sides_[records_.back()].key_end);
}

void StampedMap::Insert(uint64_t key, int32_t value) {
  if ((size_ + 1) * 2 > slots_.size()) {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.size() * 2, Slot{});
    const uint32_t live = gen_;
    gen_ = 1;
    size_ = 0;
    for (const Slot& slot : old) {
      if (slot.gen == live) Insert(slot.key, slot.value);
    }
  }
  for (size_t i = Hash(key);; i = (i + 1) & (slots_.size() - 1)) {
    Slot& slot = slots_[i];
    if (slot.gen != gen_) {
      slot = {key, value, gen_};
      ++size_;
      return;
    }
    if (slot.key == key) {
      slot.value = value;
      return;
    }
  }
}

int32_t Stepper::Intern(StackPool* pool, int32_t state, int32_t parent) {
  // Equal stacks must be one node, or sets would grow with every ambiguity;
  // nodes made during one step are the only candidates.
  const uint64_t key = NodeKey(state, parent);
  int32_t id = made_.Find(key);
  if (id >= 0) return id;
  id = pool->Add(state, parent);
  made_.Insert(key, id);
  return id;
}

int32_t Stepper::AddLike(StackPool* pool, int32_t state, int32_t parent,
                         int32_t from) {
  NodeSide side;
  if (from >= 0) {
    const NodeSide& was = values_.side(from);
    side.seen = was.seen;
    side.members = was.members;
    side.chars = was.chars;
    side.phase = was.phase;
  }
  values_.Append(side);
  return pool->Add(state, parent);
}

int32_t Stepper::InternLike(StackPool* pool, int32_t state, int32_t parent,
                            int32_t from, int32_t start) {
  // As Intern: two nodes of one state over one parent belong to one
  // instance, which saw one text.
  const uint64_t key = NodeKey(state, parent);
  int32_t id = made_.Find(key);
  if (id < 0) {
    id = AddLike(pool, state, parent, from);
    made_.Insert(key, id);
  }
  // A frame shared with a plain call returning to the same state (made
  // first, in this very step) is a distinct call's frame all the same.
  if (start >= 0) values_.side(id).start = start;
  return id;
}

int32_t Stepper::CountedMove(StackPool* pool, int32_t from, int32_t state,
                             uint8_t byte) {
  const Pda& pda = *pda_;
  bool begins = false;
  const int8_t phase = CharPhase::Step(values_.side(from).phase, byte, &begins);
  const int32_t chars = values_.side(from).chars + (begins ? 1 : 0);
  if (chars + pda.CharsToEnd(state, phase) >
      pda.MaxChars(pda.StateRule(state))) {
    return -1;
  }
  const int32_t id = AddLike(pool, state, (*pool)[from].parent, from);
  values_.side(id).chars = chars;
  values_.side(id).phase = phase;
  return id;
}

int32_t Stepper::Record(StackPool* pool, int32_t frame) {
  // Keyed apart from Intern's (no state is -3); several stacks ending one
  // value into the same frame share its record.
  constexpr int32_t kSeen = -2;
  const uint64_t made_key =
      (uint64_t{0xFFFFFFFDu} << 32) | static_cast<uint32_t>(frame);
  const int32_t made = made_.Find(made_key);
  if (made >= 0) return made;
  if (made == kSeen) return -1;
  const size_t start =
      std::min(text_.size(), static_cast<size_t>(values_.side(frame).start));
  key_.clear();
  AppendJsonValueKey(std::string_view(text_).substr(start), &key_);
  const uint64_t hash = std::hash<std::string_view>()(key_);
  if (Seen(values_.side(frame).seen, hash, key_)) {
    made_.Insert(made_key, kSeen);
    return -1;
  }
  const StackNode node = (*pool)[frame];
  values_.AppendRecord(values_.side(frame).seen, hash, key_);
  const int32_t id = pool->Add(node.state, node.parent);
  values_.side(id).members = values_.side(frame).members;
  made_.Insert(made_key, id);
  return id;
}

int32_t Stepper::CountMember(StackPool* pool, int32_t frame, int bit) {
  if (values_.side(frame).members.Has(bit)) return frame;
  // Keyed apart from Intern's and Record's (no state is 0xFFFFFExx).
  const uint64_t made_key =
      (uint64_t{0xFFFFFE00u | static_cast<uint32_t>(bit)} << 32) |
      static_cast<uint32_t>(frame);
  int32_t id = made_.Find(made_key);
  if (id >= 0) return id;
  NodeSide side = values_.side(frame);
  side.members.Add(bit);
  values_.Append(side);
  const StackNode node = (*pool)[frame];
  id = pool->Add(node.state, node.parent);
  made_.Insert(made_key, id);
  return id;
}

bool Stepper::Return(StackPool* pool, int32_t id, int32_t* to) {
  const Pda& pda = *pda_;
  const StackNode node = (*pool)[id];
  const int32_t rule = pda.StateRule(node.state);
  if (!values_.side(id).members.Contains(pda.RequiredMembers(rule))) {
    return false;
  }
  *to = node.parent;
  if (node.parent < 0) return true;
  if (pda.IsDistinct(rule)) {
    *to = Record(pool, *to);
    if (*to < 0) return false;
  }
  const int bit = pda.MemberBit(rule);
  if (bit >= 0) *to = CountMember(pool, *to, bit);
  return true;
}

bool Stepper::Seen(int32_t head, uint64_t hash, std::string_view key) {
  auto holds = [&](int32_t r) {
    return values_.side(r).hash == hash && values_.key(r) == key;
  };
  // Records are numbered as made, so those newer than the kept list come
  // first on the way down to it.
  constexpr int kMaxNewer = 16;
  if (seen_head_ >= 0 &&
      values_.low_water() > static_cast<size_t>(seen_head_)) {
    int32_t r = head;
    int newer = 0;
    for (; r > seen_head_ && newer < kMaxNewer; r = values_.side(r).prev) {
      if (holds(r)) return true;
      ++newer;
    }
    if (r == seen_head_) {
      auto [it, end] = seen_hashes_.equal_range(hash);
      for (; it != end; ++it) {
        if (values_.key(it->second) == key) return true;
      }
      return false;
    }
  }
  // Short lists are read as they are; longer ones are kept by hash.
  int count = 0;
  for (int32_t r = head; r >= 0 && count <= kMaxNewer;
       r = values_.side(r).prev) {
    ++count;
  }
  if (count <= kMaxNewer) {
    for (int32_t r = head; r >= 0; r = values_.side(r).prev) {
      if (holds(r)) return true;
    }
    return false;
  }
  seen_hashes_.clear();
  bool found = false;
  for (int32_t r = head; r >= 0; r = values_.side(r).prev) {
    seen_hashes_.emplace(values_.side(r).hash, r);
    found = found || holds(r);
  }
  seen_head_ = head;
  values_.MarkLowWater();
  return found;
}

template <bool kTracking>
bool Stepper::CloseChain(StackPool* pool_in, int32_t seed,
                         std::vector<int32_t>* scan, CloseFlags* flags) {
  StackPool& pool = *pool_in;
  const Pda& pda = *pda_;
  const size_t mark = scan->size();
  size_t after_seed = mark;  // where the closure of the seed's parent begins
  CloseFlags reached;
  for (int32_t id = seed;;) {
    if (id == kBottom || id == kOpen) {
      (id == kBottom ? reached.bottom : reached.open) = true;
      break;
    }
    if (id != seed) {
      const ChainMemo& m = pool.memo(id);
      if (m.count >= 0) {
        scan->insert(scan->end(), m.ids, m.ids + m.count);
        reached.bottom |= m.flags.bottom;
        reached.open |= m.flags.open;
        break;
      }
    }
    const StackNode& node = pool[id];
    if (pda.CallsBegin(node.state) != pda.CallsEnd(node.state)) return false;
    if (pda.HasBytes(node.state)) scan->push_back(id);
    if (id == seed) after_seed = scan->size();
    if (!pda.IsFinal(node.state)) break;
    // A checked return (a value ending, a member counted or required ones
    // checked) depends on the node's side: the general walk takes it.
    if constexpr (kTracking) {
      if (pda.ReturnIsChecked(pda.StateRule(node.state))) return false;
    }
    id = node.parent;
  }
  const int32_t parent = seed >= 0 ? pool[seed].parent : -1;
  const size_t count = scan->size() - after_seed;
  if (parent >= 0 && pda.IsFinal(pool[seed].state) &&
      count <= ChainMemo::kMaxIds) {
    ChainMemo& m = pool.memo(parent);
    if (m.count < 0) {
      m.count = static_cast<int8_t>(count);
      m.flags = reached;
      std::copy(scan->begin() + after_seed, scan->end(), m.ids);
    }
  }
  flags->bottom |= reached.bottom;
  flags->open |= reached.open;
  return true;
}

CloseFlags Stepper::Close(StackPool* pool, const int32_t* seeds, size_t n,
                          std::vector<int32_t>* scan) {
  return tracking_ ? CloseT<true>(pool, seeds, n, scan)
                   : CloseT<false>(pool, seeds, n, scan);
}

template <bool kTracking>
CloseFlags Stepper::CloseT(StackPool* pool_in, const int32_t* seeds, size_t n,
                           std::vector<int32_t>* scan) {
  StackPool& pool = *pool_in;
  const Pda& pda = *pda_;
  CloseFlags flags;
  const size_t mark = scan->size();
  auto overflowed = [&] {
    scan->resize(mark);
    made_.Clear();
    CloseFlags dead;
    dead.overflow = true;
    return dead;
  };
  {
    // Most closes: stacks whose tops end their rules a few times over and
    // call nothing on the way: walks up chains (remembered per caller), with
    // a call anywhere handled by the general walk below.
    bool pure = true;
    for (size_t k = 0; k < n && pure; ++k)
      pure = CloseChain<kTracking>(&pool, seeds[k], scan, &flags);
    if (pure) {
      if (n > 1) {  // chains may meet
        std::sort(scan->begin() + mark, scan->end());
        scan->erase(std::unique(scan->begin() + mark, scan->end()),
                    scan->end());
      }
      if (scan->size() - mark > kMaxScanNodes) return overflowed();
      made_.Clear();
      return flags;
    }
    scan->resize(mark);
    flags = CloseFlags();
  }
  const bool plain = !pda.has_run_time_checks();
  work_.assign(seeds, seeds + n);
  seen_.Clear();
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
    if (seen_.Find(static_cast<uint64_t>(id)) >= 0) continue;
    seen_.Insert(static_cast<uint64_t>(id), 0);
    const StackNode node = pool[id];
    if (pda.HasBytes(node.state)) {
      scan->push_back(id);
      if (scan->size() - mark > kMaxScanNodes) return overflowed();
    }
    if constexpr (!kTracking) {
      if (pda.IsFinal(node.state)) work_.push_back(node.parent);
      for (const PdaCall* c = pda.CallsBegin(node.state);
           c != pda.CallsEnd(node.state); ++c) {
        // A tail call returns straight to this node's parent.
        int32_t ret = (plain ? pda.IsTail(c->return_state) : pda.IsTailCall(*c))
                          ? node.parent
                          : Intern(&pool, c->return_state, node.parent);
        work_.push_back(Intern(&pool, pda.RuleStart(c->rule), ret));
      }
    } else {
      if (pda.IsFinal(node.state)) {
        int32_t to = node.parent;
        if (!pda.ReturnIsChecked(pda.StateRule(node.state)) ||
            Return(&pool, id, &to)) {
          work_.push_back(to);
        }
      }
      for (const PdaCall* c = pda.CallsBegin(node.state);
           c != pda.CallsEnd(node.state); ++c) {
        // A member counted already is not called again, nor a dispatch
        // whose members all are.
        if (pda.IsGuarded(c->rule) &&
            values_.side(id).members.Contains(pda.Guard(c->rule))) {
          continue;
        }
        // A distinct call always has a frame, where its values are kept.
        const bool distinct = pda.IsDistinct(c->rule);
        int32_t ret =
            pda.IsTailCall(*c)
                ? node.parent
                : InternLike(
                      &pool, c->return_state, node.parent, id,
                      distinct ? static_cast<int32_t>(text_.size()) : -1);
        // A counted string read on by a rule of its own carries its count,
        // and a dispatch its caller's members.
        work_.push_back(InternLike(
            &pool, pda.RuleStart(c->rule), ret,
            Counted(node.state) || pda.IsDispatch(c->rule) ? id : -1, -1));
      }
    }
  }
  made_.Clear();
  return flags;
}

CloseFlags Stepper::Step(StackPool* pool, const int32_t* begin,
                         const int32_t* end, uint8_t byte,
                         std::vector<int32_t>* scan) {
  return tracking_ ? StepT<true>(pool, begin, end, byte, scan)
                   : StepT<false>(pool, begin, end, byte, scan);
}

template <bool kTracking>
CloseFlags Stepper::StepT(StackPool* pool, const int32_t* begin,
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
      if constexpr (kTracking) {
        if (Counted(next)) {
          const int32_t id = CountedMove(pool, *begin, next, byte);
          if (id >= 0) scan->push_back(id);
          return {};
        }
      }
      scan->push_back(next == node.state ? *begin
                      : kTracking ? AddLike(pool, next, node.parent, *begin)
                                  : pool->Add(next, node.parent));
      return {};
    }
  }
  seeds_.clear();
  made_.Clear();
  moves_.clear();
  for (const int32_t* it = begin; it != end; ++it) {
    const StackNode node = (*pool)[*it];
    int32_t next = pda_->Next(node.state, byte);
    // A self-loop keeps the very node: a set that reads a byte back into
    // itself then comes out with the same ids, which callers can detect.
    if (next != Pda::kDead) moves_.push_back({next, node.parent, *it});
  }
  // -1: a move refused (past a counted string's bound).
  auto node_for = [&](const Move& m) {
    if constexpr (kTracking) {
      if (Counted(m.state)) return CountedMove(pool, m.from, m.state, byte);
    }
    if (m.state == (*pool)[m.from].state) return m.from;
    return kTracking ? AddLike(pool, m.state, m.parent, m.from)
                     : pool->Add(m.state, m.parent);
  };
  if (moves_.size() <= 8) {  // few: deduplicate by comparing
    for (size_t i = 0; i < moves_.size(); ++i) {
      bool dup = false;
      for (size_t j = 0; j < i && !dup; ++j) {
        dup = moves_[j].state == moves_[i].state &&
              moves_[j].parent == moves_[i].parent;
      }
      if (dup) continue;
      const int32_t id = node_for(moves_[i]);
      if (id >= 0) seeds_.push_back(id);
    }
  } else {
    for (const Move& m : moves_) {
      const uint64_t key = NodeKey(m.state, m.parent);
      int32_t id = made_.Find(key);
      if (id < 0) {
        id = node_for(m);
        if (id < 0) continue;
        made_.Insert(key, id);
      }
      seeds_.push_back(id);
    }
  }
  return CloseT<kTracking>(pool, seeds_.data(), seeds_.size(), scan);
}

void Stepper::ReadSorted(
    StackPool* pool, const int32_t* begin, const int32_t* end,
    const Vocabulary& vocab, const std::vector<int32_t>& ids,
    const std::function<void(int32_t, const TokenReach&)>& visit,
    size_t offset) {
  if (tracking_) {
    ReadSortedT<true, false>(pool, begin, end, vocab, ids, visit, offset);
  } else {
    ReadSortedT<false, false>(pool, begin, end, vocab, ids, visit, offset);
  }
}

void Stepper::ReadSortedSharingRemainders(
    StackPool* pool, const int32_t* begin, const int32_t* end,
    const Vocabulary& vocab, const std::vector<int32_t>& ids,
    const std::function<void(int32_t, const TokenReach&)>& visit) {
  if (tracking_) {
    if (pda_->has_distinct()) {
      ReadSortedT<true, false>(pool, begin, end, vocab, ids, visit, 0);
    } else {
      ReadSortedT<true, true>(pool, begin, end, vocab, ids, visit, 0);
    }
  } else {
    ReadSortedT<false, true>(pool, begin, end, vocab, ids, visit, 0);
  }
}

template <bool kTracking, bool kRemainders>
void Stepper::ReadSortedT(
    StackPool* pool, const int32_t* begin, const int32_t* end,
    const Vocabulary& vocab, const std::vector<int32_t>& ids,
    const std::function<void(int32_t, const TokenReach&)>& visit,
    size_t offset) {
  const size_t mark = pool->size();
  const size_t text_mark = text_.size();
  sorted_sets_.assign(begin, end);
  sorted_levels_.assign(1, {0, mark, {}, false, false});
  // A level whose ids are the root's (and nothing escaped on the way) reads
  // the rest of a token exactly as the root would.
  if (kRemainders) remainders_.clear();
  // The deepest root level with some of `bytes` left past it, or 0.
  const auto deepest_root = [&](std::string_view bytes) -> size_t {
    if (!kRemainders) return 0;
    for (size_t d = std::min(sorted_levels_.size(), bytes.size()); d-- > 1;) {
      if (sorted_levels_[d].root) return d;
    }
    return 0;
  };
  // The reach of the remainder of `bytes` past it, if read already.
  const auto known = [&](std::string_view bytes) -> const TokenReach* {
    const size_t d = deepest_root(bytes);
    if (d == 0) return nullptr;
    auto it = remainders_.find(bytes.substr(d));
    return it == remainders_.end() ? nullptr : &it->second;
  };
  std::string_view prev;  // the token the levels were computed for
  // Ids sorted by bytes have their spans anywhere in the vocabulary's
  // table: ask for those a few ahead before they are read (the bytes' load
  // waits on the span's). MaskBench's mask time fell by a tenth.
  constexpr size_t kSpanAhead = 16, kBytesAhead = 8;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i + kSpanAhead < ids.size()) vocab.PrefetchSpan(ids[i + kSpanAhead]);
    if (i + kBytesAhead < ids.size()) vocab.PrefetchBytes(ids[i + kBytesAhead]);
    const int32_t id = ids[i];
    const std::string_view bytes = vocab.bytes(id).substr(offset);
    // Levels up to the shared prefix stay; deeper ones are dropped.
    size_t keep = 0;
    const size_t limit =
        std::min({prev.size(), bytes.size(), sorted_levels_.size() - 1});
    while (keep < limit && prev[keep] == bytes[keep]) ++keep;
    if (keep + 1 < sorted_levels_.size()) {
      if constexpr (kTracking) {
        Truncate(pool, sorted_levels_[keep + 1].pool_size, text_mark + keep);
      } else {
        pool->Truncate(sorted_levels_[keep + 1].pool_size);
      }
      sorted_sets_.resize(sorted_levels_[keep + 1].sets_begin);
      sorted_levels_.resize(keep + 1);
    }
    prev = bytes;
    const TokenReach* reach = known(bytes);
    // Step on while the sets live; a token whose prefix died stops there.
    while (reach == nullptr && sorted_levels_.size() <= bytes.size() &&
           sorted_levels_.back().sets_begin < sorted_sets_.size()) {
      const size_t from = sorted_levels_.back().sets_begin;
      const size_t from_end = sorted_sets_.size();
      SortedLevel level{
          from_end, pool->size(), {}, sorted_levels_.back().escaped, false};
      step_out_.clear();
      const size_t at = sorted_levels_.size() - 1;
      if constexpr (kTracking) text_.push_back(bytes[at]);
      level.flags = StepT<kTracking>(
          pool, sorted_sets_.data() + from, sorted_sets_.data() + from_end,
          static_cast<uint8_t>(bytes[at]), &step_out_);
      level.escaped |= level.flags.open;
      level.root = kRemainders && !level.escaped &&
                   step_out_.size() == static_cast<size_t>(end - begin) &&
                   std::equal(step_out_.begin(), step_out_.end(), begin);
      sorted_sets_.insert(sorted_sets_.end(), step_out_.begin(),
                          step_out_.end());
      sorted_levels_.push_back(level);
      if (level.root) reach = known(bytes);
    }
    if (reach != nullptr) {
      visit(id, *reach);
      continue;
    }
    const SortedLevel& last = sorted_levels_.back();
    const TokenReach read{sorted_levels_.size() - 1 == bytes.size(),
                          last.sets_begin < sorted_sets_.size(), last.flags,
                          last.escaped};
    visit(id, read);
    if (const size_t d = deepest_root(bytes); d != 0) {
      remainders_.emplace(bytes.substr(d), read);
    }
  }
  if constexpr (kTracking) {
    Truncate(pool, mark, text_mark);
  } else {
    pool->Truncate(mark);
  }
}

}  // namespace grammard::grammar::internal
