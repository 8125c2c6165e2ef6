#include "grammar/compiler.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grammar/base/scc.h"
#include "grammar/base/status_macros.h"
#include "grammar/engine/distinct_values.h"
#include "grammar/engine/grammar_data.h"
#include "grammar/engine/nfa.h"
#include "grammar/engine/token_index.h"
#include "grammar/frontends/ebnf/ebnf_parser.h"
#include "grammar/frontends/regex/regex_parser.h"
#include "grammar/ir/grammar_passes.h"
#include "grammar/ir/utf8_lowering.h"

namespace grammard::grammar {
namespace {

// Small rules that cannot reach themselves are copied into their callers
// instead of being called when they may match nothing or match only short
// text: `ws ::= [ ]*` or JSON's `char` called from everywhere would leave
// almost every token depending on the caller (a token crosses many rule
// boundaries), which only a matcher can then decide. Copied, the caller's
// own automaton decides. Other rules are left as calls: copies of a loop
// like `ident` multiply the states whose whole trie walk is costly.
constexpr uint64_t kInlineMaxSize = 24;
// Bounded rules are larger once character classes become UTF-8 byte
// sequences (`[^"\\]` is a choice of a dozen), but add no loops.
constexpr uint64_t kInlineBoundedMaxSize = 64;
// A bounded repeat is built as a copy of its body per count, and a rule
// copied into that body as many times (an array of up to 1,000 items of a
// 24-digit pattern took 27,000 states): a rule larger than
// kInlineRepeatedMaxSize referred to under a repeat of more counts than
// kInlineMaxCopies stays a call. Smaller ones (whitespace) add no more
// states copied than called.
constexpr int64_t kInlineMaxCopies = 16;
constexpr uint64_t kInlineRepeatedMaxSize = 8;

// Rules referred to somewhere under a repeat of more than kInlineMaxCopies
// counts, in their referrer's own body.
std::vector<bool> RepeatedManyTimes(const Grammar& g) {
  const size_t n = g.rules.size();
  std::vector<bool> many(n, false);
  // Per expression, the last rule whose walk met it and how (bit 1: outside
  // such a repeat, bit 2: under one).
  std::vector<size_t> seen_in(g.exprs.size(), n);
  std::vector<uint8_t> seen(g.exprs.size(), 0);
  std::vector<std::pair<int32_t, bool>> stack;
  for (size_t r = 0; r < n; ++r) {
    stack.assign({{g.rules[r].body, false}});
    while (!stack.empty()) {
      const auto [e, under] = stack.back();
      stack.pop_back();
      if (seen_in[e] != r) {
        seen_in[e] = r;
        seen[e] = 0;
      }
      const uint8_t bit = under ? 2 : 1;
      if (seen[e] & bit) continue;
      seen[e] |= bit;
      const Expr& x = g.exprs[e];
      if (x.kind == ExprKind::kRuleRef && under) many[x.rule] = true;
      const bool below =
          under || (x.kind == ExprKind::kRepeat && x.max != kUnbounded &&
                    x.max > kInlineMaxCopies);
      for (int32_t c : x.children) stack.push_back({c, below});
    }
  }
  return many;
}

// Rules with run-time conditions, and the rules that call distinct rules or
// counted members, stay calls: a matcher keeps a distinct rule's values, and
// the members counted, per frame of the caller (engine/stack.h), so the
// caller must have frames of its own, and each value or member must end in
// a return; a rule with required members checks them at its own return,
// and one counting characters counts them in its own frames.
std::vector<bool> KeptAsCalls(const Grammar& g) {
  std::vector<bool> kept(g.rules.size(), false);
  std::vector<int32_t> stack;
  auto reported = [&](int32_t r) {
    return g.rules[r].distinct || g.rules[r].member_bit >= 0 ||
           !g.rules[r].member_guard.empty() || g.rules[r].member_dispatch;
  };
  for (size_t r = 0; r < g.rules.size(); ++r) {
    if (reported(r) || !g.rules[r].required_members.empty() ||
        g.rules[r].max_chars >= 0) {
      kept[r] = true;
    }
  }
  if (std::find(kept.begin(), kept.end(), true) == kept.end()) return kept;
  std::vector<size_t> seen_in(g.exprs.size(), g.rules.size());
  for (size_t r = 0; r < g.rules.size(); ++r) {
    stack.assign({g.rules[r].body});
    while (!stack.empty() && !kept[r]) {
      const int32_t e = stack.back();
      stack.pop_back();
      if (seen_in[e] == r) continue;
      seen_in[e] = r;
      const Expr& x = g.exprs[e];
      if (x.kind == ExprKind::kRuleRef && reported(x.rule)) {
        kept[r] = true;
      }
      stack.insert(stack.end(), x.children.begin(), x.children.end());
    }
  }
  return kept;
}

// `kept`: KeptAsCalls(g), never inlined.
std::vector<bool> InlinedRules(const Grammar& g,
                               const std::vector<bool>& kept) {
  const size_t n = g.rules.size();
  // Per rule: the rules its body refers to, and its size once unrolled.
  std::vector<std::vector<int32_t>> refs(n);
  std::vector<uint64_t> size(n, 0);
  std::vector<bool> loops(n, false);  // the body repeats without bound
  // seen[e] == r + 1: e was met in rule r's body (a fresh vector per rule
  // would cost rules x expressions).
  std::vector<size_t> seen(g.exprs.size(), 0);
  for (size_t r = 0; r < n; ++r) {
    std::vector<int32_t> stack{g.rules[r].body};
    while (!stack.empty()) {
      int32_t e = stack.back();
      stack.pop_back();
      if (e < 0) continue;
      const Expr& x = g.exprs[e];
      // A reference counts once per expression it is a child of: a front
      // end may share one reference expression among them (the JSON Schema
      // emitter does), and a rule's size must not shrink for it.
      if (seen[e] == r + 1) {
        if (x.kind == ExprKind::kRuleRef) ++size[r];
        continue;
      }
      seen[e] = r + 1;
      size[r] += x.kind == ExprKind::kRepeat
                     ? static_cast<uint64_t>(std::max(x.min, x.max)) + 1
                 : x.kind == ExprKind::kBytes ? x.bytes.size()
                                              : 1;
      if (x.kind == ExprKind::kRuleRef) refs[r].push_back(x.rule);
      if (x.kind == ExprKind::kRepeat && x.max == kUnbounded) loops[r] = true;
      for (int32_t c : x.children) stack.push_back(c);
    }
  }
  // A rule on a cycle of references must stay a call.
  // A rule whose text has bounded length (`char`, a keyword) adds only a
  // handful of states wherever it is copied: neither it nor a rule it
  // reaches repeats without bound. Both from the components of the
  // references (a walk of the rules each rule reaches was rules squared,
  // a few milliseconds on a Kubernetes schema).
  std::vector<int32_t> begin{0}, targets;
  for (size_t r = 0; r < n; ++r) {
    targets.insert(targets.end(), refs[r].begin(), refs[r].end());
    begin.push_back(static_cast<int32_t>(targets.size()));
  }
  const internal::Components sccs = internal::StronglyConnected(begin, targets);
  // Per component: some rule of it, or one it reaches, loops. A component
  // reaches only lower-numbered ones, which come before it in `order`.
  std::vector<bool> reaches_loop(sccs.size.size(), false);
  for (int32_t r : sccs.order) {
    const int32_t c = sccs.of[r];
    bool loop = loops[r];
    for (int32_t x : refs[r]) loop = loop || reaches_loop[sccs.of[x]];
    if (loop) reaches_loop[c] = true;
  }
  std::vector<bool> recursive(n, false), bounded(n, false);
  for (size_t r = 0; r < n; ++r) {
    recursive[r] = sccs.size[sccs.of[r]] > 1 ||
                   std::find(refs[r].begin(), refs[r].end(),
                             static_cast<int32_t>(r)) != refs[r].end();
    bounded[r] = !recursive[r] && !reaches_loop[sccs.of[r]];
  }
  const std::vector<bool> nullable = NullableRules(g);
  std::vector<bool> many = RepeatedManyTimes(g);
  std::vector<bool> inlined(n, false);
  auto decide = [&](size_t r) {
    const bool small =
        size[r] <= (bounded[r] ? kInlineBoundedMaxSize : kInlineMaxSize);
    inlined[r] = (nullable[r] || bounded[r]) && !recursive[r] && small &&
                 !kept[r] && !(many[r] && size[r] > kInlineRepeatedMaxSize) &&
                 static_cast<int32_t>(r) != g.root;
  };
  for (size_t r = 0; r < n; ++r) decide(r);
  // What a rule copied many times refers to is copied as many times.
  std::vector<int32_t> work;
  for (size_t r = 0; r < n; ++r) {
    if (many[r] && inlined[r]) work.push_back(static_cast<int32_t>(r));
  }
  while (!work.empty()) {
    const int32_t r = work.back();
    work.pop_back();
    for (int32_t x : refs[r]) {
      if (many[x]) continue;
      many[x] = true;
      decide(x);
      if (inlined[x]) work.push_back(x);
    }
  }
  return inlined;
}

// A body's copies into callers may grow the grammar at most this many times.
constexpr int64_t kMaxAbsorbGrowth = 4;
// Rounds of keeping as rules those that would be copied twice (below).
constexpr int kMaxAbsorbRounds = 4;

// A loop of rules, with all it reaches, at most this many expressions
// large may be copied into every rule that ends in it.
constexpr int64_t kMaxCopiedLoop = 1024;

// Per rule, whether it lies on a loop of references at rules' ends
// (`at_end`, among the `absorbed` rules) that, with every absorbed rule it
// reaches, is at most kMaxCopiedLoop expressions large. The tail of the
// keys that must avoid the same names or patterns is such a loop, the same
// rule in every key once the passes merged equal rules: kept a rule, it
// turns each key's states into calls, which only the general walk
// classifies (llama3: 7 ms per key state met, against 1 to 2 for a leaf
// walk).
// A string's counted chain, which copied into each member of an object
// would multiply its states, reaches no loop.
std::vector<bool> SmallTailLoops(
    const std::vector<std::vector<int32_t>>& at_end,
    const std::vector<int64_t>& size, const std::vector<bool>& absorbed) {
  const size_t n = at_end.size();
  std::vector<int32_t> begin{0}, targets;
  std::vector<bool> self(n, false);
  for (size_t r = 0; r < n; ++r) {
    if (absorbed[r]) {
      for (int32_t t : at_end[r]) {
        if (!absorbed[t]) continue;
        targets.push_back(t);
        self[r] = self[r] || t == static_cast<int32_t>(r);
      }
    }
    begin.push_back(static_cast<int32_t>(targets.size()));
  }
  const internal::Components sccs = internal::StronglyConnected(begin, targets);
  // Per component, in reverse topological order (what it reaches first):
  // its rules' sizes and those of the components it reaches, capped past
  // the limit. A component reached along two paths counts twice, which
  // only keeps more loops as rules.
  const size_t num = sccs.size.size();
  std::vector<int64_t> reach(num, 0);
  std::vector<bool> cyclic(num, false);
  std::vector<int32_t> seen(num, -1);
  size_t at = 0;
  for (size_t c = 0; c < num; ++c) {
    int64_t total = 0;
    for (int32_t k = 0; k < sccs.size[c]; ++k) {
      const int32_t r = sccs.order[at + k];
      total += size[r];
      cyclic[c] = cyclic[c] || sccs.size[c] > 1 || self[r];
      for (int32_t e = begin[r]; e < begin[r + 1]; ++e) {
        const int32_t d = sccs.of[targets[e]];
        if (d == static_cast<int32_t>(c) ||
            seen[d] == static_cast<int32_t>(c)) {
          continue;
        }
        seen[d] = static_cast<int32_t>(c);
        total += reach[d];
      }
    }
    reach[c] = std::min(total, kMaxCopiedLoop + 1);
    at += sccs.size[c];
  }
  std::vector<bool> out(n, false);
  for (size_t r = 0; r < n; ++r) {
    const int32_t c = sccs.of[r];
    out[r] = absorbed[r] && cyclic[c] && reach[c] <= kMaxCopiedLoop;
  }
  return out;
}

// Rules referred to only at the very end of other rules (`a ::= "x" b`):
// the states of a pattern's automaton, which the JSON Schema converter
// writes as rules, or an object's member states. A call there would only
// return to return again, so the callers' automata read such a rule's body
// themselves (NfaBuilder): a cycle of them becomes one automaton, whose
// tokens classify as one rule without calls, and no stack frame is pushed.
// (A rule referring to itself at its end reads itself again from its start
// in any case.)
// Not the root, nor rules copied anyway (InlinedRules), nor `kept`
// (KeptAsCalls). None when copying
// them into every rule that reaches them would outgrow the grammar
// kMaxAbsorbGrowth times.
// Partial once `deadline` passes: its walks through copied rules grow as
// the square of a chain of them (30,000 rules took 150 s).
std::vector<bool> AbsorbedRules(const Grammar& g,
                                const std::vector<bool>& inlined,
                                const std::vector<bool>& kept,
                                const Deadline& deadline) {
  const size_t n = g.rules.size();
  std::vector<bool> before_end(n, false), referred(n, false);
  std::vector<std::vector<int32_t>> at_end(n);  // rules referred to at the end
  std::vector<int64_t> size(n, 0);
  // (expression, whether it ends the rule); an inlined rule's body ends the
  // rule where its reference does. This mirrors which `to` NfaBuilder
  // passes: a sequence's last child, every branch, a {0,1} repeat's child.
  // Per expression, the last rule whose walk met it and how (bit 1: before
  // the end, bit 2: at the end).
  std::vector<size_t> seen_in(g.exprs.size(), n);
  std::vector<uint8_t> seen(g.exprs.size(), 0);
  // Deadline checks count steps, not rules: one rule's walk through the
  // rules copied into it may be a whole chain.
  uint64_t steps = 0;
  auto expired = [&] { return ++steps % 1024 == 0 && deadline.Passed(); };
  for (size_t r = 0; r < n; ++r) {
    std::vector<std::pair<int32_t, bool>> stack = {{g.rules[r].body, true}};
    while (!stack.empty()) {
      if (expired()) return std::vector<bool>(n, false);
      const auto [e, end] = stack.back();
      stack.pop_back();
      if (seen_in[e] != r) {
        seen_in[e] = r;
        seen[e] = 0;
        ++size[r];
      }
      const uint8_t bit = end ? 2 : 1;
      if (seen[e] & bit) continue;
      seen[e] |= bit;
      const Expr& x = g.exprs[e];
      switch (x.kind) {
        case ExprKind::kRuleRef:
          if (inlined[x.rule]) {
            stack.push_back({g.rules[x.rule].body, end});
          } else {
            referred[x.rule] = true;
            if (end) {
              at_end[r].push_back(x.rule);
            } else {
              before_end[x.rule] = true;
            }
          }
          break;
        case ExprKind::kSequence:
          for (size_t k = 0; k < x.children.size(); ++k) {
            stack.push_back({x.children[k], end && k + 1 == x.children.size()});
          }
          break;
        case ExprKind::kChoice:
          for (int32_t c : x.children) stack.push_back({c, end});
          break;
        case ExprKind::kRepeat:
          stack.push_back({x.children[0], end && x.min == 0 && x.max == 1});
          break;
        default:
          break;
      }
    }
  }
  std::vector<bool> absorbed(n, false);
  int64_t total = 0;
  for (size_t r = 0; r < n; ++r) {
    total += size[r];
    absorbed[r] = referred[r] && !before_end[r] && !inlined[r] && !kept[r] &&
                  static_cast<int32_t>(r) != g.root;
  }
  const std::vector<bool> small_loop = SmallTailLoops(at_end, size, absorbed);
  // What the rules that stay rules copy. A rule that two of them would
  // each copy stays a rule too (unless a small loop, above): an object's
  // members, each ending in its value, would otherwise carry a copy of a long
  // string's counted chain per object. Only the first such rule on a path is
  // kept (the rest of the chain is then copied once, into it), so rounds go on
  // until no rule is copied twice, or up to kMaxAbsorbRounds.
  int64_t copied = 0;
  // mark[t]: the last staying rule whose walk reached t. Reached before by
  // another rule's walk, t is copied twice.
  std::vector<int32_t> mark, work;
  std::vector<bool> twice;
  for (int round = 0;; ++round) {
    copied = 0;
    mark.assign(n, -1);
    twice.assign(n, false);
    for (size_t r = 0; r < n; ++r) {
      if (absorbed[r]) continue;
      work.assign(at_end[r].begin(), at_end[r].end());
      while (!work.empty()) {
        if (expired()) return std::vector<bool>(n, false);
        const int32_t t = work.back();
        work.pop_back();
        if (!absorbed[t] || mark[t] == static_cast<int32_t>(r)) continue;
        twice[t] = twice[t] || mark[t] >= 0;
        mark[t] = static_cast<int32_t>(r);
        copied += size[t];
        work.insert(work.end(), at_end[t].begin(), at_end[t].end());
      }
    }
    if (round == kMaxAbsorbRounds) break;
    // The first rule copied twice on its path: one some rule that is not
    // itself copied twice ends with.
    std::vector<int32_t> kept;
    for (size_t r = 0; r < n; ++r) {
      if (absorbed[r] && twice[r]) continue;
      for (int32_t t : at_end[r]) {
        if (absorbed[t] && twice[t] && !small_loop[t]) kept.push_back(t);
      }
    }
    if (kept.empty()) break;
    for (int32_t t : kept) absorbed[t] = false;
  }
  if (copied > kMaxAbsorbGrowth * total) return std::vector<bool>(n, false);
  return absorbed;
}

// Rules some call reaches from the root: the others are only ever copied
// (InlinedRules) or read (AbsorbedRules) inside their callers, so an
// automaton of their own would be states no matcher visits. A pattern
// counted by maxLength is written as a chain of small rules, each copied
// into the one before and reading the rest of the chain: built on their own
// too, they were most of the states of such schemas (55K of 60K on one).
// Partial once `deadline` passes.
std::vector<bool> CalledRules(const Grammar& g,
                              const std::vector<bool>& inlined,
                              const std::vector<bool>& absorbed,
                              const Deadline& deadline) {
  const size_t n = g.rules.size();
  std::vector<bool> called(n, false);
  // Per expression, the last rule whose walk met it.
  std::vector<size_t> seen(g.exprs.size(), n);
  std::vector<int32_t> rules{g.root}, exprs;
  called[g.root] = true;
  for (size_t head = 0; head < rules.size(); ++head) {
    if (head % 64 == 0 && deadline.Passed()) break;
    const size_t r = static_cast<size_t>(rules[head]);
    exprs.assign({g.rules[r].body});
    while (!exprs.empty()) {
      const int32_t e = exprs.back();
      exprs.pop_back();
      if (seen[e] == r) continue;
      seen[e] = r;
      const Expr& x = g.exprs[e];
      if (x.kind != ExprKind::kRuleRef) {
        exprs.insert(exprs.end(), x.children.begin(), x.children.end());
      } else if (inlined[x.rule] || absorbed[x.rule]) {
        exprs.push_back(g.rules[x.rule].body);
      } else if (!called[x.rule]) {
        called[x.rule] = true;
        rules.push_back(x.rule);
      }
    }
  }
  return called;
}

// Per expression, an id that structurally equal expressions share, and
// whether that id occurs more than once where the builder will meet it
// (as a child, a rule's body, or the body of a rule copied into a caller).
struct SharedExprs {
  std::vector<int32_t> id;
  std::vector<bool> repeated;  // indexed by id
};

SharedExprs FindSharedExprs(const Grammar& g,
                            const std::vector<bool>& inlined) {
  SharedExprs out;
  out.id = StructuralIds(g);
  std::vector<int32_t> uses(g.exprs.size(), 0);
  for (const Expr& x : g.exprs) {
    for (int32_t c : x.children) ++uses[out.id[c]];
    if (x.kind == ExprKind::kRuleRef && inlined[x.rule]) {
      ++uses[out.id[g.rules[x.rule].body]];
    }
  }
  for (const Rule& r : g.rules) ++uses[out.id[r.body]];
  out.repeated.resize(uses.size());
  for (size_t k = 0; k < uses.size(); ++k) out.repeated[k] = uses[k] > 1;
  return out;
}

// Thompson construction of one expression of a byte-level grammar between
// two Nfa states of `rule`. Repeats are unrolled; `budget` bounds the states
// made so that {n,m} nests cannot blow up memory.
//
// An expression that occurs again toward the same end state is not built
// again: the second occurrence enters the first one's fragment. A fragment
// only has edges out of its entry and its own states, and into its own
// states and its end, so whoever enters it can only leave it at that end,
// having read one string of the expression. This matters to the subset
// construction: `key ::= "\"" ([^r] char* | "r" ([^o] char* | ...)) "\""`
// (a key that is not "ro...") has a `char*` per branch, and as copies they
// make a DFA state per branch and char* state that minimizing merges again
// (2,746 states for 260 on a Kubernetes schema); shared, they are one.
class NfaBuilder {
 public:
  // Incomplete, and not to be used, once `deadline` has passed.
  NfaBuilder(const Grammar& g, internal::Nfa* nfa, int64_t budget,
             const Deadline& deadline)
      : g_(g),
        nfa_(*nfa),
        budget_(budget),
        kept_(KeptAsCalls(g)),
        inline_(InlinedRules(g, kept_)),
        absorbed_(AbsorbedRules(g, inline_, kept_, deadline)),
        called_(CalledRules(g, inline_, absorbed_, deadline)),
        shared_(FindSharedExprs(g, inline_)) {}

