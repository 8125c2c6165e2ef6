#include "grammar/frontends/structural_tag/structural_tag.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "grammar/base/bounded_json.h"
#include "grammar/base/status_macros.h"
#include "grammar/base/utf8.h"
#include "nlohmann/json.hpp"

namespace grammard::grammar {
namespace {

// Ordered, so that a schema dumped back to text keeps its member order
// (JsonPropertyOrder::kAsWritten depends on it).
using Json = nlohmann::ordered_json;

absl::Status At(const std::string& pointer, const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("structural tag: ", pointer, ": ", problem));
}

std::string PointerToken(const std::string& key) {
  return absl::StrReplaceAll(key, {{"~", "~0"}, {"/", "~1"}});
}

absl::Status NotJson(const absl::Status& status) {
  return absl::InvalidArgumentError(
      absl::StrCat("structural tag: ", status.message()));
}

struct Structure {
  std::string begin;
  std::string end;
  Json schema;
};

struct Spec {
  std::vector<std::string> triggers;
  std::vector<Structure> structures;
};

absl::Status ReadTriggers(const Json& spec, Spec* out) {
  auto it = spec.find("triggers");
  if (it == spec.end()) return At("/triggers", "missing");
  if (!it->is_array() || it->empty()) {
    return At("/triggers", "must be a non-empty array of strings");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& t = (*it)[i];
    if (!t.is_string() || t.get_ref<const std::string&>().empty()) {
      return At(absl::StrCat("/triggers/", i), "must be a non-empty string");
    }
    out->triggers.push_back(t.get<std::string>());
  }
  return absl::OkStatus();
}

// Moves the schema out of `s`.
absl::Status ReadStructure(Json& s, const std::string& pointer,
                           const std::vector<std::string>& triggers,
                           Structure* out) {
  if (!s.is_object()) return At(pointer, "must be an object");
  for (const auto& [key, value] : s.items()) {
    if (key != "begin" && key != "schema" && key != "end") {
      return At(absl::StrCat(pointer, "/", PointerToken(key)),
                "unknown key; a structure has \"begin\", \"schema\" and "
                "\"end\"");
    }
  }
  for (const char* key : {"begin", "end"}) {
    auto it = s.find(key);
    const std::string where = absl::StrCat(pointer, "/", key);
    if (it == s.end()) return At(where, "missing");
    if (!it->is_string()) return At(where, "must be a string");
  }
  out->begin = s["begin"].get<std::string>();
  out->end = s["end"].get<std::string>();
  if (out->begin.empty()) return At(pointer + "/begin", "must not be empty");
  if (std::none_of(triggers.begin(), triggers.end(), [&](const std::string& t) {
        return absl::StartsWith(out->begin, t);
      })) {
    return At(pointer + "/begin", "starts with none of the triggers");
  }
  auto schema = s.find("schema");
  if (schema == s.end()) return At(pointer + "/schema", "missing");
  if (!schema->is_object() && !schema->is_boolean()) {
    return At(pointer + "/schema", "must be a JSON schema (object or boolean)");
  }
  out->schema = std::move(*schema);
  return absl::OkStatus();
}

absl::StatusOr<Spec> ReadSpec(Json spec) {
  absl::Status deep = CheckJsonDepth(spec, kMaxStructuralTagJsonDepth);
  if (!deep.ok()) return NotJson(deep);
  if (!spec.is_object()) {
    return absl::InvalidArgumentError(
        "structural tag: the spec must be a JSON object");
  }
  for (const auto& [key, value] : spec.items()) {
    if (key == "type") {
      if (value != "structural_tag") {
        return At("/type", "must be \"structural_tag\"");
      }
    } else if (key != "structures" && key != "triggers") {
      return At("/" + PointerToken(key),
                "unknown key; the spec has \"structures\" and \"triggers\"");
    }
  }
  Spec out;
  GRAMMARD_RETURN_IF_ERROR(ReadTriggers(spec, &out));
  auto structures = spec.find("structures");
  if (structures == spec.end()) return At("/structures", "missing");
  if (!structures->is_array()) return At("/structures", "must be an array");
  out.structures.resize(structures->size());
  for (size_t i = 0; i < structures->size(); ++i) {
    GRAMMARD_RETURN_IF_ERROR(ReadStructure((*structures)[i],
                                           absl::StrCat("/structures/", i),
                                           out.triggers, &out.structures[i]));
  }
  return out;
}

// The Aho-Corasick automaton of the triggers over code points: state s
// stands for the longest suffix of the text read that is a prefix of some
// trigger, and Ends(s) lists the triggers that are suffixes of it.
class TriggerAutomaton {
 public:
  explicit TriggerAutomaton(const std::vector<std::vector<uint32_t>>& triggers)
      : edges_(1), fail_(1, 0), ends_(1) {
    for (size_t t = 0; t < triggers.size(); ++t) {
      int32_t s = 0;
      for (uint32_t cp : triggers[t]) {
        alphabet_.insert(cp);
        auto [it, added] =
            edges_[s].emplace(cp, static_cast<int32_t>(edges_.size()));
        if (added) {
          edges_.emplace_back();
          fail_.push_back(0);
          ends_.emplace_back();
        }
        s = it->second;
      }
      ends_[s].push_back(static_cast<int32_t>(t));
    }
    // Breadth first, so that every failure target (a shorter string) is
    // complete before the states that fall back to it.
    std::vector<int32_t> queue{0};
    for (size_t i = 0; i < queue.size(); ++i) {
      const int32_t u = queue[i];
      for (const auto& [cp, v] : edges_[u]) {
        fail_[v] = u == 0 ? 0 : Next(fail_[u], cp);
        ends_[v].insert(ends_[v].end(), ends_[fail_[v]].begin(),
                        ends_[fail_[v]].end());
        std::sort(ends_[v].begin(), ends_[v].end());
        queue.push_back(v);
      }
    }
  }

