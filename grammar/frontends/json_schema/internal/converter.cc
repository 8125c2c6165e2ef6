#include <functional>

#include "grammar/base/status_macros.h"
#include "grammar/frontends/json_schema/internal/converter_impl.h"
#include "grammar/frontends/json_schema/internal/keywords.h"

namespace grammard::grammar::json_schema_internal {

namespace {

// Schemas expanded inside one another through allOf/anyOf/$ref.
constexpr int kMaxExpandDepth = 128;

}  // namespace

// ===================================================================== Policy

absl::Status Converter::Unsupported(int32_t loc, absl::string_view keyword,
                                    const absl::Status& cause) {
  if (IsDeadline(cause)) return cause;
  return Unsupported(loc, keyword, cause.message());
}

absl::Status Converter::Unsupported(int32_t loc, absl::string_view keyword,
                                    absl::string_view reason) {
  std::string where = Where(loc, keyword);
  if (opt_.strict) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot enforce \"", keyword, "\" at ", where, ": ",
                     reason, " (lenient mode would drop it)"));
  }
  if (dropped_seen_.emplace(std::string(keyword), where).second) {
    dropped_->push_back({std::string(keyword), where, std::string(reason)});
  }
  return absl::OkStatus();
}

absl::Status Converter::CheckBudget() {
  if (static_cast<int64_t>(e_.g().exprs.size()) > opt_.max_exprs ||
      static_cast<int64_t>(e_.g().rules.size()) > opt_.max_rules) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the grammar for this schema grows past ", opt_.max_rules,
                     " rules or ", opt_.max_exprs, " expressions"));
  }
  return opt_.dfa.CheckDeadline();
}

// ====================================================================== Terms

int32_t Converter::Alias(int32_t loc) {
  // Follows locations that are nothing but a $ref, so that every path to a
  // schema shares one rule.
  for (int hops = 0; hops < 64; ++hops) {
    const Json& n = doc_.node(loc);
    if (!n.is_object()) return loc;
    auto ref = n.find("$ref");
    if (ref == n.end() || !ref->is_string()) return loc;
    if (doc_.draft() >= Draft::k2019) {
      for (auto it = n.begin(); it != n.end(); ++it) {
        if (it.key() != "$ref" && IsKnownKeyword(it.key())) return loc;
      }
    }
    absl::StatusOr<int32_t> target =
        doc_.ResolveRef(loc, ref->get_ref<const std::string&>());
    if (!target.ok()) return loc;
    loc = *target;
  }
  return loc;
}

TermSet Converter::Canon(TermSet ts) {
  TermSet out;
  for (Term t : ts) {
    t.loc = Alias(t.loc);
    const Json& n = doc_.node(t.loc);
    if (n.is_boolean()) {
      if (n.get<bool>() != t.neg) continue;  // true
      return FalseSet();
    }
    if (n.is_object() && n.empty()) {
      if (!t.neg) continue;
      return FalseSet();
    }
    out.push_back(t);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i].loc == out[i + 1].loc) return FalseSet();  // x and not x
  }
  return out;
}

// ================================================================= Expansion

int32_t Converter::AddFragment(SimpleSchema s) {
  fragments_.push_back(std::move(s));
  return static_cast<int32_t>(fragments_.size()) - 1;
}

absl::StatusOr<int32_t> Converter::OwnFragment(int32_t loc) {
  auto it = own_fragment_.find(loc);
  if (it != own_fragment_.end()) return it->second;
  SimpleSchema s;
  bool any = false;
  GRAMMARD_RETURN_IF_ERROR(ParseOwn(loc, &s, &any));
  int32_t id = any ? AddFragment(std::move(s)) : -1;
  own_fragment_[loc] = id;
  return id;
}

absl::StatusOr<SimpleSchema> Converter::OwnCopy(int32_t loc) {
  absl::StatusOr<int32_t> own = OwnFragment(loc);
  if (!own.ok()) return own.status();
  return *own >= 0 ? fragments_[*own] : SimpleSchema{};
}

