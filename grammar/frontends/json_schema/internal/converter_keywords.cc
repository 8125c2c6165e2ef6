#include "absl/strings/ascii.h"
#include "grammar/base/status_macros.h"
#include "grammar/frontends/json_schema/internal/converter_impl.h"

namespace grammard::grammar::json_schema_internal {

std::optional<int64_t> NonNegativeInt(const Json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    return static_cast<int64_t>(std::min<uint64_t>(u, uint64_t{1} << 62));
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < 0) return std::nullopt;
    return i;
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (d >= 0 && d < 4e18 &&
        d == static_cast<double>(static_cast<int64_t>(d))) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

bool IsJsonMediaType(const Json& v) {
  std::string type = absl::AsciiStrToLower(v.get<std::string>());
  type =
      std::string(absl::StripAsciiWhitespace(type.substr(0, type.find(';'))));
  return type == "application/json";
}

absl::Status Converter::ParseOwn(int32_t loc, SimpleSchema* s, bool* any) {
  const Json& n = doc_.node(loc);
  auto bad = [&](const char* key, const auto& reason) {
    return Unsupported(loc, key, reason);  // a text, or a failure's status
  };
  auto decimal = [&](const char* key,
                     std::optional<Decimal>* out) -> absl::Status {
    out->reset();
    auto it = n.find(key);
    if (it == n.end() || it->is_boolean()) return absl::OkStatus();
    if (!it->is_number()) return bad(key, "must be a number");
    absl::StatusOr<Decimal> d = ParseDecimal(it->dump());
    if (!d.ok()) return bad(key, d.status().message());
    *out = *d;
    return absl::OkStatus();
  };
  auto count = [&](const char* key,
                   std::optional<int64_t>* out) -> absl::Status {
    out->reset();
    auto it = n.find(key);
    if (it == n.end()) return absl::OkStatus();
    *out = NonNegativeInt(*it);
    if (!*out) return bad(key, "must be a non-negative integer");
    return absl::OkStatus();
  };
  // type
  if (auto it = n.find("type"); it != n.end()) {
    uint8_t mask = 0;
    bool number = false, integer = false, ok = true;
    auto add = [&](const Json& t) {
      if (!t.is_string()) {
        ok = false;
        return;
      }
      const std::string& name = t.get_ref<const std::string&>();
      if (name == "null")
        mask |= kNullT;
      else if (name == "boolean")
        mask |= kBoolT;
      else if (name == "number")
        mask |= kNumT, number = true;
      else if (name == "integer")
        mask |= kNumT, integer = true;
      else if (name == "string")
        mask |= kStrT;
      else if (name == "array")
        mask |= kArrT;
      else if (name == "object")
        mask |= kObjT;
      else
        ok = false;
    };
    if (it->is_array()) {
      for (const Json& t : *it) add(t);
    } else {
      add(*it);
    }
    if (!ok) {
      GRAMMARD_RETURN_IF_ERROR(bad("type", "must name JSON types"));
    } else {
      s->types = mask;
      s->number.integer = integer && !number;
      s->number.integer_zero_fraction = doc_.draft() != Draft::k4;
      *any = true;
    }
  }
  // enum, const
  if (auto it = n.find("enum"); it != n.end()) {
    if (!it->is_array()) {
      GRAMMARD_RETURN_IF_ERROR(bad("enum", "must be an array"));
    } else {
      s->has_values = true;
      for (const Json& v : *it) {
        GRAMMARD_RETURN_IF_ERROR(Tick());
        s->values.Add(&v);
      }
      *any = true;
    }
  }
  if (auto it = n.find("const"); it != n.end()) {
    // Of an enum beside it, the value as the enum writes it.
    const Json* kept = s->has_values ? s->values.Find(*it) : &*it;
    s->values = ValueList();
    if (kept != nullptr) s->values.Add(kept);
    s->has_values = true;
    *any = true;
  }
  // numbers
  {
    std::optional<Decimal> d;
    GRAMMARD_RETURN_IF_ERROR(decimal("minimum", &d));
    if (d) {
      const Json* ex =
          n.contains("exclusiveMinimum") ? &n["exclusiveMinimum"] : nullptr;
      s->number.lower = Bound{*d, ex && ex->is_boolean() && ex->get<bool>()};
    }
    GRAMMARD_RETURN_IF_ERROR(decimal("exclusiveMinimum", &d));
    if (d && (!s->number.lower || Compare(*d, s->number.lower->value) >= 0)) {
      s->number.lower = Bound{*d, true};
    }
    GRAMMARD_RETURN_IF_ERROR(decimal("maximum", &d));
    if (d) {
      const Json* ex =
          n.contains("exclusiveMaximum") ? &n["exclusiveMaximum"] : nullptr;
      s->number.upper = Bound{*d, ex && ex->is_boolean() && ex->get<bool>()};
    }
    GRAMMARD_RETURN_IF_ERROR(decimal("exclusiveMaximum", &d));
    if (d && (!s->number.upper || Compare(*d, s->number.upper->value) <= 0)) {
      s->number.upper = Bound{*d, true};
    }
    GRAMMARD_RETURN_IF_ERROR(decimal("multipleOf", &d));
    if (d) {
      if (d->IsZero() || d->negative) {
        GRAMMARD_RETURN_IF_ERROR(bad("multipleOf", "must be greater than 0"));
      } else {
        NumberConstraints probe;
        probe.multiple_of.push_back(*d);
        absl::StatusOr<CharDfa> dfa = NumberDfa(probe, opt_.dfa);
        if (!dfa.ok()) {
          GRAMMARD_RETURN_IF_ERROR(bad("multipleOf", dfa.status()));
        } else {
          s->number.multiple_of.push_back(*d);
        }
      }
    }
    if (!s->number.Unconstrained()) {
      s->number_loc = loc;
      *any = true;
    }
  }
  // strings
  {
    std::optional<int64_t> c;
    GRAMMARD_RETURN_IF_ERROR(count("minLength", &c));
    if (c) s->string.min_len = *c;
    GRAMMARD_RETURN_IF_ERROR(count("maxLength", &c));
    if (c) s->string.max_len = *c;
    if (s->string.HasLength()) s->string.length_loc = loc;
    // A string must match `r`'s regex (dropped, in lenient mode, when the
    // regex cannot be built).
    auto require = [&](RegexRef r) -> absl::Status {
      absl::StatusOr<RegexEntry*> entry = GetRegex(r);
      if (!entry.ok()) return bad(r.Keyword(), entry.status());
      s->string.must.push_back(std::move(r));
      return absl::OkStatus();
    };
    if (auto it = n.find("pattern"); it != n.end()) {
      if (!it->is_string()) {
        GRAMMARD_RETURN_IF_ERROR(bad("pattern", "must be a string"));
      } else {
        GRAMMARD_RETURN_IF_ERROR(
            require(RegexRef{RegexRef::kPattern, it->get<std::string>(), loc}));
      }
    }
    if (auto it = n.find("format"); it != n.end() && it->is_string()) {
      const std::string name = it->get<std::string>();
      FormatInfo info = LookupFormat(name);
      if (info.support == FormatSupport::kUnsupported) {
        GRAMMARD_RETURN_IF_ERROR(bad(
            "format", absl::StrCat("format \"", name, "\": ", info.reason)));
      } else if (info.support == FormatSupport::kEnforced) {
        GRAMMARD_RETURN_IF_ERROR(
            require(RegexRef{RegexRef::kFormat, name, loc}));
      }
    }
    if (auto it = n.find("contentMediaType");
        it != n.end() && AssertsContent("contentMediaType", *it)) {
      GRAMMARD_RETURN_IF_ERROR(
          bad("contentMediaType",
              "JSON documents inside strings are not enforced"));
    }
    if (auto it = n.find("contentEncoding");
        it != n.end() && AssertsContent("contentEncoding", *it)) {
      GRAMMARD_RETURN_IF_ERROR(
          require(RegexRef{RegexRef::kEncoding, it->get<std::string>(), loc}));
    }
    if (!s->string.Unconstrained()) *any = true;
  }
  // arrays
  {
    ArrayC& a = s->array;
    bool has_prefix = false;
    if (auto it = n.find("prefixItems"); it != n.end()) {
      if (!it->is_array()) {
        GRAMMARD_RETURN_IF_ERROR(
            bad("prefixItems", "must be an array of schemas"));
      } else {
        for (size_t i = 0; i < it->size(); ++i) {
          a.prefix.push_back(One(doc_.Child(loc, "prefixItems", i)));
        }
        has_prefix = true;
      }
    }
    if (auto it = n.find("items"); it != n.end()) {
      if (it->is_array()) {
        if (has_prefix) {
          GRAMMARD_RETURN_IF_ERROR(
              bad("items", "an array of items beside prefixItems"));
        } else {
          for (size_t i = 0; i < it->size(); ++i) {
            a.prefix.push_back(One(doc_.Child(loc, "items", i)));
          }
          has_prefix = true;
          if (n.contains("additionalItems"))
            a.rest = One(doc_.Child(loc, "additionalItems"));
        }
      } else if (it->is_object() || it->is_boolean()) {
        a.rest = One(doc_.Child(loc, "items"));
      } else {
        GRAMMARD_RETURN_IF_ERROR(bad("items", "must be a schema"));
      }
    }
    std::optional<int64_t> c;
    GRAMMARD_RETURN_IF_ERROR(count("minItems", &c));
    if (c) a.min_items = *c;
    GRAMMARD_RETURN_IF_ERROR(count("maxItems", &c));
    if (c) a.max_items = *c;
    if (a.min_items > 0 || a.max_items >= 0) a.loc = loc;
    if (auto it = n.find("uniqueItems"); it != n.end()) {
      if (!it->is_boolean()) {
        GRAMMARD_RETURN_IF_ERROR(bad("uniqueItems", "must be a boolean"));
      } else if (it->get<bool>()) {
        a.unique = true;
        a.unique_loc = loc;
      }
    }
    if (n.contains("contains")) {
      ContainsC cc;
      cc.schema = One(doc_.Child(loc, "contains"));
      cc.loc = loc;
      GRAMMARD_RETURN_IF_ERROR(count("minContains", &c));
      if (c) cc.min = *c;
      GRAMMARD_RETURN_IF_ERROR(count("maxContains", &c));
      if (c) cc.max = *c;
      if (cc.min > 0 || cc.max >= 0) a.contains.push_back(std::move(cc));
    }
    if (has_prefix || !a.rest.empty() || a.min_items > 0 || a.max_items >= 0 ||
        a.unique || !a.contains.empty()) {
      *any = true;
    }
  }
  // objects
  {
    ObjectC& o = s->object;
    o.loc = loc;
    KeyRule rule;
    bool has_rule = false, rule_ok = true;
    if (auto it = n.find("properties"); it != n.end()) {
      if (!it->is_object()) {
        GRAMMARD_RETURN_IF_ERROR(bad("properties", "must be an object"));
        rule_ok = false;
      } else {
        for (auto p = it->begin(); p != it->end(); ++p) {
          rule.props.emplace_back(p.key(),
                                  One(doc_.Child(loc, "properties", p.key())));
        }
        has_rule = true;
      }
    }
    if (auto it = n.find("patternProperties"); it != n.end()) {
      if (!it->is_object()) {
        GRAMMARD_RETURN_IF_ERROR(bad("patternProperties", "must be an object"));
        rule_ok = false;
      } else {
        for (auto p = it->begin(); p != it->end(); ++p) {
          RegexRef r{RegexRef::kPattern, p.key(), loc};
          absl::StatusOr<RegexEntry*> entry = GetRegex(r);
          if (!entry.ok()) {
            // Without the pattern the keys it governs cannot be told apart
            // from additional ones: drop the whole member rule.
            GRAMMARD_RETURN_IF_ERROR(bad("patternProperties", entry.status()));
            rule_ok = false;
            break;
          }
          rule.patterns.emplace_back(
              std::move(r), One(doc_.Child(loc, "patternProperties", p.key())));
        }
        has_rule = true;
      }
    }
    if (n.contains("additionalProperties")) {
      TermSet add = One(doc_.Child(loc, "additionalProperties"));
      if (!add.empty()) {
        rule.has_additional = true;
        rule.additional = std::move(add);
      }
      has_rule = true;
    }
    if (has_rule && rule_ok) {
      o.rules.push_back(std::move(rule));
      *any = true;
    }
    if (auto it = n.find("required"); it != n.end() && !it->is_boolean()) {
      // (A boolean is draft 3's per-property flag, which later drafts ignore.)
      bool ok = it->is_array();
      if (ok) {
        for (const Json& r : *it) ok = ok && r.is_string();
      }
      if (!ok) {
        GRAMMARD_RETURN_IF_ERROR(bad("required", "must be an array of names"));
      } else {
        for (const Json& r : *it) {
          const std::string& name = r.get_ref<const std::string&>();
          if (std::find(o.required.begin(), o.required.end(), name) ==
              o.required.end()) {
            o.required.push_back(name);
          }
        }
        if (!o.required.empty()) *any = true;
      }
    }
    std::optional<int64_t> c;
    GRAMMARD_RETURN_IF_ERROR(count("minProperties", &c));
    if (c) o.min_props = *c;
    GRAMMARD_RETURN_IF_ERROR(count("maxProperties", &c));
    if (c) o.max_props = *c;
    if (o.min_props > 0 || o.max_props >= 0) *any = true;
    if (n.contains("propertyNames")) {
      TermSet names = One(doc_.Child(loc, "propertyNames"));
      if (!names.empty()) {
        o.names.push_back(std::move(names));
        *any = true;
      }
    }
  }
  // unevaluated*: without in-place applicators beside them, the members and
  // items evaluated are exactly those this schema's own keywords cover, so
  // they read as additionalProperties / the items after the prefix. With
  // only allOf and $ref (which always apply), the members evaluated are
  // still known statically: see EvaluatedMembers.
  bool applicators = false;
  for (const char* key :
       {"allOf", "anyOf", "oneOf", "if", "then", "else", "$ref", "$dynamicRef",
        "$recursiveRef", "dependentSchemas", "dependencies"}) {
    applicators = applicators || n.contains(key);
  }
  if (auto it = n.find("unevaluatedProperties");
      applicators && it != n.end() &&
      !((it->is_boolean() && it->get<bool>()) ||
        (it->is_object() && it->empty()))) {
    EvaluatedMembers ev;
    GRAMMARD_RETURN_IF_ERROR(CollectEvaluated(loc, 0, &ev));
    if (ev.dynamic) {
      GRAMMARD_RETURN_IF_ERROR(
          bad("unevaluatedProperties",
              "unevaluatedProperties beside anyOf/oneOf/if/"
              "dependentSchemas/$dynamicRef is not supported"));
    } else if (!ev.all) {
      KeyRule rule;
      for (const std::string& name : ev.names)
        rule.props.emplace_back(name, TermSet{});
      for (const RegexRef& r : ev.patterns)
        rule.patterns.emplace_back(r, TermSet{});
      rule.has_additional = true;
      rule.additional = One(doc_.Child(loc, "unevaluatedProperties"));
      s->object.rules.push_back(std::move(rule));
      *any = true;
    }
  }
  for (const char* key : {"unevaluatedProperties", "unevaluatedItems"}) {
    auto it = n.find(key);
    if (it == n.end()) continue;
    if ((it->is_boolean() && it->get<bool>()) ||
        (it->is_object() && it->empty())) {
      continue;
    }
    const bool items = std::string(key) == "unevaluatedItems";
    if (!items && applicators) continue;  // handled above
    // contains marks the items it matches as evaluated.
    if (applicators || (items && n.contains("contains"))) {
      GRAMMARD_RETURN_IF_ERROR(
          bad(key,
              "unevaluated* beside allOf/anyOf/oneOf/if/$ref/"
              "dependentSchemas/contains is not supported"));
      continue;
    }
    const TermSet rest = One(doc_.Child(loc, key));
    if (items) {
      auto it_items = n.find("items");
      const bool all_evaluated =
          (it_items != n.end() && !it_items->is_array()) ||
          (it_items != n.end() && n.contains("additionalItems"));
      if (!all_evaluated) s->array.rest = rest;
    } else if (!n.contains("additionalProperties")) {
      if (s->object.rules.empty()) s->object.rules.emplace_back();
      s->object.rules.back().has_additional = true;
      s->object.rules.back().additional = rest;
    }
    *any = true;
  }
  return absl::OkStatus();
}

absl::Status Converter::CollectEvaluated(int32_t loc, int depth,
                                         EvaluatedMembers* ev) {
  const Json& n = doc_.node(loc);
  if (!n.is_object()) return absl::OkStatus();
  if (depth > 32) {
    ev->dynamic = true;  // deep or cyclic $ref chains: give up, refuse
    return absl::OkStatus();
  }
  for (const char* key :
       {"anyOf", "oneOf", "if", "then", "else", "dependentSchemas",
        "dependencies", "$dynamicRef", "$recursiveRef"}) {
    ev->dynamic = ev->dynamic || n.contains(key);
  }
  // Both cover every member of the object they apply to.
  ev->all = ev->all || n.contains("additionalProperties") ||
            (depth > 0 && n.contains("unevaluatedProperties"));
  if (auto it = n.find("properties"); it != n.end() && it->is_object()) {
    for (auto p = it->begin(); p != it->end(); ++p)
      ev->names.push_back(p.key());
  }
  if (auto it = n.find("patternProperties"); it != n.end() && it->is_object()) {
    for (auto p = it->begin(); p != it->end(); ++p) {
      ev->patterns.push_back(RegexRef{RegexRef::kPattern, p.key(), loc});
    }
  }
  if (auto it = n.find("allOf"); it != n.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      GRAMMARD_RETURN_IF_ERROR(
          CollectEvaluated(doc_.Child(loc, "allOf", i), depth + 1, ev));
    }
  }
  if (n.contains("$ref")) {
    absl::StatusOr<int32_t> target = RefTarget(loc);
    if (!target.ok()) return target.status();
    return CollectEvaluated(*target, depth + 1, ev);
  }
  return absl::OkStatus();
}

}  // namespace grammard::grammar::json_schema_internal
