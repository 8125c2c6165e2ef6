#include "grammar/engine/distinct_values.h"

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grammar/base/member_set.h"
#include "grammar/base/scc.h"

namespace grammard::grammar::internal {
namespace {

// Per state: whether the state's rule can end from it (productive), and
// whether it can in infinitely many ways (endless), for the rules inside
// distinct values (the others stay false).
struct Completions {
  std::vector<uint8_t> productive, endless;
};

Completions Analyze(const Pda& pda) {
  const int32_t n = pda.num_states();
  Completions out;
  out.productive.assign(n, 0);
  out.endless.assign(n, 0);
  auto inside = [&](int32_t s) { return pda.InsideDistinct(pda.StateRule(s)); };
  // Predecessors by byte moves, and per rule the calls into it.
  std::vector<std::vector<int32_t>> preds(n);
  std::vector<std::vector<std::pair<int32_t, int32_t>>> calls_of(
      pda.num_rules());  // (calling state, return state)
  std::vector<std::vector<std::pair<int32_t, int32_t>>> calls_to(
      n);  // per return state: (calling state, rule called)
  for (int32_t s = 0; s < n; ++s) {
    if (!inside(s)) continue;
    int32_t last = -2;
    for (int32_t c = 0; c < pda.num_byte_classes(); ++c) {
      const int32_t t = pda.Next(s, pda.ClassByte(c));
      if (t != Pda::kDead && t != last) preds[t].push_back(s);
      last = t;
    }
    for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s); ++c) {
      calls_of[c->rule].push_back({s, c->return_state});
      calls_to[c->return_state].push_back({s, c->rule});
    }
  }
  auto start_of = [&](int32_t s) { return pda.RuleStart(pda.StateRule(s)); };
  // Productive: reverse search from final states; a call edge counts once
  // both the callee's start and the return state are productive.
  std::vector<int32_t> work;
  auto mark = [&](std::vector<uint8_t>* flags, int32_t s) {
    if (!(*flags)[s]) {
      (*flags)[s] = 1;
      work.push_back(s);
    }
  };
  for (int32_t s = 0; s < n; ++s) {
    if (inside(s) && pda.IsFinal(s)) mark(&out.productive, s);
  }
  // Return states make their callers productive once the callee's start
  // is; calls are few, so they are re-checked until nothing changes.
  for (;;) {
    while (!work.empty()) {
      const int32_t s = work.back();
      work.pop_back();
      for (int32_t p : preds[s]) mark(&out.productive, p);
    }
    for (int32_t r = 0; r < pda.num_rules(); ++r) {
      if (!out.productive[pda.RuleStart(r)]) continue;
      for (const auto& [p, ret] : calls_of[r]) {
        if (out.productive[ret]) mark(&out.productive, p);
      }
    }
    if (work.empty()) break;
  }
  // Endless: a cycle among productive states (bytes or calls), a call into
  // a rule that is endless, or a path to either. Rules that reach
  // themselves by calls are endless (left recursion is refused, so each
  // round reads bytes).
  std::vector<int32_t> begin(n + 1, 0), targets;
  for (int32_t s = 0; s < n; ++s) {
    begin[s] = static_cast<int32_t>(targets.size());
    if (!out.productive[s]) continue;
    int32_t last = -2;
    for (int32_t c = 0; c < pda.num_byte_classes(); ++c) {
      const int32_t t = pda.Next(s, pda.ClassByte(c));
      if (t != Pda::kDead && t != last && out.productive[t]) {
        targets.push_back(t);
      }
      last = t;
    }
    for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s); ++c) {
      if (out.productive[pda.RuleStart(c->rule)] &&
          out.productive[c->return_state]) {
        targets.push_back(c->return_state);
      }
    }
  }
  begin[n] = static_cast<int32_t>(targets.size());
  const Components states = StronglyConnected(begin, targets);
  for (int32_t s = 0; s < n; ++s) {
    bool loops = states.size[states.of[s]] > 1;
    for (int32_t k = begin[s]; k < begin[s + 1] && !loops; ++k) {
      loops = targets[k] == s;
    }
    if (loops) mark(&out.endless, s);
  }
  // The call graph among productive rules.
  const int32_t rules = pda.num_rules();
  std::vector<int32_t> rbegin(rules + 1, 0), rtargets;
  std::vector<std::vector<int32_t>> callees(rules);
  for (int32_t s = 0; s < n; ++s) {
    if (!out.productive[s]) continue;
    for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s); ++c) {
      if (out.productive[pda.RuleStart(c->rule)] &&
          out.productive[c->return_state]) {
        callees[pda.StateRule(s)].push_back(c->rule);
      }
    }
  }
  for (int32_t r = 0; r < rules; ++r) {
    rbegin[r] = static_cast<int32_t>(rtargets.size());
    rtargets.insert(rtargets.end(), callees[r].begin(), callees[r].end());
  }
  rbegin[rules] = static_cast<int32_t>(rtargets.size());
  const Components calls = StronglyConnected(rbegin, rtargets);
  std::vector<uint8_t> rule_endless(rules, 0);
  auto rule_is_endless = [&](int32_t r) {
    if (rule_endless[r]) return;
    rule_endless[r] = 1;
    for (const auto& [p, ret] : calls_of[r]) {
      if (out.productive[p] && out.productive[ret]) mark(&out.endless, p);
    }
  };
  for (int32_t r = 0; r < rules; ++r) {
    bool recursive = calls.size[calls.of[r]] > 1;
    for (int32_t t : callees[r]) recursive = recursive || t == r;
    if (recursive && out.productive[pda.RuleStart(r)]) rule_is_endless(r);
  }
  while (!work.empty()) {
    const int32_t s = work.back();
    work.pop_back();
    for (int32_t p : preds[s]) {
      if (out.productive[p]) mark(&out.endless, p);
    }
    for (const auto& [p, rule] : calls_to[s]) {
      if (out.productive[p] && out.productive[pda.RuleStart(rule)]) {
        mark(&out.endless, p);
      }
    }
    // A rule whose start is endless makes its callers endless too.
    if (s == start_of(s)) rule_is_endless(pda.StateRule(s));
  }
  return out;
}

}  // namespace

