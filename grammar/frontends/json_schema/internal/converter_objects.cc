#include <algorithm>
#include <map>

#include "grammar/base/status_macros.h"
#include "grammar/frontends/json_schema/internal/converter_impl.h"

namespace grammard::grammar::json_schema_internal {

namespace {

// Distinct witnesses (members negated member keywords ask for) on one
// object: a member is read in one way per set of them it may stand for, so
// states grow 2^witnesses (the object's rule budget still bounds them).
// MaskBench's handwritten objects ask for up to five.
constexpr size_t kMaxWitnesses = 5;
// Distinct patternProperties regexes an object may combine (bits of a
// class's mask), and the classes of names they may split names into.
constexpr int kMaxKeyPatterns = 64;
constexpr size_t kMaxKeyClasses = 64;

}  // namespace

int32_t Converter::NameTrie(const std::vector<const NextMember*>& members,
                            size_t pos) {
  if (members.size() == 1) {
    const NextMember& m = *members[0];
    const int32_t rule = e_.NewRule(
        "member_next",
        e_.Seq({e_.Bytes(std::string_view(m.quoted).substr(pos)), m.after}));
    e_.g().rules[rule].member_bit = static_cast<int16_t>(m.bit);
    e_.g().rules[rule].member_guard.Add(m.bit);
    return e_.Ref(rule);
  }
  // The run every name shares; names differ and none is a prefix of
  // another, so they part before any ends.
  const std::string& first = members[0]->quoted;
  const size_t from = pos;
  while (std::all_of(members.begin(), members.end(), [&](const NextMember* m) {
    return m->quoted[pos] == first[pos];
  })) {
    ++pos;
  }
  std::map<char, std::vector<const NextMember*>> by_next;
  for (const NextMember* m : members) by_next[m->quoted[pos]].push_back(m);
  std::vector<int32_t> branches;
  for (const auto& [byte, group] : by_next) {
    // A name others extend ends here: its rule reads the closing quote
    // itself, so that what follows a name (whitespace, the colon) is never
    // the first byte of a guarded rule, which every token holding it would
    // make a token to read for real (engine/distinct_values.h).
    if (byte == '"') {
      branches.push_back(NameTrie(group, pos));
      continue;
    }
    int32_t next = NameTrie(group, pos + 1);
    if (group.size() > 1) {
      const int32_t rule = e_.NewRule("member_names", next);
      e_.g().rules[rule].member_dispatch = true;
      for (const NextMember* m : group) {
        e_.g().rules[rule].member_guard.Add(m->bit);
      }
      next = e_.Ref(rule);
    }
    branches.push_back(e_.Seq({e_.Bytes(std::string(1, byte)), next}));
  }
  return e_.Seq({e_.Bytes(std::string_view(first).substr(from, pos - from)),
                 e_.Alt(std::move(branches))});
}

absl::StatusOr<int32_t> Converter::ObjectExpr(const ObjectC& o, int depth) {
  // Declared names: every property named by a rule or by `required`. Each
  // gets its own member; all other names share "other" members.
  std::vector<std::string> declared;
  auto declare = [&](const std::string& k) {
    if (std::find(declared.begin(), declared.end(), k) == declared.end()) {
      declared.push_back(k);
    }
  };
  if (opt_.order == PropertyOrder::kRequiredFirst) {
    for (const std::string& k : o.required) declare(k);
  }
  for (const KeyRule& rule : o.rules) {
    for (const auto& prop : rule.props) declare(prop.first);
  }
  for (const std::string& k : o.required) declare(k);

  // Lenient mode reads a constraint it cannot keep as "any members".
  auto loose = [&](absl::string_view keyword,
                   const auto& why) -> absl::StatusOr<int32_t> {
    GRAMMARD_RETURN_IF_ERROR(Unsupported(o.loc, keyword, why));
    const int32_t member =
        e_.Seq({e_.AnyString(), e_.KeySeparator(), e_.AnyValue(depth + 1)});
    return e_.Alt(
        {e_.Empty('{', '}'),
         e_.Seq({e_.Open('{', depth), member,
                 e_.g().AddRepeat(e_.Seq({e_.ItemSeparator(depth), member}), 0,
                                  kUnbounded),
                 e_.Close('}', depth)})});
  };
  // A witness (from a negated member keyword) is a member the object must
  // have; the states below remember which ones were written. One member may
  // be the witness of several: it is read in one way per set of witnesses
  // it stands for (`as`, a bit per witness; 0: none).
  if (o.witnesses.size() > kMaxWitnesses) {
    return loose("not",
                 absl::StrCat("more than ", kMaxWitnesses,
                              " distinct members to find on one object for "
                              "negated member keywords"));
  }
  const size_t num_witnesses = o.witnesses.size();
  const uint32_t all_found = (1u << num_witnesses) - 1;
  // Whether a member named `k` may stand for every witness in `as`.
  auto witness_name = [&](const std::string& k,
                          uint32_t as) -> absl::StatusOr<bool> {
    for (size_t i = 0; i < num_witnesses; ++i) {
      if (!(as >> i & 1)) continue;
      absl::StatusOr<bool> named = WitnessName(o.witnesses[i], k);
      if (!named.ok() || !*named) return named;
    }
    return true;
  };
  // A member's value of `ts`, standing for the witnesses in `as`.
  auto value_with = [&](const TermSet& ts, uint32_t as) {
    TermSet value = ts;
    for (size_t i = 0; i < num_witnesses; ++i) {
      if (as >> i & 1) value = Join(value, o.witnesses[i].value);
    }
    if (as != 0) value = Canon(std::move(value));
    if (IsFalseSet(value)) return e_.Nothing();
    return ValueRef(value, depth + 1);
  };
  // The member `key` with values `ts`, standing for the witnesses in `as`.
  auto member_with = [&](int32_t key, const TermSet& ts, uint32_t as) {
    const int32_t value = value_with(ts, as);
    if (e_.IsNothing(value)) return value;
    return e_.Seq({key, e_.KeySeparator(), value});
  };

  struct Member {
    bool required;
    std::string name;
    int32_t key;  // the quoted name
    // Per set of witnesses it stands for (0: none), its value; Nothing when
    // none is allowed.
    std::vector<int32_t> values;
    std::vector<int32_t> exprs;  // written below, indexed alike
  };
  std::vector<Member> members;
  for (const std::string& k : declared) {
    const bool required =
        std::find(o.required.begin(), o.required.end(), k) != o.required.end();
    absl::StatusOr<std::optional<TermSet>> vt = KeyValueTerms(o, k);
    if (!vt.ok()) return vt.status();
    bool allowed = vt->has_value();
    const Json name = k;
    for (const TermSet& names : o.names) {
      if (!allowed) break;
      absl::StatusOr<bool> ok = ValidateTerms(name, names, 0);
      if (!ok.ok()) return ok.status();
      allowed = *ok;
    }
    if (!allowed) {
      if (required) return e_.Nothing();
      continue;
    }
    Member m{required, k, e_.Quoted(e_.StringContent(k)), {}, {}};
    for (uint32_t as = 0; as <= all_found; ++as) {
      absl::StatusOr<bool> named = witness_name(k, as);
      if (!named.ok()) return loose("patternProperties", named.status());
      m.values.push_back(*named ? value_with(**vt, as) : e_.Nothing());
    }
    members.push_back(std::move(m));
  }

  // Other names, split into classes by the patterns they match.
  std::vector<std::pair<RegexRef, int>> patterns;  // (pattern, rule index)
  for (size_t r = 0; r < o.rules.size(); ++r) {
    for (const auto& pat : o.rules[r].patterns) {
      patterns.emplace_back(pat.first, static_cast<int>(r));
    }
  }
  if (patterns.size() > static_cast<size_t>(kMaxKeyPatterns)) {
    return loose("patternProperties",
                 absl::StrCat("more than ", kMaxKeyPatterns,
                              " patterns apply to one object"));
  }
  absl::StatusOr<std::optional<CharDfa>> names = NamesDfa(o.names);
  if (!names.ok()) return loose("propertyNames", names.status());
  absl::StatusOr<CharDfa> declared_dfa = LiteralsDfa(declared);
  if (!declared_dfa.ok()) return declared_dfa.status();
  // Per set of witnesses (bit i: witness i), the names every one of them
  // may have.
  std::vector<CharDfa> names_of;  // per witness
  for (const Witness& w : o.witnesses) {
    absl::StatusOr<CharDfa> names = WitnessNames(w);
    if (!names.ok()) return loose("patternProperties", names.status());
    names_of.push_back(*std::move(names));
  }
  std::vector<CharDfa> witness_dfa{AnyStringDfa()};
  for (uint32_t as = 1; as <= all_found; ++as) {
    // The set without its lowest witness was made before it.
    const uint32_t low = as & (~as + 1);
    const uint32_t i = static_cast<uint32_t>(__builtin_ctz(low));
    absl::StatusOr<CharDfa> both = json_schema_internal::Intersect(
        witness_dfa[as ^ low], names_of[i], opt_.dfa);
    if (!both.ok()) return loose("patternProperties", both.status());
    witness_dfa.push_back(*std::move(both));
  }
  // Per set of witnesses (0: none), the other members standing for them.
  std::vector<std::vector<int32_t>> others(all_found + 1);
  // The other names, split by which patterns they match: refined one
  // pattern at a time, keeping only classes some name falls in. Patterns
  // rarely overlap, so there are about as many classes as patterns, not
  // 2^patterns.
  struct KeyClass {
    uint64_t in;                  // bit i: matches patterns[i]
    std::optional<CharDfa> keys;  // none: any string
  };
  std::vector<KeyClass> key_classes;
  if (patterns.empty() && declared.empty() && !*names) {
    key_classes.push_back({0, std::nullopt});
  } else {
    CharDfa keys = Complement(*declared_dfa);
    if (*names) {
      absl::StatusOr<CharDfa> named =
          json_schema_internal::Intersect(keys, **names, opt_.dfa);
      if (!named.ok()) return loose("patternProperties", named.status());
      keys = *std::move(named);
    }
    if (!keys.IsEmpty()) key_classes.push_back({0, std::move(keys)});
    for (size_t i = 0; i < patterns.size(); ++i) {
      absl::StatusOr<const CharDfa*> x = RegexDfa(patterns[i].first);
      if (!x.ok()) return loose("patternProperties", x.status());
      std::vector<KeyClass> refined;
      for (const KeyClass& c : key_classes) {
        absl::StatusOr<CharDfa> in =
            json_schema_internal::Intersect(*c.keys, **x, opt_.dfa);
        if (!in.ok()) return loose("patternProperties", in.status());
        absl::StatusOr<CharDfa> out = Subtract(*c.keys, **x, opt_.dfa);
        if (!out.ok()) return loose("patternProperties", out.status());
        if (!in->IsEmpty()) refined.push_back({c.in | uint64_t{1} << i, *in});
        if (!out->IsEmpty()) refined.push_back({c.in, *out});
      }
      if (refined.size() > kMaxKeyClasses) {
        return loose("patternProperties",
                     absl::StrCat("its patterns split member names into more "
                                  "than ",
                                  kMaxKeyClasses, " classes"));
      }
      key_classes = std::move(refined);
    }
  }
  // Names whose values share one schema, one key automaton each: a pattern
  // whose value is what additionalProperties allows anyway (`"^.{1,255}$":
  // {}` beside the default `true`) constrains nothing, and its counted key
  // would cost every first mask there a walk of the vocabulary per count.
  struct NameClass {
    TermSet value;
    std::optional<CharDfa> keys;  // none: any string
  };
  std::vector<NameClass> name_classes;
  for (KeyClass& c : key_classes) {
    TermSet value;
    for (size_t r = 0; r < o.rules.size(); ++r) {
      const KeyRule& rule = o.rules[r];
      bool matched = false;
      for (size_t i = 0; i < patterns.size(); ++i) {
        if (patterns[i].second != static_cast<int>(r) ||
            !(c.in & (uint64_t{1} << i))) {
          continue;
        }
        matched = true;
        for (const auto& pat : rule.patterns) {
          if (pat.first.Key() == patterns[i].first.Key()) {
            value = Join(value, pat.second);
          }
        }
      }
      if (!matched && rule.has_additional) value = Join(value, rule.additional);
    }
    value = Canon(std::move(value));
    if (IsFalseSet(value)) continue;
    std::optional<CharDfa> keys = std::move(c.keys);
    auto same =
        std::find_if(name_classes.begin(), name_classes.end(),
                     [&](const NameClass& n) { return n.value == value; });
    if (same == name_classes.end()) {
      name_classes.push_back({std::move(value), std::move(keys)});
    } else {
      absl::StatusOr<CharDfa> both =
          json_schema_internal::Union(*same->keys, *keys, opt_.dfa);
      if (!both.ok()) return loose("patternProperties", both.status());
      same->keys = *std::move(both);
    }
  }
  for (const NameClass& c : name_classes) {
    const int32_t key_expr =
        c.keys ? e_.Ref(e_.NewRule("key", e_.DfaString(*c.keys, "key")))
               : e_.AnyString();
    others[0].push_back(member_with(key_expr, c.value, 0));
    for (uint32_t as = 1; as <= all_found; ++as) {
      absl::StatusOr<CharDfa> wkeys =
          c.keys ? json_schema_internal::Intersect(*c.keys, witness_dfa[as],
                                                   opt_.dfa)
                 : absl::StatusOr<CharDfa>(witness_dfa[as]);
      if (!wkeys.ok()) return loose("additionalProperties", wkeys.status());
      if (!wkeys->IsEmpty()) {
        others[as].push_back(
            member_with(e_.Ref(e_.NewRule("key", e_.DfaString(*wkeys, "key"))),
                        c.value, as));
      }
    }
  }
  const bool has_other = !others[0].empty();
  // Per set of witnesses, the rule of other members standing for them.
  std::vector<int32_t> other(all_found + 1, e_.Nothing());
  for (uint32_t as = 0; as <= all_found; ++as) {
    if (others[as].empty()) continue;
    other[as] = e_.Ref(e_.NewRule(as == 0 ? "member" : "witness",
                                  e_.Alt(std::move(others[as]))));
  }

  // States: which declared members were written (a subset in any order, an
  // index in declared order) and how many members so far (counted only up
  // to what minProperties/maxProperties need).
  const size_t n = members.size();
  const bool small = n <= static_cast<size_t>(kMaxAnyOrderProperties);
  const int64_t cap = o.max_props >= 0 ? o.max_props : o.min_props;
  // kAnyRepeatable's larger objects: declared members in any order, each as
  // often as the model likes (every occurrence valid, so whichever one a
  // parser keeps is valid), remembering only which required ones were
  // written. Counting members, or a witness that a later duplicate could
  // overwrite, needs each name once: such objects stay as written.
  size_t num_required = 0;
  for (const Member& m : members) num_required += m.required;
  const bool repeatable =
      opt_.order == PropertyOrder::kAnyRepeatable && !small && cap <= 0 &&
      num_witnesses == 0 &&
      num_required <= static_cast<size_t>(kMaxAnyOrderProperties);
  // Such objects with more required members than states could remember
  // (2^required): the same, with the required ones counted at run time
  // instead (grammar_ir.h's member_bit and required_members).
  const bool counted = opt_.order == PropertyOrder::kAnyRepeatable && !small &&
                       cap <= 0 && num_witnesses == 0 && !repeatable &&
                       num_required <= static_cast<size_t>(kMaxCountedMembers);
  // kAny's objects too large for a state per subset of members written:
  // each declared member a rule counted once at run time (member_guard), the
  // required ones required (grammar_ir.h). Such an object has a member
  // unless it may be empty, so minProperties 1 needs no count.
  const bool once = opt_.order == PropertyOrder::kAny && !small &&
                    o.max_props < 0 && o.min_props <= 1 && num_witnesses == 0 &&
                    n <= static_cast<size_t>(kMaxCountedMembers);
  // kAny's other larger objects (min/maxProperties, negated members) stay
  // as written, as kAnyRepeatable's do: a state per subset made host.json's
  // grammar five times its rules and its compile three times as long. Past
  // what a frame counts they are refused, a declared order of 256 optional
  // members being quadratic in alternatives.
  const bool once_too_many = opt_.order == PropertyOrder::kAny && !small &&
                             n > static_cast<size_t>(kMaxCountedMembers);
  const bool any_order =
      once || repeatable || counted || once_too_many ||
      (small && (opt_.order == PropertyOrder::kAny ||
                 opt_.order == PropertyOrder::kAnyWhenSmall ||
                 opt_.order == PropertyOrder::kAnyRepeatable));
  // The bit member j sets in `seen` when written in any order (none for an
  // optional member that may repeat).
  std::vector<uint64_t> bit(n, 0);
  for (size_t j = 0, r = 0; j < n; ++j) {
    if (!repeatable) {
      bit[j] = j < 64 ? uint64_t{1} << j : 0;  // past 20: refused below
    } else if (members[j].required) {
      bit[j] = uint64_t{1} << r++;
    }
  }
  const int64_t count_states = (cap + 1) * (int64_t{all_found} + 1);
  const size_t seen_bits = repeatable ? num_required : counted || once ? 0 : n;
  const int64_t member_states =
      any_order ? (seen_bits >= 20 ? int64_t{1} << 20 : int64_t{1} << seen_bits)
                : static_cast<int64_t>(n) + 1;
  if (member_states * count_states > kMaxCountingRules) {
    // Blame the count only when there is one to blame.
    const char* keyword = any_order || cap <= 0 ? "properties"
                          : o.max_props >= 0    ? "maxProperties"
                                                : "minProperties";
    return loose(
        keyword,
        absl::StrCat("an object with ", n, " properties",
                     cap > 0 ? absl::StrCat(", counting up to ", cap) : "",
                     " needs more than ", kMaxCountingRules, " grammar rules",
                     any_order ? " in any order" : "",
                     opt_.order == PropertyOrder::kAny &&
                             n > static_cast<size_t>(kMaxCountedMembers)
                         ? absl::StrCat(" (a matcher counts at most ",
                                        kMaxCountedMembers,
                                        " declared properties at run time)")
                         : ""));
  }
  if (once) {
    // One rule holds the whole object, so that every member returns into a
    // frame of it. Its names are read by one trie of dispatches
    // (grammar_ir.h's member_dispatch), each member by one rule called
    // where its name parts from the others, guarded by its bit, so that a
    // name prefix is refused once all its members are counted, as is the
    // separator once every member is, and a matcher steps one stack along
    // the names, not one per member. The whitespace before the separator
    // stays the object's (its closing brace then always follows, or a
    // member it requires).
    std::vector<int32_t> firsts, nexts;
    std::vector<NextMember> named;
    MemberSet required;
    for (size_t j = 0; j < n; ++j) {
      if (e_.IsNothing(members[j].values[0])) {
        if (members[j].required) return e_.Nothing();
        continue;
      }
      if (members[j].required) required.Add(static_cast<int>(j));
      // What follows a name (the separator and the value) is a rule of its
      // own: members whose values are alike then call one rule once equal
      // rules merge, where copies in each member's rule were states each
      // classified on its own at its first mask (an 83-member object of
      // Github_ultra: 362 states first met, 85 of them by the general walk;
      // 279 and 2 this way).
      const int32_t value = e_.Ref(e_.NewRule(
          "member_value", e_.Seq({e_.KeySeparator(), members[j].values[0]})));
      const std::string& name = members[j].name;
      if (JsonEmitter::OneSpelling(name)) {
        named.push_back({static_cast<int>(j), name + "\"", value});
        continue;
      }
      // A name JSON lets escape has several spellings: rules of its own,
      // the later one beginning with the separator.
      const int32_t first =
          e_.NewRule("member_first", e_.Seq({members[j].key, value}));
      const int32_t next = e_.NewRule(
          "member_next",
          e_.Seq({e_.ItemSeparatorAfterWs(depth), members[j].key, value}));
      for (int32_t rule : {first, next}) {
        e_.g().rules[rule].member_bit = static_cast<int16_t>(j);
      }
      e_.g().rules[next].member_guard.Add(static_cast<int>(j));
      firsts.push_back(e_.Ref(first));
      nexts.push_back(e_.Ref(next));
    }
    if (!named.empty()) {
      std::vector<const NextMember*> all;
      for (const NextMember& m : named) all.push_back(&m);
      // The first member reads the trie right after the opening quote;
      // a later one through a dispatch guarded by every name, which reads
      // the separator first.
      const int32_t names = e_.NewRule("member_names", NameTrie(all, 0));
      e_.g().rules[names].member_dispatch = true;
      firsts.push_back(e_.Seq({e_.Bytes("\""), e_.Ref(names)}));
      const int32_t next =
          e_.NewRule("member_next", e_.Seq({e_.ItemSeparatorAfterWs(depth),
                                            e_.Bytes("\""), e_.Ref(names)}));
      e_.g().rules[next].member_dispatch = true;
      for (const NextMember& m : named) {
        e_.g().rules[next].member_guard.Add(m.bit);
      }
      nexts.push_back(e_.Ref(next));
    }
    if (has_other) {
      firsts.push_back(other[0]);
      nexts.push_back(e_.Seq({e_.ItemSeparatorAfterWs(depth), other[0]}));
    }
    const int32_t body =
        e_.Seq({e_.Open('{', depth), e_.Alt(std::move(firsts)),
                e_.g().AddRepeat(e_.Seq({e_.Ws(), e_.Alt(std::move(nexts))}), 0,
                                 kUnbounded),
                e_.Close('}', depth)});
    const int32_t rule = e_.NewRule("any_order_object", body);
    e_.g().rules[rule].required_members = required;
    return e_.Alt({required.empty() && o.min_props <= 0 ? e_.Empty('{', '}')
                                                        : e_.Nothing(),
                   e_.Ref(rule)});
  }
  for (Member& m : members) {
    // In any order, every state of which members were written calls the
    // members not written yet. Written inline, each state would get a trie
    // of keys of its own (a five-property object: 743 automaton states for
    // 64), and a state after each key, before its value. A value read at
    // the member's end is copied into it only when no other rule would
    // copy it too (compiler.cc, AbsorbedRules).
    auto with = [&](int32_t value) {
      if (e_.IsNothing(value)) return value;
      const int32_t member = e_.Seq({m.key, e_.KeySeparator(), value});
      return any_order ? e_.Ref(e_.NewRule("member", member)) : member;
    };
    for (int32_t value : m.values) m.exprs.push_back(with(value));
  }
  if (counted) {
    // One rule holds the whole object, so that every member returns into a
    // frame of it: its members in any order, each as often as the model
    // likes, and its required ones each a rule setting a bit there.
    std::vector<int32_t> alts;
    MemberSet required;
    int next_bit = 0;
    for (const Member& m : members) {
      const int32_t expr = m.exprs[0];
      if (m.required) {
        if (e_.IsNothing(expr)) return e_.Nothing();
        // `with` made it a call of a rule of its own.
        e_.g().rules[e_.g().exprs[expr].rule].member_bit =
            static_cast<int16_t>(next_bit);
        required.Add(next_bit++);
      }
      if (!e_.IsNothing(expr)) alts.push_back(expr);
    }
    if (has_other) alts.push_back(other[0]);
    const int32_t member = e_.Alt(std::move(alts));
    const int32_t body =
        e_.Seq({e_.Open('{', depth), member,
                e_.g().AddRepeat(e_.Seq({e_.ItemSeparator(depth), member}), 0,
                                 kUnbounded),
                e_.Close('}', depth)});
    const int32_t rule = e_.NewRule("counted_object", body);
    e_.g().rules[rule].required_members = required;
    return e_.Ref(rule);
  }
  auto accepts = [&](uint64_t seen, int64_t count, uint32_t found) {
    if (count < o.min_props || found != all_found) return false;
    for (size_t j = 0; j < n; ++j) {
      if (!members[j].required) continue;
      // Any order: `seen` is a set; declared order: an index past j.
      if (any_order ? !(seen & bit[j]) : seen <= j) return false;
    }
    return true;
  };
  // Repeatable objects: the members that may come again in any state, as
  // one rule all states call. Copied into each of the 2^required states,
  // they made most of such an object's automaton (a 20 KB schema: 20,600
  // states for 5,200).
  int32_t repeat_rule = -1;
  if (repeatable) {
    std::vector<int32_t> optional;
    for (size_t j = 0; j < n; ++j) {
      if (bit[j] == 0) optional.push_back(members[j].exprs[0]);
    }
    if (has_other) optional.push_back(other[0]);
    if (!optional.empty()) {
      repeat_rule = e_.NewRule("members", e_.Alt(std::move(optional)));
    }
  }
  using State = std::tuple<uint64_t, int64_t, uint32_t>;
  std::map<State, int32_t> rules;
  std::vector<State> pending;
  auto state = [&](uint64_t seen, int64_t count, uint32_t found) {
    count = std::min(count, cap);
    State key{seen, count, found};
    auto it = rules.find(key);
    if (it != rules.end()) return e_.Ref(it->second);
    const int32_t rule = e_.NewRule("object_state");
    rules.emplace(key, rule);
    pending.push_back(key);
    return e_.Ref(rule);
  };
  auto steps = [&](uint64_t seen, int64_t count, uint32_t found, bool first) {
    std::vector<int32_t> alts;
    if (o.max_props >= 0 && count >= o.max_props) return e_.Nothing();
    // Writing a member (`exprs`, per set of witnesses it stands for) and
    // going on from `next`: as no witness, or as witnesses not found yet.
    auto add = [&](const std::vector<int32_t>& exprs, uint64_t next) {
      alts.push_back(e_.Seq({exprs[0], state(next, count + 1, found)}));
      for (uint32_t as = 1; as <= all_found; ++as) {
        if ((as & found) != 0 || e_.IsNothing(exprs[as])) continue;
        alts.push_back(e_.Seq({exprs[as], state(next, count + 1, found | as)}));
      }
    };
    if (repeatable) {
      // Members that leave `seen` as it is share one alternative.
      std::vector<int32_t> same;
      if (repeat_rule >= 0) same.push_back(e_.Ref(repeat_rule));
      for (size_t j = 0; j < n; ++j) {
        if (bit[j] == 0) continue;
        if (seen & bit[j]) {
          same.push_back(members[j].exprs[0]);
        } else {
          add(members[j].exprs, seen | bit[j]);
        }
      }
      if (!same.empty()) {
        alts.push_back(
            e_.Seq({e_.Alt(std::move(same)), state(seen, count + 1, found)}));
      }
    } else if (any_order) {
      for (size_t j = 0; j < n; ++j) {
        if (seen & bit[j]) continue;
        add(members[j].exprs, seen | bit[j]);
      }
    } else {
      // The next declared member may be any later one, skipping only
      // optional ones.
      for (size_t j = seen; j < n; ++j) {
        add(members[j].exprs, j + 1);
        if (members[j].required) break;
      }
    }
    if (has_other && !repeatable) add(other, seen);
    if (alts.empty()) return e_.Nothing();
    // One separator before the choice: one per alternative made an
    // object's states mostly copies of it.
    return e_.Seq({first ? e_.Bytes("") : e_.ItemSeparator(depth),
                   e_.Alt(std::move(alts))});
  };
  const int32_t start =
      e_.Alt({accepts(0, 0, 0) ? e_.Empty('{', '}') : e_.Nothing(),
              e_.Seq({e_.Open('{', depth), steps(0, 0, 0, true)})});
  while (!pending.empty()) {
    auto [seen, count, found] = pending.back();
    pending.pop_back();
    e_.g().rules[rules[{seen, count, found}]].body = e_.Alt(
        {accepts(seen, count, found) ? e_.Close('}', depth) : e_.Nothing(),
         steps(seen, count, found, false)});
  }
  return start;
}

}  // namespace grammard::grammar::json_schema_internal