absl::StatusOr<Dnf> Converter::Product(const Dnf& a, const Dnf& b) {
  if (static_cast<int64_t>(a.size()) * static_cast<int64_t>(b.size()) >
      int64_t{opt_.max_alternatives} * 8) {
    return absl::ResourceExhaustedError(
        absl::StrCat("combining allOf/anyOf/oneOf gives more than ",
                     opt_.max_alternatives, " alternatives"));
  }
  // Pairs of contradictory types are dropped; past the budget, so are the
  // pairs proved disjoint (a proof costs automata, so only then).
  auto combine = [&](bool prove) -> absl::StatusOr<Dnf> {
    std::set<Alt> seen;
    Dnf out;
    for (const Alt& x : a) {
      for (const Alt& y : b) {
        Alt z;
        std::set_union(x.begin(), x.end(), y.begin(), y.end(),
                       std::back_inserter(z));
        uint8_t types = kAllT;
        for (int32_t f : z) types &= fragments_[f].types;
        if (types == 0) continue;  // contradictory types: nothing to keep
        if (seen.count(z)) continue;
        if (prove && disjoint_proofs_left_ > 0) {
          absl::StatusOr<const SimpleSchema*> mx = Merge(x);
          if (!mx.ok()) return mx.status();
          absl::StatusOr<const SimpleSchema*> my = Merge(y);
          if (!my.ok()) return my.status();
          absl::StatusOr<bool> apart = Disjoint(**mx, **my, 0);
          if (apart.ok() && *apart) continue;
          if (IsDeadline(apart.status())) return apart.status();
        }
        seen.insert(z);
        out.push_back(std::move(z));
      }
    }
    return out;
  };
  absl::StatusOr<Dnf> combined = combine(false);
  if (combined.ok() &&
      static_cast<int32_t>(combined->size()) > opt_.max_alternatives) {
    combined = combine(true);
  }
  if (!combined.ok()) return combined.status();
  Dnf out = *std::move(combined);
  if (static_cast<int32_t>(out.size()) > opt_.max_alternatives) {
    return absl::ResourceExhaustedError(
        absl::StrCat("combining allOf/anyOf/oneOf gives more than ",
                     opt_.max_alternatives, " alternatives"));
  }
  return out;
}

absl::StatusOr<Dnf> Converter::Union(std::vector<Dnf> parts) {
  Dnf all;
  std::set<Alt> seen;
  for (Dnf& p : parts) {
    for (Alt& a : p) {
      if (seen.insert(a).second) all.push_back(std::move(a));
    }
  }
  // An alternative that includes another's fragments is implied by it.
  std::sort(all.begin(), all.end(),
            [](const Alt& x, const Alt& y) { return x.size() < y.size(); });
  Dnf out;
  for (Alt& a : all) {
    bool absorbed = false;
    if (out.size() < 512) {
      for (const Alt& kept : out) {
        if (std::includes(a.begin(), a.end(), kept.begin(), kept.end())) {
          absorbed = true;
          break;
        }
      }
    }
    if (!absorbed) out.push_back(std::move(a));
  }
  if (static_cast<int32_t>(out.size()) > opt_.max_alternatives) {
    return absl::ResourceExhaustedError(
        absl::StrCat("combining allOf/anyOf/oneOf gives more than ",
                     opt_.max_alternatives, " alternatives"));
  }
  return out;
}

absl::StatusOr<int32_t> Converter::RefTarget(int32_t loc) {
  const Json& ref = doc_.node(loc)["$ref"];
  if (!ref.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("$ref at ", Where(loc, "$ref"), " is not a string"));
  }
  absl::StatusOr<int32_t> target =
      doc_.ResolveRef(loc, ref.get_ref<const std::string&>());
  if (!target.ok()) {
    return absl::Status(
        target.status().code(),
        absl::StrCat(Where(loc, "$ref"), ": ", target.status().message()));
  }
  return *target;
}