absl::Status CheckDistinctValuesEndless(const Pda& pda) {
  if (!pda.has_distinct()) return absl::OkStatus();
  const Completions c = Analyze(pda);
  // Rules a stack inside a value may hold with only finitely many
  // completions below: from each distinct rule, through calls whose return
  // state is not endless.
  std::vector<std::vector<int32_t>> states_of(pda.num_rules());
  for (int32_t s = 0; s < pda.num_states(); ++s) {
    if (c.productive[s]) states_of[pda.StateRule(s)].push_back(s);
  }
  // A state with finitely many completions is still fine where a stack
  // only ever reaches it by a return from a rule whose every end can go on
  // endlessly: the callee's stack is then there beside it (`"ab` may end
  // its string, or grow). Per rule, whether its ends all grow; per state,
  // whether a byte leads into it.
  std::vector<uint8_t> ends_grow(pda.num_rules(), 1), by_byte(pda.num_states());
  std::vector<std::vector<int32_t>> returned_from(pda.num_states());
  for (int32_t s = 0; s < pda.num_states(); ++s) {
    if (!c.productive[s]) continue;
    if (pda.IsFinal(s) && !(pda.HasBytes(s) && c.endless[s])) {
      ends_grow[pda.StateRule(s)] = 0;
    }
    for (int b = 0; b < 256; ++b) {
      const int32_t t = pda.Next(s, static_cast<uint8_t>(b));
      if (t != Pda::kDead) by_byte[t] = 1;
    }
    for (const PdaCall* k = pda.CallsBegin(s); k != pda.CallsEnd(s); ++k) {
      returned_from[k->return_state].push_back(k->rule);
    }
  }
  auto beside_growing = [&](int32_t s) {
    if (by_byte[s] || s == pda.RuleStart(pda.StateRule(s)) ||
        returned_from[s].empty()) {
      return false;
    }
    for (int32_t callee : returned_from[s]) {
      if (!ends_grow[callee]) return false;
    }
    return true;
  };
  std::vector<int32_t> seen(pda.num_rules(), -1), work;
  for (int32_t value = 0; value < pda.num_rules(); ++value) {
    if (!pda.IsDistinct(value)) continue;
    work.assign({value});
    seen[value] = value;
    while (!work.empty()) {
      const int32_t r = work.back();
      work.pop_back();
      for (int32_t s : states_of[r]) {
        if (pda.HasBytes(s) && !c.endless[s] && !beside_growing(s)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "the values of distinct rule '", pda.RuleName(value),
              "' may run out of distinct endings (inside rule '",
              pda.RuleName(r),
              "' a value in the making can end in finitely many ways)"));
        }
        for (const PdaCall* k = pda.CallsBegin(s); k != pda.CallsEnd(s); ++k) {
          const bool finite_below =
              pda.IsTailCall(*k) || !c.endless[k->return_state];
          if (finite_below && seen[k->rule] != value) {
            seen[k->rule] = value;
            work.push_back(k->rule);
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// Members some continuation of a state may call, a call being refused only
// where its guard is all counted: `all` where a way on needs no member (the
// state may end its rule, reads bytes outside a dispatch, which the front
// end keeps going, or calls an unguarded rule that is no dispatch).
struct Cover {
  bool all = false;
  MemberSet members;
  void Add(const Cover& c) {
    all = all || c.all;
    members.AddAll(c.members);
  }
  friend bool operator==(const Cover& a, const Cover& b) {
    return a.all == b.all && a.members == b.members;
  }
};

// What is known of a frame's members in a state: nothing (kNone), that
// none is counted (kFresh), or that some member of `guard` is not.
struct Known {
  enum Kind { kNone, kFresh, kGuard } kind = kFresh;
  MemberSet guard;
};

struct Strands {
  std::vector<uint8_t> fresh;     // per state: its frame counts no member
  std::vector<uint8_t> doomable;  // per state: some frame may strand it
};

// Per state: whether some frame's members may leave a stack in it no way
// on (every call it could go on with refused, at once or after bytes of
// its own). A dispatch's frame is its caller's as it was when the
// dispatch was called: a guarded one was called because some member of its
// guard was not counted, and nothing returns into it (every call from it is
// a tail call), so a state is safe where every member of the guard is one
// some continuation may call. An unguarded dispatch knows what its callers
// know. A state of another rule knows its frame empty until a call that may
// count a member (a counted member or a dispatch) returns into it.
Strands MayStrand(const Pda& pda) {
  const int32_t n = pda.num_states();
  auto successors = [&](int32_t s, auto&& visit) {
    int32_t last = Pda::kDead;
    for (int32_t c = 0; c < pda.num_byte_classes(); ++c) {
      const int32_t t = pda.Next(s, pda.ClassByte(c));
      if (t != Pda::kDead && t != last) visit(t);
      last = t;
    }
  };
  // A rule a counted string calls starts with its caller's side (members
  // too), so only the others start fresh.
  std::vector<uint8_t> starts_fresh(pda.num_rules(), 1);
  for (int32_t s = 0; s < n; ++s) {
    for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s); ++c) {
      if (pda.MaxChars(pda.StateRule(s)) >= 0) starts_fresh[c->rule] = 0;
    }
  }
  // Only a rule calling a dispatch may have a state it matters for: a
  // state of another rule calls no dispatch, and reads bytes, ends or calls
  // a rule that is none (a guarded call needs a byte of its own beside it,
  // CheckRequiredMembersEndOnBytes), so it cannot strand.
  std::vector<uint8_t> calls_dispatch(pda.num_rules(), 0);
  for (int32_t s = 0; s < n; ++s) {
    for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s); ++c) {
      if (pda.IsDispatch(c->rule)) calls_dispatch[pda.StateRule(s)] = 1;
    }
  }
  std::vector<uint8_t> fresh(n, 0);
  std::vector<int32_t> work;
  for (int32_t r = 0; r < pda.num_rules(); ++r) {
    if (pda.IsDispatch(r) || !starts_fresh[r] || !calls_dispatch[r]) continue;
    fresh[pda.RuleStart(r)] = 1;
    work.push_back(pda.RuleStart(r));
  }
  while (!work.empty()) {
    const int32_t s = work.back();
    work.pop_back();
    auto reach = [&](int32_t t) {
      if (!fresh[t]) {
        fresh[t] = 1;
        work.push_back(t);
      }
    };
    successors(s, reach);
    for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s); ++c) {
      if (pda.MemberBit(c->rule) < 0 && !pda.IsDispatch(c->rule)) {
        reach(c->return_state);
      }
    }
  }
  // What each dispatch knows: a guarded one its guard; an unguarded one
  // what every caller knows, kNone where a caller is another unguarded
  // dispatch (the front end makes none).
  std::vector<Known> known(pda.num_rules());
  for (int32_t r = 0; r < pda.num_rules(); ++r) {
    if (pda.IsGuarded(r)) known[r] = {Known::kGuard, pda.Guard(r)};
  }
  for (int32_t s = 0; s < n; ++s) {
    const int32_t rule = pda.StateRule(s);
    for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s); ++c) {
      Known& k = known[c->rule];
      if (!pda.IsDispatch(c->rule) || pda.IsGuarded(c->rule) ||
          k.kind == Known::kNone) {
        continue;
      }
      if (pda.IsDispatch(rule) && pda.IsGuarded(rule)) {
        k.kind = Known::kGuard;
        k.guard.AddAll(pda.Guard(rule));
      } else if (pda.IsDispatch(rule) || !fresh[s]) {
        k.kind = Known::kNone;
      }
    }
  }
  std::vector<uint8_t> doomable(n, 0);
  std::vector<uint8_t> bad_start(pda.num_rules(), 0);
  for (bool changed = true; changed;) {
    // The least covers: a guarded call covers its guard unless the
    // dispatch it calls may strand at its start.
    std::vector<Cover> cover(n);
    std::vector<int32_t> open;  // the states whose cover may still grow
    for (int32_t s = 0; s < n; ++s) {
      if (pda.IsFinal(s) ||
          (!pda.IsDispatch(pda.StateRule(s)) && pda.HasBytes(s))) {
        cover[s].all = true;
      } else {
        open.push_back(s);
      }
    }
    for (bool grew = true; grew;) {
      grew = false;
      // Backwards: states mostly move to later ones (a trie's, a rule's),
      // so a round or two settles them.
      for (auto it = open.rbegin(); it != open.rend(); ++it) {
        const int32_t s = *it;
        Cover c = cover[s];
        if (c.all) continue;
        if (pda.IsDispatch(pda.StateRule(s))) {
          successors(s, [&](int32_t t) { c.Add(cover[t]); });
        }
        for (const PdaCall* call = pda.CallsBegin(s); call != pda.CallsEnd(s);
             ++call) {
          if (pda.IsGuarded(call->rule)) {
            if (!bad_start[call->rule]) c.members.AddAll(pda.Guard(call->rule));
          } else if (pda.IsDispatch(call->rule)) {
            c.Add(cover[pda.RuleStart(call->rule)]);
          } else {
            c.all = true;
          }
        }
        if (!(c == cover[s])) {
          cover[s] = c;
          grew = true;
        }
      }
    }
    changed = false;
    for (int32_t s = 0; s < n; ++s) {
      const int32_t rule = pda.StateRule(s);
      const Known k = pda.IsDispatch(rule)
                          ? known[rule]
                          : Known{fresh[s] ? Known::kFresh : Known::kNone, {}};
      doomable[s] =
          !cover[s].all &&
          (k.kind == Known::kNone ||
           (k.kind == Known::kGuard && !cover[s].members.Contains(k.guard)));
      if (doomable[s] && s == pda.RuleStart(rule) && pda.IsGuarded(rule) &&
          pda.IsDispatch(rule) && !bad_start[rule]) {
        bad_start[rule] = 1;
        changed = true;
      }
    }
  }
  return {std::move(fresh), std::move(doomable)};
}

