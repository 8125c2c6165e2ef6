#include "grammar/matcher.h"

#include <algorithm>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "grammar/engine/grammar_data.h"

namespace grammard::grammar {

using internal::kBottom;
using internal::StackNode;

GrammarMatcher::GrammarMatcher(CompiledGrammar grammar)
    : grammar_(std::move(grammar)), stepper_(grammar_.data().pda) {
  Start();
}

void GrammarMatcher::Start() {
  pool_.Clear();
  scan_.clear();
  history_.clear();
  terminated_ = false;
  const internal::Pda& pda = grammar_.data().pda;
  if (pda.has_run_time_checks()) stepper_.Track();
  int32_t root = stepper_.Add(&pool_, pda.RuleStart(pda.root_rule()), kBottom);
  internal::CloseFlags flags = stepper_.Close(&pool_, &root, 1, &scan_);
  history_.push_back({0, scan_.size(), pool_.size(), 0, flags.bottom, false});
}

void GrammarMatcher::Reset() { Start(); }

size_t GrammarMatcher::MemoryBytes() const {
  // The scratch a mask keeps counts too: in a very ambiguous object the
  // check keys reach 128 KB each, and a read's token lists the vocabulary's
  // size.
  const size_t ids = tmp_a_.capacity() + tmp_b_.capacity() + tops_.capacity() +
                     reading_.capacity() + check_allowed_.capacity();
  const size_t scratch =
      ids * sizeof(int32_t) +
      sets_.capacity() * sizeof(const internal::TokenSet*) +
      reads_.capacity() * sizeof(Read) +
      risky_sets_.capacity() * sizeof(risky_sets_[0]) +
      risky_keyed_.capacity() * sizeof(risky_keyed_[0]) +
      (check_key_.capacity() + next_check_key_.capacity()) * sizeof(int64_t);
  return pool_.MemoryBytes() + scan_.capacity() * sizeof(int32_t) +
         history_.capacity() * sizeof(Position) + scratch +
         (stepper_.tracking()
              ? stepper_.text().capacity() + stepper_.values().MemoryBytes()
              : 0);
}

bool GrammarMatcher::CanTerminate() const { return history_.back().can_end; }

absl::Status GrammarMatcher::Advance(std::string_view bytes) {
  if (terminated_) {
    return absl::FailedPreconditionError("the matcher has already terminated");
  }
  const size_t pool_mark = pool_.size();
  const size_t text_mark = stepper_.text().size();
  tmp_a_.assign(scan_begin(), scan_end());
  bool can_end = history_.back().can_end;
  for (size_t i = 0; i < bytes.size(); ++i) {
    tmp_b_.clear();
    internal::CloseFlags flags =
        stepper_.Read(&pool_, tmp_a_.data(), tmp_a_.data() + tmp_a_.size(),
                      static_cast<uint8_t>(bytes[i]), &tmp_b_);
    can_end = flags.bottom;
    if (flags.overflow) {
      stepper_.Truncate(&pool_, pool_mark, text_mark);
      return absl::ResourceExhaustedError(
          absl::StrCat("byte ", i, " of ", bytes.size(),
                       ": the grammar is too ambiguous here (more than ",
                       internal::kMaxScanNodes, " parse stacks)"));
    }
    if (tmp_b_.empty() && !(can_end && i + 1 == bytes.size())) {
      stepper_.Truncate(&pool_, pool_mark, text_mark);
      return absl::InvalidArgumentError(absl::StrCat(
          "byte ", i, " of ", bytes.size(), " is not allowed by the grammar"));
    }
    tmp_a_.swap(tmp_b_);
  }
  size_t begin = scan_.size();
  scan_.insert(scan_.end(), tmp_a_.begin(), tmp_a_.end());
  history_.push_back({begin, scan_.size(), pool_.size(), stepper_.text().size(),
                      can_end, false});
  return absl::OkStatus();
}

absl::Status GrammarMatcher::AcceptToken(int32_t id) {
  const Vocabulary& vocab = grammar_.vocabulary();
  if (id < 0 || id >= vocab.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token ", id, " is outside the vocabulary of ", vocab.size()));
  }
  if (terminated_) {
    return absl::FailedPreconditionError(
        absl::StrCat("token ", id, " after the end of the sequence"));
  }
  if (vocab.is_eos(id)) {
    if (!CanTerminate()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "end-of-sequence token ", id, " before the grammar is complete"));
    }
    Position p = history_.back();
    p.terminated = true;
    history_.push_back(p);
    terminated_ = true;
    return absl::OkStatus();
  }
  if (vocab.kind(id) != TokenKind::kText || vocab.bytes(id).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token ", id, " is not text"));
  }
  absl::Status s = Advance(vocab.bytes(id));
  if (!s.ok()) {
    // Keeps ResourceExhausted (too ambiguous) apart from a refused token.
    const absl::StatusCode code =
        s.code() == absl::StatusCode::kResourceExhausted
            ? s.code()
            : absl::StatusCode::kInvalidArgument;
    return absl::Status(
        code,
        absl::StrCat("token ", id, " is not allowed here: ", s.message()));
  }
  return s;
}

