#include "grammar/frontends/json_schema/internal/json_emitter.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grammar/base/scc.h"
#include "grammar/frontends/json_schema/internal/numbers.h"

namespace grammard::grammar::json_schema_internal {
namespace {

// A DFA state reached from several places becomes a rule once its inlined
// expression would be larger than this; and any chain of inlined states
// deeper than kMaxInlineDepth is cut by a rule, which keeps expression
// nesting (and the engine's recursion over it) shallow.
constexpr int64_t kShareSize = 48;
constexpr int kMaxInlineDepth = 200;

std::string Sanitize(std::string_view hint) {
  std::string out;
  for (char c : hint) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.';
    out.push_back(ok ? c : '_');
    if (out.size() >= 40) break;
  }
  // Collapse runs of '_' for readability.
  std::string collapsed;
  for (char c : out) {
    if (c == '_' && !collapsed.empty() && collapsed.back() == '_') continue;
    collapsed.push_back(c);
  }
  while (!collapsed.empty() &&
         (collapsed.back() == '_' || collapsed.back() == '.')) {
    collapsed.pop_back();
  }
  if (collapsed.empty() ||
      !((collapsed[0] >= 'a' && collapsed[0] <= 'z') ||
        (collapsed[0] >= 'A' && collapsed[0] <= 'Z') || collapsed[0] == '_')) {
    collapsed = "s_" + collapsed;
  }
  return collapsed;
}

// Characters a JSON string holds as they are: all but controls, the quote
// and the backslash.
std::vector<CharRange> RawStringRanges() {
  return {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCodepoint}};
}

// What may follow a backslash on its own: `\"`, `\\`, `\/`, `\b`, ...
std::vector<CharRange> SimpleEscapeRanges() {
  return {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'},
          {'f', 'f'}, {'n', 'n'},   {'r', 'r'}, {'t', 't'}};
}

std::vector<CharRange> HexRanges() {
  return {{'0', '9'}, {'A', 'F'}, {'a', 'f'}};
}

// The hex digit characters (both cases) for nibble values in `nibbles`.
std::vector<CharRange> HexDigitsFor(const std::vector<int>& nibbles) {
  std::vector<CharRange> out;
  for (int v : nibbles) {
    if (v < 10) {
      out.push_back(
          {static_cast<uint32_t>('0' + v), static_cast<uint32_t>('0' + v)});
    } else {
      out.push_back({static_cast<uint32_t>('a' + v - 10),
                     static_cast<uint32_t>('a' + v - 10)});
      out.push_back({static_cast<uint32_t>('A' + v - 10),
                     static_cast<uint32_t>('A' + v - 10)});
    }
  }
  return out;
}

bool Contains(const std::vector<CharRange>& ranges, uint32_t cp) {
  for (const CharRange& r : ranges) {
    if (r.lo <= cp && cp <= r.hi) return true;
  }
  return false;
}

const char* ShortEscape(uint32_t cp) {
  switch (cp) {
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      return nullptr;
  }
}

// `ranges` as a map key: their bounds in order.
std::vector<uint32_t> RangesKey(const std::vector<CharRange>& ranges) {
  std::vector<uint32_t> key;
  for (const CharRange& r : ranges) {
    key.push_back(r.lo);
    key.push_back(r.hi);
  }
  return key;
}

// The expression `make` writes for `key`, written once and found again
// in `memo` (a std::map to expression ids) after that.
template <typename Map, typename Make>
int32_t Once(Map* memo, typename Map::key_type key, Make make) {
  auto [at, fresh] = memo->try_emplace(std::move(key), -1);
  if (fresh) at->second = make();
  return at->second;
}

}  // namespace

JsonEmitter::JsonEmitter(Grammar* grammar, JsonLayout layout)
    : g_(*grammar), layout_(std::move(layout)) {}