  // Whether a matcher may enter `rule` by a call, and so needs its
  // automaton (the others are read inside their callers').
  bool Called(int32_t rule) const { return called_[rule]; }

  // Builds `expr` between `from` and `to`, states of `rule`. Depth-first
  // with a stack of its own: rules copied into their callers nest as deep
  // as the grammar chains them (30,000 rules `r0 ::= r1`, `r1 ::= r2`, ...
  // overflowed a thread's stack when this recursed).
  absl::Status Build(int32_t rule, int32_t expr, int32_t from, int32_t to) {
    stack_.assign(1, Frame{expr, from, to});
    while (!stack_.empty()) {
      Frame& f = stack_.back();
      if (f.child < 0) {
        absl::StatusOr<bool> composite = Enter(rule, &f);
        if (!composite.ok()) return composite.status();
        if (!*composite) {
          stack_.pop_back();
          continue;
        }
      }
      std::optional<Frame> child;
      GRAMMARD_RETURN_IF_ERROR(Next(rule, &f, &child));
      if (child.has_value()) {
        stack_.push_back(*child);
      } else {
        stack_.pop_back();
      }
    }
    return absl::OkStatus();
  }

 private:
  // One expression being built: `child` counts the children (or a repeat's
  // copies) started so far, -1 before the expression is entered.
  struct Frame {
    int32_t expr;
    int32_t from;
    int32_t to;
    int64_t child = -1;
    int32_t cur = 0;   // where the next child starts
    int32_t next = 0;  // where the child last started ends
  };