absl::Status GrammarMatcher::AcceptString(std::string_view bytes) {
  return Advance(bytes);
}

absl::Status GrammarMatcher::Rollback(int32_t k) {
  if (k < 0 || k > num_accepted()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot roll back ", k, " tokens: ", num_accepted(), " were accepted"));
  }
  history_.resize(history_.size() - k);
  const Position& p = history_.back();
  scan_.resize(p.scan_end);
  stepper_.Truncate(&pool_, p.pool_size, p.text_size);
  terminated_ = p.terminated;
  return absl::OkStatus();
}

int32_t GrammarMatcher::ValidateTokens(const std::vector<int32_t>& draft) {
  int32_t n = 0;
  while (n < static_cast<int32_t>(draft.size()) && AcceptToken(draft[n]).ok())
    ++n;
  Rollback(n).IgnoreError();  // n tokens were just accepted
  return n;
}

void GrammarMatcher::PlanMask() {
  const internal::GrammarData& data = grammar_.data();
  sets_.clear();
  reads_.clear();
  in_value_ = false;
  checking_ = false;
  risky_sets_.clear();
  risky_keyed_.clear();
  counted_slack_ = INT32_MAX;
  if (terminated_) return;
  if (data.pda.has_counted_chars()) {
    // A token of n bytes adds at most n times the rule's jump to its
    // string's count plus the least still to come (Pda::MaxCharJump).
    const internal::ValueLog& log = stepper_.values();
    for (const int32_t* it = scan_begin(); it != scan_end(); ++it) {
      const int32_t state = pool_[*it].state;
      const int32_t rule = data.pda.StateRule(state);
      const int32_t max = data.pda.MaxChars(rule);
      const int32_t jump = data.pda.MaxCharJump(rule);
      if (max < 0 || jump == 0) continue;
      const internal::NodeSide& side = log.side(*it);
      const int32_t slack =
          max - side.chars - data.pda.CharsToEnd(state, side.phase);
      counted_slack_ = std::min(counted_slack_, slack / jump);
    }
    if (counted_slack_ >= data.index->max_token_length()) {
      counted_slack_ = INT32_MAX;
    }
  }
  if (data.pda.has_distinct()) {
    for (const int32_t* it = scan_begin(); it != scan_end() && !in_value_;
         ++it) {
      in_value_ = InValue(*it);
    }
  }
  if (data.pda.has_members()) {
    for (const int32_t* it = scan_begin(); it != scan_end() && !checking_;
         ++it) {
      checking_ =
          data.pda.MayReadChecked(data.pda.StateRule(pool_[*it].state)) ||
          InCheckingFrame(*it);
    }
  }
  // Whether a rule's own reading may end a rule requiring members or call a
  // once member (then its sets may hold tokens the frames refuse).
  const auto risky = [&](int32_t node) {
    return checking_ &&
           data.pda.MayReadChecked(data.pda.StateRule(pool_[node].state));
  };
  if (scan_end() - scan_begin() > 1) {
    tops_.clear();
    for (const int32_t* it = scan_begin(); it != scan_end(); ++it) {
      tops_.push_back(pool_[*it].state);
    }
    data.table.WalkTogether(tops_.data(), tops_.size());
  }
  for (const int32_t* it = scan_begin(); it != scan_end(); ++it) {
    const StackNode node = pool_[*it];
    const internal::StateTokens* t = data.table.For(node.state);
    if (!t->accepted.empty()) sets_.push_back(&t->accepted);
    // A token read within a rule that is not checking members, and calls
    // none that is, ends no rule requiring members and calls no once member
    // (CheckRequiredMembersEndOnBytes): its sets hold until a level read in
    // such a rule, and above it.
    bool level_risky = risky(*it);
    // The top's filter, made at its first risky set (a level is risky only
    // where a grammar keeps members): a top with none needs none.
    internal::MemberCheckedTokens::Filter checked{nullptr, nullptr};
    bool made = false;
    const auto add_risky = [&](const internal::TokenSet* set) {
      if (!made) {
        made = true;
        const MemberSet& members = stepper_.values().side(*it).members;
        checked = data.member_checked.For(
            data.pda, *data.index, node.state, members,
            !data.pda.IsDispatch(data.pda.StateRule(node.state)) &&
                FramesHaveSlack(*it));
        if (checked.keyed != nullptr) {
          risky_keyed_.push_back({checked.keyed, members});
        }
      }
      risky_sets_.push_back({set, checked.bits});
    };
    if (level_risky && !t->accepted.empty()) add_risky(&t->accepted);
    // Below the root rule's frame nothing may follow.
    if (t->uncertain.empty() || node.parent == kBottom) continue;
    // Uncertain tokens depend on each stack's callers: the nearest callers'
    // states settle most of them (precomputed), the rest are read for real.
    const std::vector<int32_t>* pending = &t->uncertain;
    const internal::ContextTokens* ctx =
        data.table.Context(node.state, pool_[node.parent].state);
    int32_t caller = node.parent;
    while (ctx != nullptr) {
      if (!ctx->accepted.empty()) sets_.push_back(&ctx->accepted);
      level_risky = level_risky || risky(caller);
      if (level_risky && !ctx->accepted.empty()) add_risky(&ctx->accepted);
      pending = &ctx->uncertain;
      caller = pool_[caller].parent;
      if (pending->empty() || caller == kBottom) break;
      ctx = ctx->Context(pool_[caller].state);
    }
    if (ctx != nullptr && (pending->empty() || caller == kBottom)) continue;
    reads_.push_back({it, pending});
  }
  // Stack tops in one state (or one group of states) share their sets.
  std::sort(sets_.begin(), sets_.end());
  sets_.erase(std::unique(sets_.begin(), sets_.end()), sets_.end());
}

