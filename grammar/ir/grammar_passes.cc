#include "grammar/ir/grammar_passes.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grammar/base/refine.h"
#include "grammar/base/status_macros.h"

namespace grammard::grammar {
namespace {

// Marks in `seen` every expression reachable from `root_expr` without
// following rule references, and reports the rules referenced on the way;
// `stack` is scratch.
template <typename OnRuleRef>
void WalkBody(const Grammar& g, int32_t root_expr, std::vector<char>* seen,
              std::vector<int32_t>* stack, OnRuleRef on_rule_ref) {
  stack->assign(1, root_expr);
  while (!stack->empty()) {
    const int32_t e = stack->back();
    stack->pop_back();
    if ((*seen)[e]) continue;
    (*seen)[e] = 1;
    const Expr& expr = g.exprs[e];
    if (expr.kind == ExprKind::kRuleRef) on_rule_ref(expr.rule);
    for (int32_t child : expr.children) stack->push_back(child);
  }
}

// Collects the rules that can start `e`'s match: those referenced where
// everything before them may match empty.
class LeftEdgeCollector {
 public:
  LeftEdgeCollector(const Grammar& g, const std::vector<bool>& nullable)
      : g_(g), nullable_(nullable), stamp_(g.exprs.size(), -1) {}

  std::vector<int32_t> Collect(int32_t rule) {
    edges_.clear();
    current_ = rule;
    Walk(g_.rules[rule].body);
    return std::move(edges_);
  }

 private:
  void Walk(int32_t e) {
    if (stamp_[e] == current_) return;
    stamp_[e] = current_;
    const Expr& expr = g_.exprs[e];
    switch (expr.kind) {
      case ExprKind::kRuleRef:
        if (std::find(edges_.begin(), edges_.end(), expr.rule) ==
            edges_.end()) {
          edges_.push_back(expr.rule);
        }
        break;
      case ExprKind::kSequence:
        for (int32_t child : expr.children) {
          Walk(child);
          if (!nullable_[child]) break;
        }
        break;
      case ExprKind::kChoice:
        for (int32_t child : expr.children) Walk(child);
        break;
      case ExprKind::kRepeat:
        if (expr.max != 0) Walk(expr.children[0]);
        break;
      default:
        break;
    }
  }

  const Grammar& g_;
  const std::vector<bool>& nullable_;
  std::vector<int32_t> stamp_;  // The rule whose walk last visited each expr.
  std::vector<int32_t> edges_;
  int32_t current_ = -1;
};

}  // namespace

absl::StatusOr<Grammar> Normalize(Grammar grammar, const Deadline& deadline) {
  auto too_long = [] {
    return absl::DeadlineExceededError(
        "normalizing the grammar took longer than its deadline");
  };
  GRAMMARD_RETURN_IF_ERROR(grammar.Validate());
  if (deadline.Passed()) return too_long();
  Grammar reachable = RemoveUnreachableRules(std::move(grammar));
  if (deadline.Passed()) return too_long();
  GRAMMARD_RETURN_IF_ERROR(CheckNoLeftRecursion(reachable));
  return reachable;
}

std::vector<int32_t> StructuralIds(const Grammar& grammar,
                                   const std::vector<int32_t>& rule_class) {
  const size_t n = grammar.exprs.size();
  std::vector<int32_t> id(n);
  auto rule_of = [&](const Expr& x) -> int32_t {
    if (x.kind != ExprKind::kRuleRef) return -1;
    return rule_class.empty() ? x.rule : rule_class[x.rule];
  };
  // Children precede parents, so their ids are known: an expression is
  // hashed from its own fields and its children's ids, and compared field
  // by field with the first expression of that hash (hash-consing).
  auto hash = [&](const Expr& x) {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001B3ull; };
    mix(static_cast<uint64_t>(x.kind));
    mix(static_cast<uint32_t>(x.min));
    mix(static_cast<uint32_t>(x.max));
    mix(static_cast<uint32_t>(rule_of(x)));
    for (const CharRange& r : x.ranges) mix(uint64_t{r.lo} << 32 | r.hi);
    for (int32_t c : x.children) mix(static_cast<uint32_t>(id[c]));
    for (unsigned char c : x.bytes) mix(c);
    // Murmur's finalizer: the table indexes by the low bits.
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    return h;
  };
  auto same = [&](const Expr& a, const Expr& b) {
    if (a.kind != b.kind || a.min != b.min || a.max != b.max ||
        rule_of(a) != rule_of(b) || a.ranges != b.ranges ||
        a.bytes != b.bytes || a.children.size() != b.children.size()) {
      return false;
    }
    for (size_t k = 0; k < a.children.size(); ++k) {
      if (id[a.children[k]] != id[b.children[k]]) return false;
    }
    return true;
  };
  size_t slots = 16;
  while (slots < 2 * n) slots *= 2;
  std::vector<int32_t> table(slots, -1);  // first expression of each id
  std::vector<uint64_t> hashes(n);
  int32_t ids = 0;
  for (size_t e = 0; e < n; ++e) {
    const Expr& x = grammar.exprs[e];
    hashes[e] = hash(x);
    size_t i = hashes[e] & (slots - 1);
    for (; table[i] >= 0; i = (i + 1) & (slots - 1)) {
      const int32_t k = table[i];
      if (hashes[k] == hashes[e] && same(grammar.exprs[k], x)) break;
    }
    if (table[i] >= 0) {
      id[e] = id[table[i]];
    } else {
      table[i] = static_cast<int32_t>(e);
      id[e] = ids++;
    }
  }
  return id;
}