// The bytes of the byte classes `classes` marks.
std::array<bool, 256> BytesOfClasses(const Pda& pda,
                                     const std::vector<uint8_t>& classes) {
  std::array<bool, 256> bytes{};
  for (int b = 0; b < 256; ++b) {
    bytes[b] = classes[pda.ByteClass(static_cast<uint8_t>(b))] != 0;
  }
  return bytes;
}

// The bytes that, read from a state of a rule `from` marks, may end a rule
// `ends` marks, or a rule whose end ends one: called from one (or from such
// a rule) into a state that may end.
std::array<bool, 256> EndingBytes(const Pda& pda, std::vector<uint8_t> ends,
                                  const std::function<bool(int32_t)>& from) {
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t s = 0; s < pda.num_states(); ++s) {
      if (!ends[pda.StateRule(s)]) continue;
      for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s); ++c) {
        if (!ends[c->rule] && pda.IsFinal(c->return_state)) {
          ends[c->rule] = 1;
          changed = true;
        }
      }
    }
  }
  // A state of a rule no end reaches moves to no state that ends one
  // (byte moves stay in their rule); the others by byte class.
  std::vector<uint8_t> classes(pda.num_byte_classes(), 0);
  for (int32_t s = 0; s < pda.num_states(); ++s) {
    if (!ends[pda.StateRule(s)] || !from(pda.StateRule(s))) continue;
    for (int32_t c = 0; c < pda.num_byte_classes(); ++c) {
      const int32_t t = pda.Next(s, pda.ClassByte(c));
      if (t != Pda::kDead && pda.IsFinal(t)) classes[c] = 1;
    }
  }
  return BytesOfClasses(pda, classes);
}