bool GrammarMatcher::InValue(int32_t top) const {
  // Rules no distinct rule reaches are never inside a value, so the walk
  // stops at the first frame of one (the root's, in most grammars).
  const internal::Pda& pda = grammar_.data().pda;
  for (int32_t id = top; id >= 0; id = pool_[id].parent) {
    const int32_t rule = pda.StateRule(pool_[id].state);
    if (pda.IsDistinct(rule)) return true;
    if (!pda.InsideDistinct(rule)) return false;
  }
  return false;
}

bool GrammarMatcher::AnyValueSeen() const {
  const internal::ValueLog& log = stepper_.values();
  for (const int32_t* it = scan_begin(); it != scan_end(); ++it) {
    for (int32_t id = *it; id >= 0; id = pool_[id].parent) {
      if (log.side(id).seen >= 0) return true;
    }
  }
  return false;
}

bool GrammarMatcher::CheckKey(std::vector<int64_t>* key) const {
  // A key costs a few words per node while a read steps every token it
  // reads over every stack, so even keys of thousands of nodes pay (a
  // MaskBench object held in 255 stacks at once read 93 tokens anew, 2 ms,
  // at each byte of a string). The bound keeps the two keys a matcher
  // holds under 128 KB each.
  constexpr size_t kMaxKey = size_t{1} << 14;
  key->clear();
  const internal::Pda& pda = grammar_.data().pda;
  if (pda.has_distinct()) return false;
  const internal::ValueLog& log = stepper_.values();
  // Without counted members every frame's bits are empty: not keyed.
  const int member_words = pda.has_members() ? MemberSet::kWords : 0;
  for (const int32_t* it = scan_begin(); it != scan_end(); ++it) {
    for (int32_t id = *it; id >= 0; id = pool_[id].parent) {
      const internal::NodeSide& side = log.side(id);
      key->push_back(pool_[id].state);
      for (int k = 0; k < member_words; ++k) {
        key->push_back(static_cast<int64_t>(side.members.word(k)));
      }
      key->push_back(int64_t{side.chars} << 8 |
                     static_cast<uint8_t>(side.phase));
      if (key->size() > kMaxKey) {
        key->clear();
        return false;
      }
    }
    key->push_back(INT64_MIN);  // the stack's end
  }
  return true;
}