Grammar MergeEqualRules(Grammar grammar) {
  const int32_t n = static_cast<int32_t>(grammar.rules.size());
  constexpr int64_t kMaxWork = int64_t{1} << 22;
  // A rule's shape: its body with every reference alike. Two rules are equal
  // when their shapes are and the rules they refer to, in the order a walk
  // of the body tree meets them, are equal in turn.
  const std::vector<int32_t> shape =
      StructuralIds(grammar, std::vector<int32_t>(n, 0));
  std::vector<std::vector<int32_t>> refs(n);
  std::vector<int32_t> cls(n);
  // Whether an expression refers to a rule somewhere below it (children
  // precede parents): the walks below skip the rest, such as a string
  // automaton's shared tails, whose tree is far larger than its DAG.
  std::vector<bool> refers(grammar.exprs.size(), false);
  for (size_t e = 0; e < grammar.exprs.size(); ++e) {
    const Expr& x = grammar.exprs[e];
    bool below = x.kind == ExprKind::kRuleRef;
    for (int32_t c : x.children) below = below || refers[c];
    refers[e] = below;
  }
  int64_t work = 0;
  std::vector<int32_t> stack;
  for (int32_t r = 0; r < n; ++r) {
    cls[r] = shape[grammar.rules[r].body];
    // The tree, not the DAG: shared children are walked once per parent, so
    // that equal lists mean references at equal places.
    stack.assign({grammar.rules[r].body});
    while (!stack.empty()) {
      if (++work > kMaxWork) return grammar;
      const Expr& x = grammar.exprs[stack.back()];
      stack.pop_back();
      if (x.kind == ExprKind::kRuleRef) refs[r].push_back(x.rule);
      for (auto c = x.children.rbegin(); c != x.children.rend(); ++c) {
        if (refers[*c]) stack.push_back(*c);
      }
    }
  }
  // Rules with different run-time conditions (distinct, member counting,
  // characters counted) are never one: they start apart, with the classes kept
  // dense (refinement's work grows with their number).
  if (std::any_of(
          grammar.rules.begin(), grammar.rules.end(), [](const Rule& r) {
            return r.distinct || r.member_bit >= 0 ||
                   !r.required_members.empty() || !r.member_guard.empty() ||
                   r.member_dispatch || r.max_chars >= 0;
          })) {
    std::map<
        std::tuple<int32_t, bool, int16_t, MemberSet, MemberSet, bool, int32_t>,
        int32_t>
        dense;
    for (int32_t r = 0; r < n; ++r) {
      const Rule& rule = grammar.rules[r];
      cls[r] =
          dense
              .emplace(std::make_tuple(cls[r], rule.distinct, rule.member_bit,
                                       rule.required_members, rule.member_guard,
                                       rule.member_dispatch, rule.max_chars),
                       static_cast<int32_t>(dense.size()))
              .first->second;
    }
  }
  // Moore's refinement from the shapes: a round splits rules whose
  // references fall in different classes, until a round splits nothing.
  const internal::Predecessors referrers =
      internal::PredecessorsOf(n, [&](int32_t r, auto&& f) {
        for (int32_t t : refs[r]) f(t);
      });
  const int32_t shapes = 1 + *std::max_element(cls.begin(), cls.end());
  const internal::Refinement refined =
      internal::Refine(std::move(cls), shapes, referrers,
                       std::numeric_limits<int64_t>::max(), kMaxWork - work,
                       [&](int32_t r, const std::vector<int32_t>& now,
                           std::vector<int32_t>* sig) {
                         for (int32_t t : refs[r]) sig->push_back(now[t]);
                       });
  if (!refined.stable) return grammar;
  // The first rule of each class stands for it; the root for its own.
  std::vector<int32_t> first(refined.classes, -1);
  first[refined.cls[grammar.root]] = grammar.root;
  int32_t count = 1;
  for (int32_t r = 0; r < n; ++r) {
    if (first[refined.cls[r]] < 0) {
      first[refined.cls[r]] = r;
      ++count;
    }
  }
  if (count == n) return grammar;
  for (Expr& x : grammar.exprs) {
    if (x.kind == ExprKind::kRuleRef) x.rule = first[refined.cls[x.rule]];
  }
  return RemoveUnreachableRules(std::move(grammar));
}