  // Starts `f`: leaves and references are built at once (false); a
  // sequence, choice or repeat is set up for Next (true). A reference read
  // in place (copied, or absorbed) continues as its rule's body.
  absl::StatusOr<bool> Enter(int32_t rule, Frame* f) {
    for (;;) {
      if (--budget_ < 0) return TooBig();
      const Expr& e = g_.exprs[f->expr];
      const bool composite = e.kind == ExprKind::kSequence ||
                             e.kind == ExprKind::kChoice ||
                             e.kind == ExprKind::kRepeat;
      if (composite && shared_.repeated[shared_.id[f->expr]]) {
        const uint64_t key =
            (static_cast<uint64_t>(shared_.id[f->expr]) << 32) |
            static_cast<uint32_t>(f->to);
        auto [it, fresh] = entries_.try_emplace(key, -1);
        if (!fresh) {
          nfa_.AddEpsilon(f->from, it->second);
          return false;
        }
        const int32_t entry = NewState(rule);
        it->second = entry;
        nfa_.AddEpsilon(f->from, entry);
        f->from = entry;
      }
      switch (e.kind) {
        case ExprKind::kBytes: {
          int32_t cur = f->from;
          if (e.bytes.empty()) nfa_.AddEpsilon(f->from, f->to);
          for (size_t i = 0; i < e.bytes.size(); ++i) {
            int32_t next = i + 1 == e.bytes.size() ? f->to : NewState(rule);
            uint8_t b = static_cast<uint8_t>(e.bytes[i]);
            nfa_.AddBytes(cur, b, b, next);
            cur = next;
          }
          return false;
        }
        case ExprKind::kByteClass:
          for (const CharRange& r : e.ranges) {
            nfa_.AddBytes(f->from, static_cast<uint8_t>(r.lo),
                          static_cast<uint8_t>(r.hi), f->to);
          }
          return false;
        case ExprKind::kCharClass:
          return absl::InternalError(
              "character class left after lowering to bytes");
        case ExprKind::kSequence:
          if (e.children.empty()) nfa_.AddEpsilon(f->from, f->to);
          f->child = 0;
          f->cur = f->from;
          return !e.children.empty();
        case ExprKind::kChoice:
          f->child = 0;
          return !e.children.empty();
        case ExprKind::kRepeat:
          f->child = 0;
          f->cur = f->from;
          return true;
        case ExprKind::kRuleRef:
          if (inline_[e.rule]) {
            f->expr = g_.rules[e.rule].body;
            continue;
          }
          if (e.rule == rule && f->to == nfa_.rule_accept(rule)) {
            // Read again from the start, as a tail call would.
            nfa_.AddEpsilon(f->from, nfa_.rule_start(rule));
            return false;
          }
          if (absorbed_[e.rule]) {
            absl::StatusOr<bool> fresh = Absorb(rule, e.rule, f);
            if (!fresh.ok()) return fresh.status();
            if (!*fresh) return false;
            continue;
          }
          nfa_.AddCall(f->from, e.rule, f->to);
          return false;
      }
      return absl::InternalError("unknown expression kind");
    }
  }

