#include "grammar/base/status_macros.h"
#include "grammar/frontends/json_schema/internal/converter_impl.h"

namespace grammard::grammar::json_schema_internal {

namespace {

// Nesting of values and of schemas a single check may follow.
constexpr int kMaxCheckDepth = 256;

uint8_t TypeOf(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return kNullT;
    case Json::value_t::boolean:
      return kBoolT;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return kNumT;
    case Json::value_t::string:
      return kStrT;
    case Json::value_t::array:
      return kArrT;
    case Json::value_t::object:
      return kObjT;
    default:
      return 0;
  }
}

}  // namespace

absl::StatusOr<const SimpleSchema*> Converter::Merge(const Alt& alt) {
  auto it = merged_.find(alt);
  if (it != merged_.end()) return it->second.get();
  auto s = std::make_unique<SimpleSchema>();
  for (int32_t f : alt) {
    GRAMMARD_RETURN_IF_ERROR(Intersect(s.get(), fragments_[f]));
  }
  const SimpleSchema* out = s.get();
  merged_.emplace(alt, std::move(s));
  return out;
}

absl::Status Converter::Intersect(SimpleSchema* acc, const SimpleSchema& f) {
  acc->types &= f.types;
  NumberConstraints& num = acc->number;
  num.integer = num.integer || f.number.integer;
  num.integer_zero_fraction =
      num.integer_zero_fraction && f.number.integer_zero_fraction;
  if (f.number.lower) {
    int c = num.lower ? Compare(f.number.lower->value, num.lower->value) : 1;
    if (c > 0) num.lower = f.number.lower;
    if (c == 0 && f.number.lower->exclusive) num.lower->exclusive = true;
  }
  if (f.number.upper) {
    int c = num.upper ? Compare(f.number.upper->value, num.upper->value) : -1;
    if (c < 0) num.upper = f.number.upper;
    if (c == 0 && f.number.upper->exclusive) num.upper->exclusive = true;
  }
  for (const Decimal& m : f.number.multiple_of) {
    if (std::find(num.multiple_of.begin(), num.multiple_of.end(), m) ==
        num.multiple_of.end()) {
      num.multiple_of.push_back(m);
    }
  }
  num.not_multiple_of.insert(num.not_multiple_of.end(),
                             f.number.not_multiple_of.begin(),
                             f.number.not_multiple_of.end());
  num.excluded.insert(num.excluded.end(), f.number.excluded.begin(),
                      f.number.excluded.end());
  if (f.number_loc >= 0) acc->number_loc = f.number_loc;

  StringC& str = acc->string;
  str.min_len = std::max(str.min_len, f.string.min_len);
  if (f.string.max_len >= 0) {
    str.max_len = str.max_len < 0 ? f.string.max_len
                                  : std::min(str.max_len, f.string.max_len);
  }
  if (f.string.length_loc >= 0) str.length_loc = f.string.length_loc;
  str.must.insert(str.must.end(), f.string.must.begin(), f.string.must.end());
  str.must_not.insert(str.must_not.end(), f.string.must_not.begin(),
                      f.string.must_not.end());
  str.excluded.insert(str.excluded.end(), f.string.excluded.begin(),
                      f.string.excluded.end());

  ArrayC& arr = acc->array;
  const size_t n = std::max(arr.prefix.size(), f.array.prefix.size());
  std::vector<TermSet> prefix(n);
  for (size_t i = 0; i < n; ++i) {
    const TermSet& a = i < arr.prefix.size() ? arr.prefix[i] : arr.rest;
    const TermSet& b =
        i < f.array.prefix.size() ? f.array.prefix[i] : f.array.rest;
    prefix[i] = Canon(Join(a, b));
  }
  arr.prefix = std::move(prefix);
  arr.rest = Canon(Join(arr.rest, f.array.rest));
  arr.min_items = std::max(arr.min_items, f.array.min_items);
  if (f.array.max_items >= 0) {
    arr.max_items = arr.max_items < 0
                        ? f.array.max_items
                        : std::min(arr.max_items, f.array.max_items);
  }
  arr.contains.insert(arr.contains.end(), f.array.contains.begin(),
                      f.array.contains.end());
  if (arr.loc < 0) arr.loc = f.array.loc;
  if (f.array.unique) {
    arr.unique = true;
    arr.unique_loc = f.array.unique_loc;
  }

  ObjectC& obj = acc->object;
  obj.rules.insert(obj.rules.end(), f.object.rules.begin(),
                   f.object.rules.end());
  for (const std::string& r : f.object.required) {
    if (std::find(obj.required.begin(), obj.required.end(), r) ==
        obj.required.end()) {
      obj.required.push_back(r);
    }
  }
  obj.names.insert(obj.names.end(), f.object.names.begin(),
                   f.object.names.end());
  obj.min_props = std::max(obj.min_props, f.object.min_props);
  if (f.object.max_props >= 0) {
    obj.max_props = obj.max_props < 0
                        ? f.object.max_props
                        : std::min(obj.max_props, f.object.max_props);
  }
  if (obj.loc < 0) obj.loc = f.object.loc;
  // A witness asked for twice is found by one member: keep one.
  for (const Witness& w : f.object.witnesses) {
    if (std::find(obj.witnesses.begin(), obj.witnesses.end(), w) ==
        obj.witnesses.end()) {
      obj.witnesses.push_back(w);
    }
  }

  if (f.has_values) {
    if (acc->has_values) {
      ValueList kept;
      for (const Json* v : acc->values) {
        GRAMMARD_RETURN_IF_ERROR(Tick());
        if (f.values.Contains(*v)) kept.Add(v);
      }
      acc->values = std::move(kept);
    } else {
      acc->values = f.values;
    }
    acc->has_values = true;
  }
  for (const Json* x : f.excluded) acc->excluded.Add(x);
  return absl::OkStatus();
}