int32_t JsonEmitter::NewRule(std::string_view hint, int32_t body) {
  const std::string base = Sanitize(hint);
  std::string name = base;
  int32_t& count = rule_names_[base];
  while (!used_names_.insert(name).second) {
    name = absl::StrCat(base, "-", ++count);
  }
  return g_.AddRule(std::move(name), body);
}

bool JsonEmitter::IsEpsilon(int32_t expr) const {
  const Expr& e = g_.exprs[expr];
  return e.kind == ExprKind::kBytes && e.bytes.empty();
}

bool JsonEmitter::IsNothing(int32_t expr) const {
  const Expr& e = g_.exprs[expr];
  return e.kind == ExprKind::kCharClass && e.ranges.empty();
}

int32_t JsonEmitter::Seq(std::vector<int32_t> parts) {
  std::vector<int32_t> kept;
  for (int32_t p : parts) {
    if (IsNothing(p)) return p;
    if (!IsEpsilon(p)) kept.push_back(p);
  }
  if (kept.empty()) return g_.AddEpsilon();
  if (kept.size() == 1) return kept[0];
  return g_.AddSequence(std::move(kept));
}

int32_t JsonEmitter::Alt(std::vector<int32_t> parts) {
  std::vector<int32_t> kept;
  for (int32_t p : parts) {
    if (!IsNothing(p)) kept.push_back(p);
  }
  if (kept.empty()) return Nothing();
  if (kept.size() == 1) return kept[0];
  return g_.AddChoice(std::move(kept));
}

int32_t JsonEmitter::Ws() {
  if (!layout_.flexible) return g_.AddEpsilon();
  if (ws_rule_ < 0) {
    int32_t space =
        g_.AddCharClass({{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}, {'\r', '\r'}});
    int32_t max =
        layout_.max_whitespace < 0 ? kUnbounded : layout_.max_whitespace;
    ws_rule_ =
        NewRule("ws", max == 0 ? g_.AddEpsilon() : g_.AddRepeat(space, 0, max));
  }
  return Ref(ws_rule_);
}

int32_t JsonEmitter::Newline(int depth) {
  return Bytes("\n" +
               std::string(static_cast<size_t>(depth * layout_.indent), ' '));
}

int32_t JsonEmitter::Ref(int32_t rule) {
  if (static_cast<size_t>(rule) >= refs_.size()) refs_.resize(rule + 1, -1);
  if (refs_[rule] < 0) refs_[rule] = g_.AddRuleRef(rule);
  return refs_[rule];
}

// Brackets and separators are one expression each per kind and depth,
// referred to again: every object state and member writes them, and copies
// were a large share of a Kubernetes schema's expressions for every pass
// over the grammar to read.
int32_t JsonEmitter::Open(char bracket, int depth) {
  return Once(&punctuation_, {'o', bracket, depth}, [&] {
    const std::string text(1, bracket);
    if (layout_.flexible) return Seq({Bytes(text), Ws()});
    if (indented()) return Seq({Bytes(text), Newline(depth + 1)});
    return Bytes(text);
  });
}

int32_t JsonEmitter::Close(char bracket, int depth) {
  return Once(&punctuation_, {'c', bracket, depth}, [&] {
    const std::string text(1, bracket);
    if (layout_.flexible) return Seq({Ws(), Bytes(text)});
    if (indented()) return Seq({Newline(depth), Bytes(text)});
    return Bytes(text);
  });
}

int32_t JsonEmitter::Empty(char open, char close) {
  if (layout_.flexible) {
    return Seq(
        {Bytes(std::string(1, open)), Ws(), Bytes(std::string(1, close))});
  }
  return Bytes(std::string{open, close});
}

int32_t JsonEmitter::ItemSeparator(int depth) {
  return Once(&punctuation_, {'s', ',', depth}, [&] {
    if (layout_.flexible) return Seq({Ws(), Bytes(","), Ws()});
    if (indented()) {
      return Seq({Bytes(layout_.item_separator), Newline(depth + 1)});
    }
    return Bytes(layout_.item_separator);
  });
}