  int32_t Next(int32_t state, uint32_t cp) const {
    for (;;) {
      auto it = edges_[state].find(cp);
      if (it != edges_[state].end()) return it->second;
      if (state == 0) return 0;
      state = fail_[state];
    }
  }
  const std::vector<int32_t>& Ends(int32_t state) const { return ends_[state]; }
  // The code points triggers use; every other one leads back to state 0.
  const std::set<uint32_t>& alphabet() const { return alphabet_; }

 private:
  std::vector<std::map<uint32_t, int32_t>> edges_;  // the trie
  std::vector<int32_t> fail_;
  std::vector<std::vector<int32_t>> ends_;  // sorted trigger indices
  std::set<uint32_t> alphabet_;
};

// The automaton's states that free text can be in (reached from the start
// without completing a trigger), each with its moves grouped by target.
struct FreeText {
  struct Move {
    std::vector<CharRange> ranges;
    bool to_tag;     // a trigger that starts a structure completes
    int32_t target;  // a FreeText state, or an index into tag_starts
  };
  std::vector<std::vector<Move>> moves;  // state 0 is the start
  // Per tag start, the triggers (that start structures) ending there.
  std::vector<std::vector<int32_t>> tag_starts;
};

FreeText ExploreFreeText(const TriggerAutomaton& ac,
                         const std::vector<bool>& starts_structure) {
  std::vector<CharRange> alphabet;
  for (uint32_t cp : ac.alphabet()) alphabet.push_back({cp, cp});
  const std::vector<CharRange> others = ComplementCodepointRanges(alphabet);

  FreeText out;
  std::map<int32_t, int32_t> state_index{{0, 0}};
  std::map<std::vector<int32_t>, int32_t> tag_index;
  std::vector<int32_t> states{0};  // automaton state of each FreeText state
  for (size_t i = 0; i < states.size(); ++i) {
    std::map<std::pair<bool, int32_t>, std::vector<CharRange>> by_target;
    by_target[{false, 0}] = others;
    for (uint32_t cp : ac.alphabet()) {
      const int32_t next = ac.Next(states[i], cp);
      if (ac.Ends(next).empty()) {
        auto [it, added] = state_index.emplace(next, states.size());
        if (added) states.push_back(next);
        by_target[{false, it->second}].push_back({cp, cp});
        continue;
      }
      std::vector<int32_t> starting;
      for (int32_t t : ac.Ends(next)) {
        if (starts_structure[t]) starting.push_back(t);
      }
      // A trigger no structure starts with cannot appear in free text.
      if (starting.empty()) continue;
      auto [it, added] = tag_index.emplace(starting, out.tag_starts.size());
      if (added) out.tag_starts.push_back(starting);
      by_target[{true, it->second}].push_back({cp, cp});
    }
    out.moves.emplace_back();
    for (auto& [target, ranges] : by_target) {
      out.moves.back().push_back(
          {std::move(ranges), target.first, target.second});
    }
  }
  return out;
}

// Appends `src`'s expressions and rules to `dst`, each rule's name prefixed;
// returns the index of `src`'s root in `dst`. Children keep preceding their
// parents because every index moves by the same amount.
int32_t Append(const Grammar& src, const std::string& prefix, Grammar* dst) {
  const int32_t expr_base = static_cast<int32_t>(dst->exprs.size());
  const int32_t rule_base = static_cast<int32_t>(dst->rules.size());
  for (Expr e : src.exprs) {
    for (int32_t& child : e.children) child += expr_base;
    if (e.kind == ExprKind::kRuleRef) e.rule += rule_base;
    dst->exprs.push_back(std::move(e));
  }
  for (Rule r : src.rules) {  // a copy keeps the run-time conditions
    r.name = absl::StrCat(prefix, r.name);
    r.body += expr_base;
    dst->rules.push_back(std::move(r));
  }
  return src.root + rule_base;
}

}  // namespace

absl::StatusOr<StructuralTagResult> StructuralTagGrammar(
    std::string_view spec_json, const JsonSchemaOptions& options) {
  absl::StatusOr<Json> parsed =
      ParseBoundedJson(spec_json, kMaxStructuralTagJsonDepth);
  if (!parsed.ok()) return NotJson(parsed.status());
  return ParsedStructuralTagGrammar(*std::move(parsed), options);
}