// The tokens, in the index's byte order, holding one of `bytes`: a walk of
// the index's trie that takes a node's whole subtree at the first such byte
// (a tenth of reading every token's bytes).
std::vector<int32_t> TokensHolding(const TokenIndex& index,
                                   const std::array<bool, 256>& bytes) {
  std::vector<int32_t> out;
  for (int32_t n = 1; n < index.num_nodes();) {
    if (!bytes[index.node_byte(n)]) {
      ++n;
      continue;
    }
    const int32_t end = index.node_end(n);
    for (int32_t i = index.node_tokens_begin(n);
         i < index.node_tokens_begin(end); ++i) {
      out.push_back(index.id(i));
    }
    n = end;
  }
  return out;
}

}  // namespace

ValueEndingTokens TokensThatMayEndValues(const Pda& pda,
                                         const TokenIndex& index) {
  if (!pda.has_distinct()) return {};
  std::vector<uint8_t> ends(pda.num_rules(), 0);
  for (int32_t r = 0; r < pda.num_rules(); ++r) ends[r] = pda.IsDistinct(r);
  const std::array<bool, 256> bytes =
      EndingBytes(pda, std::move(ends),
                  [&](int32_t rule) { return pda.InsideDistinct(rule); });
  ValueEndingTokens out;
  out.once = TokensHolding(index, bytes);
  for (const int32_t id : out.once) {
    int held = 0;
    for (const char ch : index.vocab().bytes(id)) {
      held += bytes[static_cast<uint8_t>(ch)];
    }
    if (held >= 2) out.twice.push_back(id);
  }
  return out;
}

absl::Status CheckRequiredMembersEndOnBytes(const Pda& pda) {
  for (int32_t s = 0; s < pda.num_states(); ++s) {
    const int32_t rule = pda.StateRule(s);
    for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s); ++c) {
      if (pda.IsDispatch(rule) && !pda.IsTailCall(*c)) {
        return absl::InvalidArgumentError(
            absl::StrCat("the dispatch \"", pda.RuleName(rule), "\" calls \"",
                         pda.RuleName(c->rule), "\" other than at its end"));
      }
      if (pda.IsGuarded(c->rule) && !pda.HasBytes(s) && !pda.IsDispatch(rule)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rule \"", pda.RuleName(rule), "\" calls the guarded rule \"",
            pda.RuleName(c->rule),
            "\" from a state with no byte of its own to go on with"));
      }
    }
    if (pda.RequiredMembers(rule).empty()) continue;
    for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s); ++c) {
      if (pda.IsFinal(c->return_state)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rule \"", pda.RuleName(rule),
            "\" requires members but may end right after a call of \"",
            pda.RuleName(c->rule), "\" returns"));
      }
    }
  }
  return absl::OkStatus();
}