int32_t JsonEmitter::ItemSeparatorAfterWs(int depth) {
  if (!layout_.flexible) return ItemSeparator(depth);
  return Once(&punctuation_, {'a', ',', depth}, [&] {
    return Seq({Bytes(","), Ws()});
  });
}

int32_t JsonEmitter::KeySeparator() {
  if (key_separator_ < 0) {
    key_separator_ = layout_.flexible ? Seq({Ws(), Bytes(":"), Ws()})
                                      : Bytes(layout_.key_separator);
  }
  return key_separator_;
}

int32_t JsonEmitter::AnyString() {
  if (string_rule_ < 0) {
    int32_t raw = g_.AddCharClass(RawStringRanges());
    int32_t hex = g_.AddCharClass(HexRanges());
    int32_t escape =
        Seq({Bytes("\\"), Alt({g_.AddCharClass(SimpleEscapeRanges()),
                               Seq({Bytes("u"), g_.AddRepeat(hex, 4, 4)})})});
    string_rule_ = NewRule(
        "string",
        Seq({Bytes("\""), g_.AddRepeat(Alt({raw, escape}), 0, kUnbounded),
             Bytes("\"")}));
  }
  return Ref(string_rule_);
}

int32_t JsonEmitter::AnyNumber() {
  if (number_rule_ < 0) {
    int32_t digit = g_.AddCharClass({{'0', '9'}});
    int32_t int_part =
        Alt({Bytes("0"), Seq({g_.AddCharClass({{'1', '9'}}),
                              g_.AddRepeat(digit, 0, kUnbounded)})});
    int32_t frac = g_.AddRepeat(
        Seq({Bytes("."), g_.AddRepeat(digit, 1, kUnbounded)}), 0, 1);
    int32_t exp = g_.AddRepeat(
        Seq({g_.AddCharClass({{'e', 'e'}, {'E', 'E'}}),
             g_.AddRepeat(g_.AddCharClass({{'+', '+'}, {'-', '-'}}), 0, 1),
             g_.AddRepeat(digit, 1, kUnbounded)}),
        0, 1);
    number_rule_ = NewRule(
        "number", Seq({g_.AddRepeat(Bytes("-"), 0, 1), int_part, frac, exp}));
  }
  return Ref(number_rule_);
}

int32_t JsonEmitter::AnyPlainInteger() {
  if (plain_integer_rule_ < 0) {
    int32_t digit = g_.AddCharClass({{'0', '9'}});
    plain_integer_rule_ = NewRule(
        "plain_integer",
        Alt({Bytes("0"),
             Seq({g_.AddRepeat(Bytes("-"), 0, 1), g_.AddCharClass({{'1', '9'}}),
                  g_.AddRepeat(digit, 0, kUnbounded)})}));
  }
  return Ref(plain_integer_rule_);
}

int32_t JsonEmitter::AnyInteger() {
  if (integer_rule_ < 0) {
    // 1.0 is an integer too (JSON Schema compares values, not texts).
    int32_t zeros = g_.AddRepeat(
        Seq({Bytes("."), g_.AddRepeat(Bytes("0"), 1, kUnbounded)}), 0, 1);
    int32_t digit = g_.AddCharClass({{'0', '9'}});
    integer_rule_ = NewRule(
        "integer",
        Seq({Alt({Bytes("0"), Seq({g_.AddRepeat(Bytes("-"), 0, 1),
                                   g_.AddCharClass({{'1', '9'}}),
                                   g_.AddRepeat(digit, 0, kUnbounded)})}),
             zeros}));
  }
  return Ref(integer_rule_);
}

