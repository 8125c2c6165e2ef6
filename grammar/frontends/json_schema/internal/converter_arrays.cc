#include "grammar/base/status_macros.h"
#include "grammar/frontends/json_schema/internal/converter_impl.h"

namespace grammard::grammar::json_schema_internal {

namespace {

// Values uniqueItems may choose among.
constexpr int kMaxUniqueValues = 12;

const Json& StaticValue(int which) {
  static const Json kValues[] = {Json(nullptr), Json(true), Json(false)};
  return kValues[which];
}

}  // namespace

absl::StatusOr<int32_t> Converter::ArrayExpr(const ArrayC& a, int depth) {
  int64_t max_items = a.max_items;
  // Past the prefix, a `false` rest schema ends the array.
  if (IsFalseSet(a.rest)) {
    const int64_t p = static_cast<int64_t>(a.prefix.size());
    max_items = max_items < 0 ? p : std::min(max_items, p);
  }
  // An item that must be absent also ends the array there.
  for (size_t i = 0; i < a.prefix.size(); ++i) {
    if (IsFalseSet(a.prefix[i])) {
      const int64_t p = static_cast<int64_t>(i);
      max_items = max_items < 0 ? p : std::min(max_items, p);
      break;
    }
  }
  if (max_items >= 0 && a.min_items > max_items) return e_.Nothing();
  ArrayC b = a;
  b.max_items = max_items;
  if (b.unique && (max_items < 0 || max_items > 1)) {
    if (!b.contains.empty()) {
      GRAMMARD_RETURN_IF_ERROR(
          Unsupported(b.unique_loc, "uniqueItems",
                      "uniqueItems together with contains is not supported"));
    } else {
      return UniqueArray(b, depth);
    }
  }
  if (!b.contains.empty()) return ContainsArray(b, depth);
  const int32_t max_repeat = GrammarLimits{}.max_repeat;
  if (b.min_items > max_repeat || max_items > max_repeat) {
    GRAMMARD_RETURN_IF_ERROR(Unsupported(
        b.loc, b.min_items > max_repeat ? "minItems" : "maxItems",
        absl::StrCat("item counts above ", max_repeat, " are not supported")));
    b.min_items = std::min<int64_t>(b.min_items, max_repeat);
    max_items = max_items > max_repeat ? -1 : max_items;
  }
  const int64_t p = static_cast<int64_t>(b.prefix.size());
  // tail(i): items i, i+1, ... given that i items came before (so each is
  // preceded by a separator), built from the back (prefixes may be long).
  auto rest_items = [&](int64_t i) -> int32_t {
    if (max_items >= 0 && i >= max_items) return e_.Bytes("");
    const int32_t lo =
        static_cast<int32_t>(std::max<int64_t>(0, b.min_items - i));
    const int32_t hi =
        max_items < 0 ? kUnbounded : static_cast<int32_t>(max_items - i);
    return e_.g().AddRepeat(
        e_.Seq({e_.ItemSeparator(depth), ValueRef(b.rest, depth + 1)}), lo, hi);
  };
  int32_t tail = rest_items(std::max<int64_t>(p, 1));
  for (int64_t i = p - 1; i >= 1; --i) {
    if (max_items >= 0 && i >= max_items) {
      tail = e_.Bytes("");
      continue;
    }
    const int32_t x = e_.Seq(
        {e_.ItemSeparator(depth), ValueRef(b.prefix[i], depth + 1), tail});
    tail = i >= b.min_items ? e_.Alt({e_.Bytes(""), x}) : x;
    // A rule now and then keeps long tuples from nesting past the
    // grammar's depth limit.
    if (i % 128 == 0) tail = e_.Ref(e_.NewRule("items", tail));
  }
  int32_t nonempty = e_.Nothing();
  if (max_items != 0) {
    nonempty =
        e_.Seq({e_.Open('[', depth), ValueRef(ItemTerms(b, 0), depth + 1), tail,
                e_.Close(']', depth)});
  }
  return e_.Alt(
      {b.min_items == 0 ? e_.Empty('[', ']') : e_.Nothing(), nonempty});
}

absl::StatusOr<int32_t> Converter::ContainsArray(const ArrayC& a, int depth) {
  if (a.contains.size() > 1) {
    GRAMMARD_RETURN_IF_ERROR(
        Unsupported(a.contains[1].loc, "contains",
                    "more than one contains on the same array"));
  }
  const ContainsC& c = a.contains[0];
  const int64_t p = static_cast<int64_t>(a.prefix.size());
  // Positions saturate at `top`: past it, every position behaves alike.
  const int64_t top = a.max_items >= 0
                          ? a.max_items
                          : std::max<int64_t>({p, a.min_items, int64_t{1}});
  // Counts of matching items saturate at `cap`.
  const int64_t cap = c.max >= 0 ? c.max + 1 : c.min;
  if ((top + 1) * (cap + 1) > kMaxCountingRules) {
    GRAMMARD_RETURN_IF_ERROR(Unsupported(
        c.loc, "contains",
        absl::StrCat("counting contains over ", top, " items needs more than ",
                     kMaxCountingRules, " rules")));
    ArrayC plain = a;
    plain.contains.clear();
    return ArrayExpr(plain, depth);
  }
  // Matching and non-matching items at each position.
  TermSet negated;
  bool never_matches = IsFalseSet(c.schema);
  if (c.schema.size() == 1 && !never_matches) {
    negated = Canon({Term{c.schema[0].loc, !c.schema[0].neg}});
  }
  auto item = [&](int64_t pos, bool match) -> int32_t {
    const TermSet& base = ItemTerms(a, static_cast<size_t>(pos));
    if (match) {
      return never_matches ? e_.Nothing()
                           : ValueRef(Canon(Join(base, c.schema)), depth + 1);
    }
    if (never_matches) return ValueRef(base, depth + 1);
    if (c.schema.empty()) return e_.Nothing();
    if (c.schema.size() == 1) {
      return ValueRef(Canon(Join(base, negated)), depth + 1);
    }
    std::vector<int32_t> alts;
    for (Term t : c.schema) {
      alts.push_back(
          ValueRef(Canon(Join(base, {Term{t.loc, !t.neg}})), depth + 1));
    }
    return e_.Alt(std::move(alts));
  };
  auto accepts = [&](int64_t pos, int64_t count) {
    return pos >= a.min_items && count >= c.min &&
           (c.max < 0 || count <= c.max);
  };
  std::map<std::pair<int64_t, int64_t>, int32_t> rules;
  std::vector<std::pair<int64_t, int64_t>> pending;
  auto state = [&](int64_t pos, int64_t count) {
    pos = std::min(pos, top);
    count = std::min(count, cap);
    auto key = std::make_pair(pos, count);
    auto it = rules.find(key);
    if (it != rules.end()) return e_.Ref(it->second);
    const int32_t rule = e_.NewRule("contains_state");
    rules.emplace(key, rule);
    pending.push_back(key);
    return e_.Ref(rule);
  };
  // The items after the first `pos` ones, each with its separator.
  auto steps = [&](int64_t pos, int64_t count, bool first) {
    std::vector<int32_t> alts;
    if (a.max_items >= 0 && pos >= a.max_items) return e_.Nothing();
    const int32_t sep = first ? e_.Bytes("") : e_.ItemSeparator(depth);
    for (bool match : {true, false}) {
      const int32_t x = item(pos, match);
      if (e_.IsNothing(x)) continue;
      alts.push_back(e_.Seq({sep, x, state(pos + 1, count + (match ? 1 : 0))}));
    }
    return e_.Alt(std::move(alts));
  };
  const int32_t start =
      e_.Alt({accepts(0, 0) ? e_.Empty('[', ']') : e_.Nothing(),
              e_.Seq({e_.Open('[', depth), steps(0, 0, true)})});
  while (!pending.empty()) {
    auto [pos, count] = pending.back();
    pending.pop_back();
    e_.g().rules[rules[{pos, count}]].body =
        e_.Alt({accepts(pos, count) ? e_.Close(']', depth) : e_.Nothing(),
                steps(pos, count, false)});
  }
  return start;
}

absl::StatusOr<std::optional<std::vector<const Json*>>> Converter::FiniteValues(
    const TermSet& ts) {
  using Out = std::optional<std::vector<const Json*>>;
  if (ts.empty()) return Out();
  absl::StatusOr<Dnf> d = ExpandSet(ts);
  if (!d.ok()) return d.status();
  ValueList values;
  auto add = [&](const Json* v, const SimpleSchema& s) -> absl::Status {
    absl::StatusOr<bool> ok = CheckValue(*v, s, 0);
    if (!ok.ok()) return ok.status();
    if (*ok) values.Add(v);
    return absl::OkStatus();
  };
  for (const Alt& alt : *d) {
    absl::StatusOr<const SimpleSchema*> s = Merge(alt);
    if (!s.ok()) return s.status();
    const SimpleSchema& m = **s;
    if (m.has_values) {
      for (const Json* v : m.values) {
        GRAMMARD_RETURN_IF_ERROR(add(v, m));
      }
    } else if ((m.types & ~(kNullT | kBoolT)) == 0) {
      for (int i = 0; i < 3; ++i) {
        GRAMMARD_RETURN_IF_ERROR(add(&StaticValue(i), m));
      }
    } else {
      return Out();
    }
  }
  return Out(std::vector<const Json*>(values.begin(), values.end()));
}

absl::StatusOr<int32_t> Converter::UniqueArray(const ArrayC& a, int depth) {
  // Unique items are decidable when every position allows a few listed
  // values: the grammar then tracks the set of values used so far.
  const size_t positions = a.prefix.size() + 1;
  std::vector<std::vector<const Json*>> allowed(positions);
  ValueList all;
  for (size_t i = 0; i < positions; ++i) {
    const TermSet& ts = ItemTerms(a, i);
    if (i == a.prefix.size() && IsFalseSet(ts)) break;
    absl::StatusOr<std::optional<std::vector<const Json*>>> v =
        FiniteValues(ts);
    if (!v.ok()) return v.status();
    if (!*v) {
      GRAMMARD_RETURN_IF_ERROR(Unsupported(
          a.unique_loc, "uniqueItems",
          "unique items are enforced only among listed values (enum, "
          "const, booleans, null)"));
      ArrayC plain = a;
      plain.unique = false;
      return ArrayExpr(plain, depth);
    }
    allowed[i] = **v;
    for (const Json* x : **v) all.Add(x);
  }
  if (all.size() > static_cast<size_t>(kMaxUniqueValues)) {
    GRAMMARD_RETURN_IF_ERROR(Unsupported(
        a.unique_loc, "uniqueItems",
        absl::StrCat("more than ", kMaxUniqueValues, " values to keep apart")));
    ArrayC plain = a;
    plain.unique = false;
    return ArrayExpr(plain, depth);
  }
  auto index_of = [&](const Json* v) {
    const Json* listed = all.Find(*v);
    return static_cast<size_t>(std::find(all.begin(), all.end(), listed) -
                               all.begin());
  };
  std::vector<uint32_t> masks(positions, 0);
  for (size_t i = 0; i < positions; ++i) {
    for (const Json* v : allowed[i]) masks[i] |= 1u << index_of(v);
  }
  std::vector<int32_t> literal;
  for (const Json* v : all) {
    absl::StatusOr<int32_t> x = e_.Value(*v, depth + 1);
    if (!x.ok()) return x.status();
    literal.push_back(*x);
  }
  const int64_t max_items = a.max_items < 0
                                ? static_cast<int64_t>(all.size())
                                : std::min<int64_t>(a.max_items, all.size());
  std::map<std::pair<int64_t, uint32_t>, int32_t> rules;
  std::vector<std::pair<int64_t, uint32_t>> pending;
  absl::Status budget;
  auto state = [&](int64_t pos, uint32_t used) {
    auto key = std::make_pair(pos, used);
    auto it = rules.find(key);
    if (it != rules.end()) return e_.Ref(it->second);
    if (static_cast<int64_t>(rules.size()) >= kMaxCountingRules) {
      budget = absl::ResourceExhaustedError("too many states");
    }
    const int32_t rule = e_.NewRule("unique_state");
    rules.emplace(key, rule);
    pending.push_back(key);
    return e_.Ref(rule);
  };
  auto steps = [&](int64_t pos, uint32_t used, bool first) {
    std::vector<int32_t> alts;
    if (pos >= max_items) return e_.Nothing();
    const uint32_t mask =
        masks[std::min<size_t>(static_cast<size_t>(pos), positions - 1)];
    const int32_t sep = first ? e_.Bytes("") : e_.ItemSeparator(depth);
    for (size_t k = 0; k < all.size(); ++k) {
      if (!(mask & (1u << k)) || (used & (1u << k))) continue;
      alts.push_back(e_.Seq({sep, literal[k], state(pos + 1, used | 1u << k)}));
    }
    return e_.Alt(std::move(alts));
  };
  const int32_t start =
      e_.Alt({a.min_items == 0 ? e_.Empty('[', ']') : e_.Nothing(),
              e_.Seq({e_.Open('[', depth), steps(0, 0, true)})});
  while (!pending.empty() && budget.ok()) {
    auto [pos, used] = pending.back();
    pending.pop_back();
    e_.g().rules[rules[{pos, used}]].body =
        e_.Alt({pos >= a.min_items ? e_.Close(']', depth) : e_.Nothing(),
                steps(pos, used, false)});
  }
  if (!budget.ok()) {
    // Left unfinished, the states match nothing; the array falls back below.
    for (const auto& key : pending)
      e_.g().rules[rules[key]].body = e_.Nothing();
    GRAMMARD_RETURN_IF_ERROR(
        Unsupported(a.unique_loc, "uniqueItems",
                    absl::StrCat("tracking unique items needs more than ",
                                 kMaxCountingRules, " rules")));
    ArrayC plain = a;
    plain.unique = false;
    return ArrayExpr(plain, depth);
  }
  return start;
}

}  // namespace grammard::grammar::json_schema_internal