absl::StatusOr<int32_t> Converter::DynamicRefTarget(int32_t loc) {
  const Json& ref = doc_.node(loc)["$dynamicRef"];
  if (!ref.is_string()) {
    GRAMMARD_RETURN_IF_ERROR(
        Unsupported(loc, "$dynamicRef", "must be a string"));
    return -1;
  }
  const std::string& text = ref.get_ref<const std::string&>();
  absl::StatusOr<int32_t> target = doc_.ResolveRef(loc, text);
  if (!target.ok()) {
    return absl::Status(target.status().code(),
                        absl::StrCat(Where(loc, "$dynamicRef"), ": ",
                                     target.status().message()));
  }
  // It resolves like $ref unless its target is a $dynamicAnchor of the same
  // name, which the dynamic scope may override: only when no other
  // $dynamicAnchor of that name exists anywhere is the target certain.
  const size_t hash = text.find('#');
  const std::string name =
      hash == std::string::npos ? "" : text.substr(hash + 1);
  const Json& node = doc_.node(*target);
  const auto anchor =
      node.is_object() ? node.find("$dynamicAnchor") : node.end();
  if (!name.empty() && name[0] != '/' && node.is_object() &&
      anchor != node.end() && *anchor == name &&
      doc_.DynamicAnchorCount(name) > 1) {
    GRAMMARD_RETURN_IF_ERROR(Unsupported(
        loc, "$dynamicRef",
        absl::StrCat("several $dynamicAnchor \"", name,
                     "\" exist, so the target depends on the dynamic scope")));
    return -1;
  }
  return *target;
}

absl::StatusOr<Dnf> Converter::Expand(int32_t loc, bool neg) {
  auto key = std::make_pair(loc, neg);
  auto it = expanded_.find(key);
  if (it != expanded_.end()) return it->second;
  if (!expanding_.insert(key).second) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the schema at ", Where(loc, ""),
        " refers to itself through allOf/anyOf/oneOf/$ref without a property "
        "or item in between, which no finite value can satisfy"));
  }
  if (++expand_depth_ > kMaxExpandDepth) {
    --expand_depth_;
    expanding_.erase(key);
    return absl::ResourceExhaustedError(
        "schemas nested too deeply through allOf/anyOf/oneOf/$ref");
  }
  absl::StatusOr<Dnf> d = ExpandUncached(loc, neg);
  --expand_depth_;
  expanding_.erase(key);
  if (!d.ok()) return d.status();
  expanded_.emplace(key, *d);
  return d;
}

absl::StatusOr<Dnf> Converter::ExpandUncached(int32_t loc, bool neg) {
  GRAMMARD_RETURN_IF_ERROR(CheckBudget());
  const Json& n = doc_.node(loc);
  if (n.is_boolean()) {
    return n.get<bool>() != neg ? Dnf{Alt{}} : Dnf{};
  }
  if (!n.is_object()) {
    GRAMMARD_RETURN_IF_ERROR(
        Unsupported(loc, "", "a schema must be an object or a boolean"));
    return neg ? Dnf{} : Dnf{Alt{}};  // lenient: read as `true`
  }
  if (n.contains("$ref") && doc_.draft() <= Draft::k7) {
    // Before 2019-09, $ref replaces the schema it stands in.
    absl::StatusOr<int32_t> target = RefTarget(loc);
    if (!target.ok()) return target.status();
    return Expand(*target, neg);
  }
  return neg ? ExpandNegative(loc) : ExpandPositive(loc);
}

absl::StatusOr<Dnf> Converter::ExpandSet(const TermSet& ts) {
  Dnf d{Alt{}};
  for (Term t : ts) {
    absl::StatusOr<Dnf> x = Expand(t.loc, t.neg);
    if (!x.ok()) return x.status();
    absl::StatusOr<Dnf> p = Product(d, *x);
    if (!p.ok()) return p.status();
    d = *std::move(p);
  }
  return d;
}