int32_t JsonEmitter::AnyValue(int depth) {
  const int level = indented() ? std::min(depth, kMaxIndentDepth) : 0;
  if (static_cast<int>(value_rules_.size()) > level &&
      value_rules_[level] >= 0) {
    return Ref(value_rules_[level]);
  }
  if (static_cast<int>(value_rules_.size()) <= level) {
    value_rules_.resize(level + 1, -1);
  }
  const std::string suffix = indented() ? absl::StrCat("_", level) : "";
  int32_t value = NewRule("value" + suffix);
  value_rules_[level] = value;
  int32_t object, array;
  if (indented() && level >= kMaxIndentDepth) {
    object = Empty('{', '}');
    array = Empty('[', ']');
  } else {
    int32_t member = Seq({AnyString(), KeySeparator(), AnyValue(level + 1)});
    object = Alt(
        {Empty('{', '}'),
         Seq({Open('{', level), member,
              g_.AddRepeat(Seq({ItemSeparator(level), member}), 0, kUnbounded),
              Close('}', level)})});
    int32_t item = AnyValue(level + 1);
    array = Alt(
        {Empty('[', ']'),
         Seq({Open('[', level), item,
              g_.AddRepeat(Seq({ItemSeparator(level), item}), 0, kUnbounded),
              Close(']', level)})});
  }
  int32_t object_rule = NewRule("object" + suffix, object);
  int32_t array_rule = NewRule("array" + suffix, array);
  g_.rules[value].body =
      Alt({Ref(object_rule), Ref(array_rule), AnyString(), AnyNumber(),
           Bytes("true"), Bytes("false"), Bytes("null")});
  return Ref(value);
}

int32_t JsonEmitter::Hex4NonSurrogate() {
  int32_t hex = g_.AddCharClass(HexRanges());
  return Alt({Seq({g_.AddCharClass({{'0', '9'}, {'A', 'C'}, {'a', 'c'}}),
                   g_.AddRepeat(hex, 3, 3)}),
              Seq({g_.AddCharClass({{'D', 'D'}, {'d', 'd'}}),
                   g_.AddCharClass({{'0', '7'}}), g_.AddRepeat(hex, 2, 2)}),
              Seq({g_.AddCharClass({{'E', 'F'}, {'e', 'f'}}),
                   g_.AddRepeat(hex, 3, 3)})});
}

int32_t JsonEmitter::CountedChar() {
  if (counted_char_rule_ < 0) {
    int32_t raw = g_.AddCharClass(RawStringRanges());
    int32_t hex = g_.AddCharClass(HexRanges());
    int32_t high = Seq({Bytes("\\u"), g_.AddCharClass({{'D', 'D'}, {'d', 'd'}}),
                        g_.AddCharClass({{'8', '9'}, {'A', 'B'}, {'a', 'b'}}),
                        g_.AddRepeat(hex, 2, 2)});
    int32_t low = Seq({Bytes("\\u"), g_.AddCharClass({{'D', 'D'}, {'d', 'd'}}),
                       g_.AddCharClass({{'C', 'F'}, {'c', 'f'}}),
                       g_.AddRepeat(hex, 2, 2)});
    counted_char_rule_ = NewRule(
        "char",
        Alt({raw, Seq({Bytes("\\"), g_.AddCharClass(SimpleEscapeRanges())}),
             Seq({Bytes("\\u"), Hex4NonSurrogate()}), Seq({high, low})}));
  }
  return Ref(counted_char_rule_);
}

int32_t JsonEmitter::JsonChar(const std::vector<CharRange>& ranges) {
  return JsonCharForms(ranges).all;
}

int32_t JsonEmitter::EscapedChars(uint64_t escaped) {
  std::vector<int32_t> escapes;
  if (escaped >> 32 & 1) escapes.push_back(Bytes("\\\""));
  if (escaped >> 33 & 1) escapes.push_back(Bytes("\\\\"));
  if (escaped >> 34 & 1) escapes.push_back(Bytes("\\/"));
  std::vector<int> nibbles[2];
  for (uint32_t c = 0; c < 0x20; ++c) {
    if (!(escaped >> c & 1)) continue;
    if (const char* e = ShortEscape(c)) escapes.push_back(Bytes(e));
    nibbles[c >> 4].push_back(static_cast<int>(c & 15));
  }
  for (int high = 0; high < 2; ++high) {
    if (nibbles[high].empty()) continue;
    escapes.push_back(Seq({Bytes(high == 0 ? "\\u000" : "\\u001"),
                           g_.AddCharClass(HexDigitsFor(nibbles[high]))}));
  }
  return Alt(escapes);
}