Grammar RemoveUnreachableRules(Grammar grammar) {
  const size_t num_rules = grammar.rules.size();
  // Bytes, not vector<bool> bits, and one stack for all rules: this pass
  // runs twice per JSON Schema compile.
  std::vector<char> rule_kept(num_rules, 0);
  std::vector<char> expr_kept(grammar.exprs.size(), 0);
  std::vector<int32_t> queue = {grammar.root}, stack;
  rule_kept[grammar.root] = 1;
  for (size_t head = 0; head < queue.size(); ++head) {
    WalkBody(grammar, grammar.rules[queue[head]].body, &expr_kept, &stack,
             [&](int32_t rule) {
               if (!rule_kept[rule]) {
                 rule_kept[rule] = 1;
                 queue.push_back(rule);
               }
             });
  }

  // Everything kept (a grammar normalized before): nothing to renumber.
  const size_t rules_kept =
      static_cast<size_t>(std::count(rule_kept.begin(), rule_kept.end(), 1));
  const size_t exprs_kept =
      static_cast<size_t>(std::count(expr_kept.begin(), expr_kept.end(), 1));
  if (rules_kept == num_rules && exprs_kept == grammar.exprs.size()) {
    return grammar;
  }
  // Compacted in place: kept expressions move down over dropped ones, and
  // their children, which precede them, are renumbered already.
  std::vector<int32_t> new_expr(grammar.exprs.size(), -1);
  std::vector<int32_t> new_rule(num_rules, -1);
  int32_t next_rule = 0;
  for (size_t r = 0; r < num_rules; ++r) {
    if (rule_kept[r]) new_rule[r] = next_rule++;
  }
  int32_t next_expr = 0;
  for (size_t i = 0; i < grammar.exprs.size(); ++i) {
    if (!expr_kept[i]) continue;
    Expr& e = grammar.exprs[i];
    for (int32_t& child : e.children) child = new_expr[child];
    if (e.kind == ExprKind::kRuleRef) e.rule = new_rule[e.rule];
    new_expr[i] = next_expr;
    if (static_cast<size_t>(next_expr) != i) {
      grammar.exprs[next_expr] = std::move(e);
    }
    ++next_expr;
  }
  grammar.exprs.resize(next_expr);
  for (size_t r = 0; r < num_rules; ++r) {
    if (!rule_kept[r]) continue;
    Rule& rule = grammar.rules[r];
    rule.body = new_expr[rule.body];
    if (static_cast<size_t>(new_rule[r]) != r) {
      grammar.rules[new_rule[r]] = std::move(rule);
    }
  }
  grammar.rules.resize(next_rule);
  grammar.root = new_rule[grammar.root];
  return grammar;
}

