#include "grammar/syntax/grammar_passes.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grammar/internal/refine.h"

namespace grammard::grammar {
namespace {

// Marks every expression reachable from `root_expr` without following rule
// references, and reports the rules referenced on the way.
template <typename OnRuleRef>
void WalkBody(const Grammar& g, int32_t root_expr, std::vector<bool>* seen,
              OnRuleRef on_rule_ref) {
  std::vector<int32_t> stack = {root_expr};
  while (!stack.empty()) {
    const int32_t e = stack.back();
    stack.pop_back();
    if ((*seen)[e]) continue;
    (*seen)[e] = true;
    const Expr& expr = g.exprs[e];
    if (expr.kind == ExprKind::kRuleRef) on_rule_ref(expr.rule);
    for (int32_t child : expr.children) stack.push_back(child);
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

absl::StatusOr<Grammar> Normalize(const Grammar& grammar) {
  absl::Status status = grammar.Validate();
  if (!status.ok()) return status;
  Grammar reachable = RemoveUnreachableRules(grammar);
  status = CheckNoLeftRecursion(reachable);
  if (!status.ok()) return status;
  return reachable;
}

std::vector<int32_t> StructuralIds(const Grammar& grammar,
                                   const std::vector<int32_t>& rule_class) {
  std::vector<int32_t> id(grammar.exprs.size());
  std::unordered_map<std::string, int32_t> ids;
  std::string key;
  auto put = [&key](int64_t v) {
    char raw[sizeof v];
    std::memcpy(raw, &v, sizeof v);
    key.append(raw, sizeof v);
  };
  // Children precede parents, so their ids are known.
  for (size_t e = 0; e < grammar.exprs.size(); ++e) {
    const Expr& x = grammar.exprs[e];
    key.assign(1, static_cast<char>(x.kind));
    put(x.min);
    put(x.max);
    put(x.kind != ExprKind::kRuleRef ? -1
        : rule_class.empty()         ? x.rule
                                     : rule_class[x.rule]);
    put(static_cast<int64_t>(x.ranges.size()));
    for (const CharRange& r : x.ranges) {
      put((static_cast<int64_t>(r.lo) << 32) | r.hi);
    }
    put(static_cast<int64_t>(x.children.size()));
    for (int32_t c : x.children) put(id[c]);
    key += x.bytes;
    id[e] = ids.emplace(key, static_cast<int32_t>(ids.size())).first->second;
  }
  return id;
}

Grammar MergeEqualRules(const Grammar& grammar) {
  const int32_t n = static_cast<int32_t>(grammar.rules.size());
  constexpr int64_t kMaxWork = int64_t{1} << 22;
  // A rule's shape: its body with every reference alike. Two rules are equal
  // when their shapes are and the rules they refer to, in the order a walk
  // of the body tree meets them, are equal in turn.
  const std::vector<int32_t> shape =
      StructuralIds(grammar, std::vector<int32_t>(n, 0));
  std::vector<std::vector<int32_t>> refs(n);
  std::vector<int32_t> cls(n);
  int64_t work = 0;
  for (int32_t r = 0; r < n; ++r) {
    cls[r] = shape[grammar.rules[r].body];
    // The tree, not the DAG: shared children are walked once per parent, so
    // that equal lists mean references at equal places.
    std::vector<int32_t> stack = {grammar.rules[r].body};
    while (!stack.empty()) {
      if (++work > kMaxWork) return grammar;
      const Expr& x = grammar.exprs[stack.back()];
      stack.pop_back();
      if (x.kind == ExprKind::kRuleRef) refs[r].push_back(x.rule);
      stack.insert(stack.end(), x.children.rbegin(), x.children.rend());
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
  Grammar merged = grammar;
  for (Expr& x : merged.exprs) {
    if (x.kind == ExprKind::kRuleRef) x.rule = first[refined.cls[x.rule]];
  }
  return RemoveUnreachableRules(merged);
}

Grammar RemoveUnreachableRules(const Grammar& grammar) {
  const size_t num_rules = grammar.rules.size();
  std::vector<bool> rule_kept(num_rules, false);
  std::vector<bool> expr_kept(grammar.exprs.size(), false);
  std::vector<int32_t> queue = {grammar.root};
  rule_kept[grammar.root] = true;
  for (size_t head = 0; head < queue.size(); ++head) {
    WalkBody(grammar, grammar.rules[queue[head]].body, &expr_kept,
             [&](int32_t rule) {
               if (!rule_kept[rule]) {
                 rule_kept[rule] = true;
                 queue.push_back(rule);
               }
             });
  }

  std::vector<int32_t> new_rule(num_rules, -1);
  int32_t next_rule = 0;
  for (size_t r = 0; r < num_rules; ++r) {
    if (rule_kept[r]) new_rule[r] = next_rule++;
  }
  Grammar out;
  std::vector<int32_t> new_expr(grammar.exprs.size(), -1);
  for (size_t i = 0; i < grammar.exprs.size(); ++i) {
    if (!expr_kept[i]) continue;
    Expr e = grammar.exprs[i];
    for (int32_t& child : e.children) child = new_expr[child];
    if (e.kind == ExprKind::kRuleRef) e.rule = new_rule[e.rule];
    new_expr[i] = static_cast<int32_t>(out.exprs.size());
    out.exprs.push_back(std::move(e));
  }
  for (size_t r = 0; r < num_rules; ++r) {
    if (rule_kept[r]) {
      out.AddRule(grammar.rules[r].name, new_expr[grammar.rules[r].body]);
    }
  }
  out.root = new_rule[grammar.root];
  return out;
}

std::vector<bool> NullableExprs(const Grammar& grammar) {
  // Horn-clause propagation: each expression waits for a number of its
  // dependencies to become nullable (all children of a sequence, one child of
  // a choice or repeat, the body of a referenced rule), then wakes its
  // dependents. Linear, whatever the order rules are defined in.
  const size_t n = grammar.exprs.size();
  std::vector<bool> nullable(n, false);
  std::vector<int32_t> waiting(n, 0);
  std::vector<std::vector<int32_t>> dependents(n);
  std::vector<int32_t> queue;
  for (size_t i = 0; i < n; ++i) {
    const Expr& e = grammar.exprs[i];
    const int32_t self = static_cast<int32_t>(i);
    switch (e.kind) {
      case ExprKind::kBytes:
        if (e.bytes.empty()) queue.push_back(self);
        break;
      case ExprKind::kCharClass:
      case ExprKind::kByteClass:
        break;
      case ExprKind::kSequence:
        waiting[i] = static_cast<int32_t>(e.children.size());
        for (int32_t child : e.children) dependents[child].push_back(self);
        break;
      case ExprKind::kChoice:
        waiting[i] = 1;
        for (int32_t child : e.children) dependents[child].push_back(self);
        break;
      case ExprKind::kRepeat:
        if (e.min == 0) {
          queue.push_back(self);
        } else {
          waiting[i] = 1;
          dependents[e.children[0]].push_back(self);
        }
        break;
      case ExprKind::kRuleRef:
        waiting[i] = 1;
        dependents[grammar.rules[e.rule].body].push_back(self);
        break;
    }
  }
  for (int32_t e : queue) nullable[e] = true;
  for (size_t head = 0; head < queue.size(); ++head) {
    for (int32_t dependent : dependents[queue[head]]) {
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
