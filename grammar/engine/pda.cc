#include "grammar/engine/pda.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <limits>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "grammar/base/refine.h"

namespace grammard::grammar::internal {

void Pda::SetByteClasses(const std::array<bool, 256>& starts, int32_t states) {
  int32_t c = -1;
  for (int b = 0; b < 256; ++b) {
    if (b == 0 || starts[b]) class_byte_[++c] = static_cast<uint8_t>(b);
    byte_class_[b] = static_cast<uint8_t>(c);
  }
  num_classes_ = c + 1;
  // Filled by memset, not element by element: the table of a string counted
  // to 65535 has five million cells.
  static_assert(kDead == -1, "memset fills every byte of a cell with 0xFF");
  next_.resize(static_cast<size_t>(states) * num_classes_);
  std::memset(next_.data(), 0xFF, next_.size() * sizeof(int32_t));
}

void Pda::SetRun(int32_t s, int lo, int hi, int32_t target) {
  int32_t* row = next_.data() + static_cast<size_t>(s) * num_classes_;
  std::fill(row + byte_class_[lo], row + byte_class_[hi] + 1, target);
}

void Pda::ComputeHasBytes() {
  has_bytes_.assign(num_states(), 0);
  for (int32_t s = 0; s < num_states(); ++s) {
    const int32_t* row = next_.data() + static_cast<size_t>(s) * num_classes_;
    has_bytes_[s] = std::any_of(row, row + num_classes_,
                                [](int32_t t) { return t != kDead; });
  }
}

void Pda::FindReturnStates() {
  // Return states seen through tail calls: a rule tail-called from R finds
  // whatever R finds below it. Grows to a fixpoint (tail calls may cycle).
  return_states_.assign(num_rules(), {});
  std::vector<std::vector<int32_t>> tail_callers(num_rules());
  for (int32_t s = 0; s < num_states(); ++s) {
    for (const PdaCall* c = CallsBegin(s); c != CallsEnd(s); ++c) {
      if (IsTailCall(*c)) {
        tail_callers[c->rule].push_back(StateRule(s));
      } else {
        return_states_[c->rule].push_back(c->return_state);
      }
    }
  }
  // A rule tail-calls another from many states, and itself (an object's
  // state that an optional member leaves unchanged): each caller once.
  for (int32_t r = 0; r < num_rules(); ++r) {
    std::vector<int32_t>& callers = tail_callers[r];
    std::sort(callers.begin(), callers.end());
    callers.erase(std::unique(callers.begin(), callers.end()), callers.end());
    callers.erase(std::remove(callers.begin(), callers.end(), r),
                  callers.end());
  }
  // Sorted once, then again only where tail callers add states: a string
  // counted to 32767 has that many return states for its character.
  for (std::vector<int32_t>& mine : return_states_) {
    if (!std::is_sorted(mine.begin(), mine.end())) {
      std::sort(mine.begin(), mine.end());
    }
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < num_rules(); ++r) {
      if (tail_callers[r].empty()) continue;
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

Pda Pda::Minimize(const RawPda& raw) {
  const int32_t n = raw.num_states();
  // Start from (rule, final): moves and calls never leave a rule.
  std::vector<int32_t> initial(n);
  for (int32_t s = 0; s < n; ++s) {
    initial[s] = 2 * raw.state_rule[s] + raw.final[s];
  }
  const int32_t initial_classes =
      2 * static_cast<int32_t>(raw.rule_names.size());
  const Predecessors pred = PredecessorsOf(n, [&](int32_t s, auto&& f) {
    for (int32_t k = raw.runs_begin[s]; k < raw.runs_begin[s + 1]; ++k) {
      if (raw.runs[k].second != kDead) f(raw.runs[k].second);
    }
    for (int32_t k = raw.calls_begin[s]; k < raw.calls_begin[s + 1]; ++k) {
      f(raw.calls[k].return_state);
    }
  });
  // Past this many signature ints merging is not worth its time: keep
  // every state.
  constexpr int64_t kMaxWork = int64_t{1} << 24;
  Refinement refined = Refine(
      std::move(initial), initial_classes, pred,
      std::numeric_limits<int64_t>::max(), kMaxWork,
      [&](int32_t s, const std::vector<int32_t>& cls,
          std::vector<int32_t>* sig) {
        AppendRunClasses(
            raw.runs, raw.runs_begin[s], raw.runs_begin[s + 1],
            [&](int32_t t) { return cls[t]; }, sig);
        // At most one call per rule, in rule order.
        sig->push_back(-3);
        for (int32_t k = raw.calls_begin[s]; k < raw.calls_begin[s + 1]; ++k) {
          sig->push_back(raw.calls[k].rule);
          sig->push_back(cls[raw.calls[k].return_state]);
        }
      });
  std::vector<int32_t> cls = std::move(refined.cls);
  int32_t count = 0;
  if (refined.stable) {
    // Ids of the classes that have states, numbered densely.
    std::vector<int32_t> dense(refined.classes, -1);
    for (int32_t& c : cls) {
      if (dense[c] < 0) dense[c] = count++;
      c = dense[c];
    }
  } else {
    for (int32_t s = 0; s < n; ++s) cls[s] = s;
    count = n;
  }

  std::vector<int32_t> rep(count, -1);
  for (int32_t s = 0; s < n; ++s) {
    if (rep[cls[s]] < 0) rep[cls[s]] = s;
  }
  // New state numbers: each rule's start first, so that state r stays rule
  // r's start, then the other classes in order.
  std::vector<int32_t> state_of(count, -1), class_of;
  class_of.reserve(count);
  auto number = [&](int32_t c) {
    if (state_of[c] >= 0) return;
    state_of[c] = static_cast<int32_t>(class_of.size());
    class_of.push_back(c);
  };
  for (size_t r = 0; r < raw.rule_names.size(); ++r) number(cls[r]);
  for (int32_t c = 0; c < count; ++c) number(c);

  Pda out;
  out.rule_names_ = raw.rule_names;
  out.root_rule_ = raw.root_rule;
  out.rule_start_.resize(raw.rule_names.size());
  for (size_t r = 0; r < raw.rule_names.size(); ++r) {
    out.rule_start_[r] = state_of[cls[r]];
  }
  out.final_.resize(count);
  out.state_rule_.resize(count);
  out.has_bytes_.assign(count, 0);
  // A row changes only where a run begins (runs cover every byte) whose
  // target, once merged, differs from the run before it.
  auto merged = [&](int32_t t) { return t == kDead ? kDead : cls[t]; };
  std::array<bool, 256> starts{};
  for (int32_t c : class_of) {
    const int32_t s = rep[c];
    for (int32_t k = raw.runs_begin[s] + 1; k < raw.runs_begin[s + 1]; ++k) {
      if (merged(raw.runs[k].second) != merged(raw.runs[k - 1].second)) {
        starts[raw.runs[k].first] = true;
      }
    }
  }
  out.SetByteClasses(starts, count);
  out.call_offsets_.assign(1, 0);
  for (int32_t i = 0; i < count; ++i) {
    const int32_t s = rep[class_of[i]];
    out.final_[i] = raw.final[s];
    out.state_rule_[i] = raw.state_rule[s];
    for (int32_t k = raw.runs_begin[s]; k < raw.runs_begin[s + 1]; ++k) {
      const auto [first, t] = raw.runs[k];
      if (t == kDead) continue;
      const int32_t last =
          k + 1 < raw.runs_begin[s + 1] ? raw.runs[k + 1].first - 1 : 255;
      out.SetRun(i, first, last, state_of[cls[t]]);
      out.has_bytes_[i] = 1;
    }
    for (int32_t k = raw.calls_begin[s]; k < raw.calls_begin[s + 1]; ++k) {
      out.calls_.push_back(
          {raw.calls[k].rule, state_of[cls[raw.calls[k].return_state]]});
    }
    out.call_offsets_.push_back(static_cast<uint32_t>(out.calls_.size()));
  }
  out.FindReturnStates();
  return out;
}

namespace {

// Rules that may complete without reading a byte, through their own final
// start or calls of such rules: a fixpoint over the rules' byte-free paths.
std::vector<bool> NullableRules(const Pda& pda) {
  std::vector<bool> nullable(pda.num_rules(), false);
  std::vector<int32_t> work;
  std::vector<bool> seen(pda.num_states(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < pda.num_rules(); ++r) {
      if (nullable[r]) continue;
      work.assign({pda.RuleStart(r)});
      std::vector<int32_t> visited;
      while (!work.empty() && !nullable[r]) {
        const int32_t s = work.back();
        work.pop_back();
        if (seen[s]) continue;
        seen[s] = true;
        visited.push_back(s);
        nullable[r] = pda.IsFinal(s);
        for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s); ++c)
          if (nullable[c->rule]) work.push_back(c->return_state);
      }
      for (int32_t s : visited) seen[s] = false;
      changed |= nullable[r];
    }
  }
  return nullable;
}

}  // namespace

Pda::Alike Pda::AlikeUpTo(int32_t rule, int32_t depth, int64_t max_work,
                          int32_t min_depth) const {
  Alike out;
  // Counted first, far cheaper than walking the rule: a string of maxLength
  // 65535 has a state per count, and walking them took 17 ms for nothing.
  if (std::count(state_rule_.begin(), state_rule_.end(), rule) >
      max_work / (min_depth + 1)) {
    out.depth = -1;
    return out;
  }
  // The rule's states: all reachable from its start by bytes and returns.
  std::vector<bool> in_rule(num_states(), false);
  std::vector<int32_t> work{RuleStart(rule)};
  in_rule[RuleStart(rule)] = true;
  auto reach = [&](int32_t t) {
    if (t != kDead && !in_rule[t]) {
      in_rule[t] = true;
      work.push_back(t);
    }
  };
  while (!work.empty()) {
    const int32_t s = work.back();
    work.pop_back();
    out.states.push_back(s);
    for (int32_t c = 0; c < num_classes_; ++c) reach(Next(s, ClassByte(c)));
    for (const PdaCall* c = CallsBegin(s); c != CallsEnd(s); ++c)
      reach(c->return_state);
  }
  std::sort(out.states.begin(), out.states.end());
  const auto n = static_cast<int32_t>(out.states.size());
  depth = static_cast<int32_t>(std::min<int64_t>(depth, max_work / n - 1));
  out.depth = depth;
  std::vector<int32_t> index(num_states(), -1);
  for (int32_t i = 0; i < n; ++i) index[out.states[i]] = i;
  auto index_of = [&](int32_t s) { return index[s]; };
  // Moves as indices into states: byte runs and calls (rule, return state,
  // whether the rule may match nothing).
  const std::vector<bool> nullable = NullableRules(*this);
  std::vector<std::pair<int32_t, int32_t>> runs;
  std::vector<int32_t> runs_begin(n + 1, 0);
  struct Call {
    int32_t rule, to;
    bool nullable;
  };
  std::vector<Call> calls;
  std::vector<int32_t> calls_begin(n + 1, 0);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t s = out.states[i];
    AppendRuns(*this, s, index_of, &runs);
    runs_begin[i + 1] = static_cast<int32_t>(runs.size());
    for (const PdaCall* c = CallsBegin(s); c != CallsEnd(s); ++c)
      calls.push_back({c->rule, index_of(c->return_state), nullable[c->rule]});
    calls_begin[i + 1] = static_cast<int32_t>(calls.size());
  }
  // Classes as a tree of splits: a state's class is out.leaf[i] at the
  // last level; a node stands for its class at every level from the one it
  // split off at (node_level) until it splits again. Node 0 is everything.
  out.node_parent.assign({-1});
  out.node_level.assign({-1});
  out.leaf.assign(n, 0);
  std::unordered_map<std::vector<int32_t>, int32_t, SignatureHash> ids;
  std::vector<int32_t> sig, cls(n);
  std::vector<std::pair<int32_t, int32_t>> call_sig;
  for (int32_t k = 0; k <= depth; ++k) {
    const std::vector<int32_t>& prev = out.leaf;  // the classes at k - 1
    ids.clear();
    for (int32_t i = 0; i < n; ++i) {
      sig.assign({prev[i], IsFinal(out.states[i]) ? 1 : 0});
      // After one more byte (or a call that reads at least one), the next
      // k - 1 bytes must read alike; a call that may read nothing must
      // return to the very same state. At level 0, only whether a byte
      // leads anywhere.
      call_sig.clear();
      for (int32_t j = calls_begin[i]; j < calls_begin[i + 1]; ++j) {
        const Call& c = calls[j];
        call_sig.push_back({c.rule, c.nullable ? -2 - c.to
                                    : k > 0    ? prev[c.to]
                                               : 0});
      }
      std::sort(call_sig.begin(), call_sig.end());
      for (auto [r, to] : call_sig) {
        sig.push_back(r);
        sig.push_back(to);
      }
      sig.push_back(-1 - n);
      AppendRunClasses(
          runs, runs_begin[i], runs_begin[i + 1],
          [&](int32_t t) { return k > 0 ? prev[t] : 0; }, &sig);
      cls[i] = ids.emplace(sig, static_cast<int32_t>(ids.size())).first->second;
    }
    // A node whose states now fall into several classes gets a child each.
    std::unordered_map<int32_t, int32_t> child;        // class -> its new node
    std::unordered_map<int32_t, int32_t> first_class;  // node -> a class
    std::vector<bool> splits(out.node_parent.size(), false);
    for (int32_t i = 0; i < n; ++i) {
      auto [it, added] = first_class.emplace(prev[i], cls[i]);
      if (!added && it->second != cls[i]) splits[prev[i]] = true;
    }
    bool split = false;
    std::vector<int32_t> next(n);
    for (int32_t i = 0; i < n; ++i) {
      next[i] = prev[i];
      if (!splits[prev[i]]) continue;
      split = true;
      auto [it, added] =
          child.emplace(cls[i], static_cast<int32_t>(out.node_parent.size()));
      if (added) {
        out.node_parent.push_back(prev[i]);
        out.node_level.push_back(k);
      }
      next[i] = it->second;
    }
    out.leaf = std::move(next);
    // No split after level 0: every deeper level is this one.
    if (k > 0 && !split) break;
  }
  return out;
}