absl::StatusOr<StructuralTagResult> ParsedStructuralTagGrammar(
    nlohmann::ordered_json spec_json, const JsonSchemaOptions& options) {
  absl::StatusOr<Spec> spec = ReadSpec(std::move(spec_json));
  if (!spec.ok()) return spec.status();

  StructuralTagResult result;
  std::vector<Grammar> schemas;
  for (size_t k = 0; k < spec->structures.size(); ++k) {
    const std::string pointer = absl::StrCat("/structures/", k, "/schema");
    absl::StatusOr<JsonSchemaResult> schema = ParsedJsonSchemaToGrammar(
        std::move(spec->structures[k].schema), options);
    if (!schema.ok()) {
      return absl::Status(schema.status().code(),
                          absl::StrCat("structural tag: ", pointer, ": ",
                                       schema.status().message()));
    }
    schemas.push_back(std::move(schema->grammar));
    for (DroppedKeyword& d : schema->dropped) {
      d.pointer = pointer + d.pointer;
      result.dropped.push_back(std::move(d));
    }
  }

  // Duplicate triggers would only repeat alternatives.
  std::vector<std::string> triggers = spec->triggers;
  std::sort(triggers.begin(), triggers.end());
  triggers.erase(std::unique(triggers.begin(), triggers.end()), triggers.end());
  std::vector<std::vector<uint32_t>> code_points(triggers.size());
  std::vector<bool> starts_structure(triggers.size(), false);
  for (size_t t = 0; t < triggers.size(); ++t) {
    for (size_t pos = 0; pos < triggers[t].size();) {
      uint32_t cp = 0;
      if (!base::DecodeUtf8(triggers[t], &pos, &cp)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "structural tag: trigger \"", triggers[t], "\" is not UTF-8"));
      }
      code_points[t].push_back(cp);
    }
    for (const Structure& s : spec->structures) {
      if (absl::StartsWith(s.begin, triggers[t])) starts_structure[t] = true;
    }
  }
  const FreeText text =
      ExploreFreeText(TriggerAutomaton(code_points), starts_structure);

  // root (free text from the start), text_<i> (free text in state i),
  // dispatch_<j> (the rest of a tag once tag_starts[j]'s triggers ended),
  // tag_<k> (structure k's JSON and end, then free text) and s<k>_* (the
  // rules of structure k's schema).
  Grammar g;
  g.root = g.AddRule("root");
  std::vector<int32_t> text_rules{g.root};
  for (size_t i = 1; i < text.moves.size(); ++i) {
    text_rules.push_back(g.AddRule(absl::StrCat("text_", i)));
  }
  std::vector<int32_t> dispatch_rules;
  for (size_t j = 0; j < text.tag_starts.size(); ++j) {
    dispatch_rules.push_back(g.AddRule(absl::StrCat("dispatch_", j)));
  }
  std::vector<int32_t> tag_rules;
  for (size_t k = 0; k < schemas.size(); ++k) {
    tag_rules.push_back(g.AddRule(absl::StrCat("tag_", k)));
  }
  for (size_t k = 0; k < schemas.size(); ++k) {
    const int32_t schema_root =
        Append(schemas[k], absl::StrCat("s", k, "_"), &g);
    g.rules[tag_rules[k]].body = g.AddSequence(
        {g.AddRuleRef(schema_root), g.AddBytes(spec->structures[k].end),
         g.AddRuleRef(g.root)});
  }
  for (size_t j = 0; j < text.tag_starts.size(); ++j) {
    std::vector<int32_t> tags;
    for (int32_t t : text.tag_starts[j]) {
      for (size_t k = 0; k < schemas.size(); ++k) {
        const std::string& begin = spec->structures[k].begin;
        if (!absl::StartsWith(begin, triggers[t])) continue;
        tags.push_back(
            g.AddSequence({g.AddBytes(begin.substr(triggers[t].size())),
                           g.AddRuleRef(tag_rules[k])}));
      }
    }
    g.rules[dispatch_rules[j]].body = g.AddChoice(std::move(tags));
  }
  // Every call is the last thing its alternative does (a tail call), which
  // keeps the matcher's stacks flat however long the text runs.
  for (size_t i = 0; i < text.moves.size(); ++i) {
    std::vector<int32_t> alternatives;
    for (const FreeText::Move& m : text.moves[i]) {
      const int32_t callee =
          m.to_tag ? dispatch_rules[m.target] : text_rules[m.target];
      alternatives.push_back(
          g.AddSequence({g.AddCharClass(m.ranges), g.AddRuleRef(callee)}));
    }
    alternatives.push_back(g.AddEpsilon());  // the text may end here
    g.rules[text_rules[i]].body = g.AddChoice(std::move(alternatives));
  }

  result.grammar = std::move(g);
  return result;
}

}  // namespace grammard::grammar