  // The next child of an entered sequence, choice or repeat into `*child`,
  // after finishing the one built last; none once all are built.
  absl::Status Next(int32_t rule, Frame* f, std::optional<Frame>* child) {
    const Expr& e = g_.exprs[f->expr];
    const int64_t n = static_cast<int64_t>(e.children.size());
    switch (e.kind) {
      case ExprKind::kSequence:
        if (f->child > 0) f->cur = f->next;
        if (f->child == n) return absl::OkStatus();
        f->next = f->child + 1 == n ? f->to : NewState(rule);
        *child = Frame{e.children[f->child++], f->cur, f->next};
        return absl::OkStatus();
      case ExprKind::kChoice:
        // Branches may share both ends: no fragment leaves its `to`, nor
        // loops back to its `from` (repeats loop on states of their own;
        // a rule's reference to itself at its end re-enters its whole
        // body, every branch included, as it should).
        if (f->child < n)
          *child = Frame{e.children[f->child++], f->from, f->to};
        return absl::OkStatus();
      case ExprKind::kRepeat:
        return NextCopy(rule, e, f, child);
      default:
        return absl::InternalError("not a composite expression");
    }
  }

  // A repeat is unrolled: `min` copies in a row, then either one copy
  // looping back on itself or `max - min` optional copies, each able to
  // stop early.
  absl::Status NextCopy(int32_t rule, const Expr& e, Frame* f,
                        std::optional<Frame>* child) {
    const int32_t body = e.children[0];
    if (f->child > 0) {  // finish the copy built last
      if (e.max == kUnbounded && f->child == e.min + 1) {
        nfa_.AddEpsilon(f->next, f->cur);
        nfa_.AddEpsilon(f->cur, f->to);
        return absl::OkStatus();
      }
      f->cur = f->next;
      if (budget_ < 0) return TooBig();
    }
    const int64_t i = f->child++;
    if (i < e.min) {
      f->next = NewState(rule);
      *child = Frame{body, f->cur, f->next};
    } else if (e.max == kUnbounded) {
      const int32_t a = NewState(rule), b = NewState(rule);
      nfa_.AddEpsilon(f->cur, a);
      f->cur = a;
      f->next = b;
      *child = Frame{body, a, b};
    } else if (i < e.max) {
      nfa_.AddEpsilon(f->cur, f->to);
      f->next = i + 1 == e.max ? f->to : NewState(rule);
      *child = Frame{body, f->cur, f->next};
    } else if (e.min == e.max) {
      nfa_.AddEpsilon(f->cur, f->to);
    }
    return absl::OkStatus();
  }

