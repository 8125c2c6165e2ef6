#include "grammar/base/status_macros.h"
#include "grammar/frontends/json_schema/internal/converter_impl.h"
#include "grammar/frontends/json_schema/internal/keywords.h"

namespace grammard::grammar::json_schema_internal {

absl::StatusOr<Dnf> Converter::ExpandNegative(int32_t loc) {
  const Json& n = doc_.node(loc);
  std::vector<Dnf> parts;
  auto add = [&](absl::StatusOr<Dnf> x) -> absl::Status {
    if (!x.ok()) return x.status();
    parts.push_back(*std::move(x));
    return absl::OkStatus();
  };
  GRAMMARD_RETURN_IF_ERROR(add(NegOwn(loc)));
  auto children = [&](const char* key) {
    std::vector<int32_t> out;
    auto it = n.find(key);
    if (it != n.end() && it->is_array()) {
      for (size_t i = 0; i < it->size(); ++i)
        out.push_back(doc_.Child(loc, key, i));
    }
    return out;
  };
  for (int32_t c : children("allOf")) {
    GRAMMARD_RETURN_IF_ERROR(add(Expand(c, true)));
  }
  if (n.contains("$ref")) {
    absl::StatusOr<int32_t> target = RefTarget(loc);
    if (!target.ok()) return target.status();
    GRAMMARD_RETURN_IF_ERROR(add(Expand(*target, true)));
  }
  if (n.contains("$dynamicRef")) {
    absl::StatusOr<int32_t> target = DynamicRefTarget(loc);
    if (!target.ok()) return target.status();
    if (*target < 0) return Dnf{Alt{}};  // lenient: read as `true`
    GRAMMARD_RETURN_IF_ERROR(add(Expand(*target, true)));
  }
  if (n.contains("$recursiveRef")) {
    GRAMMARD_RETURN_IF_ERROR(Unsupported(
        loc, "$recursiveRef", "dynamic references are not supported"));
    return Dnf{Alt{}};
  }
  if (n.contains("anyOf")) {
    Dnf none{Alt{}};
    for (int32_t c : children("anyOf")) {
      absl::StatusOr<Dnf> x = Expand(c, true);
      if (!x.ok()) return x.status();
      absl::StatusOr<Dnf> p = Product(none, *x);
      if (!p.ok()) return p.status();
      none = *std::move(p);
    }
    parts.push_back(std::move(none));
  }
  if (n.contains("oneOf")) {
    std::vector<int32_t> cs = children("oneOf");
    Dnf none{Alt{}};
    std::vector<Dnf> pos;
    for (int32_t c : cs) {
      absl::StatusOr<Dnf> x = Expand(c, true);
      absl::StatusOr<Dnf> y = Expand(c, false);
      if (!x.ok()) return x.status();
      if (!y.ok()) return y.status();
      absl::StatusOr<Dnf> p = Product(none, *x);
      if (!p.ok()) return p.status();
      none = *std::move(p);
      pos.push_back(*std::move(y));
    }
    parts.push_back(std::move(none));
    for (size_t i = 0; i < pos.size(); ++i) {
      for (size_t j = i + 1; j < pos.size(); ++j) {
        GRAMMARD_RETURN_IF_ERROR(add(Product(pos[i], pos[j])));
      }
    }
  }
  if (n.contains("not")) {
    GRAMMARD_RETURN_IF_ERROR(add(Expand(doc_.Child(loc, "not"), false)));
  }
  if (n.contains("if")) {
    const int32_t cond = doc_.Child(loc, "if");
    absl::StatusOr<Dnf> yes = Expand(cond, false);
    absl::StatusOr<Dnf> no = Expand(cond, true);
    if (!yes.ok()) return yes.status();
    if (!no.ok()) return no.status();
    absl::StatusOr<Dnf> not_then =
        n.contains("then") ? Expand(doc_.Child(loc, "then"), true) : Dnf{};
    absl::StatusOr<Dnf> not_else =
        n.contains("else") ? Expand(doc_.Child(loc, "else"), true) : Dnf{};
    if (!not_then.ok()) return not_then.status();
    if (!not_else.ok()) return not_else.status();
    GRAMMARD_RETURN_IF_ERROR(add(Product(*yes, *not_then)));
    GRAMMARD_RETURN_IF_ERROR(add(Product(*no, *not_else)));
  }
  for (const char* key :
       {"dependentRequired", "dependentSchemas", "dependencies"}) {
    auto it = n.find(key);
    if (it == n.end() || !it->is_object()) continue;
    for (auto dep = it->begin(); dep != it->end(); ++dep) {
      if (dep->is_array()) {
        for (const Json& name : *dep) {
          if (!name.is_string()) continue;
          SimpleSchema s;
          s.types = kObjT;
          s.object.required.push_back(dep.key());
          s.object.rules.push_back(
              KeyRule{{{name.get<std::string>(), FalseSet()}}, {}, false, {}});
          parts.push_back(Single(std::move(s)));
        }
      } else if (std::string(key) != "dependentRequired") {
        SimpleSchema s;
        s.types = kObjT;
        s.object.required.push_back(dep.key());
        absl::StatusOr<Dnf> sub = Expand(doc_.Child(loc, key, dep.key()), true);
        if (!sub.ok()) return sub.status();
        GRAMMARD_RETURN_IF_ERROR(add(Product(Single(std::move(s)), *sub)));
      }
    }
  }
  return Union(std::move(parts));
}

absl::StatusOr<Dnf> Converter::NegOwn(int32_t loc) {
  const Json& n = doc_.node(loc);
  std::vector<Dnf> parts;
  const std::vector<Keyword>& keywords = ConverterKeywords();
  for (const Keyword& group : keywords) {
    if (group.group != group.name) continue;  // not a group's first
    bool present = false;
    for (const Keyword& k : keywords) {
      present = present || (k.group == group.name && n.contains(k.name));
    }
    if (!present) continue;
    const std::string key(group.name);
    absl::StatusOr<Dnf> d = NegKeyword(loc, key);
    if (!d.ok()) {
      if (opt_.strict) return d.status();
      // Lenient: a negation we cannot express is read as `true`, which
      // accepts more, never less.
      GRAMMARD_RETURN_IF_ERROR(Unsupported(loc, key, d.status()));
      return Dnf{Alt{}};
    }
    parts.push_back(*std::move(d));
  }
  return Union(std::move(parts));
}

absl::StatusOr<Dnf> Converter::Differs(int32_t loc, const Json& x) {
  std::vector<Dnf> alts;
  SimpleSchema other;
  other.types = static_cast<uint8_t>(kAllT & ~(x.is_array() ? kArrT : kObjT));
  alts.push_back(Single(std::move(other)));
  // A value other than `item`, as a member's or an item's schema.
  auto other_than = [&](const Json& item) {
    return Canon({Term{doc_.ConstSchema(loc, item), true}});
  };
  if (x.is_object()) {
    // A member of x missing, a member of x with another value, or a member
    // x does not have.
    Witness extra;
    extra.loc = loc;
    for (auto m = x.begin(); m != x.end(); ++m) {
      SimpleSchema missing;
      missing.types = kObjT;
      missing.object.rules.push_back(
          KeyRule{{{m.key(), FalseSet()}}, {}, false, {}});
      alts.push_back(Single(std::move(missing)));
      SimpleSchema changed;
      changed.types = kObjT;
      changed.object.required.push_back(m.key());
      changed.object.rules.push_back(
          KeyRule{{{m.key(), other_than(m.value())}}, {}, false, {}});
      alts.push_back(Single(std::move(changed)));
      extra.not_names.push_back(m.key());
    }
    SimpleSchema more;
    more.types = kObjT;
    more.object.witnesses.push_back(std::move(extra));
    alts.push_back(Single(std::move(more)));
    return Union(std::move(alts));
  }
  // Fewer items, more items, or item i with another value.
  const int64_t n = static_cast<int64_t>(x.size());
  if (n > 0) {
    SimpleSchema fewer;
    fewer.types = kArrT;
    fewer.array.max_items = n - 1;
    alts.push_back(Single(std::move(fewer)));
  }
  SimpleSchema more;
  more.types = kArrT;
  more.array.min_items = n + 1;
  alts.push_back(Single(std::move(more)));
  for (int64_t i = 0; i < n; ++i) {
    SimpleSchema changed;
    changed.types = kArrT;
    changed.array.min_items = i + 1;
    changed.array.prefix.assign(static_cast<size_t>(i) + 1, TermSet{});
    changed.array.prefix[static_cast<size_t>(i)] =
        other_than(x[static_cast<size_t>(i)]);
    alts.push_back(Single(std::move(changed)));
  }
  return Union(std::move(alts));
}

absl::StatusOr<Dnf> Converter::NegKeyword(int32_t loc, const std::string& key) {
  const Json& n = doc_.node(loc);
  const Json& v = n.contains(key) ? n[key] : n;
  auto unsupported = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot enforce \"", key, "\" at ", Where(loc, key),
        " under a negation: ", why, " (lenient mode would drop the negation)"));
  };
  auto decimal = [&](const Json& x) -> std::optional<Decimal> {
    if (!x.is_number()) return std::nullopt;
    absl::StatusOr<Decimal> d = ParseDecimal(x.dump());
    if (!d.ok()) return std::nullopt;
    return *d;
  };
  SimpleSchema s;
  if (key == "type") {
    absl::StatusOr<SimpleSchema> own = OwnCopy(loc);
    if (!own.ok()) return own.status();
    const SimpleSchema& pos = *own;
    s.types = static_cast<uint8_t>(kAllT & ~pos.types);
    if (pos.number.integer && (pos.types & kNumT)) {
      s.types |= kNumT;
      s.number.not_multiple_of.push_back(*ParseDecimal("1"));
    }
    if (s.types == 0) return Dnf{};
    return Single(std::move(s));
  }
  if (key == "enum" || key == "const") {
    std::vector<const Json*> values;
    if (key == "const") {
      values.push_back(&v);
    } else if (v.is_array()) {
      for (const Json& x : v) values.push_back(&x);
    } else {
      return unsupported("enum must be an array");
    }
    // Scalars are excluded by value; each array or object adds "differs
    // from it", a union, to the conjunction.
    Dnf out;
    std::vector<const Json*> composite;
    for (const Json* x : values) {
      GRAMMARD_RETURN_IF_ERROR(Tick());
      if (x->is_array() || x->is_object()) {
        composite.push_back(x);
      } else {
        s.excluded.Add(x);
      }
    }
    out = Single(std::move(s));
    for (const Json* x : composite) {
      absl::StatusOr<Dnf> differs = Differs(loc, *x);
      if (differs.ok()) differs = Product(out, *differs);
      if (!differs.ok()) return differs.status();
      out = *std::move(differs);
    }
    return out;
  }
  if (key == "minimum" || key == "exclusiveMinimum" || key == "maximum" ||
      key == "exclusiveMaximum") {
    if (v.is_boolean()) return Dnf{};  // draft 4: read with minimum/maximum
    std::optional<Decimal> d = decimal(v);
    if (!d) return unsupported("not a number");
    const bool lower = key == "minimum" || key == "exclusiveMinimum";
    bool exclusive = key == "exclusiveMinimum" || key == "exclusiveMaximum";
    if (!exclusive) {
      const char* flag = lower ? "exclusiveMinimum" : "exclusiveMaximum";
      exclusive =
          n.contains(flag) && n[flag].is_boolean() && n[flag].get<bool>();
    }
    s.types = kNumT;
    // not (x >= d) is x < d; not (x > d) is x <= d; likewise above.
    if (lower) {
      s.number.upper = Bound{*d, !exclusive};
    } else {
      s.number.lower = Bound{*d, !exclusive};
    }
    return Single(std::move(s));
  }
  if (key == "multipleOf") {
    std::optional<Decimal> d = decimal(v);
    if (!d || d->IsZero() || d->negative)
      return unsupported("not a positive number");
    s.types = kNumT;
    s.number.not_multiple_of.push_back(*d);
    return Single(std::move(s));
  }
  auto bound = [&](const Json& x) -> absl::StatusOr<int64_t> {
    std::optional<int64_t> c = NonNegativeInt(x);
    if (!c) return unsupported("not a non-negative integer");
    return *c;
  };
  if (key == "minLength" || key == "maxLength" || key == "minItems" ||
      key == "maxItems" || key == "minProperties" || key == "maxProperties") {
    absl::StatusOr<int64_t> c = bound(v);
    if (!c.ok()) return c.status();
    const bool is_min = key.compare(0, 3, "min") == 0;
    if (is_min && *c == 0) return Dnf{};
    int64_t lo = is_min ? 0 : *c + 1;
    int64_t hi = is_min ? *c - 1 : -1;
    if (key == "minLength" || key == "maxLength") {
      s.types = kStrT;
      s.string.min_len = lo;
      s.string.max_len = hi;
      s.string.length_loc = loc;
    } else if (key == "minItems" || key == "maxItems") {
      s.types = kArrT;
      s.array.min_items = lo;
      s.array.max_items = hi;
    } else {
      s.types = kObjT;
      s.object.min_props = lo;
      s.object.max_props = hi;
    }
    return Single(std::move(s));
  }
  if (key == "pattern" || key == "format") {
    if (!v.is_string()) return unsupported("not a string");
    RegexRef r{key == "format" ? RegexRef::kFormat : RegexRef::kPattern,
               v.get<std::string>(), loc};
    if (r.kind == RegexRef::kFormat) {
      FormatInfo info = LookupFormat(r.text);
      if (info.support == FormatSupport::kUnknown) return Dnf{};
      if (info.support == FormatSupport::kUnsupported)
        return unsupported(info.reason);
      if (info.narrower) {
        return unsupported(absl::StrCat(
            "the grammar for format \"", r.text,
            "\" refuses some valid strings, so its complement is inexact"));
      }
    }
    absl::StatusOr<RegexEntry*> entry = GetRegex(r);
    if (IsDeadline(entry.status())) return entry.status();
    if (!entry.ok()) return unsupported(entry.status().message());
    s.types = kStrT;
    s.string.must_not.push_back(std::move(r));
    return Single(std::move(s));
  }
  if (key == "contentEncoding" || key == "contentMediaType") {
    if (!AssertsContent(key, v)) return Dnf{};  // an annotation, always true
    return unsupported("its grammar is narrower, so its complement is inexact");
  }
  if (key == "uniqueItems") {
    if (v.is_boolean() && !v.get<bool>()) return Dnf{};
    return unsupported("arrays with a repeated item");
  }
  if (key == "items") {
    absl::StatusOr<SimpleSchema> own = OwnCopy(loc);
    if (!own.ok()) return own.status();
    const SimpleSchema& pos = *own;
    std::vector<Dnf> alts;
    for (size_t i = 0; i < pos.array.prefix.size(); ++i) {
      if (pos.array.prefix[i].empty()) continue;
      SimpleSchema a;
      a.types = kArrT;
      a.array.min_items = static_cast<int64_t>(i) + 1;
      a.array.prefix.assign(i + 1, TermSet{});
      if (pos.array.prefix[i].size() != 1) {
        return unsupported("an item schema that is itself a conjunction");
      }
      const Term t = pos.array.prefix[i][0];
      a.array.prefix[i] = Canon({Term{t.loc, !t.neg}});
      alts.push_back(Single(std::move(a)));
    }
    if (!pos.array.rest.empty()) {
      if (!pos.array.prefix.empty() || pos.array.rest.size() != 1) {
        return unsupported("additional items after a tuple");
      }
      SimpleSchema a;
      a.types = kArrT;
      a.array.contains.push_back(ContainsC{
          Canon({Term{pos.array.rest[0].loc, !pos.array.rest[0].neg}}), 1, -1,
          loc});
      alts.push_back(Single(std::move(a)));
    }
    return Union(std::move(alts));
  }
  if (key == "contains") {
    absl::StatusOr<SimpleSchema> own = OwnCopy(loc);
    if (!own.ok()) return own.status();
    const SimpleSchema& pos = *own;
    std::vector<Dnf> alts;
    for (const ContainsC& c : pos.array.contains) {
      if (c.min > 0) {
        SimpleSchema a;
        a.types = kArrT;
        a.array.contains.push_back(ContainsC{c.schema, 0, c.min - 1, loc});
        alts.push_back(Single(std::move(a)));
      }
      if (c.max >= 0) {
        SimpleSchema a;
        a.types = kArrT;
        a.array.contains.push_back(ContainsC{c.schema, c.max + 1, -1, loc});
        alts.push_back(Single(std::move(a)));
      }
    }
    return Union(std::move(alts));
  }
  if (key == "properties") {
    // Some member breaks the schema its name selects: a declared one its
    // property's, one matching a pattern that pattern's (declared or not),
    // one neither declared nor matched additionalProperties.
    std::vector<Dnf> alts;
    if (n.contains("properties") && !n["properties"].is_object()) {
      return unsupported("properties must be an object");
    }
    std::vector<RegexRef> patterns;
    if (auto it = n.find("patternProperties"); it != n.end()) {
      if (!it->is_object()) {
        return unsupported("patternProperties must be an object");
      }
      for (auto p = it->begin(); p != it->end(); ++p) {
        RegexRef r{RegexRef::kPattern, p.key(), loc};
        patterns.push_back(r);
        const TermSet value =
            One(doc_.Child(loc, "patternProperties", p.key()));
        if (value.empty()) continue;
        if (value.size() != 1) {
          return unsupported("a conjunction as a patternProperties schema");
        }
        Witness w;
        w.loc = loc;
        w.in_patterns.push_back(std::move(r));
        w.value = Canon({Term{value[0].loc, !value[0].neg}});
        SimpleSchema a;
        a.types = kObjT;
        a.object.witnesses.push_back(std::move(w));
        alts.push_back(Single(std::move(a)));
      }
    }
    if (n.contains("additionalProperties")) {
      const TermSet add = One(doc_.Child(loc, "additionalProperties"));
      if (add.size() > 1) {
        return unsupported("a conjunction as additionalProperties");
      }
      if (!add.empty()) {
        Witness w;
        w.loc = loc;
        w.value = IsFalseSet(add) ? TermSet{}
                                  : Canon({Term{add[0].loc, !add[0].neg}});
        if (n.contains("properties")) {
          for (auto p = n["properties"].begin(); p != n["properties"].end();
               ++p) {
            w.not_names.push_back(p.key());
          }
        }
        w.not_patterns = patterns;
        SimpleSchema a;
        a.types = kObjT;
        a.object.witnesses.push_back(std::move(w));
        alts.push_back(Single(std::move(a)));
      }
    }
    if (!n.contains("properties")) return Union(std::move(alts));
    for (auto p = v.begin(); p != v.end(); ++p) {
      TermSet value = One(doc_.Child(loc, "properties", p.key()));
      if (value.empty()) continue;
      if (value.size() != 1)
        return unsupported("a conjunction as a property schema");
      SimpleSchema a;
      a.types = kObjT;
      a.object.required.push_back(p.key());
      a.object.rules.push_back(
          KeyRule{{{p.key(), Canon({Term{value[0].loc, !value[0].neg}})}},
                  {},
                  false,
                  {}});
      alts.push_back(Single(std::move(a)));
    }
    return Union(std::move(alts));
  }
  if (key == "required") {
    if (v.is_boolean()) return Dnf{};
    if (!v.is_array()) return unsupported("required must be an array");
    std::vector<Dnf> alts;
    for (const Json& name : v) {
      if (!name.is_string()) return unsupported("required must list names");
      SimpleSchema a;
      a.types = kObjT;
      a.object.rules.push_back(
          KeyRule{{{name.get<std::string>(), FalseSet()}}, {}, false, {}});
      alts.push_back(Single(std::move(a)));
    }
    return Union(std::move(alts));
  }
  if (key == "propertyNames") {
    TermSet names = One(doc_.Child(loc, "propertyNames"));
    if (names.empty()) return Dnf{};
    // Some member, of any value, has a name the schema rejects.
    Witness w;
    w.loc = loc;
    w.not_schemas.push_back(std::move(names));
    SimpleSchema a;
    a.types = kObjT;
    a.object.witnesses.push_back(std::move(w));
    return Single(std::move(a));
  }
  if (key == "unevaluatedProperties" || key == "unevaluatedItems") {
    if ((v.is_boolean() && v.get<bool>()) || (v.is_object() && v.empty()))
      return Dnf{};
    return unsupported("unevaluated* keywords are not supported");
  }
  return Dnf{};
}

}  // namespace grammard::grammar::json_schema_internal