int32_t Pda::Alike::SharedDepth(int32_t a, int32_t b) const {
  if (depth < 0) return -1;  // nothing compared (states may be empty)
  auto leaf_of = [&](int32_t s) {
    return leaf[std::lower_bound(states.begin(), states.end(), s) -
                states.begin()];
  };
  int32_t x = leaf_of(a), y = leaf_of(b);
  if (x == y) return depth;
  // Up to the two children of the node where they part: they split off at
  // the first level that tells them apart.
  while (node_parent[x] != node_parent[y]) {
    if (node_level[x] >= node_level[y]) {
      x = node_parent[x];
    } else {
      y = node_parent[y];
    }
  }
  return node_level[x] - 1;
}

size_t Pda::Alike::MemoryBytes() const {
  return (states.size() + leaf.size() + node_parent.size() +
          node_level.size()) *
         sizeof(int32_t);
}

size_t Pda::MemoryBytes() const {
  size_t bytes = next_.size() * sizeof(int32_t) + final_.size() +
                 has_bytes_.size() + calls_.size() * sizeof(PdaCall) +
                 call_offsets_.size() * sizeof(uint32_t) +
                 (rule_start_.size() + state_rule_.size()) * sizeof(int32_t);
  for (const auto& r : return_states_) bytes += r.size() * sizeof(int32_t);
  for (const auto& n : rule_names_) bytes += n.size();
  return bytes + distinct_.size() + inside_distinct_.size() +
         member_bit_.size() * sizeof(int16_t) +
         (required_.size() + guard_.size()) * sizeof(MemberSet) +
         dispatch_.size() + calls_guarded_.size() + inside_checking_.size() +
         may_read_checked_.size() +
         (max_chars_.size() + bound_.size() + max_char_jump_.size() +
          chars_base_.size() + chars_to_end_.size()) *
             sizeof(int32_t);
}

}  // namespace grammard::grammar::internal