MemberCheckedTokens TokensThatMayCheckMembers(const Pda& pda,
                                              const TokenIndex& index) {
  if (!pda.has_members()) return {};
  std::vector<uint8_t> ends(pda.num_rules(), 0);
  for (int32_t r = 0; r < pda.num_rules(); ++r) {
    ends[r] = !pda.RequiredMembers(r).empty();
  }
  // Bytes that check members wherever a token starts, and those that do so
  // only within a dispatch (a token entering one from outside reads a byte
  // of the first kind on the way, or enters with its frame empty).
  std::array<bool, 256> outside =
      EndingBytes(pda, std::move(ends), [](int32_t) { return true; });
  std::array<bool, 256> inside = outside;
  const Strands strands = MayStrand(pda);
  // The bytes a rule may read first: from its start state, through calls
  // and the states they return to (read as if every callee could match
  // nothing, which only adds bytes). Those of guarded rules, and of
  // unguarded dispatches called where a member may have been counted.
  std::vector<uint8_t> guarded_outside(pda.num_rules(), 0);
  std::vector<uint8_t> unguarded_outside(pda.num_rules(), 0);
  std::vector<uint8_t> from_inside(pda.num_rules(), 0);
  for (int32_t s = 0; s < pda.num_states(); ++s) {
    const bool in_dispatch = pda.IsDispatch(pda.StateRule(s));
    for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s); ++c) {
      if (!pda.IsGuarded(c->rule) &&
          (!pda.IsDispatch(c->rule) || in_dispatch || strands.fresh[s])) {
        continue;
      }
      if (in_dispatch) {
        from_inside[c->rule] = 1;
      } else {
        (pda.IsGuarded(c->rule) ? guarded_outside
                                : unguarded_outside)[c->rule] = 1;
      }
    }
  }
  auto first_bytes = [&](const std::vector<uint8_t>& rules) {
    std::vector<uint8_t> classes(pda.num_byte_classes(), 0);
    std::vector<uint8_t> seen(pda.num_states(), 0);
    std::vector<int32_t> work;
    for (int32_t r = 0; r < pda.num_rules(); ++r) {
      if (rules[r] && !seen[pda.RuleStart(r)]) {
        seen[pda.RuleStart(r)] = 1;
        work.push_back(pda.RuleStart(r));
      }
    }
    while (!work.empty()) {
      const int32_t s = work.back();
      work.pop_back();
      for (int32_t c = 0; c < pda.num_byte_classes(); ++c) {
        if (pda.Next(s, pda.ClassByte(c)) != Pda::kDead) classes[c] = 1;
      }
      for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s); ++c) {
        for (int32_t t : {pda.RuleStart(c->rule), c->return_state}) {
          if (!seen[t]) {
            seen[t] = 1;
            work.push_back(t);
          }
        }
      }
    }
    return BytesOfClasses(pda, classes);
  };
  const std::array<bool, 256> ending = outside;
  const std::array<bool, 256> first_guarded = first_bytes(guarded_outside);
  const std::array<bool, 256> first_unguarded = first_bytes(unguarded_outside);
  const std::array<bool, 256> first_inside = first_bytes(from_inside);
  for (int b = 0; b < 256; ++b) {
    const bool first_outside = first_guarded[b] || first_unguarded[b];
    outside[b] = outside[b] || first_outside;
    inside[b] = inside[b] || first_outside || first_inside[b];
  }
  // And every byte that leads into a state a frame's members may strand
  // (from a state of its rule: byte moves stay in one).
  std::vector<uint8_t> may_strand(pda.num_rules(), 0);
  for (int32_t t = 0; t < pda.num_states(); ++t) {
    if (strands.doomable[t]) may_strand[pda.StateRule(t)] = 1;
  }
  std::vector<uint8_t> strand_inside(pda.num_byte_classes(), 0);
  std::vector<uint8_t> strand_outside(pda.num_byte_classes(), 0);
  for (int32_t s = 0; s < pda.num_states(); ++s) {
    if (!may_strand[pda.StateRule(s)]) continue;
    for (int32_t c = 0; c < pda.num_byte_classes(); ++c) {
      const int32_t t = pda.Next(s, pda.ClassByte(c));
      if (t == Pda::kDead || !strands.doomable[t]) continue;
      strand_inside[c] = 1;
      if (!pda.IsDispatch(pda.StateRule(t))) strand_outside[c] = 1;
    }
  }
  const std::array<bool, 256> into_inside = BytesOfClasses(pda, strand_inside);
  const std::array<bool, 256> into_outside =
      BytesOfClasses(pda, strand_outside);
  for (int b = 0; b < 256; ++b) {
    inside[b] = inside[b] || into_inside[b];
    outside[b] = outside[b] || into_outside[b];
  }
  MemberCheckedTokens out;
  // Separators: bytes that check members outside a dispatch only as the
  // first byte of a guarded call (ending nothing, stranding nothing, into
  // no dispatch state that may strand).
  std::array<bool, 256> separator{};
  for (int b = 0; b < 256; ++b) {
    separator[b] = first_guarded[b] && !first_unguarded[b] && !ending[b] &&
                   !into_outside[b] && !into_inside[b];
  }
  // Frames: rules that count members (not dispatches, which count in their
  // callers' frames), with the guards of their own calls, and the states
  // from which one may count a member by an unguarded call before any
  // guarded one.
  std::vector<uint8_t> counting(pda.num_rules(), 0);
  out.frame_guards.resize(pda.num_rules());
  for (int32_t s = 0; s < pda.num_states(); ++s) {
    const int32_t rule = pda.StateRule(s);
    if (pda.IsDispatch(rule)) continue;
    if (!pda.RequiredMembers(rule).empty()) counting[rule] = 1;
    for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s); ++c) {
      if (pda.MemberBit(c->rule) < 0 && !pda.IsDispatch(c->rule)) continue;
      counting[rule] = 1;
      if (!pda.IsGuarded(c->rule)) continue;
      std::vector<MemberSet>& guards = out.frame_guards[rule];
      if (std::find(guards.begin(), guards.end(), pda.Guard(c->rule)) ==
          guards.end()) {
        guards.push_back(pda.Guard(c->rule));
      }
    }
  }
  out.counts_unguarded.assign(pda.num_states(), 0);
  for (bool grew = true; grew;) {
    grew = false;
    for (int32_t s = pda.num_states(); s-- > 0;) {
      if (out.counts_unguarded[s] || !counting[pda.StateRule(s)]) continue;
      bool free = false;
      for (int32_t c = 0; c < pda.num_byte_classes() && !free; ++c) {
        const int32_t t = pda.Next(s, pda.ClassByte(c));
        free = t != Pda::kDead && out.counts_unguarded[t];
      }
      for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s) && !free;
           ++c) {
        const bool counts =
            pda.MemberBit(c->rule) >= 0 || pda.IsDispatch(c->rule);
        free = counts ? !pda.IsGuarded(c->rule)
                      : out.counts_unguarded[c->return_state] != 0;
      }
      if (free) {
        out.counts_unguarded[s] = 1;
        grew = true;
      }
    }
  }
  const std::array<bool, 256> opens = first_bytes(counting);
  // Per state of a dispatch, the guards of every call it may still make,
  // through its own bytes and the dispatches it calls.
  std::vector<int32_t> dispatch_states;
  std::vector<int32_t> at(pda.num_states(), -1);
  for (int32_t s = 0; s < pda.num_states(); ++s) {
    if (pda.IsDispatch(pda.StateRule(s))) {
      at[s] = static_cast<int32_t>(dispatch_states.size());
      dispatch_states.push_back(s);
    }
  }
  std::vector<MemberSet> reach(dispatch_states.size());
  for (bool grew = true; grew;) {
    grew = false;
    // Backwards, as MayStrand's covers.
    for (size_t i = dispatch_states.size(); i-- > 0;) {
      const int32_t s = dispatch_states[i];
      MemberSet r = reach[i];
      for (int32_t c = 0; c < pda.num_byte_classes(); ++c) {
        const int32_t t = pda.Next(s, pda.ClassByte(c));
        if (t != Pda::kDead && at[t] >= 0) r.AddAll(reach[at[t]]);
      }
      for (const PdaCall* c = pda.CallsBegin(s); c != pda.CallsEnd(s); ++c) {
        r.AddAll(pda.Guard(c->rule));
        const int32_t start = pda.RuleStart(c->rule);
        if (at[start] >= 0) r.AddAll(reach[at[start]]);
      }
      if (r != reach[i]) {
        reach[i] = r;
        grew = true;
      }
    }
  }
  for (size_t i = 0; i < dispatch_states.size(); ++i) {
    out.reach.emplace_back(dispatch_states[i], reach[i]);
  }
  out.keys_ =
      std::make_unique<MemberCheckedTokens::LazyKeys[]>(dispatch_states.size());
  // Kept by the index under their bytes: most grammars ask for the same.
  const auto key =
      [](const char* what,
         std::initializer_list<const std::array<bool, 256>*> sets) {
        std::string k = what;
        for (const std::array<bool, 256>* bytes : sets) {
          for (int b = 0; b < 256; ++b) k.push_back((*bytes)[b] ? '1' : '0');
        }
        return k;
      };
  auto bits = [&](const std::array<bool, 256>& bytes) {
    return *index.ByteFilter(key("holding", {&bytes}), [&] {
      std::vector<uint32_t> out(index.all_bits().size(), 0);
      for (int b = 0; b < 256; ++b) {
        if (!bytes[b]) continue;
        const std::vector<uint32_t>& row =
            index.TokensWithByte(static_cast<uint8_t>(b));
        for (size_t w = 0; w < out.size(); ++w) out[w] |= row[w];
      }
      return out;
    });
  };
  out.outside_dispatch = bits(outside);
  out.in_dispatch = bits(inside);
  // Where no frame's guarded call can be refused before a member is
  // counted, a separator is harmless unless the token reads on into the
  // dispatch it calls, or opens a frame before it (which may count one
  // member unguarded).
  if (std::count(separator.begin(), separator.end(), true) > 0) {
    std::array<bool, 256> hard;
    for (int b = 0; b < 256; ++b) hard[b] = outside[b] && !separator[b];
    out.outside_with_slack = *index.ByteFilter(
        key("slack", {&hard, &separator, &inside, &opens}), [&] {
          std::vector<uint32_t> slack = bits(hard);
          const Vocabulary& vocab = index.vocab();
          const std::vector<uint32_t> holding = bits(separator);
          for (size_t w = 0; w < holding.size(); ++w) {
            for (uint32_t word = holding[w]; word != 0; word &= word - 1) {
              const int32_t id =
                  static_cast<int32_t>(w * 32) + __builtin_ctz(word);
              bool after_separator = false, after_open = false, risky = false;
              for (const char ch : vocab.bytes(id)) {
                const uint8_t b = static_cast<uint8_t>(ch);
                risky = risky || (after_separator && inside[b]) ||
                        (after_open && separator[b]);
                after_separator = after_separator || separator[b];
                after_open = after_open || opens[b];
              }
              if (risky) slack[id >> 5] |= 1u << (id & 31);
            }
          }
          return slack;
        });
  }
  return out;
}