const JsonEmitter::CharForms& JsonEmitter::JsonCharForms(
    const std::vector<CharRange>& ranges) {
  std::vector<uint32_t> key = RangesKey(ranges);
  auto it = json_chars_.find(key);
  if (it != json_chars_.end()) return it->second;
  std::vector<CharRange> raw;
  for (const CharRange& r : ranges) {
    // Split around what JSON requires escaped.
    uint32_t lo = std::max<uint32_t>(r.lo, 0x20);
    uint32_t hi = r.hi;
    for (uint32_t special : {uint32_t{'"'}, uint32_t{'\\'}}) {
      if (lo <= special && special <= hi) {
        if (lo < special) raw.push_back({lo, special - 1});
        lo = special + 1;
      }
    }
    if (lo <= hi) raw.push_back({lo, hi});
  }
  std::vector<CharRange> ascii, wide;
  for (const CharRange& r : raw) {
    if (r.lo < 0x80) ascii.push_back({r.lo, std::min<uint32_t>(r.hi, 0x7f)});
    if (r.hi >= 0x80) wide.push_back({std::max<uint32_t>(r.lo, 0x80), r.hi});
  }
  // The multi-byte and escaped groups are alike for most sets of ranges
  // (all characters but a few ASCII ones, in each state of a key that is
  // none of the declared names): one expression each, not a copy per set
  // for every pass over the grammar to read.
  uint64_t escaped = 0;  // bit c: control character c; 32-34: " \ /
  for (uint32_t c = 0; c < 0x20; ++c) {
    if (Contains(ranges, c)) escaped |= uint64_t{1} << c;
  }
  if (Contains(ranges, '"')) escaped |= uint64_t{1} << 32;
  if (Contains(ranges, '\\')) escaped |= uint64_t{1} << 33;
  if (Contains(ranges, '/')) escaped |= uint64_t{1} << 34;
  CharForms f;
  if (!ascii.empty()) f.groups.push_back(g_.AddCharClass(ascii));
  if (!wide.empty()) {
    f.groups.push_back(Once(&wide_chars_, RangesKey(wide),
                            [&] { return g_.AddCharClass(wide); }));
  }
  if (escaped != 0) {
    f.groups.push_back(
        Once(&escaped_chars_, escaped, [&] { return EscapedChars(escaped); }));
  }
  f.all = Alt(f.groups);
  return json_chars_.emplace(std::move(key), std::move(f)).first->second;
}

namespace {

// Whether a code point of a string's contents has other forms than its
// bytes (an escape JSON asks for or allows).
bool Escapable(uint32_t cp) {
  return cp < 0x20 || cp == '"' || cp == '\\' || cp == '/';
}

}  // namespace

int32_t JsonEmitter::StringContent(std::string_view utf8) {
  std::vector<int32_t> parts;
  std::string run;
  size_t pos = 0;
  while (pos < utf8.size()) {
    size_t start = pos;
    uint32_t cp;
    if (!DecodeUtf8(utf8, &pos, &cp)) return Nothing();
    if (Escapable(cp)) {
      if (!run.empty()) parts.push_back(Bytes(run));
      run.clear();
      parts.push_back(JsonChar({{cp, cp}}));
    } else {
      run.append(utf8.substr(start, pos - start));
    }
  }
  if (!run.empty()) parts.push_back(Bytes(run));
  return Seq(parts);
}

bool JsonEmitter::OneSpelling(std::string_view utf8) {
  // The escapable code points are ASCII, so no byte of another matches.
  return std::none_of(utf8.begin(), utf8.end(), [](char c) {
    return Escapable(static_cast<unsigned char>(c));
  });
}

