#include <optional>

#include "grammar/base/status_macros.h"
#include "grammar/frontends/json_schema/internal/converter_impl.h"

namespace grammard::grammar::json_schema_internal {

namespace {

// Values uniqueItems may choose among.
constexpr int kMaxUniqueValues = 12;
// contains counted on one array: items are read in 2^k ways.
constexpr size_t kMaxContains = 4;

// Listed values of a unique array: a frame's member bits.
constexpr size_t kMaxListedDistinct = 64;

// null, true, false, then the number zero.
const Json& StaticValue(int which) {
  static const Json kValues[] = {Json(nullptr), Json(true), Json(false),
                                 Json(0)};
  return kValues[which];
}
const Json& Zero() { return StaticValue(3); }

}  // namespace

absl::StatusOr<int32_t> Converter::ArrayExpr(
    const ArrayC& a, int depth, const std::vector<DistinctPosition>* distinct) {
  // Kept distinct, a position's growing values are a call of a distinct
  // rule, and each listed value two rules counted once in the array's frame:
  // one for the first item, one that begins with its separator for later
  // items, so that the separator is refused once every listed value a
  // position allows is written (the whitespace before it stays the array's).
  std::vector<int32_t> growing;
  std::vector<std::vector<size_t>> listed_at;
  std::vector<const Json*> listed;
  std::vector<int32_t> listed_first, listed_next;
  if (distinct) {
    for (const DistinctPosition& d : *distinct) {
      std::vector<int32_t> alts;
      for (const SimpleSchema& s : d.endless) {
        absl::StatusOr<int32_t> x = EmitAlt(s, depth + 1);
        if (!x.ok()) return x.status();
        alts.push_back(*x);
      }
      int32_t rule = -1;
      if (!alts.empty()) {
        rule = e_.NewRule("distinct_item", e_.Alt(std::move(alts)));
        e_.g().rules[rule].distinct = true;
      }
      growing.push_back(rule);
      std::vector<size_t> at;
      for (const Json* v : d.listed) {
        size_t k = 0;
        while (k < listed.size() && *listed[k] != *v) ++k;
        if (k == listed.size()) {
          absl::StatusOr<int32_t> x = e_.Value(*v, depth + 1);
          if (!x.ok()) return x.status();
          const int32_t first = e_.NewRule("listed_item", *x);
          const int32_t next = e_.NewRule(
              "listed_item_next", e_.Seq({e_.ItemSeparatorAfterWs(depth), *x}));
          for (int32_t r : {first, next}) {
            e_.g().rules[r].member_bit = static_cast<int8_t>(k);
          }
          e_.g().rules[next].member_guard.Add(static_cast<int>(k));
          listed.push_back(v);
          listed_first.push_back(e_.Ref(first));
          listed_next.push_back(e_.Ref(next));
        }
        at.push_back(k);
      }
      listed_at.push_back(std::move(at));
    }
  }
  const size_t rest = a.prefix.size();
  // The first item (position 0) and a later one at position i, with its
  // separator.
  auto first = [&](size_t i) {
    if (!distinct) return ValueRef(ItemTerms(a, i), depth + 1);
    const size_t at = std::min(i, rest);
    std::vector<int32_t> alts;
    if (growing[at] >= 0) alts.push_back(e_.Ref(growing[at]));
    for (size_t k : listed_at[at]) alts.push_back(listed_first[k]);
    return e_.Alt(std::move(alts));
  };
  auto next = [&](size_t i) {
    if (!distinct) {
      return e_.Seq(
          {e_.ItemSeparator(depth), ValueRef(ItemTerms(a, i), depth + 1)});
    }
    const size_t at = std::min(i, rest);
    std::vector<int32_t> alts;
    if (growing[at] >= 0) {
      alts.push_back(
          e_.Seq({e_.ItemSeparatorAfterWs(depth), e_.Ref(growing[at])}));
    }
    for (size_t k : listed_at[at]) alts.push_back(listed_next[k]);
    return e_.Seq({e_.Ws(), e_.Alt(std::move(alts))});
  };
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
    return e_.g().AddRepeat(next(rest), lo, hi);
  };
  int32_t tail = rest_items(std::max<int64_t>(p, 1));
  for (int64_t i = p - 1; i >= 1; --i) {
    if (max_items >= 0 && i >= max_items) {
      tail = e_.Bytes("");
      continue;
    }
    const int32_t x = e_.Seq({next(static_cast<size_t>(i)), tail});
    tail = i >= b.min_items ? e_.Alt({e_.Bytes(""), x}) : x;
    // A rule now and then keeps long tuples from nesting past the
    // grammar's depth limit (never where the array's frame counts its
    // items: DistinctPositions refuses such tuples).
    if (i % 128 == 0 && !distinct) tail = e_.Ref(e_.NewRule("items", tail));
  }
  int32_t nonempty = e_.Nothing();
  if (max_items != 0) {
    nonempty =
        e_.Seq({e_.Open('[', depth), first(0), tail, e_.Close(']', depth)});
  }
  const int32_t array =
      e_.Alt({b.min_items == 0 ? e_.Empty('[', ']') : e_.Nothing(), nonempty});
  // The array's own rule: its frames are where the items seen are kept.
  return distinct ? e_.Ref(e_.NewRule("distinct_items", array)) : array;
}