bool GrammarMatcher::InCheckingFrame(int32_t top) const {
  const internal::Pda& pda = grammar_.data().pda;
  const internal::ValueLog& log = stepper_.values();
  for (int32_t id = top; id >= 0; id = pool_[id].parent) {
    const int32_t rule = pda.StateRule(pool_[id].state);
    if (!pda.InsideChecking(rule)) return false;
    const MemberSet& members = log.side(id).members;
    if (!members.Contains(pda.RequiredMembers(rule))) return true;
    if (!members.empty() && pda.CallsGuarded(rule)) return true;
  }
  return false;
}

bool GrammarMatcher::FramesHaveSlack(int32_t top) const {
  // Deeper stacks are read with the outside filter whole.
  constexpr int kMaxFrames = 64;
  const internal::Pda& pda = grammar_.data().pda;
  const internal::MemberCheckedTokens& checked = grammar_.data().member_checked;
  const internal::ValueLog& log = stepper_.values();
  int frames = 0;
  // A member is counted in the frame below it as it returns, so a frame
  // holds its own members and the one above it.
  int returning = -1;
  for (int32_t id = top; id >= 0; id = pool_[id].parent) {
    if (++frames > kMaxFrames) return false;
    const int32_t state = pool_[id].state;
    const int32_t rule = pda.StateRule(state);
    if (checked.counts_unguarded[state]) return false;
    MemberSet members = log.side(id).members;
    if (returning >= 0) members.Add(returning);
    for (const MemberSet& guard : checked.frame_guards[rule]) {
      if (members.Contains(guard)) return false;
    }
    returning = pda.MemberBit(rule);
  }
  return true;
}

bool GrammarMatcher::NextMaskKey(std::vector<uintptr_t>* key) {
  PlanMask();
  key->clear();
  // Inside a distinct value, a frame lacking required members or a string
  // near its counted bound, the mask depends on what was seen.
  if (!reads_.empty() || in_value_ || checking_ ||
      counted_slack_ != INT32_MAX) {
    return false;
  }
  key->push_back(reinterpret_cast<uintptr_t>(&grammar_.data()));
  key->push_back((terminated_ ? 2u : 0u) | (CanTerminate() ? 1u : 0u));
  for (const internal::TokenSet* set : sets_) {
    key->push_back(reinterpret_cast<uintptr_t>(set));
  }
  return true;
}