int32_t JsonEmitter::Quoted(int32_t content) {
  if (IsNothing(content)) return content;
  return Seq({Bytes("\""), content, Bytes("\"")});
}

absl::StatusOr<int32_t> JsonEmitter::Value(const Json& value, int depth) {
  switch (value.type()) {
    case Json::value_t::null:
      return Bytes("null");
    case Json::value_t::boolean:
      return Bytes(value.get<bool>() ? "true" : "false");
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: {
      absl::StatusOr<Decimal> d = ParseDecimal(value.dump());
      if (!d.ok()) return d.status();
      // The same value may be written with trailing zeros (1.0, 2.50).
      int32_t zeros =
          d->IsInteger()
              ? g_.AddRepeat(
                    Seq({Bytes("."), g_.AddRepeat(Bytes("0"), 1, kUnbounded)}),
                    0, 1)
              : g_.AddRepeat(Bytes("0"), 0, kUnbounded);
      // Draft 4 keeps literal numbers as written: 1.0 is no integer there.
      if (!layout_.number_variants) return Bytes(d->ToString());
      const int32_t plain = Seq({Bytes(d->ToString()), zeros});
      if (d->IsZero()) return plain;
      // Scientific notation with one digit before the point (how most
      // serializers write large and small doubles: 9.007199254740992e+15).
      const std::string& digits = d->digits;
      const int64_t exp = d->exponent + static_cast<int64_t>(digits.size()) - 1;
      const int32_t mantissa_frac =
          digits.size() > 1
              ? Seq({Bytes("." + digits.substr(1)),
                     g_.AddRepeat(Bytes("0"), 0, kUnbounded)})
              : g_.AddRepeat(
                    Seq({Bytes("."), g_.AddRepeat(Bytes("0"), 1, kUnbounded)}),
                    0, 1);
      const int32_t exp_sign =
          exp < 0 ? Bytes("-") : g_.AddRepeat(Bytes("+"), 0, 1);
      const int32_t exp_digits =
          exp == 0 ? g_.AddRepeat(Bytes("0"), 1, kUnbounded)
                   : Seq({g_.AddRepeat(Bytes("0"), 0, kUnbounded),
                          Bytes(std::to_string(exp < 0 ? -exp : exp))});
      const int32_t scientific =
          Seq({Bytes(std::string(d->negative ? "-" : "") + digits[0]),
               mantissa_frac, g_.AddCharClass({{'E', 'E'}, {'e', 'e'}}),
               exp_sign, exp_digits});
      return Alt({plain, scientific});
    }
    case Json::value_t::string:
      return Quoted(StringContent(value.get_ref<const std::string&>()));
    case Json::value_t::array: {
      if (value.empty()) return Empty('[', ']');
      if (indented() && depth >= kMaxIndentDepth) return Nothing();
      std::vector<int32_t> parts{Open('[', depth)};
      for (size_t i = 0; i < value.size(); ++i) {
        if (i > 0) parts.push_back(ItemSeparator(depth));
        absl::StatusOr<int32_t> item = Value(value[i], depth + 1);
        if (!item.ok()) return item.status();
        parts.push_back(*item);
      }
      parts.push_back(Close(']', depth));
      return Seq(parts);
    }
    case Json::value_t::object: {
      if (value.empty()) return Empty('{', '}');
      if (indented() && depth >= kMaxIndentDepth) return Nothing();
      std::vector<int32_t> members;
      for (auto it = value.begin(); it != value.end(); ++it) {
        absl::StatusOr<int32_t> member = Value(it.value(), depth + 1);
        if (!member.ok()) return member.status();
        members.push_back(
            Seq({Quoted(StringContent(it.key())), KeySeparator(), *member}));
      }
      // Every order of the members, while there are few enough; else the
      // written order alone (fewer texts, never a wrong one).
      std::vector<size_t> order(members.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::vector<int32_t> orders;
      do {
        std::vector<int32_t> parts{Open('{', depth)};
        for (size_t i = 0; i < order.size(); ++i) {
          if (i > 0) parts.push_back(ItemSeparator(depth));
          parts.push_back(members[order[i]]);
        }
        parts.push_back(Close('}', depth));
        orders.push_back(Seq(parts));
      } while (layout_.any_member_order &&
               members.size() <= kMaxPermutedMembers &&
               std::next_permutation(order.begin(), order.end()));
      return Alt(orders);
    }
    default:
      return absl::InvalidArgumentError("not a JSON value");
  }
}

absl::StatusOr<int32_t> JsonEmitter::TranslateRegex(const Grammar& regex,
                                                    int32_t expr) {
  // Children precede parents, so one pass in index order maps every
  // reachable expression after its children.
  std::vector<char> reachable(expr + 1, 0);
  reachable[expr] = 1;
  for (int32_t i = expr; i >= 0; --i) {
    if (!reachable[i]) continue;
    for (int32_t c : regex.exprs[i].children) reachable[c] = 1;
  }
  std::vector<int32_t> mapped(expr + 1, -1);
  for (int32_t i = 0; i <= expr; ++i) {
    if (!reachable[i]) continue;
    const Expr& e = regex.exprs[i];
    std::vector<int32_t> children;
    for (int32_t c : e.children) children.push_back(mapped[c]);
    switch (e.kind) {
      case ExprKind::kBytes:
        mapped[i] = StringContent(e.bytes);
        break;
      case ExprKind::kCharClass:
        mapped[i] = JsonChar(e.ranges);
        break;
      case ExprKind::kSequence:
        mapped[i] = Seq(children);
        break;
      case ExprKind::kChoice:
        mapped[i] = Alt(children);
        break;
      case ExprKind::kRepeat:
        mapped[i] = IsNothing(children[0]) && e.min == 0 ? g_.AddEpsilon()
                    : IsEpsilon(children[0])
                        ? children[0]
                        : g_.AddRepeat(children[0], e.min, e.max);
        break;
      default:
        return absl::InvalidArgumentError(
            "only code point level regular expressions can be translated");
    }
  }
  return mapped[expr];
}

int32_t JsonEmitter::EmitDfa(
    const CharDfa& dfa,
    const std::function<std::vector<int32_t>(const std::vector<CharRange>&)>&
        symbol,
    std::string_view hint, int32_t tail) {
  if (dfa.IsEmpty()) return Nothing();
  const int32_t n = dfa.num_states();
  // Per state: ranges to each other state (in first-edge order) and to
  // itself.
  std::vector<std::vector<std::pair<int32_t, std::vector<CharRange>>>> out(n);
  std::vector<std::vector<CharRange>> self(n);
  std::vector<int32_t> indegree(n, 0);
  for (int32_t s = 0; s < n; ++s) {
    for (const CharDfa::Edge& e : dfa.edges[s]) {
      if (e.to == s) {
        self[s].push_back({e.lo, e.hi});
        continue;
      }
      auto it = std::find_if(out[s].begin(), out[s].end(),
                             [&](const auto& p) { return p.first == e.to; });
      if (it == out[s].end()) {
        out[s].emplace_back(e.to, std::vector<CharRange>{});
        it = out[s].end() - 1;
        ++indegree[e.to];
      }
      it->second.push_back({e.lo, e.hi});
    }
  }
  // Components come out in reverse topological order.
  std::vector<int32_t> begin{0}, targets;
  for (int32_t s = 0; s < n; ++s) {
    for (const auto& [t, ranges] : out[s]) targets.push_back(t);
    begin.push_back(static_cast<int32_t>(targets.size()));
  }
  const internal::Components sccs = internal::StronglyConnected(begin, targets);
  const std::vector<int32_t>& comp = sccs.of;
  const std::vector<int32_t>& comp_size = sccs.size;
  const std::vector<int32_t>& order = sccs.order;
  // Decide which states become rules, children first.
  std::vector<char> is_rule(n, 0);
  std::vector<int64_t> size(n, 0);
  std::vector<int> depth(n, 0);
  for (int32_t s : order) {
    if (comp_size[comp[s]] > 1) {
      is_rule[s] = 1;
      continue;
    }
    int64_t sz = self[s].empty() ? 0 : 2;
    int d = 0;
    for (const auto& [t, ranges] : out[s]) {
      sz += 1 + (is_rule[t] ? 1 : size[t]);
      if (!is_rule[t]) d = std::max(d, depth[t]);
    }
    size[s] = sz;
    depth[s] = d + 1;
    if (s != 0 &&
        ((indegree[s] > 1 && sz > kShareSize) || depth[s] > kMaxInlineDepth)) {
      is_rule[s] = 1;
    }
  }
  std::vector<int32_t> rule_of(n, -1);
  for (int32_t s = 0; s < n; ++s) {
    if (is_rule[s])
      rule_of[s] = NewRule(absl::StrCat(std::string(hint), "_s", s));
  }
  std::vector<int32_t> expr(n, -1);
  auto ref = [&](int32_t t) { return is_rule[t] ? Ref(rule_of[t]) : expr[t]; };
  // A group and the loop it leads into (a key that is none of the
  // declared names: its any-character tail, left from each state), written
  // once for all the states that share both (JsonCharForms). A rule with
  // such a loop is unbounded, so sharing leaves its inlining alone
  // (compiler.cc weighs bounded rules by their size).
  std::map<std::pair<int32_t, int32_t>, int32_t> into_loop;
  for (int32_t s : order) {
    std::vector<int32_t> alts;
    for (const auto& [t, ranges] : out[s]) {
      // Each group of forms leads on to the target by itself (see
      // JsonCharForms) where copying the target costs no more than a
      // reference: a rule, or a state that only loops. Copies of larger
      // targets would multiply down nested states.
      const std::vector<int32_t> groups = symbol(ranges);
      if (is_rule[t] || out[t].empty()) {
        for (int32_t group : groups) {
          if (is_rule[t] || self[t].empty()) {
            alts.push_back(Seq({group, ref(t)}));
            continue;
          }
          // A loop state is an expression, not a rule: ref(t) writes nothing.
          const int32_t loop = ref(t);
          alts.push_back(Once(&into_loop, {group, t}, [&] {
            return Seq({group, loop});
          }));
        }
      } else {
        alts.push_back(Seq({Alt(groups), ref(t)}));
      }
    }
    if (dfa.accepting[s]) alts.push_back(tail);
    int32_t body = Alt(alts);
    if (!self[s].empty()) {
      body = Seq({g_.AddRepeat(Alt(symbol(self[s])), 0, kUnbounded), body});
    }
    if (is_rule[s]) {
      g_.rules[rule_of[s]].body = body;
    } else {
      expr[s] = body;
    }
  }
  return ref(0);
}

int32_t JsonEmitter::DfaString(const CharDfa& dfa, std::string_view hint) {
  // The closing quote ends every accepting state, so that the states made
  // rules are referred to only at the string's end and are read inside it
  // (compiler.cc, AbsorbedRules): a string rule that calls none classifies
  // its tokens by a leaf walk (llama3: a pattern counted by maxLength,
  // 25 ms by the general walk).
  if (dfa.IsEmpty()) return Nothing();
  return Seq({Bytes("\""), DfaStringRest(dfa, hint)});
}

int32_t JsonEmitter::DfaStringRest(const CharDfa& dfa, std::string_view hint) {
  return EmitDfa(
      dfa,
      [this](const std::vector<CharRange>& r) {
        return JsonCharForms(r).groups;
      },
      hint, Bytes("\""));
}

int32_t JsonEmitter::DfaPlain(const CharDfa& dfa, std::string_view hint) {
  return EmitDfa(
      dfa,
      [this](const std::vector<CharRange>& r) {
        return std::vector<int32_t>{g_.AddCharClass(r)};
      },
      hint, g_.AddEpsilon());
}

}  // namespace grammard::grammar::json_schema_internal