absl::StatusOr<std::optional<DistinctPosition>> Converter::SplitDistinct(
    const TermSet& ts) {
  using Out = std::optional<DistinctPosition>;
  std::vector<SimpleSchema> alts;
  if (ts.empty()) {
    alts.emplace_back();
  } else {
    absl::StatusOr<Dnf> d = ExpandSet(ts);
    if (!d.ok()) return d.status();
    for (const Alt& alt : *d) {
      absl::StatusOr<const SimpleSchema*> merged = Merge(alt);
      if (!merged.ok()) return merged.status();
      alts.push_back(**merged);
    }
  }
  ValueList listed;
  auto add = [&](const Json* v, const SimpleSchema& s) {
    return AddIfValid(v, s, &listed);
  };
  DistinctPosition out;
  for (const SimpleSchema& m : alts) {
    GRAMMARD_RETURN_IF_ERROR(Tick());
    if (m.has_values) {
      for (const Json* v : m.values) GRAMMARD_RETURN_IF_ERROR(add(v, m));
      continue;
    }
    for (int i = 0; i < 3; ++i)
      GRAMMARD_RETURN_IF_ERROR(add(&StaticValue(i), m));
    SimpleSchema e = m;
    e.types &= static_cast<uint8_t>(~(kNullT | kBoolT));
    if (e.types & kNumT) {
      GRAMMARD_RETURN_IF_ERROR(add(&Zero(), m));
      e.excluded.Add(&Zero());
      e.number.integer_zero_fraction = false;
    }
    if (e.types != 0) out.endless.push_back(std::move(e));
  }
  // The growing values leave the listed ones to their counted rules.
  for (SimpleSchema& e : out.endless) {
    for (const Json* v : listed) {
      if (!v->is_object() && !v->is_array()) {
        e.excluded.Add(v);
      } else if (e.types & (kArrT | kObjT)) {
        return Out();
      }
    }
    absl::StatusOr<bool> grows = EndlessAlt(e);
    if (!grows.ok()) return grows.status();
    if (!*grows) return Out();
  }
  out.listed.assign(listed.begin(), listed.end());
  return Out(std::move(out));
}

absl::StatusOr<bool> Converter::EndlessAlt(const SimpleSchema& m) {
  if (m.has_values || (m.types & (kNullT | kBoolT)) != 0) return false;
  if (m.types & kNumT) {
    // A digit more is always a new value once zero, exponents and an
    // integer's zero fraction are out (the bounded number syntax has no
    // exponents); bounds and multiples may leave one value only.
    const NumberConstraints& c = m.number;
    if (c.lower || c.upper || !c.multiple_of.empty() ||
        !c.not_multiple_of.empty() || (c.integer && c.integer_zero_fraction) ||
        !m.excluded.Contains(Zero())) {
      return false;
    }
  }
  if (m.types & kStrT) {
    const StringC& c = m.string;
    if (c.max_len >= 0 || !c.must_not.empty()) return false;
    // Patterns and formats: their automaton must always grow (excluded
    // strings and a minimum length take finitely many away).
    std::optional<CharDfa> all;
    for (const RegexRef& r : c.must) {
      absl::StatusOr<const CharDfa*> dfa = RegexDfa(r);
      if (!dfa.ok()) {
        if (IsDeadline(dfa.status())) return dfa.status();
        return false;
      }
      if (!all) {
        all = **dfa;
        continue;
      }
      absl::StatusOr<CharDfa> both =
          json_schema_internal::Intersect(*all, **dfa, opt_.dfa);
      if (!both.ok()) {
        if (IsDeadline(both.status())) return both.status();
        return false;
      }
      all = *std::move(both);
    }
    if (all && !AlwaysGrows(*all)) return false;
  }
  if (m.types & kArrT) {
    const ArrayC& a = m.array;
    bool prefix_false = false;
    for (const TermSet& p : a.prefix) prefix_false |= IsFalseSet(p);
    if (a.max_items >= 0 || IsFalseSet(a.rest) || prefix_false ||
        !a.contains.empty()) {
      return false;
    }
    // Unique items of their own: one more needs a value that may always
    // grow.
    if (a.unique) {
      absl::StatusOr<std::optional<std::vector<DistinctPosition>>> d =
          DistinctPositions(a);
      if (!d.ok()) return d.status();
      if (!*d || (*d)->back().endless.empty()) return false;
    }
  }
  if (m.types & kObjT) {
    const ObjectC& o = m.object;
    if (o.max_props >= 0 || !o.names.empty()) return false;
    for (const KeyRule& k : o.rules) {
      if (k.has_additional && !k.additional.empty()) return false;
    }
  }
  return true;
}