namespace grammard::grammar::internal {
namespace {

// A run of bytes [lo, hi] leading to one state: rows are mostly dead, and a
// JSON string's row is a few runs.
struct ByteRun {
  uint8_t lo;
  uint8_t hi;
  uint16_t unused;
  int32_t target;
};

bool InRange(int32_t v, int32_t n) { return v >= 0 && v < n; }

}  // namespace

void Pda::Save(ByteWriter* out) const {
  out->Put<int32_t>(num_states());
  out->Put<int32_t>(num_rules());
  out->Put<int32_t>(root_rule_);
  std::vector<uint32_t> run_offsets = {0};
  std::vector<ByteRun> runs;
  std::vector<std::pair<int32_t, int32_t>> row;
  for (int32_t s = 0; s < num_states(); ++s) {
    row.clear();
    AppendRuns(
        *this, s, [](int32_t t) { return t; }, &row);
    for (size_t k = 0; k < row.size(); ++k) {
      const auto [first, t] = row[k];
      if (t < 0) continue;
      const int32_t last = k + 1 < row.size() ? row[k + 1].first - 1 : 255;
      runs.push_back(
          {static_cast<uint8_t>(first), static_cast<uint8_t>(last), 0, t});
    }
    run_offsets.push_back(static_cast<uint32_t>(runs.size()));
  }
  out->PutVector(run_offsets);
  out->PutVector(runs);
  out->PutVector(final_);
  out->PutVector(calls_);
  out->PutVector(call_offsets_);
  out->PutVector(rule_start_);
  out->PutVector(state_rule_);
  for (const std::string& name : rule_names_) out->PutString(name);
  for (const std::vector<int32_t>& r : return_states_) out->PutVector(r);
  out->PutVector(distinct_);
  out->PutVector(member_bit_);
  out->PutVector(required_);
  out->PutVector(guard_);
  out->PutVector(dispatch_);
  out->PutVector(max_chars_);
}

void Pda::MarkDistinct(const std::vector<uint8_t>& distinct) {
  distinct_.clear();
  inside_distinct_.clear();
  if (std::find_if(distinct.begin(), distinct.end(),
                   [](uint8_t d) { return d != 0; }) == distinct.end()) {
    return;
  }
  // Tail calls are found anew below (FindReturnStates).
  distinct_.assign(distinct.begin(), distinct.end());
  inside_distinct_ = Reached(distinct_, /*callees=*/true);
  FindReturnStates();
}

void Pda::MarkMembers(const std::vector<int16_t>& member_bit,
                      const std::vector<MemberSet>& required,
                      const std::vector<MemberSet>& guard,
                      const std::vector<uint8_t>& dispatch) {
  member_bit_.clear();
  required_.clear();
  guard_.clear();
  dispatch_.clear();
  calls_guarded_.clear();
  inside_checking_.clear();
  may_read_checked_.clear();
  const bool any = std::any_of(member_bit.begin(), member_bit.end(),
                               [](int16_t b) { return b >= 0; }) ||
                   std::any_of(required.begin(), required.end(),
                               [](const MemberSet& r) { return !r.empty(); });
  if (!any) return;
  member_bit_.assign(member_bit.begin(), member_bit.end());
  required_.assign(required.begin(), required.end());
  guard_.assign(guard.begin(), guard.end());
  dispatch_.assign(dispatch.begin(), dispatch.end());
  calls_guarded_.assign(num_rules(), 0);
  for (int32_t s = 0; s < num_states(); ++s) {
    for (const PdaCall* c = CallsBegin(s); c != CallsEnd(s); ++c) {
      if (!guard_[c->rule].empty()) calls_guarded_[StateRule(s)] = 1;
    }
  }
  std::vector<uint8_t> checking(num_rules(), 0);
  for (int32_t r = 0; r < num_rules(); ++r) {
    checking[r] = !required_[r].empty() || calls_guarded_[r];
  }
  inside_checking_ = Reached(checking, /*callees=*/true);
  may_read_checked_ = Reached(checking, /*callees=*/false);
  FindReturnStates();
}

absl::Status Pda::MarkCountedChars(const std::vector<int32_t>& max_chars) {
  max_chars_.clear();
  bound_.clear();
  max_char_jump_.clear();
  chars_base_.clear();
  chars_to_end_.clear();
  if (std::none_of(max_chars.begin(), max_chars.end(),
                   [](int32_t m) { return m >= 0; })) {
    return absl::OkStatus();
  }
  // The rules reading a counted string: the counted rules and those they
  // reach by calls, each of which must be a tail call (the automaton of a
  // long pattern keeps some of its states as rules, called at its end), so
  // that the string's count passes from frame to frame.
  std::vector<int32_t> owner(num_rules(), -1);
  std::vector<int32_t> work;
  for (int32_t r = 0; r < num_rules(); ++r) {
    if (max_chars[r] >= 0) {
      owner[r] = r;
      work.push_back(r);
    }
  }
  std::vector<std::vector<int32_t>> states_of(num_rules());
  for (int32_t s = 0; s < num_states(); ++s)
    states_of[StateRule(s)].push_back(s);
  while (!work.empty()) {
    const int32_t r = work.back();
    work.pop_back();
    for (int32_t s : states_of[r]) {
      for (const PdaCall* c = CallsBegin(s); c != CallsEnd(s); ++c) {
        if (!IsTail(c->return_state)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "rule \"", RuleName(r), "\" reads a counted string but calls \"",
              RuleName(c->rule), "\" before its end"));
        }
        if (owner[c->rule] == owner[r]) continue;
        if (owner[c->rule] >= 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "rule \"", RuleName(c->rule), "\" reads the strings of both \"",
              RuleName(owner[c->rule]), "\" and \"", RuleName(owner[r]), "\""));
        }
        owner[c->rule] = owner[r];
        work.push_back(c->rule);
      }
    }
  }
  // No other rule may call them: their frames would count from nothing.
  for (int32_t s = 0; s < num_states(); ++s) {
    for (const PdaCall* c = CallsBegin(s); c != CallsEnd(s); ++c) {
      if (owner[c->rule] >= 0 && max_chars[c->rule] < 0 &&
          owner[StateRule(s)] != owner[c->rule]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rule \"", RuleName(c->rule), "\" reads a counted string but \"",
            RuleName(StateRule(s)), "\" calls it too"));
      }
    }
  }
  constexpr int K = CharPhase::kCount;
  std::vector<int32_t> states;  // of counting rules, by their base / K
  chars_base_.assign(num_states(), -1);
  bound_.assign(num_rules(), -1);
  for (int32_t r = 0; r < num_rules(); ++r) {
    if (owner[r] < 0) continue;
    bound_[r] = max_chars[owner[r]];
    for (int32_t s : states_of[r]) {
      chars_base_[s] = static_cast<int32_t>(states.size()) * K;
      states.push_back(s);
    }
  }
  max_chars_ = max_chars;
  max_char_jump_.assign(num_rules(), 0);
  // One byte per run of a byte class that steps every phase alike: every
  // state moves alike on a class, and CharPhase::Step tells apart only
  // these bytes.
  std::vector<uint8_t> reps;
  auto kind = [](int b) {
    return b == '\\'            ? 1
           : b == '"'           ? 2
           : b == 'u'           ? 3
           : (b & 0xC0) == 0x80 ? 4
                                : 0;
  };
  for (int b = 0; b < 256; ++b) {
    if (b == 0 ||
        ByteClass(static_cast<uint8_t>(b)) !=
            ByteClass(static_cast<uint8_t>(b - 1)) ||
        kind(b) != kind(b - 1)) {
      reps.push_back(static_cast<uint8_t>(b));
    }
  }
  // (state, phase) nodes reached from the counted rules' starts, and the
  // moves between them (a tail call: to the callee's start, reading
  // nothing) reversed.
  const size_t n = states.size() * K;
  std::vector<uint8_t> reached(n, 0);
  auto node = [&](int32_t s, int8_t phase) { return chars_base_[s] + phase; };
  for (int32_t r = 0; r < num_rules(); ++r) {
    if (max_chars[r] >= 0) {
      reached[node(RuleStart(r), CharPhase::kBetween)] = 1;
      work.push_back(node(RuleStart(r), CharPhase::kBetween));
    }
  }
  struct Move {
    int32_t from, to;
    int32_t weight;
  };
  std::vector<Move> moves;
  auto add = [&](int32_t u, int32_t v, int32_t weight) {
    moves.push_back({u, v, weight});
    if (!reached[v]) {
      reached[v] = 1;
      work.push_back(v);
    }
  };
  while (!work.empty()) {
    const int32_t u = work.back();
    work.pop_back();
    const int32_t s = states[u / K];
    const int8_t phase = static_cast<int8_t>(u % K);
    for (uint8_t b : reps) {
      const int32_t t = Next(s, b);
      if (t == kDead) continue;
      bool begins = false;
      const int8_t next = CharPhase::Step(phase, b, &begins);
      add(u, node(t, next), begins ? 1 : 0);
    }
    for (const PdaCall* c = CallsBegin(s); c != CallsEnd(s); ++c) {
      add(u, node(RuleStart(c->rule), phase), 0);
    }
  }
  std::vector<int32_t> into_begin(n + 1, 0);
  for (const Move& m : moves) ++into_begin[m.to + 1];
  for (size_t i = 0; i < n; ++i) into_begin[i + 1] += into_begin[i];
  std::vector<int32_t> into(moves.size());
  {
    std::vector<int32_t> fill(into_begin.begin(), into_begin.end() - 1);
    for (size_t k = 0; k < moves.size(); ++k) {
      into[fill[moves[k].to]++] = static_cast<int32_t>(k);
    }
  }
  // Fewest characters to the end: a 0-1 breadth-first walk back from the
  // final states (between characters: after the closing quote).
  chars_to_end_.assign(n, kNoEnd);
  std::deque<int32_t> queue;
  for (int32_t s : states) {
    if (IsFinal(s) && reached[node(s, CharPhase::kBetween)]) {
      chars_to_end_[node(s, CharPhase::kBetween)] = 0;
      queue.push_back(node(s, CharPhase::kBetween));
    }
  }
  while (!queue.empty()) {
    const int32_t v = queue.front();
    queue.pop_front();
    for (int32_t k = into_begin[v]; k < into_begin[v + 1]; ++k) {
      const Move& m = moves[into[k]];
      const int32_t d = chars_to_end_[v] + m.weight;
      if (d < chars_to_end_[m.from]) {
        chars_to_end_[m.from] = d;
        m.weight == 0 ? queue.push_front(m.from) : queue.push_back(m.from);
      }
    }
  }
  // The most one byte adds to count + CharsToEnd, per counted string.
  std::vector<int32_t> jump(num_rules(), 0);
  for (const Move& m : moves) {
    if (chars_to_end_[m.from] >= kNoEnd || chars_to_end_[m.to] >= kNoEnd) {
      continue;
    }
    int32_t& j = jump[owner[StateRule(states[m.from / K])]];
    j = std::max(j, m.weight + chars_to_end_[m.to] - chars_to_end_[m.from]);
  }
  for (int32_t r = 0; r < num_rules(); ++r) {
    if (owner[r] >= 0) max_char_jump_[r] = jump[owner[r]];
  }
  for (int32_t r = 0; r < num_rules(); ++r) {
    if (max_chars[r] < 0) continue;
    const int32_t least = CharsToEnd(RuleStart(r), CharPhase::kBetween);
    if (least > max_chars[r]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rule \"", RuleName(r), "\" counts at most ", max_chars[r],
          " characters, but its strings hold at least ",
          least >= kNoEnd ? std::string("infinitely many")
                          : std::to_string(least)));
    }
  }
  return absl::OkStatus();
}

