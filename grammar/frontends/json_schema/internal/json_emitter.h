// JsonEmitter: writes the pieces of JSON text into a Grammar for the front
// ends of this package: whitespace and separators in the chosen layout, the
// shared terminal rules (any string, number, integer, value), literal JSON
// values, JSON-encoded characters, regexes translated into string contents,
// and automata (char_dfa.h) as rules.
//
//   Grammar g;
//   JsonEmitter e(&g, JsonLayout{});
//   int32_t any = e.AnyValue(0);                 // a rule reference
//   int32_t lit = e.Value(Json::parse("[1, \"a\"]"), 0);
//
// Shared terminals are rules made once per grammar, because the engine
// classifies the tokens of a rule's states once however often it is used.
//
// Inside strings the emitter writes each character in its canonical JSON
// forms: raw, except `"`, `\` and control characters, which are escaped
// (short escapes such as \n, or \u00XX in either case), and `/`, which may
// also be written \/. Constrained strings (patterns, formats, enums) accept
// only these forms; the unconstrained string accepts any \uXXXX escape too.
//
// Cost: linear in what is emitted; EmitDfa is linear in the automaton.
// Thread-safety: writes to its grammar; one thread.
#ifndef GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_JSON_EMITTER_H_
#define GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_JSON_EMITTER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/frontends/json_schema/internal/char_dfa.h"
#include "grammar/frontends/json_schema/internal/schema_doc.h"
#include "grammar/ir/grammar_ir.h"

namespace grammard::grammar::json_schema_internal {

// How JSON text is laid out (see JsonSchemaOptions in json_schema.h).
struct JsonLayout {
  // Any JSON whitespace between tokens; else exactly the separators below.
  bool flexible = true;
  // Longest whitespace run when flexible; -1: unbounded.
  int32_t max_whitespace = -1;
  std::string item_separator = ",";
  std::string key_separator = ":";
  // When >= 0 (and not flexible): a newline and indent * depth spaces
  // before each member and each non-empty container's closing bracket.
  int32_t indent = -1;
  // Members of literal objects (enum, const) in any order, not only as
  // written; kept to objects of at most kMaxPermutedMembers members.
  bool any_member_order = false;
  // Literal numbers also in their other spellings (1.0, 1e0); off for
  // draft 4, where 1.0 is not an integer.
  bool number_variants = true;
};

inline constexpr size_t kMaxPermutedMembers = 5;

// Containers nested deeper than this cannot be written in indented layout
// (each depth needs rules of its own).
inline constexpr int kMaxIndentDepth = 32;

class JsonEmitter {
 public:
  JsonEmitter(Grammar* grammar, JsonLayout layout);

  Grammar& g() { return g_; }
  bool indented() const { return !layout_.flexible && layout_.indent >= 0; }

  // A new rule whose name starts with `hint` (sanitised, made unique).
  int32_t NewRule(std::string_view hint, int32_t body = -1);

  // Helpers that drop epsilons and unwrap single children.
  int32_t Seq(std::vector<int32_t> parts);
  int32_t Alt(std::vector<int32_t> parts);
  int32_t Bytes(std::string_view bytes) { return g_.AddBytes(bytes); }
  // One expression per rule, referred to again: each object state and
  // member refers to the same rules, and a copy per use was a third of a
  // Kubernetes schema's expressions, for every pass over the grammar to
  // read.
  int32_t Ref(int32_t rule);
  int32_t Nothing() { return g_.AddCharClass({}); }
  bool IsEpsilon(int32_t expr) const;
  bool IsNothing(int32_t expr) const;

  // Layout pieces for a container at depth `depth` (0 = top level).
  int32_t Ws();
  int32_t Open(char bracket, int depth);
  int32_t Close(char bracket, int depth);
  int32_t Empty(char open, char close);
  int32_t ItemSeparator(int depth);
  // ItemSeparator but for the whitespace before the comma (Ws()).
  int32_t ItemSeparatorAfterWs(int depth);
  int32_t KeySeparator();

