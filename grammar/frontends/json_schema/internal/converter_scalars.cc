#include "grammar/base/status_macros.h"
#include "grammar/frontends/json_schema/internal/converter_impl.h"
#include "grammar/frontends/regex/regex_parser.h"

namespace grammard::grammar::json_schema_internal {

namespace {

// The longest string length minLength/maxLength may count. The engine
// spends an automaton state per counted character (100000 by default), so
// 64 KiB keeps the common 32767 and 65535 within reach.
constexpr int64_t kMaxCountedLength = 65536;
// A string's maxLength past this (its minLength not) is counted at run time
// (CountedString): an automaton of a state per count compiles in time
// linear in the bound (MaskBench's TTFM p99 fell from about 39 to 33 ms),
// while the run-time count reads tokens for real only in the last few
// characters.
constexpr int64_t kRunTimeLengthFrom = 256;
// A pattern or format with lengths whose automaton has more edges than
// this (code point ranges, each a few grammar expressions once written in
// UTF-8) has its maxLength counted at run time instead, when that
// automaton is at least kCountingShrinksBy times smaller without it: on
// MaskBench `^(?:\S+\s+){0,29}\S+$` up to 300 characters made 347K edges,
// and a schema with three of them 3.2M expressions, past the grammar's
// limit of 1M.
constexpr size_t kMaxUnrolledStringEdges = 32768;
constexpr size_t kCountingShrinksBy = 4;

size_t EdgeCount(const CharDfa& dfa) {
  size_t n = 0;
  for (const auto& edges : dfa.edges) n += edges.size();
  return n;
}

// maxLength counted at run time past this is this: 2^28 characters, far
// past what any model writes, and a count that never overflows (a bound
// above refuses only longer strings, never lets an invalid one through).
constexpr int64_t kMaxRunTimeLength = int64_t{1} << 28;

// Calls visit(i) for each character of `p` from `from` on that is neither
// escaped nor inside a class [...] (ECMAScript's: the first `]` ends it), so
// may be a group, an alternation or an anchor; stops at the first call that
// returns false. The one reading of a pattern's structure the splitters
// below share.
template <typename Visit>
void ForEachSyntaxChar(const std::string& p, size_t from, Visit visit) {
  bool in_class = false;
  for (size_t i = from; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      ++i;
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
    } else if (!visit(i)) {
      return;
    }
  }
}

// One top-level alternative of a pattern.
struct PatternAlt {
  std::string text;
  bool start = false;
  bool end = false;
};

// The index of the `)` closing the group opened at p[open], or npos.
size_t GroupEnd(const std::string& p, size_t open) {
  int depth = 0;
  size_t end = std::string::npos;
  ForEachSyntaxChar(p, open, [&](size_t i) {
    if (p[i] == '(') {
      ++depth;
    } else if (p[i] == ')' && --depth == 0) {
      end = i;
      return false;
    }
    return true;
  });
  return end;
}

// The inside of `p` when all of it is one group, "(...)" or "(?:...)";
// nullopt otherwise.
std::optional<std::string> GroupInside(const std::string& p) {
  if (p.size() < 2 || p[0] != '(' || GroupEnd(p, 0) != p.size() - 1) {
    return std::nullopt;
  }
  if (p.compare(0, 3, "(?:") == 0) return p.substr(3, p.size() - 4);
  if (p.compare(0, 2, "(?") == 0) return std::nullopt;  // lookaround, names
  return p.substr(1, p.size() - 2);
}

// Splits a pattern into its top-level alternatives, each with whether it is
// anchored at the start (^) and at the end ($), or sets *elsewhere for
// anchors anywhere else, whose meaning under JSON Schema's search semantics
// the regex parser's full-match reading would change.
absl::StatusOr<std::vector<PatternAlt>> SplitPattern(const std::string& p,
                                                     bool* elsewhere,
                                                     int depth_left = 32) {
  if (depth_left == 0) {
    return absl::InvalidArgumentError("groups nested too deeply");
  }
  std::vector<PatternAlt> alts;
  std::vector<size_t> anchors;  // offsets of unescaped ^ and $ outside classes
  size_t begin = 0;
  int depth = 0;
  auto finish = [&](size_t end) -> absl::Status {
    // An alternative that is one group, as in "(^a+$)|^b", is the
    // alternatives inside it.
    if (std::optional<std::string> inside =
            GroupInside(p.substr(begin, end - begin))) {
      absl::StatusOr<std::vector<PatternAlt>> inner =
          SplitPattern(*inside, elsewhere, depth_left - 1);
      if (!inner.ok()) return inner.status();
      alts.insert(alts.end(), inner->begin(), inner->end());
      anchors.clear();
      return absl::OkStatus();
    }
    PatternAlt alt;
    size_t b = begin, e = end;
    for (size_t a : anchors) {
      if (a == b && p[a] == '^' && !alt.start) {
        alt.start = true;
        b = a + 1;
      } else if (a + 1 == e && p[a] == '$' && a >= b) {
        alt.end = true;
        e = a;
      } else {
        *elsewhere = true;
      }
    }
    alt.text = p.substr(b, e - b);
    alts.push_back(std::move(alt));
    anchors.clear();
    return absl::OkStatus();
  };
  absl::Status status;
  ForEachSyntaxChar(p, 0, [&](size_t i) {
    const char c = p[i];
    if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == '|' && depth == 0) {
      status = finish(i);
      begin = i + 1;
    } else if (c == '^' || c == '$') {
      anchors.push_back(i);
    }
    return status.ok();
  });
  GRAMMARD_RETURN_IF_ERROR(status);
  GRAMMARD_RETURN_IF_ERROR(finish(p.size()));
  return alts;
}