void GrammarMatcher::FillNextTokenMask(uint32_t* row) {
  const Vocabulary& vocab = grammar_.vocabulary();
  const int32_t words = grammar_.mask_words();
  PlanMask();
  // Bitsets first, so that the first one is copied rather than merged.
  bool clean = true;
  for (const internal::TokenSet* set : sets_) {
    if (set->is_bitset()) set->AddTo(row, words, &clean);
  }
  for (const internal::TokenSet* set : sets_) {
    if (!set->is_bitset()) set->AddTo(row, words, &clean);
  }
  if (clean) std::fill(row, row + words, 0u);
  const auto allow_readable = [row](int32_t id,
                                    const internal::Stepper::TokenReach& r) {
    if (r.readable()) row[id >> 5] |= 1u << (id & 31);
  };
  // Clears the bit the tables set for a token that needs a real read (or,
  // with no list, one refused outright), listing it.
  const auto take = [row](int32_t id, std::vector<int32_t>* reading) {
    uint32_t& word = row[id >> 5];
    if (!(word & (1u << (id & 31)))) return;
    word &= ~(1u << (id & 31));
    if (reading != nullptr) reading->push_back(id);
  };
  for (const Read& read : reads_) {
    // Only those not allowed already.
    reading_.clear();
    for (int32_t id : *read.pending) {
      if (!(row[id >> 5] & (1u << (id & 31)))) reading_.push_back(id);
    }
    stepper_.ReadSorted(&pool_, read.top, read.top + 1, vocab, reading_,
                        allow_readable);
  }
  if (in_value_) {
    // The tables allow what the grammar does; a token that may end a value
    // is allowed only if some stack survives it with the values kept apart
    // (before any was seen, only one that may end two: an array's first
    // item).
    reading_.clear();
    const internal::ValueEndingTokens& ending =
        grammar_.data().value_ending_tokens;
    for (int32_t id : AnyValueSeen() ? ending.once : ending.twice) {
      take(id, &reading_);
    }
    stepper_.ReadSorted(&pool_, scan_begin(), scan_end(), vocab, reading_,
                        allow_readable);
  }
  if (checking_) {
    // Likewise a token that may end a rule requiring members or call a once
    // member, from the sets of the levels that may (PlanMask).
    reading_.clear();
    for (const auto& [set, checked] : risky_sets_) {
      set->TakeFrom(row, checked, words, &reading_);
    }
    // And from a dispatch, the tokens whose keys meet the frame's members.
    // Those of another stack top's sets come along: a real read is exact.
    // A token whose fate the frame refuses is refused outright where its
    // top is the only one (another may read it); one it leaves open keeps
    // the tables' bit.
    const bool one_top = scan_end() - scan_begin() == 1;
    for (const auto& [keyed, members] : risky_keyed_) {
      for (const internal::DispatchTokenKeys::Group& group : keyed->groups) {
        if (!group.always && !group.key.Intersects(members)) continue;
        for (int32_t id : group.tokens) take(id, &reading_);
      }
      for (const internal::DispatchTokenKeys::Fate& fate : keyed->fates) {
        if (!fate.Refused(members)) continue;
        for (int32_t id : fate.tokens) take(id, one_top ? nullptr : &reading_);
      }
    }
    const bool keyed = CheckKey(&next_check_key_);
    if (keyed && !check_key_.empty() && next_check_key_ == check_key_) {
      for (int32_t id : check_allowed_) row[id >> 5] |= 1u << (id & 31);
    } else {
      // ReadSorted shares the steps of tokens that share a prefix (and here
      // of those that share a remainder past a string's characters).
      grammar_.data().index->SortByBytes(&reading_);
      check_allowed_.clear();
      stepper_.ReadSortedSharingRemainders(
          &pool_, scan_begin(), scan_end(), vocab, reading_,
          [&](int32_t id, const internal::Stepper::TokenReach& r) {
            if (!r.readable()) return;
            row[id >> 5] |= 1u << (id & 31);
            check_allowed_.push_back(id);
          });
      check_key_.swap(next_check_key_);
    }
  }
  if (counted_slack_ != INT32_MAX) {
    // Likewise a token long enough to pass a counted string's bound.
    reading_.clear();
    for (int32_t id : grammar_.data().index->longest_first()) {
      if (static_cast<int32_t>(vocab.bytes(id).size()) <= counted_slack_) {
        break;
      }
      take(id, &reading_);
    }
    grammar_.data().index->SortByBytes(&reading_);
    stepper_.ReadSorted(&pool_, scan_begin(), scan_end(), vocab, reading_,
                        allow_readable);
  }
  if (terminated_ || CanTerminate()) {
    for (int32_t id : vocab.eos_ids()) row[id >> 5] |= 1u << (id & 31);
  }
}