std::vector<bool> NullableExprs(const Grammar& grammar) {
  // Horn-clause propagation: each expression waits for a number of its
  // dependencies to become nullable (all children of a sequence, one child of
  // a choice or repeat, the body of a referenced rule), then wakes its
  // dependents. Linear, whatever the order rules are defined in.
  const int32_t n = static_cast<int32_t>(grammar.exprs.size());
  std::vector<bool> nullable(n, false);
  std::vector<int32_t> waiting(n, 0);
  std::vector<int32_t> queue;
  for (int32_t i = 0; i < n; ++i) {
    const Expr& e = grammar.exprs[i];
    switch (e.kind) {
      case ExprKind::kBytes:
        if (e.bytes.empty()) queue.push_back(i);
        break;
      case ExprKind::kCharClass:
      case ExprKind::kByteClass:
        break;
      case ExprKind::kSequence:
        waiting[i] = static_cast<int32_t>(e.children.size());
        break;
      case ExprKind::kChoice:
      case ExprKind::kRuleRef:
        waiting[i] = 1;
        break;
      case ExprKind::kRepeat:
        if (e.min == 0) {
          queue.push_back(i);
        } else {
          waiting[i] = 1;
        }
        break;
    }
  }
  // Per expression, the expressions that wait on it.
  const internal::Predecessors dependents =
      internal::PredecessorsOf(n, [&](int32_t i, auto&& f) {
        const Expr& e = grammar.exprs[i];
        switch (e.kind) {
          case ExprKind::kSequence:
          case ExprKind::kChoice:
            for (int32_t child : e.children) f(child);
            break;
          case ExprKind::kRepeat:
            if (e.min != 0) f(e.children[0]);
            break;
          case ExprKind::kRuleRef:
            f(grammar.rules[e.rule].body);
            break;
          default:
            break;
        }
      });
  for (int32_t e : queue) nullable[e] = true;
  for (size_t head = 0; head < queue.size(); ++head) {
    const int32_t e = queue[head];
    for (int32_t k = dependents.begin[e]; k < dependents.begin[e + 1]; ++k) {
      const int32_t dependent = dependents.preds[k];
      if (nullable[dependent]) continue;
      if (--waiting[dependent] == 0) {
        nullable[dependent] = true;
        queue.push_back(dependent);
      }
    }
  }
  return nullable;
}

std::vector<bool> NullableRules(const Grammar& grammar) {
  const std::vector<bool> exprs = NullableExprs(grammar);
  std::vector<bool> rules(grammar.rules.size());
  for (size_t r = 0; r < grammar.rules.size(); ++r) {
    rules[r] = exprs[grammar.rules[r].body];
  }
  return rules;
}

absl::Status CheckNoLeftRecursion(const Grammar& grammar) {
  const std::vector<bool> nullable = NullableExprs(grammar);
  const int32_t num_rules = static_cast<int32_t>(grammar.rules.size());
  std::vector<std::vector<int32_t>> edges(num_rules);
  LeftEdgeCollector collector(grammar, nullable);
  for (int32_t r = 0; r < num_rules; ++r) edges[r] = collector.Collect(r);

  // Iterative depth-first search; a back edge to a rule still on the path
  // closes a cycle, which the path spells out.
  enum Color : uint8_t { kWhite, kGray, kBlack };
  std::vector<Color> color(num_rules, kWhite);
  std::vector<int32_t> order = {grammar.root};
  for (int32_t r = 0; r < num_rules; ++r) {
    if (r != grammar.root) order.push_back(r);
  }
  for (int32_t start : order) {
    if (color[start] != kWhite) continue;
    std::vector<std::pair<int32_t, size_t>> path = {{start, 0}};
    color[start] = kGray;
    while (!path.empty()) {
      auto& [rule, next_edge] = path.back();
      if (next_edge == edges[rule].size()) {
        color[rule] = kBlack;
        path.pop_back();
        continue;
      }
      const int32_t target = edges[rule][next_edge++];
      if (color[target] == kGray) {
        std::vector<std::string> chain;
        bool in_cycle = false;
        for (const auto& entry : path) {
          in_cycle = in_cycle || entry.first == target;
          if (in_cycle) chain.push_back(grammar.rules[entry.first].name);
        }
        chain.push_back(grammar.rules[target].name);
        return absl::InvalidArgumentError(
            absl::StrCat("left recursion: ", absl::StrJoin(chain, " -> ")));
      }
      if (color[target] == kWhite) {
        color[target] = kGray;
        path.push_back({target, 0});
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace grammard::grammar