std::vector<uint8_t> Pda::Reached(const std::vector<uint8_t>& from,
                                  bool callees) const {
  // Per rule, the rules it calls (callees) or is called by (callers).
  std::vector<std::vector<int32_t>> next(num_rules());
  for (int32_t s = 0; s < num_states(); ++s) {
    for (const PdaCall* c = CallsBegin(s); c != CallsEnd(s); ++c) {
      if (callees) {
        next[StateRule(s)].push_back(c->rule);
      } else {
        next[c->rule].push_back(StateRule(s));
      }
    }
  }
  std::vector<uint8_t> reached = from;
  std::vector<int32_t> work;
  for (int32_t r = 0; r < num_rules(); ++r) {
    if (reached[r]) work.push_back(r);
  }
  while (!work.empty()) {
    const int32_t r = work.back();
    work.pop_back();
    for (int32_t t : next[r]) {
      if (!reached[t]) {
        reached[t] = 1;
        work.push_back(t);
      }
    }
  }
  return reached;
}

absl::StatusOr<Pda> Pda::Load(ByteReader* in) {
  Pda pda;
  int32_t states = 0, rules = 0;
  std::vector<uint32_t> run_offsets;
  std::vector<ByteRun> runs;
  if (!in->Get(&states) || !in->Get(&rules) || !in->Get(&pda.root_rule_) ||
      states < 0 || rules <= 0 || !InRange(pda.root_rule_, rules) ||
      !in->GetVector(&run_offsets) || !in->GetVector(&runs) ||
      run_offsets.size() != static_cast<size_t>(states) + 1 ||
      run_offsets[0] != 0 || run_offsets.back() != runs.size()) {
    return in->Malformed();
  }
  std::array<bool, 256> starts{};
  for (int32_t s = 0; s < states; ++s) {
    if (run_offsets[s + 1] < run_offsets[s] ||
        run_offsets[s + 1] > runs.size()) {
      return in->Malformed();
    }
    for (uint32_t k = run_offsets[s]; k < run_offsets[s + 1]; ++k) {
      const ByteRun& r = runs[k];
      if (r.lo > r.hi || !InRange(r.target, states)) {
        return in->Malformed();
      }
      starts[r.lo] = true;
      if (r.hi < 255) starts[r.hi + 1] = true;
    }
  }
  pda.SetByteClasses(starts, states);
  for (int32_t s = 0; s < states; ++s) {
    for (uint32_t k = run_offsets[s]; k < run_offsets[s + 1]; ++k) {
      pda.SetRun(s, runs[k].lo, runs[k].hi, runs[k].target);
    }
  }
  if (!in->GetVector(&pda.final_) || !in->GetVector(&pda.calls_) ||
      !in->GetVector(&pda.call_offsets_) || !in->GetVector(&pda.rule_start_) ||
      !in->GetVector(&pda.state_rule_) ||
      pda.final_.size() != static_cast<size_t>(states) ||
      pda.call_offsets_.size() != static_cast<size_t>(states) + 1 ||
      pda.call_offsets_[0] != 0 ||
      pda.call_offsets_.back() != pda.calls_.size() ||
      pda.rule_start_.size() != static_cast<size_t>(rules) ||
      pda.state_rule_.size() != static_cast<size_t>(states)) {
    return in->Malformed();
  }
  for (int32_t s = 0; s < states; ++s) {
    if (pda.call_offsets_[s + 1] < pda.call_offsets_[s] ||
        !InRange(pda.state_rule_[s], rules)) {
      return in->Malformed();
    }
  }
  for (const PdaCall& c : pda.calls_) {
    if (!InRange(c.rule, rules) || !InRange(c.return_state, states)) {
      return in->Malformed();
    }
  }
  for (int32_t start : pda.rule_start_) {
    if (!InRange(start, states)) return in->Malformed();
  }
  pda.rule_names_.resize(rules);
  pda.return_states_.resize(rules);
  for (std::string& name : pda.rule_names_) {
    if (!in->GetString(&name)) return in->status();
  }
  for (std::vector<int32_t>& r : pda.return_states_) {
    if (!in->GetVector(&r)) return in->status();
    for (int32_t s : r) {
      if (!InRange(s, states)) return in->Malformed();
    }
  }
  std::vector<uint8_t> distinct;
  if (!in->GetVector(&distinct)) return in->status();
  if (!distinct.empty() && distinct.size() != static_cast<size_t>(rules)) {
    return in->Malformed();
  }
  std::vector<int16_t> member_bit;
  std::vector<MemberSet> required;
  std::vector<MemberSet> guard;
  std::vector<uint8_t> dispatch;
  if (!in->GetVector(&member_bit) || !in->GetVector(&required) ||
      !in->GetVector(&guard) || !in->GetVector(&dispatch)) {
    return in->status();
  }
  if (member_bit.size() != required.size() ||
      member_bit.size() != guard.size() ||
      member_bit.size() != dispatch.size() ||
      (!member_bit.empty() &&
       member_bit.size() != static_cast<size_t>(rules))) {
    return in->Malformed();
  }
  for (int16_t b : member_bit) {
    if (b < -1 || b >= MemberSet::kMax) return in->Malformed();
  }
  std::vector<int32_t> max_chars;
  if (!in->GetVector(&max_chars)) return in->status();
  if (!max_chars.empty() && max_chars.size() != static_cast<size_t>(rules)) {
    return in->Malformed();
  }
  for (int32_t m : max_chars) {
    if (m < -1) return in->Malformed();
  }
  pda.ComputeHasBytes();
  pda.MarkDistinct(distinct);
  pda.MarkMembers(member_bit, required, guard, dispatch);
  if (!pda.MarkCountedChars(max_chars).ok()) return in->Malformed();
  return pda;
}

}  // namespace grammard::grammar::internal