ForcedContinuation GrammarMatcher::JumpForward(size_t max_bytes) {
  ForcedContinuation out;
  if (terminated_) return out;
  const internal::Pda& pda = grammar_.data().pda;
  const size_t pool_mark = pool_.size();
  const size_t text_mark = stepper_.text().size();
  tmp_a_.assign(scan_begin(), scan_end());
  std::vector<int32_t> trial;
  auto survives = [&](uint8_t byte) {
    const size_t pool_at = pool_.size();
    const size_t text_at = stepper_.text().size();
    trial.clear();
    const internal::CloseFlags flags = stepper_.Read(
        &pool_, tmp_a_.data(), tmp_a_.data() + tmp_a_.size(), byte, &trial);
    const bool alive = !trial.empty() || flags.bottom;
    stepper_.Truncate(&pool_, pool_at, text_at);
    return alive;
  };
  bool can_end = CanTerminate();
  while (!can_end && out.bytes.size() < max_bytes && !tmp_a_.empty()) {
    int forced = -1;
    for (int b = 0; b < 256 && forced != -2; ++b) {
      for (int32_t id : tmp_a_) {
        if (pda.Next(pool_[id].state, static_cast<uint8_t>(b)) ==
            internal::Pda::kDead) {
          continue;
        }
        // Counted strings: the automaton allows bytes the count refuses,
        // so only a byte some stack survives counts.
        if (pda.has_counted_chars() && !survives(static_cast<uint8_t>(b))) {
          break;
        }
        forced = forced == -1 ? b : -2;
        break;
      }
    }
    if (forced < 0) break;
    tmp_b_.clear();
    internal::CloseFlags flags =
        stepper_.Read(&pool_, tmp_a_.data(), tmp_a_.data() + tmp_a_.size(),
                      static_cast<uint8_t>(forced), &tmp_b_);
    // The only byte the grammar allows may still end a value seen before.
    if (tmp_b_.empty() && !flags.bottom) break;
    out.bytes.push_back(static_cast<char>(forced));
    can_end = flags.bottom;
    tmp_a_.swap(tmp_b_);
  }
  stepper_.Truncate(&pool_, pool_mark, text_mark);
  const internal::TokenIndex& index = *grammar_.data().index;
  for (size_t pos = 0; pos < out.bytes.size();) {
    int32_t id = index.LongestPrefix(std::string_view(out.bytes).substr(pos));
    if (id < 0) break;
    out.token_ids.push_back(id);
    pos += grammar_.vocabulary().bytes(id).size();
  }
  return out;
}

GrammarMatcher GrammarMatcher::Fork() const {
  GrammarMatcher copy(grammar_);
  if (stepper_.tracking()) {
    // Records reach back to values read long ago and their offsets into
    // the text: the whole pool and text are copied.
    const Position& p = history_.back();
    copy.pool_ = pool_;
    copy.stepper_.values() = stepper_.values();
    copy.stepper_.text() = stepper_.text();
    copy.stepper_.Truncate(&copy.pool_, p.pool_size, p.text_size);
    copy.scan_.assign(scan_begin(), scan_end());
    copy.history_.assign(1, {0, copy.scan_.size(), p.pool_size, p.text_size,
                             p.can_end, p.terminated});
    copy.terminated_ = terminated_;
    return copy;
  }
  copy.pool_.Clear();
  copy.scan_.clear();
  copy.history_.clear();
  // Copy only the stacks of the current position, renumbered.
  std::unordered_map<int32_t, int32_t> renumber;
  std::vector<int32_t> chain;
  for (const int32_t* it = scan_begin(); it != scan_end(); ++it) {
    chain.clear();
    for (int32_t id = *it; id >= 0 && !renumber.count(id);
         id = pool_[id].parent) {
      chain.push_back(id);
    }
    for (auto c = chain.rbegin(); c != chain.rend(); ++c) {
      const StackNode& node = pool_[*c];
      int32_t parent = node.parent < 0 ? node.parent : renumber.at(node.parent);
      renumber[*c] = copy.pool_.Add(node.state, parent);
    }
    copy.scan_.push_back(renumber.at(*it));
  }
  const Position& p = history_.back();
  copy.history_.push_back(
      {0, copy.scan_.size(), copy.pool_.size(), 0, p.can_end, p.terminated});
  copy.terminated_ = terminated_;
  return copy;
}

void FillMasks(const std::vector<GrammarMatcher*>& matchers, uint32_t* masks,
               size_t stride_words, ThreadPool* pool) {
  pool->ParallelFor(static_cast<int64_t>(matchers.size()), [&](int64_t i) {
    if (matchers[i] != nullptr)
      matchers[i]->FillNextTokenMask(masks + i * stride_words);
  });
}

}  // namespace grammard::grammar