absl::StatusOr<int32_t> Converter::ContainsArray(const ArrayC& a, int depth) {
  // Several contains (from allOf, say) are counted together: a state is the
  // position and one count per contains, and an item is read as the set of
  // contains it matches (and fails the others).
  const size_t k = a.contains.size();
  if (k > kMaxContains) {
    GRAMMARD_RETURN_IF_ERROR(
        Unsupported(a.contains[kMaxContains].loc, "contains",
                    absl::StrCat("more than ", kMaxContains,
                                 " contains on the same array")));
    ArrayC fewer = a;
    fewer.contains.resize(kMaxContains);
    return ContainsArray(fewer, depth);
  }
  const int64_t p = static_cast<int64_t>(a.prefix.size());
  // Positions saturate at `top`: past it, every position behaves alike.
  const int64_t top = a.max_items >= 0
                          ? a.max_items
                          : std::max<int64_t>({p, a.min_items, int64_t{1}});
  // Counts of matching items saturate at cap[i].
  std::vector<int64_t> cap(k);
  int64_t states = top + 1;
  for (size_t i = 0; i < k; ++i) {
    const ContainsC& c = a.contains[i];
    cap[i] = c.max >= 0 ? c.max + 1 : c.min;
    states = states > kMaxCountingRules ? states : states * (cap[i] + 1);
  }
  if (states > kMaxCountingRules) {
    GRAMMARD_RETURN_IF_ERROR(Unsupported(
        a.contains[0].loc, "contains",
        absl::StrCat("counting contains over ", top, " items needs more than ",
                     kMaxCountingRules, " rules")));
    ArrayC plain = a;
    plain.contains.clear();
    return ArrayExpr(plain, depth);
  }
  // Per contains: its schema negated, as alternatives (one per term).
  std::vector<std::vector<TermSet>> negated(k);
  std::vector<bool> never_matches(k);
  for (size_t i = 0; i < k; ++i) {
    const TermSet& schema = a.contains[i].schema;
    never_matches[i] = IsFalseSet(schema);
    if (never_matches[i]) continue;
    for (Term t : schema) negated[i].push_back(Canon({Term{t.loc, !t.neg}}));
  }
  // An item at `pos` that matches exactly the contains in `matched`.
  auto item = [&](int64_t pos, uint32_t matched) -> int32_t {
    std::vector<TermSet> alts = {ItemTerms(a, static_cast<size_t>(pos))};
    for (size_t i = 0; i < k; ++i) {
      const bool match = (matched >> i) & 1;
      if (never_matches[i]) {
        if (match) return e_.Nothing();
        continue;
      }
      if (match) {
        for (TermSet& alt : alts) alt = Join(alt, a.contains[i].schema);
        continue;
      }
      std::vector<TermSet> next;
      for (const TermSet& alt : alts) {
        for (const TermSet& n : negated[i]) next.push_back(Join(alt, n));
      }
      alts = std::move(next);
    }
    if (alts.empty()) return e_.Nothing();  // a contains matching anything
    if (alts.size() == 1) return ValueRef(Canon(alts[0]), depth + 1);
    std::vector<int32_t> refs;
    for (const TermSet& alt : alts) {
      refs.push_back(ValueRef(Canon(alt), depth + 1));
    }
    return e_.Alt(std::move(refs));
  };
  // Whether an array may end after `pos` items with these counts.
  auto accepts = [&](int64_t pos, const std::vector<int64_t>& counts) {
    if (pos < a.min_items) return false;
    for (size_t i = 0; i < k; ++i) {
      const ContainsC& c = a.contains[i];
      if (counts[i] < c.min || (c.max >= 0 && counts[i] > c.max)) return false;
    }
    return true;
  };
  // Keyed by (position, counts...).
  std::map<std::vector<int64_t>, int32_t> rules;
  std::vector<std::vector<int64_t>> pending;
  auto state = [&](std::vector<int64_t> key) {
    key[0] = std::min(key[0], top);
    for (size_t i = 0; i < k; ++i) key[i + 1] = std::min(key[i + 1], cap[i]);
    auto it = rules.find(key);
    if (it != rules.end()) return e_.Ref(it->second);
    const int32_t rule = e_.NewRule("contains_state");
    rules.emplace(key, rule);
    pending.push_back(std::move(key));
    return e_.Ref(rule);
  };
  // The items after the first key[0] ones, each with its separator.
  auto steps = [&](const std::vector<int64_t>& key, bool first) {
    const int64_t pos = key[0];
    std::vector<int32_t> alts;
    if (a.max_items >= 0 && pos >= a.max_items) return e_.Nothing();
    const int32_t sep = first ? e_.Bytes("") : e_.ItemSeparator(depth);
    // Matching everything first, as a single contains always did.
    for (uint32_t matched = (1u << k); matched-- > 0;) {
      const int32_t x = item(pos, matched);
      if (e_.IsNothing(x)) continue;
      std::vector<int64_t> next = key;
      ++next[0];
      for (size_t i = 0; i < k; ++i) next[i + 1] += (matched >> i) & 1;
      alts.push_back(e_.Seq({sep, x, state(std::move(next))}));
    }
    return e_.Alt(std::move(alts));
  };
  const std::vector<int64_t> origin(k + 1, 0);
  const int32_t start =
      e_.Alt({accepts(0, std::vector<int64_t>(k, 0)) ? e_.Empty('[', ']')
                                                     : e_.Nothing(),
              e_.Seq({e_.Open('[', depth), steps(origin, true)})});
  while (!pending.empty()) {
    const std::vector<int64_t> key = std::move(pending.back());
    pending.pop_back();
    const std::vector<int64_t> counts(key.begin() + 1, key.end());
    e_.g().rules[rules[key]].body =
        e_.Alt({accepts(key[0], counts) ? e_.Close(']', depth) : e_.Nothing(),
                steps(key, false)});
  }
  return start;
}