// A pattern that opens with ^ and lookaheads, "^(?!X)(?=Y)R": each
// lookahead (negative or not) with its body, and R.
struct Lookahead {
  bool negative;
  std::string body;
};
struct LeadingLookaheads {
  std::vector<Lookahead> lookaheads;
  std::string rest;
};
// nullopt for any other pattern, and where R has a | outside groups (the
// lookaheads would then guard only its first alternative).
std::optional<LeadingLookaheads> SplitLeadingLookaheads(const std::string& p) {
  auto lookahead_at = [&](size_t pos) {
    return p.compare(pos, 3, "(?!") == 0 || p.compare(pos, 3, "(?=") == 0;
  };
  if (p.empty() || p[0] != '^' || !lookahead_at(1)) return std::nullopt;
  LeadingLookaheads out;
  size_t pos = 1;
  while (lookahead_at(pos)) {
    const size_t close = GroupEnd(p, pos);
    if (close == std::string::npos) return std::nullopt;
    out.lookaheads.push_back(
        {p[pos + 2] == '!', p.substr(pos + 3, close - pos - 3)});
    pos = close + 1;
  }
  out.rest = p.substr(pos);
  int depth = 0;
  bool alternation = false;
  ForEachSyntaxChar(out.rest, 0, [&](size_t i) {
    const char c = out.rest[i];
    if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else {
      alternation = c == '|' && depth == 0;
    }
    return !alternation;
  });
  if (alternation) return std::nullopt;
  return out;
}

// ECMAScript's `.` matches no line terminator (\n, \r, U+2028, U+2029);
// the regex parser's matches every code point but \n. Spells each `.`
// outside a class out as the class ECMAScript means.
std::string EcmaDots(const std::string& p) {
  std::string out;
  bool in_class = false;  // ECMAScript classes end at the first `]`
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      out += p.substr(i, 2);
      ++i;
    } else if (in_class) {
      in_class = c != ']';
      out += c;
    } else if (c == '.') {
      out += "[^\\n\\r\\u2028\\u2029]";
    } else {
      in_class = c == '[';
      out += c;
    }
  }
  return out;
}