  absl::Status TooBig() const {
    return absl::ResourceExhaustedError(
        "the grammar is too large once repetitions are expanded");
  }

  // `target`'s body read inside `rule`, once per pair: its entry is known
  // before the body is built, so a cycle of absorbed rules closes on it.
  // True when `f` is to go on as the body, entered at its entry state;
  // false when an earlier reference built it already.
  absl::StatusOr<bool> Absorb(int32_t rule, int32_t target, Frame* f) {
    if (f->to != nfa_.rule_accept(rule)) {
      return absl::InternalError(absl::StrCat(
          "rule '", g_.rules[target].name,
          "' was to be read by its callers, yet one refers to it before "
          "its end"));
    }
    const uint64_t key =
        (static_cast<uint64_t>(rule) << 32) | static_cast<uint32_t>(target);
    auto [it, fresh] = absorbed_entries_.try_emplace(key, -1);
    if (!fresh) {
      nfa_.AddEpsilon(f->from, it->second);
      return false;
    }
    it->second = NewState(rule);
    nfa_.AddEpsilon(f->from, it->second);
    f->from = it->second;
    f->expr = g_.rules[target].body;
    return true;
  }

  int32_t NewState(int32_t rule) {
    --budget_;
    return nfa_.AddState(rule);
  }

  const Grammar& g_;
  internal::Nfa& nfa_;
  int64_t budget_;
  const std::vector<bool> kept_;  // KeptAsCalls
  const std::vector<bool> inline_;
  const std::vector<bool> absorbed_;
  const std::vector<bool> called_;
  const SharedExprs shared_;
  // (rule, absorbed rule) -> where the rule reads the absorbed one.
  std::unordered_map<uint64_t, int32_t> absorbed_entries_;
  // (shared id, end state) -> entry state of the fragment built for them.
  std::unordered_map<uint64_t, int32_t> entries_;
  std::vector<Frame> stack_;  // Build's, kept for its capacity
};

absl::Status TooLong(const char* stage) {
  return absl::DeadlineExceededError(
      absl::StrCat("compiling took longer than its deadline (", stage, ")"));
}

}  // namespace

GrammarCompiler::GrammarCompiler(std::shared_ptr<const Vocabulary> vocab)
    : index_(std::make_shared<internal::TokenIndex>(std::move(vocab))) {}

const Vocabulary& GrammarCompiler::vocabulary() const {
  return index_->vocab();
}

absl::StatusOr<CompiledGrammar> GrammarCompiler::CompileEbnf(
    std::string_view ebnf, std::string_view root_rule,
    const CompileOptions& options) const {
  auto g = ParseEbnf(ebnf, root_rule, GrammarLimits(), options.deadline);
  if (!g.ok()) return g.status();
  return Compile(*std::move(g), options);
}

absl::StatusOr<CompiledGrammar> GrammarCompiler::CompileRegex(
    std::string_view regex, const CompileOptions& options) const {
  auto g = ParseRegex(regex);
  if (!g.ok()) return g.status();
  return Compile(*std::move(g), options);
}

absl::StatusOr<CompiledGrammar> GrammarCompiler::Compile(
    Grammar grammar, const CompileOptions& options) const {
  // The one place grammars are normalised: front ends hand over what they
  // built, and the size limit counts what is left once the root's
  // unreachable rules are gone.
  auto normalized = Normalize(std::move(grammar), options.deadline);
  if (!normalized.ok()) return normalized.status();
  GrammarLimits limits;
  limits.max_exprs = options.max_grammar_exprs;
  GRAMMARD_RETURN_IF_ERROR(CheckSizeLimit(*normalized, limits));
  Grammar merged = MergeEqualRules(*std::move(normalized));
  if (options.deadline.Passed()) return TooLong("merging equal rules");
  auto lowered = LowerToBytes(merged);
  if (!lowered.ok()) return lowered.status();
  if (options.deadline.Passed()) return TooLong("lowering to bytes");
  const Grammar& g = *lowered;
  internal::Nfa nfa;
  for (const Rule& r : g.rules) nfa.AddRule(r.name);
  NfaBuilder builder(g, &nfa, int64_t{options.max_states} * 16,
                     options.deadline);
  if (options.deadline.Passed()) {
    return TooLong("choosing the rules read inside their callers");
  }
  for (int32_t r = 0; r < static_cast<int32_t>(g.rules.size()); ++r) {
    if (!builder.Called(r)) continue;
    GRAMMARD_RETURN_IF_ERROR(builder.Build(
        r, g.rules[r].body, nfa.rule_start(r), nfa.rule_accept(r)));
  }
  if (options.deadline.Passed()) return TooLong("building the automata");
  GRAMMARD_RETURN_IF_ERROR(nfa.PruneUnproductive(g.root));
  auto pda = nfa.Determinize(g.root, options.max_states, options.deadline);
  if (!pda.ok() && !absl::IsDeadlineExceeded(pda.status())) {
    return pda.status();
  }
  if (pda.ok()) {
    std::vector<uint8_t> distinct(g.rules.size(), 0);
    for (size_t r = 0; r < g.rules.size(); ++r) {
      distinct[r] = g.rules[r].distinct;
    }
    pda->MarkDistinct(distinct);
    std::vector<int16_t> member_bit(g.rules.size(), -1);
    std::vector<MemberSet> required(g.rules.size());
    std::vector<MemberSet> guard(g.rules.size());
    std::vector<uint8_t> dispatch(g.rules.size(), 0);
    for (size_t r = 0; r < g.rules.size(); ++r) {
      member_bit[r] = g.rules[r].member_bit;
      required[r] = g.rules[r].required_members;
      guard[r] = g.rules[r].member_guard;
      dispatch[r] = g.rules[r].member_dispatch;
    }
    pda->MarkMembers(member_bit, required, guard, dispatch);
    std::vector<int32_t> max_chars(g.rules.size(), -1);
    for (size_t r = 0; r < g.rules.size(); ++r) {
      max_chars[r] = g.rules[r].max_chars;
    }
    GRAMMARD_RETURN_IF_ERROR(pda->MarkCountedChars(max_chars));
    GRAMMARD_RETURN_IF_ERROR(internal::CheckRequiredMembersEndOnBytes(*pda));
    GRAMMARD_RETURN_IF_ERROR(internal::CheckDistinctValuesEndless(*pda));
  }
  absl::StatusOr<std::shared_ptr<const internal::GrammarData>> data =
      pda.ok()
          ? internal::MakeGrammarData(index_, *std::move(pda), options.deadline)
          : pda.status();
  if (absl::IsDeadlineExceeded(data.status())) {
    return absl::DeadlineExceededError(
        absl::StrCat("compiling took longer than its deadline (",
                     data.status().message(), ")"));
  }
  if (!data.ok()) return data.status();
  CompiledGrammar compiled(*std::move(data));
  compiled.ClassifyAhead(
      std::min(options.deadline.at(),
               std::chrono::steady_clock::now() + options.classify_ahead),
      options.deadline.cancel_flag());
  return compiled;
}

}  // namespace grammard::grammar