absl::Status Converter::AddIfValid(const Json* v, const SimpleSchema& s,
                                   ValueList* list) {
  absl::StatusOr<bool> ok = CheckValue(*v, s, 0);
  if (!ok.ok()) return ok.status();
  if (*ok) list->Add(v);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::vector<const Json*>>> Converter::FiniteValues(
    const TermSet& ts) {
  using Out = std::optional<std::vector<const Json*>>;
  if (ts.empty()) return Out();
  absl::StatusOr<Dnf> d = ExpandSet(ts);
  if (!d.ok()) return d.status();
  ValueList values;
  auto add = [&](const Json* v, const SimpleSchema& s) {
    return AddIfValid(v, s, &values);
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

absl::StatusOr<std::optional<std::vector<DistinctPosition>>>
Converter::DistinctPositions(const ArrayC& a) {
  using Out = std::optional<std::vector<DistinctPosition>>;
  // ArrayExpr puts every 128th position of a tuple in a rule of its own,
  // whose frames would count apart from the array's.
  if (a.prefix.size() >= 128) return Out();
  std::vector<DistinctPosition> out;
  ValueList listed;
  const size_t p = a.prefix.size();
  for (size_t i = 0; i <= p; ++i) {
    const TermSet& ts = ItemTerms(a, i);
    if (i == p && IsFalseSet(ts)) {
      out.emplace_back();
      break;
    }
    absl::StatusOr<std::optional<DistinctPosition>> split = SplitDistinct(ts);
    if (!split.ok()) return split.status();
    if (!*split) return Out();
    for (const Json* v : (*split)->listed) listed.Add(v);
    // The first index this position stands for past the array's first.
    const int64_t index = static_cast<int64_t>(i == p ? std::max<size_t>(p, 1)
                                                      : std::max<size_t>(i, 1));
    if ((*split)->endless.empty() && index < a.min_items) return Out();
    out.push_back(**std::move(split));
  }
  if (listed.size() > kMaxListedDistinct) return Out();
  return Out(std::move(out));
}

absl::StatusOr<int32_t> Converter::DistinctOrPlain(const ArrayC& a, int depth) {
  ArrayC plain = a;
  plain.unique = false;
  absl::StatusOr<std::optional<std::vector<DistinctPosition>>> positions =
      DistinctPositions(a);
  if (!positions.ok()) return positions.status();
  if (*positions) return ArrayExpr(plain, depth, &**positions);
  GRAMMARD_RETURN_IF_ERROR(Unsupported(
      a.unique_loc, "uniqueItems",
      absl::StrCat(
          "unique items are enforced among values that can always grow "
          "(strings without maxLength, pattern or format; objects open to "
          "more members; arrays without maxItems; numbers without bounds "
          "or multipleOf) and up to ",
          kMaxListedDistinct,
          " listed scalars (enum, const, booleans, null), with a value that "
          "can grow at every position past the first that minItems "
          "requires")));
  return ArrayExpr(plain, depth);
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
    if (!*v) return DistinctOrPlain(a, depth);
    allowed[i] = **v;
    for (const Json* x : **v) all.Add(x);
  }
  if (all.size() > static_cast<size_t>(kMaxUniqueValues)) {
    return DistinctOrPlain(a, depth);
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