absl::StatusOr<Dnf> Converter::ExpandPositive(int32_t loc) {
  const Json& n = doc_.node(loc);
  absl::StatusOr<int32_t> own = OwnFragment(loc);
  if (!own.ok()) return own.status();
  Dnf d = *own >= 0 ? Dnf{Alt{*own}} : Dnf{Alt{}};
  auto times = [&](absl::StatusOr<Dnf> x) -> absl::Status {
    if (!x.ok()) return x.status();
    absl::StatusOr<Dnf> p = Product(d, *x);
    if (!p.ok()) return p.status();
    d = *std::move(p);
    return absl::OkStatus();
  };
  auto each_child =
      [&](const char* key,
          const std::function<absl::Status(int32_t)>& fn) -> absl::Status {
    auto it = n.find(key);
    if (it == n.end()) return absl::OkStatus();
    if (!it->is_array() || it->empty()) {
      return Unsupported(loc, key, "must be a non-empty array of schemas");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      GRAMMARD_RETURN_IF_ERROR(fn(doc_.Child(loc, key, i)));
    }
    return absl::OkStatus();
  };
  absl::Status s =
      each_child("allOf", [&](int32_t c) { return times(Expand(c, false)); });
  if (!s.ok()) return s;
  if (n.contains("$ref")) {
    absl::StatusOr<int32_t> target = RefTarget(loc);
    if (!target.ok()) return target.status();
    GRAMMARD_RETURN_IF_ERROR(times(Expand(*target, false)));
  }
  if (n.contains("$dynamicRef")) {
    absl::StatusOr<int32_t> target = DynamicRefTarget(loc);
    if (!target.ok()) return target.status();
    if (*target >= 0) {
      GRAMMARD_RETURN_IF_ERROR(times(Expand(*target, false)));
    }
  }
  if (n.contains("$recursiveRef")) {
    GRAMMARD_RETURN_IF_ERROR(Unsupported(
        loc, "$recursiveRef", "dynamic references are not supported"));
  }
  if (n.contains("anyOf")) {
    std::vector<Dnf> branches;
    s = each_child("anyOf", [&](int32_t c) -> absl::Status {
      absl::StatusOr<Dnf> x = Expand(c, false);
      if (!x.ok()) return x.status();
      branches.push_back(*std::move(x));
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    if (!branches.empty()) {
      GRAMMARD_RETURN_IF_ERROR(times(Union(std::move(branches))));
    }
  }
  if (n.contains("oneOf")) {
    const Json& one = n["oneOf"];
    if (!one.is_array() || one.empty()) {
      GRAMMARD_RETURN_IF_ERROR(
          Unsupported(loc, "oneOf", "must be a non-empty array of schemas"));
    } else {
      absl::StatusOr<Dnf> x = ExpandOneOf(loc, d);
      if (!x.ok()) return x.status();
      d = *std::move(x);
    }
  }
  if (n.contains("not")) {
    GRAMMARD_RETURN_IF_ERROR(times(Expand(doc_.Child(loc, "not"), true)));
  }
  if (n.contains("if")) {
    const int32_t cond = doc_.Child(loc, "if");
    absl::StatusOr<Dnf> yes = Expand(cond, false);
    absl::StatusOr<Dnf> no = Expand(cond, true);
    if (!yes.ok()) return yes.status();
    if (!no.ok()) return no.status();
    absl::StatusOr<Dnf> then_d = n.contains("then")
                                     ? Expand(doc_.Child(loc, "then"), false)
                                     : Dnf{Alt{}};
    absl::StatusOr<Dnf> else_d = n.contains("else")
                                     ? Expand(doc_.Child(loc, "else"), false)
                                     : Dnf{Alt{}};
    if (!then_d.ok()) return then_d.status();
    if (!else_d.ok()) return else_d.status();
    absl::StatusOr<Dnf> a = Product(*yes, *then_d);
    absl::StatusOr<Dnf> b = Product(*no, *else_d);
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    GRAMMARD_RETURN_IF_ERROR(times(Union({*std::move(a), *std::move(b)})));
  }
  // dependentRequired / dependentSchemas / dependencies: for each trigger
  // property, either it is absent or it is present with what it demands.
  for (const char* key :
       {"dependentRequired", "dependentSchemas", "dependencies"}) {
    auto it = n.find(key);
    if (it == n.end()) continue;
    if (!it->is_object()) {
      GRAMMARD_RETURN_IF_ERROR(Unsupported(loc, key, "must be an object"));
      continue;
    }
    for (auto dep = it->begin(); dep != it->end(); ++dep) {
      SimpleSchema absent;
      absent.object.rules.push_back(
          KeyRule{{{dep.key(), FalseSet()}}, {}, false, {}});
      SimpleSchema present;
      present.object.required.push_back(dep.key());
      Dnf present_d;
      if (dep->is_array()) {
        bool ok = true;
        for (const Json& name : *dep) {
          if (!name.is_string())
            ok = false;
          else
            present.object.required.push_back(name.get<std::string>());
        }
        if (!ok) {
          GRAMMARD_RETURN_IF_ERROR(
              Unsupported(loc, key, "lists must hold property names"));
          continue;
        }
        present_d = Single(std::move(present));
      } else if (std::string(key) != "dependentRequired") {
        absl::StatusOr<Dnf> sub =
            Expand(doc_.Child(loc, key, dep.key()), false);
        if (!sub.ok()) return sub.status();
        absl::StatusOr<Dnf> p = Product(Single(std::move(present)), *sub);
        if (!p.ok()) return p.status();
        present_d = *std::move(p);
      } else {
        GRAMMARD_RETURN_IF_ERROR(
            Unsupported(loc, key, "values must be arrays of names"));
        continue;
      }
      GRAMMARD_RETURN_IF_ERROR(
          times(Union({Single(std::move(absent)), present_d})));
    }
  }
  return d;
}

absl::StatusOr<Dnf> Converter::ExpandOneOf(int32_t loc, const Dnf& context) {
  const Json& branches = doc_.node(loc)["oneOf"];
  const size_t k = branches.size();
  std::vector<int32_t> locs;
  std::vector<Dnf> in_context;
  for (size_t i = 0; i < k; ++i) {
    locs.push_back(doc_.Child(loc, "oneOf", i));
    absl::StatusOr<Dnf> x = Expand(locs.back(), false);
    if (!x.ok()) return x.status();
    absl::StatusOr<Dnf> p = Product(context, *x);
    if (!p.ok()) return p.status();
    in_context.push_back(*std::move(p));
  }
  // Whether alternative `a` provably meets no alternative of `branch`.
  auto apart = [&](const Alt& a, const Dnf& branch) -> absl::StatusOr<bool> {
    // Without proofs left, not even worth merging `a` (which grows with
    // every exclusion).
    if (disjoint_proofs_left_ <= 0) return false;
    GRAMMARD_RETURN_IF_ERROR(Tick());
    absl::StatusOr<const SimpleSchema*> ma = Merge(a);
    if (!ma.ok()) return ma.status();
    for (const Alt& b : branch) {
      absl::StatusOr<const SimpleSchema*> mb = Merge(b);
      if (!mb.ok()) return mb.status();
      absl::StatusOr<bool> d = Disjoint(**ma, **mb, 0);
      if (!d.ok() || !*d) return false;
    }
    return true;
  };
  // Which pairs of branches may overlap; provably disjoint branches make
  // oneOf an anyOf.
  std::vector<std::vector<char>> overlap(k, std::vector<char>(k, 0));
  bool disjoint = true;
  for (size_t i = 0; i < k; ++i) {
    for (size_t j = i + 1; j < k; ++j) {
      for (const Alt& a : in_context[i]) {
        absl::StatusOr<bool> d = apart(a, in_context[j]);
        if (!d.ok()) return d.status();
        if (!*d) {
          overlap[i][j] = overlap[j][i] = 1;
          disjoint = false;
          break;
        }
      }
    }
  }
  if (disjoint) return Union(in_context);
  // Otherwise exactly one branch holds: branch i and not the others it may
  // meet. Only the alternatives of branch i that may meet branch j need
  // "not j"; the others are kept as they are, so that the exclusion grows
  // with the overlap rather than with every pair of branches.
  std::vector<Dnf> exact;
  std::vector<std::optional<Dnf>> negated(k);  // "not branch j", once each
  absl::Status failure;
  for (size_t i = 0; i < k && failure.ok(); ++i) {
    Dnf d = in_context[i];
    for (size_t j = 0; j < k && failure.ok(); ++j) {
      if (j == i || !overlap[i][j]) continue;
      Dnf kept, meeting;
      for (Alt& a : d) {
        absl::StatusOr<bool> away = apart(a, in_context[j]);
        if (!away.ok()) {
          failure = away.status();
          break;
        }
        (*away ? kept : meeting).push_back(std::move(a));
      }
      if (!failure.ok() || meeting.empty()) {
        d = std::move(kept);
        continue;
      }
      if (!negated[j]) {
        absl::StatusOr<Dnf> no = Expand(locs[j], true);
        if (!no.ok()) {
          failure = no.status();
          break;
        }
        negated[j] = *std::move(no);
      }
      absl::StatusOr<Dnf> p = Product(meeting, *negated[j]);
      if (!p.ok()) {
        failure = p.status();
        break;
      }
      absl::StatusOr<Dnf> both = Union({std::move(kept), *std::move(p)});
      if (!both.ok()) {
        failure = both.status();
        break;
      }
      d = *std::move(both);
    }
    exact.push_back(std::move(d));
  }
  if (failure.ok()) {
    absl::StatusOr<Dnf> u = Union(std::move(exact));
    if (u.ok()) return u;
    failure = u.status();
  }
  if (IsDeadline(failure)) return failure;
  if (opt_.strict) {
    return absl::Status(
        failure.code(),
        absl::StrCat("cannot enforce \"oneOf\" at ", Where(loc, "oneOf"),
                     ": its branches may overlap, and excluding the others "
                     "failed: ",
                     failure.message()));
  }
  if (absl::Status s =
          Unsupported(loc, "oneOf", "branches may overlap; read as anyOf");
      !s.ok()) {
    return s;
  }
  return Union(in_context);
}

// =================================================================== Emission

std::string Converter::HintFor(const TermSet& ts) const {
  if (ts.empty()) return "any";
  const std::string& p = doc_.pointer(ts[0].loc);
  size_t slash = p.rfind('/');
  std::string last = slash == std::string::npos ? p : p.substr(slash + 1);
  if (last.empty() || last == "#") last = "root";
  return (ts[0].neg ? "not_" : "") + last;
}

int32_t Converter::ValueRef(const TermSet& ts, int depth) {
  const int level = e_.indented() ? depth : 0;
  auto key = std::make_pair(ts, level);
  auto it = value_rules_.find(key);
  if (it != value_rules_.end()) return e_.Ref(it->second);
  const int32_t rule = e_.NewRule(HintFor(ts));
  value_rules_.emplace(key, rule);
  queue_.emplace_back(ts, level, rule);
  return e_.Ref(rule);
}

absl::Status Converter::EmitRule(const TermSet& ts, int depth, int32_t rule) {
  GRAMMARD_RETURN_IF_ERROR(CheckBudget());
  int32_t body;
  if (IsFalseSet(ts) || (e_.indented() && depth > kMaxIndentDepth)) {
    body = e_.Nothing();
  } else if (ts.empty()) {
    body = e_.AnyValue(depth);
  } else {
    absl::StatusOr<Dnf> d = ExpandSet(ts);
    if (!d.ok()) return d.status();
    std::vector<int32_t> alts;
    for (const Alt& alt : *d) {
      absl::StatusOr<const SimpleSchema*> s = Merge(alt);
      if (!s.ok()) return s.status();
      absl::StatusOr<int32_t> x = EmitAlt(**s, depth);
      if (!x.ok()) return x.status();
      alts.push_back(*x);
    }
    body = e_.Alt(std::move(alts));
  }
  e_.g().rules[rule].body = body;
  return absl::OkStatus();
}

absl::StatusOr<int32_t> Converter::EmitAlt(const SimpleSchema& s, int depth) {
  if (s.has_values) {
    // Listed values (distinct): exactly those that pass every other
    // constraint.
    std::vector<int32_t> parts;
    for (const Json* v : s.values) {
      absl::StatusOr<bool> ok = CheckValue(*v, s, 0);
      if (!ok.ok()) return ok.status();
      if (!*ok) continue;
      absl::StatusOr<int32_t> x = e_.Value(*v, depth);
      if (!x.ok()) return x.status();
      parts.push_back(*x);
    }
    return e_.Alt(std::move(parts));
  }
  auto excluded = [&](const Json& v) { return s.excluded.Contains(v); };
  std::vector<int32_t> parts;
  if ((s.types & kNullT) && !excluded(Json(nullptr))) {
    parts.push_back(e_.Bytes("null"));
  }
  if (s.types & kBoolT) {
    if (!excluded(Json(true))) parts.push_back(e_.Bytes("true"));
    if (!excluded(Json(false))) parts.push_back(e_.Bytes("false"));
  }
  if (s.types & kNumT) {
    absl::StatusOr<int32_t> x = NumberExpr(s);
    if (!x.ok()) return x.status();
    parts.push_back(*x);
  }
  if (s.types & kStrT) {
    absl::StatusOr<int32_t> x = StringExpr(s);
    if (!x.ok()) return x.status();
    parts.push_back(*x);
  }
  if (s.types & kArrT) {
    absl::StatusOr<int32_t> x = ArrayExpr(s.array, depth);
    if (!x.ok()) return x.status();
    parts.push_back(*x);
  }
  if (s.types & kObjT) {
    absl::StatusOr<int32_t> x = ObjectExpr(s.object, depth);
    if (!x.ok()) return x.status();
    parts.push_back(*x);
  }
  return e_.Alt(std::move(parts));
}

absl::Status Converter::Run() {
  // A meta-schema of its own may turn vocabularies off (or on), which
  // would change what every keyword means.
  const Json& top = doc_.node(doc_.root());
  if (top.is_object() && top.contains("$schema")) {
    const Json& meta = top["$schema"];
    if (!meta.is_string() || meta.get_ref<const std::string&>().find(
                                 "json-schema.org/") == std::string::npos) {
      GRAMMARD_RETURN_IF_ERROR(
          Unsupported(doc_.root(), "$schema",
                      "only the json-schema.org meta-schemas are known"));
    }
  }
  Grammar& g = e_.g();
  const int32_t root = e_.NewRule("root");
  g.root = root;
  g.rules[root].body = ValueRef(One(doc_.root()), 0);
  while (!queue_.empty()) {
    auto [ts, depth, rule] = queue_.front();
    queue_.pop_front();
    GRAMMARD_RETURN_IF_ERROR(EmitRule(ts, depth, rule));
  }
  return CheckBudget();
}

absl::Status ConvertSchema(SchemaDoc* doc, const ConvertOptions& options,
                           Grammar* grammar,
                           std::vector<DroppedKeyword>* dropped) {
  Converter converter(doc, options, grammar, dropped);
  return converter.Run();
}

}  // namespace grammard::grammar::json_schema_internal