// Copies expression `expr` of `src` (no rule references) into `dst`.
int32_t ImportExpr(Grammar* dst, const Grammar& src, int32_t expr) {
  std::vector<char> reachable(expr + 1, 0);
  reachable[expr] = 1;
  for (int32_t i = expr; i >= 0; --i) {
    if (!reachable[i]) continue;
    for (int32_t c : src.exprs[i].children) reachable[c] = 1;
  }
  std::vector<int32_t> mapped(expr + 1, -1);
  for (int32_t i = 0; i <= expr; ++i) {
    if (!reachable[i]) continue;
    Expr e = src.exprs[i];
    for (int32_t& c : e.children) c = mapped[c];
    dst->exprs.push_back(std::move(e));
    mapped[i] = static_cast<int32_t>(dst->exprs.size()) - 1;
  }
  return mapped[expr];
}

}  // namespace

absl::StatusOr<RegexEntry*> Converter::GetRegex(const RegexRef& r) {
  const std::string key = r.Key();
  auto it = regexes_.find(key);
  if (it != regexes_.end()) return it->second.get();
  auto entry = std::make_unique<RegexEntry>();
  if (r.kind != RegexRef::kPattern) {
    FormatInfo info = r.Info();
    absl::StatusOr<Grammar> g = ParseRegex(info.regex);
    if (!g.ok()) return g.status();
    entry->ir = *std::move(g);
    entry->expr = entry->ir.rules[entry->ir.root].body;
  } else if (std::optional<LeadingLookaheads> la =
                 SplitLeadingLookaheads(r.text)) {
    // "^(?!X)R": the strings "^R" is found in that "^(?:X)" is not (and
    // "(?=" those it is). Lookaheads anywhere else stay refused.
    absl::StatusOr<const CharDfa*> base =
        RegexDfa(RegexRef{RegexRef::kPattern, "^" + la->rest, r.loc});
    if (!base.ok()) return base.status();
    CharDfa dfa = **base;
    for (const Lookahead& l : la->lookaheads) {
      absl::StatusOr<const CharDfa*> x =
          RegexDfa(RegexRef{RegexRef::kPattern, "^(?:" + l.body + ")", r.loc});
      if (!x.ok()) return x.status();
      absl::StatusOr<CharDfa> y =
          l.negative ? Subtract(dfa, **x, opt_.dfa)
                     : json_schema_internal::Intersect(dfa, **x, opt_.dfa);
      if (!y.ok()) return y.status();
      dfa = *std::move(y);
    }
    entry->automaton_only = true;
    entry->dfa_done = true;
    entry->dfa = std::move(dfa);
  } else {
    // JSON Schema patterns search: an alternative not anchored at an end may
    // have anything before or after it.
    bool elsewhere = false;
    absl::StatusOr<std::vector<PatternAlt>> alts =
        SplitPattern(r.text, &elsewhere);
    if (!alts.ok()) return alts.status();
    Grammar& ir = entry->ir;
    if (elsewhere) {
      // Anchors inside: the whole pattern with its anchors, searched for by
      // RegexDfa.
      absl::StatusOr<Grammar> g = ParseRegexKeepingAnchors(EcmaDots(r.text));
      if (!g.ok()) return g.status();
      ir = *std::move(g);
      entry->expr = ir.rules[ir.root].body;
      entry->automaton_only = true;
      RegexEntry* out = entry.get();
      regexes_.emplace(key, std::move(entry));
      return out;
    }
    const int32_t any =
        ir.AddRepeat(ir.AddCharClass({{0, kMaxCodepoint}}), 0, kUnbounded);
    std::vector<int32_t> choices;
    for (const PatternAlt& alt : *alts) {
      absl::StatusOr<Grammar> g = ParseRegex(EcmaDots(alt.text));
      if (!g.ok()) return g.status();
      std::vector<int32_t> parts;
      if (!alt.start) parts.push_back(any);
      parts.push_back(ImportExpr(&ir, *g, g->rules[g->root].body));
      if (!alt.end) parts.push_back(any);
      choices.push_back(ir.AddSequence(std::move(parts)));
    }
    entry->expr = ir.AddChoice(std::move(choices));
  }
  RegexEntry* out = entry.get();
  regexes_.emplace(key, std::move(entry));
  return out;
}