absl::StatusOr<bool> Converter::ValidateTerms(const Json& v, const TermSet& ts,
                                              int depth) {
  if (depth > kMaxCheckDepth) {
    return absl::ResourceExhaustedError("value nested too deeply to check");
  }
  for (Term t : ts) {
    // A negated term is checked through its own (negative) expansion,
    // never as "the positive check failed": positive checks of some
    // formats are narrower than the format.
    absl::StatusOr<Dnf> d = Expand(t.loc, t.neg);
    if (!d.ok()) return d.status();
    bool ok = false;
    for (const Alt& alt : *d) {
      absl::StatusOr<const SimpleSchema*> s = Merge(alt);
      if (!s.ok()) return s.status();
      absl::StatusOr<bool> r = CheckValue(v, **s, depth + 1);
      if (!r.ok()) return r.status();
      if (*r) {
        ok = true;
        break;
      }
    }
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<std::optional<TermSet>> Converter::KeyValueTerms(
    const ObjectC& o, const std::string& key) {
  TermSet ts;
  const Json key_json = key;
  for (const KeyRule& rule : o.rules) {
    bool declared = false;
    for (const auto& [name, value] : rule.props) {
      if (name == key) {
        declared = true;
        ts = Join(ts, value);
      }
    }
    bool matched = false;
    for (const auto& [re, value] : rule.patterns) {
      absl::StatusOr<const CharDfa*> dfa = RegexDfa(re);
      if (!dfa.ok()) return dfa.status();
      if (Matches(**dfa, key)) {
        matched = true;
        ts = Join(ts, value);
      }
    }
    if (!declared && !matched && rule.has_additional)
      ts = Join(ts, rule.additional);
  }
  ts = Canon(std::move(ts));
  if (IsFalseSet(ts)) return std::optional<TermSet>();
  return std::optional<TermSet>(std::move(ts));
}

absl::StatusOr<bool> Converter::WitnessName(const Witness& w,
                                            const std::string& key) {
  if (std::find(w.not_names.begin(), w.not_names.end(), key) !=
      w.not_names.end()) {
    return false;
  }
  for (const RegexRef& r : w.in_patterns) {
    absl::StatusOr<const CharDfa*> dfa = RegexDfa(r);
    if (!dfa.ok()) return dfa.status();
    if (!Matches(**dfa, key)) return false;
  }
  for (const RegexRef& r : w.not_patterns) {
    absl::StatusOr<const CharDfa*> dfa = RegexDfa(r);
    if (!dfa.ok()) return dfa.status();
    if (Matches(**dfa, key)) return false;
  }
  const Json name = key;
  for (const TermSet& ts : w.not_schemas) {
    absl::StatusOr<bool> ok = ValidateTerms(name, ts, 0);
    if (!ok.ok()) return ok.status();
    if (*ok) return false;
  }
  return true;
}

absl::StatusOr<CharDfa> Converter::WitnessNames(const Witness& w) {
  absl::StatusOr<CharDfa> names = LiteralsDfa(w.not_names);
  if (!names.ok()) return names.status();
  CharDfa out = Complement(*names);
  for (const RegexRef& r : w.in_patterns) {
    absl::StatusOr<const CharDfa*> dfa = RegexDfa(r);
    if (!dfa.ok()) return dfa.status();
    absl::StatusOr<CharDfa> in =
        json_schema_internal::Intersect(out, **dfa, opt_.dfa);
    if (!in.ok()) return in.status();
    out = *std::move(in);
  }
  for (const RegexRef& r : w.not_patterns) {
    absl::StatusOr<const CharDfa*> dfa = RegexDfa(r);
    if (!dfa.ok()) return dfa.status();
    absl::StatusOr<CharDfa> rest = Subtract(out, **dfa, opt_.dfa);
    if (!rest.ok()) return rest.status();
    out = *std::move(rest);
  }
  for (const TermSet& ts : w.not_schemas) {
    absl::StatusOr<std::optional<CharDfa>> named = NamesDfa({ts});
    if (!named.ok()) return named.status();
    if (!*named) return EmptyDfa();  // every name satisfies it
    absl::StatusOr<CharDfa> rest = Subtract(out, **named, opt_.dfa);
    if (!rest.ok()) return rest.status();
    out = *std::move(rest);
  }
  return out;
}

absl::StatusOr<bool> Converter::CheckValue(const Json& v, const SimpleSchema& s,
                                           int depth) {
  if (depth > kMaxCheckDepth) {
    return absl::ResourceExhaustedError("value nested too deeply to check");
  }
  const uint8_t type = TypeOf(v);
  if (!(s.types & type)) return false;
  GRAMMARD_RETURN_IF_ERROR(Tick());
  if (s.has_values && !s.values.Contains(v)) return false;
  if (s.excluded.Contains(v)) return false;
  switch (type) {
    case kNumT: {
      std::optional<Decimal> d = NumberOf(v);
      if (!d) return false;
      if (s.number.integer && !d->IsInteger()) return false;
      // Draft 4 integers have no fraction part, even a zero one.
      if (s.number.integer && !s.number.integer_zero_fraction &&
          v.is_number_float()) {
        return false;
      }
      return SatisfiesNumber(*d, s.number);
    }
    case kStrT: {
      const std::string& str = v.get_ref<const std::string&>();
      int64_t len = CodepointCount(str);
      if (len < s.string.min_len) return false;
      if (s.string.max_len >= 0 && len > s.string.max_len) return false;
      for (const RegexRef& r : s.string.must) {
        absl::StatusOr<const CharDfa*> dfa = RegexDfa(r);
        if (!dfa.ok()) return dfa.status();
        if (Matches(**dfa, str)) continue;
        if (exact_checks_ && r.Narrower()) {
          return absl::UnimplementedError(absl::StrCat(
              r.Keyword(), " \"", r.text, "\" is checked inexactly"));
        }
        return false;
      }
      for (const RegexRef& r : s.string.must_not) {
        absl::StatusOr<const CharDfa*> dfa = RegexDfa(r);
        if (!dfa.ok()) return dfa.status();
        if (Matches(**dfa, str)) return false;
      }
      for (const std::string& x : s.string.excluded) {
        if (x == str) return false;
      }
      return true;
    }
    case kArrT: {
      const ArrayC& a = s.array;
      const int64_t size = static_cast<int64_t>(v.size());
      if (size < a.min_items || (a.max_items >= 0 && size > a.max_items))
        return false;
      for (size_t i = 0; i < v.size(); ++i) {
        const TermSet& ts = i < a.prefix.size() ? a.prefix[i] : a.rest;
        absl::StatusOr<bool> ok = ValidateTerms(v[i], ts, depth + 1);
        if (!ok.ok() || !*ok) return ok;
      }
      for (const ContainsC& c : a.contains) {
        int64_t hits = 0;
        for (const Json& item : v) {
          absl::StatusOr<bool> ok = ValidateTerms(item, c.schema, depth + 1);
          if (!ok.ok()) return ok.status();
          hits += *ok ? 1 : 0;
        }
        if (hits < c.min || (c.max >= 0 && hits > c.max)) return false;
      }
      if (a.unique) {
        for (size_t i = 0; i < v.size(); ++i) {
          for (size_t j = i + 1; j < v.size(); ++j) {
            if (JsonEqual(v[i], v[j])) return false;
          }
        }
      }
      return true;
    }
    case kObjT: {
      const ObjectC& o = s.object;
      const int64_t size = static_cast<int64_t>(v.size());
      if (size < o.min_props || (o.max_props >= 0 && size > o.max_props))
        return false;
      for (const std::string& r : o.required) {
        if (!v.contains(r)) return false;
      }
      for (auto it = v.begin(); it != v.end(); ++it) {
        absl::StatusOr<std::optional<TermSet>> ts = KeyValueTerms(o, it.key());
        if (!ts.ok()) return ts.status();
        if (!*ts) return false;
        absl::StatusOr<bool> ok = ValidateTerms(it.value(), **ts, depth + 1);
        if (!ok.ok() || !*ok) return ok;
        const Json name = it.key();
        for (const TermSet& names : o.names) {
          absl::StatusOr<bool> named = ValidateTerms(name, names, depth + 1);
          if (!named.ok() || !*named) return named;
        }
      }
      for (const Witness& w : o.witnesses) {
        bool found = false;
        for (auto it = v.begin(); it != v.end() && !found; ++it) {
          absl::StatusOr<bool> named = WitnessName(w, it.key());
          if (!named.ok()) return named.status();
          if (!*named) continue;
          absl::StatusOr<bool> ok =
              ValidateTerms(it.value(), w.value, depth + 1);
          if (!ok.ok()) return ok.status();
          found = *ok;
        }
        if (!found) return false;
      }
      return true;
    }
    default:
      return true;
  }
}

absl::StatusOr<bool> Converter::DisjointSets(const TermSet& a, const TermSet& b,
                                             int depth) {
  absl::StatusOr<Dnf> da = ExpandSet(a);
  absl::StatusOr<Dnf> db = ExpandSet(b);
  if (!da.ok() || !db.ok()) return false;
  for (const Alt& x : *da) {
    for (const Alt& y : *db) {
      absl::StatusOr<const SimpleSchema*> mx = Merge(x);
      absl::StatusOr<const SimpleSchema*> my = Merge(y);
      if (!mx.ok() || !my.ok()) return false;
      absl::StatusOr<bool> d = Disjoint(**mx, **my, depth + 1);
      if (!d.ok() || !*d) return false;
    }
  }
  return true;
}

absl::StatusOr<bool> Converter::Disjoint(const SimpleSchema& a,
                                         const SimpleSchema& b, int depth) {
  if (depth > 4) return false;
  // Past the budget, schemas are taken to overlap: exact, only costlier to
  // write (oneOf then excludes more, a product drops less).
  if (depth == 0 && --disjoint_proofs_left_ < 0) return false;
  const uint8_t common = a.types & b.types;
  if (common == 0) return true;
  // A value proves nothing when a check of it is inexact (CheckValue then
  // fails, which reads as "shared").
  const bool was_exact = exact_checks_;
  exact_checks_ = true;
  struct Restore {
    bool* flag;
    bool value;
    ~Restore() { *flag = value; }
  } restore{&exact_checks_, was_exact};
  // Listed values: disjoint when none of one side's values passes both.
  for (const SimpleSchema* side : {&a, &b}) {
    if (!side->has_values) continue;
    bool shared = false;
    for (const Json* v : side->values) {
      absl::StatusOr<bool> in_a = CheckValue(*v, a, 0);
      absl::StatusOr<bool> in_b = CheckValue(*v, b, 0);
      if (!in_a.ok() || !in_b.ok() || (*in_a && *in_b)) {
        shared = true;
        break;
      }
    }
    if (!shared) return true;
  }
  for (uint8_t t = 1; t <= kObjT; t <<= 1) {
    if (!(common & t)) continue;
    bool apart = false;
    if (t == kNumT) {
      const NumberConstraints& x = a.number;
      const NumberConstraints& y = b.number;
      auto below = [](const std::optional<Bound>& hi,
                      const std::optional<Bound>& lo) {
        if (!hi || !lo) return false;
        int c = Compare(hi->value, lo->value);
        return c < 0 || (c == 0 && (hi->exclusive || lo->exclusive));
      };
      apart = below(x.upper, y.lower) || below(y.upper, x.lower);
      Decimal one = *ParseDecimal("1");
      auto non_integer = [&](const NumberConstraints& c) {
        return std::find(c.not_multiple_of.begin(), c.not_multiple_of.end(),
                         one) != c.not_multiple_of.end();
      };
      apart = apart || (x.integer && non_integer(y)) ||
              (y.integer && non_integer(x));
    } else if (t == kStrT) {
      // Emptiness of the intersection proves nothing when a side's
      // language was narrowed.
      auto narrowed = [](const StringC& c) {
        for (const RegexRef& r : c.must) {
          if (r.Narrower()) return true;
        }
        return false;
      };
      if (!a.string.Unconstrained() && !b.string.Unconstrained() &&
          !narrowed(a.string) && !narrowed(b.string)) {
        absl::StatusOr<CharDfa> x = StringDfa(a.string, true);
        absl::StatusOr<CharDfa> y = StringDfa(b.string, true);
        if (x.ok() && y.ok()) {
          absl::StatusOr<CharDfa> both =
              json_schema_internal::Intersect(*x, *y, opt_.dfa);
          apart = both.ok() && both->IsEmpty();
        }
      }
    } else if (t == kArrT) {
      apart =
          (a.array.max_items >= 0 && a.array.max_items < b.array.min_items) ||
          (b.array.max_items >= 0 && b.array.max_items < a.array.min_items);
    } else if (t == kObjT) {
      for (const std::string& k : a.object.required) {
        if (apart) break;
        absl::StatusOr<std::optional<TermSet>> vb = KeyValueTerms(b.object, k);
        if (!vb.ok()) return false;
        if (!*vb) {
          apart = true;  // required by a, forbidden by b
          break;
        }
        if (std::find(b.object.required.begin(), b.object.required.end(), k) ==
            b.object.required.end()) {
          continue;
        }
        absl::StatusOr<std::optional<TermSet>> va = KeyValueTerms(a.object, k);
        if (!va.ok()) return false;
        if (!*va) {
          apart = true;
          break;
        }
        absl::StatusOr<bool> d = DisjointSets(**va, **vb, depth);
        apart = d.ok() && *d;
      }
      for (const std::string& k : b.object.required) {
        if (apart) break;
        absl::StatusOr<std::optional<TermSet>> va = KeyValueTerms(a.object, k);
        if (va.ok() && !*va) apart = true;
      }
      apart =
          apart ||
          (a.object.max_props >= 0 &&
           a.object.max_props < b.object.min_props) ||
          (b.object.max_props >= 0 && b.object.max_props < a.object.min_props);
    }
    if (!apart) return false;
  }
  return true;
}

}  // namespace grammard::grammar::json_schema_internal