struct MemberCheckedTokens::LazyKeys {
  std::once_flag once;
  DispatchTokenKeys keys;
};

MemberCheckedTokens::MemberCheckedTokens() = default;
MemberCheckedTokens::~MemberCheckedTokens() = default;
MemberCheckedTokens::MemberCheckedTokens(MemberCheckedTokens&&) = default;
MemberCheckedTokens& MemberCheckedTokens::operator=(MemberCheckedTokens&&) =
    default;

namespace {

// Builds a dispatch state's DispatchTokenKeys by one walk of the token trie,
// each node with the stacks its prefix may have reached: in a dispatch
// (alternatives of one frame, by calls of dispatches at their starts) or in
// a member (or another rule a dispatch calls), each with the guards on its
// way.
class KeyWalk {
 public:
  KeyWalk(const Pda& pda, const TokenIndex& index,
          const MemberCheckedTokens& checked, DispatchTokenKeys* out)
      : pda_(pda), index_(index), checked_(checked), out_(out) {}

  void Run(int32_t state) {
    Node(0, {{state, true, MemberSet(), {}, true}}, MemberSet(), false);
  }

 private:
  struct Alt {
    int32_t state;
    bool dispatch;
    MemberSet key;
    // The guards of the guarded calls on the way here, when there is one way
    // (`single`); the key is their union.
    std::vector<MemberSet> path;
    bool single;
  };
  // Past this many alternatives at one node, the node's tokens are kept
  // always (the front end's tries have one or two).
  static constexpr size_t kMaxAlts = 64;