absl::StatusOr<const CharDfa*> Converter::RegexDfa(const RegexRef& r) {
  absl::StatusOr<RegexEntry*> entry = GetRegex(r);
  if (!entry.ok()) return entry.status();
  RegexEntry& e = **entry;
  if (!e.dfa_done) {
    e.dfa_done = true;
    CharNfa nfa;
    absl::StatusOr<CharNfa::Fragment> f = nfa.AddExpr(e.ir, e.expr, opt_.dfa);
    if (f.ok() && e.automaton_only) {
      // Searched for: anything before and after, the anchors deciding
      // where the match may start and end.
      const CharNfa::Fragment before = nfa.AddAnyString();
      const CharNfa::Fragment after = nfa.AddAnyString();
      nfa.AddEpsilon(before.accept, f->start);
      nfa.AddEpsilon(f->accept, after.start);
      f = nfa.ResolveAnchors({before.start, after.accept}, opt_.dfa);
    }
    if (!f.ok()) {
      e.dfa_status = f.status();
    } else {
      absl::StatusOr<CharDfa> dfa = Determinize(nfa, *f, opt_.dfa);
      if (dfa.ok()) {
        e.dfa = *std::move(dfa);
      } else {
        e.dfa_status = dfa.status();
      }
    }
  }
  if (!e.dfa_status.ok()) return e.dfa_status;
  return &e.dfa;
}

absl::StatusOr<CharDfa> Converter::StringDfa(const StringC& c,
                                             bool with_length) {
  CharDfa dfa = AnyStringDfa();
  for (const RegexRef& r : c.must) {
    absl::StatusOr<const CharDfa*> x = RegexDfa(r);
    if (!x.ok()) return x.status();
    absl::StatusOr<CharDfa> y =
        json_schema_internal::Intersect(dfa, **x, opt_.dfa);
    if (!y.ok()) return y.status();
    dfa = *std::move(y);
  }
  for (const RegexRef& r : c.must_not) {
    absl::StatusOr<const CharDfa*> x = RegexDfa(r);
    if (!x.ok()) return x.status();
    absl::StatusOr<CharDfa> y = Subtract(dfa, **x, opt_.dfa);
    if (!y.ok()) return y.status();
    dfa = *std::move(y);
  }
  if (!c.excluded.empty()) {
    absl::StatusOr<CharDfa> words = LiteralsDfa(c.excluded);
    if (!words.ok()) return words.status();
    absl::StatusOr<CharDfa> y = Subtract(dfa, *words, opt_.dfa);
    if (!y.ok()) return y.status();
    dfa = *std::move(y);
  }
  if (with_length && c.HasLength()) {
    return LimitLength(dfa, c.min_len, c.max_len, opt_.dfa);
  }
  return dfa;
}

absl::StatusOr<std::optional<CharDfa>> Converter::NamesDfa(
    const std::vector<TermSet>& names) {
  if (names.empty()) return std::optional<CharDfa>();
  CharDfa all = AnyStringDfa();
  for (const TermSet& ts : names) {
    absl::StatusOr<Dnf> d = ExpandSet(ts);
    if (!d.ok()) return d.status();
    CharDfa allowed = EmptyDfa();
    for (const Alt& alt : *d) {
      absl::StatusOr<const SimpleSchema*> s = Merge(alt);
      if (!s.ok()) return s.status();
      const SimpleSchema& m = **s;
      if (!(m.types & kStrT)) continue;
      absl::StatusOr<CharDfa> part = EmptyDfa();
      if (m.has_values) {
        std::vector<std::string> words;
        for (const Json* v : m.values) {
          if (!v->is_string()) continue;
          absl::StatusOr<bool> ok = CheckValue(*v, m, 0);
          if (!ok.ok()) return ok.status();
          if (*ok) words.push_back(v->get<std::string>());
        }
        part = LiteralsDfa(words);
      } else {
        StringC c = m.string;
        for (const Json* v : m.excluded) {
          if (v->is_string()) c.excluded.push_back(v->get<std::string>());
        }
        part = StringDfa(c, true);
      }
      if (!part.ok()) return part.status();
      absl::StatusOr<CharDfa> u =
          json_schema_internal::Union(allowed, *part, opt_.dfa);
      if (!u.ok()) return u.status();
      allowed = *std::move(u);
    }
    absl::StatusOr<CharDfa> both =
        json_schema_internal::Intersect(all, allowed, opt_.dfa);
    if (!both.ok()) return both.status();
    all = *std::move(both);
  }
  return std::optional<CharDfa>(std::move(all));
}