  // Shared terminal rules, as references.
  int32_t AnyString();
  int32_t AnyNumber();
  int32_t AnyInteger();       // also with a zero fraction (1.0)
  int32_t AnyPlainInteger();  // no fraction at all (draft 4)
  int32_t AnyValue(int depth);
  // One code point in any JSON encoding (raw, short escape, \uXXXX or a
  // surrogate pair): the unit that minLength/maxLength count.
  int32_t CountedChar();

  // One character out of `ranges` (code points), in its canonical forms.
  int32_t JsonChar(const std::vector<CharRange>& ranges);
  // The same forms in up to three groups, `all` their choice: the raw ASCII
  // characters, the raw others (multi-byte UTF-8) and the escaped ones.
  // EmitDfa follows each group by the edge's target on its own, so that
  // states differing in a few ASCII characters (a key that is none of the
  // declared names excludes one letter per state) share what follows an
  // escape or a multi-byte character: the engine builds it once, not once
  // per state.
  struct CharForms {
    std::vector<int32_t> groups;
    int32_t all = -1;
  };
  const CharForms& JsonCharForms(const std::vector<CharRange>& ranges);
  // The contents (no quotes) of a string literal, in canonical forms.
  int32_t StringContent(std::string_view utf8);
  // Whether StringContent(utf8) has one spelling: its bytes, with no
  // character JSON asks or allows to escape.
  static bool OneSpelling(std::string_view utf8);
  int32_t Quoted(int32_t content);
  // A literal JSON value (objects keep their key order; numbers also match
  // with trailing zeros, integers as 1.0).
  absl::StatusOr<int32_t> Value(const Json& value, int depth);
  // Expression `expr` of a regex grammar (code point level) as JSON string
  // contents.
  absl::StatusOr<int32_t> TranslateRegex(const Grammar& regex, int32_t expr);
  // The language of `dfa`, each edge written with `symbol(ranges)`, a
  // choice of groups of forms that may each be followed by the edge's target
  // on its own (see JsonCharForms), and `tail` after each accepting state.
  // States on cycles, and large states reached from several places, become
  // rules named after `hint`.
  int32_t EmitDfa(
      const CharDfa& dfa,
      const std::function<std::vector<int32_t>(const std::vector<CharRange>&)>&
          symbol,
      std::string_view hint, int32_t tail);
  // Shorthands: a JSON string whose contents are `dfa`'s language, and the
  // same without its opening quote; a number text from a DFA over ASCII.
  int32_t DfaString(const CharDfa& dfa, std::string_view hint);
  int32_t DfaStringRest(const CharDfa& dfa, std::string_view hint);
  int32_t DfaPlain(const CharDfa& dfa, std::string_view hint);

 private:
  int32_t Newline(int depth);
  int32_t Hex4NonSurrogate();
  // The escaped forms of the characters set in `escaped` (JsonCharForms).
  int32_t EscapedChars(uint64_t escaped);

  Grammar& g_;
  JsonLayout layout_;
  std::map<std::string, int32_t> rule_names_;
  std::set<std::string> used_names_;
  std::map<std::vector<uint32_t>, CharForms> json_chars_;
  // JsonCharForms' shared groups: by ranges, and by EscapedChars' bits.
  std::map<std::vector<uint32_t>, int32_t> wide_chars_;
  std::map<uint64_t, int32_t> escaped_chars_;
  std::vector<int32_t> refs_;  // per rule, -1 until first needed
  // Open, Close and ItemSeparator by (kind, bracket, depth); KeySeparator.
  std::map<std::tuple<char, char, int>, int32_t> punctuation_;
  int32_t key_separator_ = -1;
  int32_t ws_rule_ = -1;
  int32_t string_rule_ = -1;
  int32_t number_rule_ = -1;
  int32_t integer_rule_ = -1;
  int32_t plain_integer_rule_ = -1;
  int32_t counted_char_rule_ = -1;
  std::vector<int32_t> value_rules_;  // per depth (one entry unless indented)
};

}  // namespace grammard::grammar::json_schema_internal

#endif  // GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_JSON_EMITTER_H_