  MemberSet Reach(int32_t state) const {
    const int32_t i = checked_.ReachIndex(state);
    return i >= 0 ? checked_.reach[i].second : MemberSet();
  }

  // Whether `alts` grew.
  static bool Merge(std::vector<Alt>* alts, const Alt& alt) {
    for (Alt& a : *alts) {
      if (a.state == alt.state && a.dispatch == alt.dispatch) {
        a.single = a.single && alt.single && a.path == alt.path;
        if (a.key.Contains(alt.key)) return false;
        a.key.AddAll(alt.key);
        return true;
      }
    }
    alts->push_back(alt);
    return true;
  }

  // `alts`: where the node's prefix may stand; `sunk`: some way leads into
  // a rule this walk does not follow (its calls), whose guards `sink` holds
  // for every token below.
  void Node(int32_t node, std::vector<Alt> alts, MemberSet sink, bool sunk) {
    // Calls of dispatches at the states reached, and into the rules they
    // call.
    bool always = false;
    for (bool grew = true; grew && !always;) {
      grew = false;
      for (size_t i = 0; i < alts.size() && !always; ++i) {
        const Alt a = alts[i];
        if (!a.dispatch) continue;
        if (pda_.IsFinal(a.state)) always = true;  // a return: callers unknown
        for (const PdaCall* c = pda_.CallsBegin(a.state);
             c != pda_.CallsEnd(a.state); ++c) {
          Alt callee{pda_.RuleStart(c->rule), pda_.IsDispatch(c->rule), a.key,
                     a.path, a.single};
          callee.key.AddAll(pda_.Guard(c->rule));
          if (pda_.IsGuarded(c->rule))
            callee.path.push_back(pda_.Guard(c->rule));
          grew = Merge(&alts, callee) || grew;
        }
        if (alts.size() > kMaxAlts) always = true;
      }
    }
    if (always) {
      Emit(node, true, MemberSet(), true);
      return;
    }
    // A member's rule is followed while it reads bytes of its own; past its
    // first call every token below is read as from outside a dispatch.
    std::vector<Alt> followed;
    for (const Alt& a : alts) {
      if (!a.dispatch && (pda_.IsFinal(a.state) ||
                          pda_.CallsBegin(a.state) != pda_.CallsEnd(a.state))) {
        sink.AddAll(a.key);
        sunk = true;
      } else {
        followed.push_back(a);
      }
    }
    if (node > 0 && (sunk || !AddFate(node, alts))) {
      MemberSet key = sink;
      for (const Alt& a : alts) {
        key.AddAll(a.key);
        if (a.dispatch) key.AddAll(Reach(a.state));
      }
      Add(index_.node_tokens_begin(node), index_.node_tokens_end(node), key,
          false);
    }
    if (followed.empty()) {
      if (sunk) Emit(node, false, sink, false);
      return;
    }
    for (int32_t child = node + 1; child < index_.node_end(node);
         child = index_.node_end(child)) {
      std::vector<Alt> next;
      for (const Alt& a : followed) {
        const int32_t t = pda_.Next(a.state, index_.node_byte(child));
        if (t != Pda::kDead) {
          Merge(&next, {t, a.dispatch, a.key, a.path, a.single});
        }
      }
      if (next.empty() && !sunk) continue;  // no token below is read here
      Node(child, std::move(next), sink, sunk);
    }
  }