absl::StatusOr<int32_t> Converter::NumberExpr(const SimpleSchema& s) {
  NumberConstraints c = s.number;
  for (const Json* x : s.excluded) {
    std::optional<Decimal> d = NumberOf(*x);
    if (d) c.excluded.push_back(*d);
  }
  if (c.Unconstrained()) {
    if (!c.integer) return e_.AnyNumber();
    return c.integer_zero_fraction ? e_.AnyInteger() : e_.AnyPlainInteger();
  }
  const std::string key = c.Key();
  auto it = number_rules_.find(key);
  if (it != number_rules_.end()) return e_.Ref(it->second);
  absl::StatusOr<CharDfa> dfa = NumberDfa(c, opt_.dfa);
  if (!dfa.ok()) {
    const char* keyword = !c.multiple_of.empty() ? "multipleOf" : "minimum";
    GRAMMARD_RETURN_IF_ERROR(Unsupported(s.number_loc, keyword, dfa.status()));
    if (!c.integer) return e_.AnyNumber();
    return c.integer_zero_fraction ? e_.AnyInteger() : e_.AnyPlainInteger();
  }
  const int32_t rule = e_.NewRule("number", e_.DfaPlain(*dfa, "number"));
  number_rules_.emplace(key, rule);
  return e_.Ref(rule);
}

absl::StatusOr<CharDfa> Converter::StringDfaWithoutMax(const StringC& c) {
  StringC open = c;
  open.max_len = -1;
  return StringDfa(open, true);
}

absl::StatusOr<int32_t> Converter::CountedString(const StringC& c) {
  absl::StatusOr<CharDfa> dfa = StringDfaWithoutMax(c);
  if (!dfa.ok()) return dfa.status();
  return CountedString(c, *dfa);
}

absl::StatusOr<int32_t> Converter::CountedString(const StringC& c,
                                                 const CharDfa& open) {
  std::string shortest;
  if (!Example(open, &shortest) || CodepointCount(shortest) > c.max_len) {
    return e_.Nothing();
  }
  const int32_t rest =
      e_.NewRule("counted_string", e_.DfaStringRest(open, "string"));
  e_.g().rules[rest].max_chars =
      static_cast<int32_t>(std::min<int64_t>(c.max_len, kMaxRunTimeLength));
  return e_.Seq({e_.Bytes("\""), e_.Ref(rest)});
}