  // Files the tokens at `node` under their fate, where every state its
  // prefix may stand in was reached one way and the walk follows them all
  // (the caller's `sunk`); false where a key must do. Only a state with
  // bytes of its own keeps a stack: one without only calls, and its
  // callees are in `alts` too. A counted string's steps may refuse by its
  // count, so its states have no fate.
  bool AddFate(int32_t node, const std::vector<Alt>& alts) {
    DispatchTokenKeys::Fate fate;
    for (const Alt& a : alts) {
      if (!a.single || pda_.MaxChars(pda_.StateRule(a.state)) >= 0) {
        return false;
      }
      if (!pda_.HasBytes(a.state)) continue;
      if (a.path.empty()) return true;  // never refused: not read at all
      fate.guards.insert(fate.guards.end(), a.path.begin(), a.path.end());
      fate.way_ends.push_back(static_cast<uint32_t>(fate.guards.size()));
    }
    DispatchTokenKeys::Fate* into = nullptr;
    for (int32_t i = index_.node_tokens_begin(node);
         i < index_.node_tokens_end(node); ++i) {
      const int32_t id = index_.id(i);
      if (!Bit(checked_.in_dispatch, id) ||
          Bit(checked_.outside_dispatch, id)) {
        continue;
      }
      if (into == nullptr) {
        // Looked up by a key the ways move into, copied back only for a
        // fate not seen yet (most repeat: a member's own bytes all have its
        // guards).
        std::pair<std::vector<MemberSet>, std::vector<uint32_t>> key{
            std::move(fate.guards), std::move(fate.way_ends)};
        auto it = fate_at_.find(key);
        if (it == fate_at_.end()) {
          fate.guards = key.first;
          fate.way_ends = key.second;
          it = fate_at_.emplace(std::move(key), out_->fates.size()).first;
          out_->fates.push_back(std::move(fate));
        }
        into = &out_->fates[it->second];
      }
      into->tokens.push_back(id);
    }
    return true;
  }

  // Every token below `node` (and at it, with `with_node`).
  void Emit(int32_t node, bool with_node, const MemberSet& key, bool always) {
    const int32_t first = node + (with_node ? 0 : 1);
    if (first >= index_.node_end(node)) return;
    Add(index_.node_tokens_begin(first),
        index_.node_tokens_begin(index_.node_end(node)), key, always);
  }

  void Add(int32_t begin, int32_t end, const MemberSet& key, bool always) {
    DispatchTokenKeys::Group* group = nullptr;
    for (int32_t i = begin; i < end; ++i) {
      const int32_t id = index_.id(i);
      if (!Bit(checked_.in_dispatch, id) ||
          Bit(checked_.outside_dispatch, id)) {
        continue;
      }
      if (group == nullptr) group = &GroupOf(key, always);
      group->tokens.push_back(id);
    }
  }

  DispatchTokenKeys::Group& GroupOf(const MemberSet& key, bool always) {
    for (DispatchTokenKeys::Group& g : out_->groups) {
      if (g.always == always && g.key == key) return g;
    }
    out_->groups.push_back({key, always, {}});
    return out_->groups.back();
  }

  static bool Bit(const std::vector<uint32_t>& bits, int32_t id) {
    return bits[id >> 5] >> (id & 31) & 1;
  }

  const Pda& pda_;
  const TokenIndex& index_;
  const MemberCheckedTokens& checked_;
  DispatchTokenKeys* out_;
  // Equal fates share one entry (a member's own bytes all have its guards).
  std::map<std::pair<std::vector<MemberSet>, std::vector<uint32_t>>, size_t>
      fate_at_;
};

}  // namespace

MemberCheckedTokens::Filter MemberCheckedTokens::For(
    const Pda& pda, const TokenIndex& index, int32_t state,
    const MemberSet& members, bool frames_have_slack) const {
  if (!pda.IsDispatch(pda.StateRule(state))) {
    return {frames_have_slack && !outside_with_slack.empty()
                ? outside_with_slack.data()
                : outside_dispatch.data(),
            nullptr};
  }
  const int32_t i = ReachIndex(state);
  if (i < 0) return {in_dispatch.data(), nullptr};
  if (!members.Intersects(reach[i].second)) {
    return {outside_dispatch.data(), nullptr};
  }
  LazyKeys& lazy = keys_[i];
  std::call_once(lazy.once,
                 [&] { KeyWalk(pda, index, *this, &lazy.keys).Run(state); });
  return {outside_dispatch.data(), &lazy.keys};
}

bool DispatchTokenKeys::Fate::Refused(const MemberSet& members) const {
  uint32_t begin = 0;
  for (const uint32_t end : way_ends) {
    bool open = true;
    for (uint32_t g = begin; g < end && open; ++g) {
      open = !members.Contains(guards[g]);
    }
    if (open) return false;
    begin = end;
  }
  return true;
}

int32_t MemberCheckedTokens::ReachIndex(int32_t state) const {
  const auto it = std::lower_bound(reach.begin(), reach.end(), state,
                                   [](const std::pair<int32_t, MemberSet>& e,
                                      int32_t s) { return e.first < s; });
  return it != reach.end() && it->first == state
             ? static_cast<int32_t>(it - reach.begin())
             : -1;
}

}  // namespace grammard::grammar::internal