absl::StatusOr<int32_t> Converter::StringExpr(const SimpleSchema& s) {
  StringC c = s.string;
  for (const Json* x : s.excluded) {
    if (x->is_string()) c.excluded.push_back(x->get<std::string>());
  }
  if (c.Unconstrained()) return e_.AnyString();
  if (c.max_len >= 0 && c.min_len > c.max_len) return e_.Nothing();
  const std::string key = c.Key();
  auto it = string_rules_.find(key);
  if (it != string_rules_.end()) return e_.Ref(it->second);
  auto automaton_only = [&](const RegexRef& r) {
    absl::StatusOr<RegexEntry*> entry = GetRegex(r);
    return entry.ok() && (*entry)->automaton_only;
  };
  // The string's rule, kept for the schemas that ask for it again.
  const auto keep = [&](int32_t expr) {
    const int32_t rule = e_.NewRule("string", expr);
    string_rules_.emplace(key, rule);
    return e_.Ref(rule);
  };
  int32_t body;
  if (c.must.empty() && c.must_not.empty() && c.excluded.empty()) {
    // Lengths alone count code points in any JSON encoding; a long
    // maxLength at run time.
    absl::StatusOr<int32_t> counted = absl::UnknownError("");
    if (c.max_len > kRunTimeLengthFrom && c.min_len <= kRunTimeLengthFrom) {
      counted = CountedString(c);
    }
    if (counted.ok() || IsDeadline(counted.status())) {
      if (!counted.ok()) return counted.status();
      return keep(*counted);
    }
    if (c.min_len > kMaxCountedLength || c.max_len > kMaxCountedLength) {
      GRAMMARD_RETURN_IF_ERROR(
          Unsupported(c.length_loc,
                      c.min_len > kMaxCountedLength ? "minLength" : "maxLength",
                      absl::StrCat("lengths above ", kMaxCountedLength,
                                   " are not supported")));
      return e_.AnyString();
    }
    body = e_.Quoted(e_.g().AddRepeat(
        e_.CountedChar(), static_cast<int32_t>(c.min_len),
        c.max_len < 0 ? kUnbounded : static_cast<int32_t>(c.max_len)));
  } else if (c.must.size() == 1 && c.must_not.empty() && c.excluded.empty() &&
             !c.HasLength() && !automaton_only(c.must[0])) {
    // A single pattern or format is written straight from its regex, which
    // keeps large formats (date-time, ipv6, uri) out of automata.
    absl::StatusOr<RegexEntry*> entry = GetRegex(c.must[0]);
    if (!entry.ok()) return entry.status();
    if ((*entry)->content_rule < 0) {
      absl::StatusOr<int32_t> content =
          e_.TranslateRegex((*entry)->ir, (*entry)->expr);
      if (!content.ok()) return content.status();
      (*entry)->content_rule = e_.NewRule("string_content", *content);
    }
    body = e_.Quoted(e_.Ref((*entry)->content_rule));
  } else {
    absl::StatusOr<CharDfa> dfa = StringDfa(c, true);
    if (dfa.ok() && c.max_len >= 0 &&
        EdgeCount(*dfa) > kMaxUnrolledStringEdges) {
      // Counted to maxLength, a pattern's automaton is about one copy per
      // character: written out, the grammar may pass its size limit.
      absl::StatusOr<CharDfa> open_dfa = StringDfaWithoutMax(c);
      if (!open_dfa.ok() && IsDeadline(open_dfa.status())) {
        return open_dfa.status();
      }
      if (open_dfa.ok() &&
          EdgeCount(*open_dfa) * kCountingShrinksBy < EdgeCount(*dfa)) {
        absl::StatusOr<int32_t> counted = CountedString(c, *open_dfa);
        if (!counted.ok()) return counted.status();
        return keep(*counted);
      }
    }
    if (!dfa.ok() && !IsDeadline(dfa.status()) && c.max_len >= 0) {
      // Too large once counted to maxLength: the automaton keeps the rest
      // (minLength too), and matchers count up to maxLength at run time.
      absl::StatusOr<int32_t> counted = CountedString(c);
      if (counted.ok() || IsDeadline(counted.status())) {
        if (!counted.ok()) return counted.status();
        return keep(*counted);
      }
    }
    if (!dfa.ok()) {
      if (IsDeadline(dfa.status())) return dfa.status();
      const RegexRef* r = !c.must.empty()       ? &c.must[0]
                          : !c.must_not.empty() ? &c.must_not[0]
                                                : nullptr;
      const int32_t loc = r != nullptr ? r->loc : c.length_loc;
      const char* keyword = r == nullptr ? "maxLength" : r->Keyword();
      GRAMMARD_RETURN_IF_ERROR(
          Unsupported(loc, keyword,
                      absl::StrCat("combining the string constraints failed: ",
                                   dfa.status().message())));
      return e_.AnyString();
    }
    body = e_.DfaString(*dfa, "string");
  }
  return keep(body);
}

}  // namespace grammard::grammar::json_schema_internal
