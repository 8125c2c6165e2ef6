#include "service/constraint.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grammar/base/bounded_json.h"
#include "grammar/base/status_macros.h"
#include "grammar/frontends/choice/choice.h"
#include "grammar/frontends/structural_tag/structural_tag.h"
#include "nlohmann/json.hpp"
#include "service/wire_text.h"

namespace grammard::service {
namespace {

using grammard::v1::Constraint;
using grammard::v1::JsonOptions;
using Json = nlohmann::ordered_json;

// Sorts object keys everywhere except directly under "properties".
Json Canonical(const Json& value, bool keep_order) {
  if (value.is_array()) {
    Json out = Json::array();
    for (const Json& item : value) out.push_back(Canonical(item, false));
    return out;
  }
  if (!value.is_object()) return value;
  std::vector<std::pair<std::string, const Json*>> members;
  for (auto it = value.begin(); it != value.end(); ++it) {
    members.emplace_back(it.key(), &it.value());
  }
  if (!keep_order) {
    std::sort(members.begin(), members.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  Json out = Json::object();
  // Appended, not looked up: keys are unique, and ordered_map's operator[]
  // searches linearly (50,000 properties took seconds).
  auto& object = out.get_ref<Json::object_t&>();
  object.reserve(members.size());
  for (const auto& [key, member] : members) {
    // The members of "properties" are property names, whose values are
    // schemas again; nothing under them keeps its order.
    object.emplace_back(key,
                        Canonical(*member, !keep_order && key == "properties"));
  }
  return out;
}

absl::StatusOr<Json> ReadJson(std::string_view text, std::string_view what,
                              int max_depth) {
  // The front end's own bound: a deeper text fails there anyway, and the
  // recursive walk of Canonical must not meet it first.
  absl::StatusOr<Json> parsed = grammar::ParseBoundedJson(text, max_depth);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(what), ": ", parsed.status().message()));
  }
  return parsed;
}

std::string CanonicalOptions(const JsonOptions& o) {
  return absl::StrCat("ws=", o.whitespace(), ",run=", o.max_whitespace_run(),
                      ",indent=", o.indent(),
                      ",item=", Json(o.item_separator()).dump(),
                      ",key=", Json(o.key_separator()).dump(),
                      ",order=", o.property_order(), ",lenient=", o.lenient());
}

grammar::JsonSchemaOptions ToSchemaOptions(const JsonOptions& o,
                                           const CompileLimits& limits) {
  grammar::JsonSchemaOptions out;
  out.strict = !o.lenient();
  switch (o.whitespace()) {
    case JsonOptions::WHITESPACE_COMPACT:
      out.whitespace = grammar::JsonWhitespace::kCompact;
      break;
    case JsonOptions::WHITESPACE_INDENTED:
      out.whitespace = grammar::JsonWhitespace::kIndented;
      break;
    default:
      out.whitespace = grammar::JsonWhitespace::kAny;
      break;
  }
  out.max_whitespace_run =
      o.max_whitespace_run() > 0 ? o.max_whitespace_run() : -1;
  if (o.indent() > 0) out.indent = o.indent();
  if (!o.item_separator().empty()) out.item_separator = o.item_separator();
  if (!o.key_separator().empty()) out.key_separator = o.key_separator();
  switch (o.property_order()) {
    case JsonOptions::PROPERTY_ORDER_REQUIRED_FIRST:
      out.property_order = grammar::JsonPropertyOrder::kRequiredFirst;
      break;
    case JsonOptions::PROPERTY_ORDER_ANY:
      out.property_order = grammar::JsonPropertyOrder::kAny;
      break;
    case JsonOptions::PROPERTY_ORDER_ANY_WHEN_SMALL:
      out.property_order = grammar::JsonPropertyOrder::kAnyWhenSmall;
      break;
    case JsonOptions::PROPERTY_ORDER_ANY_REPEATABLE:
      out.property_order = grammar::JsonPropertyOrder::kAnyRepeatable;
      break;
    default:
      out.property_order = grammar::JsonPropertyOrder::kAsWritten;
  }
  out.deadline = limits.deadline;
  return out;
}

absl::Status Prefixed(const absl::Status& status, std::string_view kind) {
  return absl::Status(status.code(),
                      absl::StrCat(std::string(kind), ": ", status.message()));
}

absl::StatusOr<std::string> CanonicalText(const Constraint& constraint,
                                          const Json& json) {
  const std::string kind = ConstraintKindName(constraint);
  switch (constraint.kind_case()) {
    case Constraint::kJsonSchema:
    case Constraint::kStructuralTag:
      return absl::StrCat(kind, "|",
                          CanonicalOptions(constraint.json_options()), "|",
                          Canonical(json, false).dump());
    case Constraint::kJsonObject:
      return absl::StrCat(kind, "|",
                          CanonicalOptions(constraint.json_options()));
    case Constraint::kRegex:
      return absl::StrCat(kind, "|", constraint.regex());
    case Constraint::kGrammar:
      return absl::StrCat(kind, "|",
                          Json(constraint.grammar().root_rule()).dump(), "|",
                          constraint.grammar().text());
    case Constraint::kChoice: {
      // Length-prefixed: choices may hold any bytes.
      std::string out = kind;
      for (const std::string& c : constraint.choice().choices()) {
        absl::StrAppend(&out, "|", c.size(), ":", c);
      }
      return out;
    }
    case Constraint::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "constraint: none of json_schema, json_object, regex, grammar, choice, "
      "structural_tag is set");
}

}  // namespace

const char* ConstraintKindName(const Constraint& constraint) {
  switch (constraint.kind_case()) {
    case Constraint::kJsonSchema:
      return "json_schema";
    case Constraint::kJsonObject:
      return "json_object";
    case Constraint::kRegex:
      return "regex";
    case Constraint::kGrammar:
      return "grammar";
    case Constraint::kChoice:
      return "choice";
    case Constraint::kStructuralTag:
      return "structural_tag";
    case Constraint::KIND_NOT_SET:
      break;
  }
  return "unset";
}

absl::StatusOr<ParsedConstraint> ParseConstraint(const Constraint& constraint) {
  GRAMMARD_RETURN_IF_ERROR(CheckConstraintUtf8(constraint));
  ParsedConstraint out;
  const bool schema = constraint.kind_case() == Constraint::kJsonSchema;
  if (schema || constraint.kind_case() == Constraint::kStructuralTag) {
    absl::StatusOr<Json> json = ReadJson(
        schema ? constraint.json_schema() : constraint.structural_tag(),
        ConstraintKindName(constraint),
        schema ? grammar::kMaxSchemaJsonDepth
               : grammar::kMaxStructuralTagJsonDepth);
    if (!json.ok()) return json.status();
    out.json = *std::move(json);
    // The text is not kept: the kind stays set, with nothing in it.
    *out.spec.mutable_json_options() = constraint.json_options();
    if (schema) {
      out.spec.set_json_schema("");
    } else {
      out.spec.set_structural_tag("");
    }
  } else {
    out.spec = constraint;
  }
  absl::StatusOr<std::string> canonical = CanonicalText(out.spec, out.json);
  if (!canonical.ok()) return canonical.status();
  out.canonical = *std::move(canonical);
  out.bytes = static_cast<int64_t>(out.spec.ByteSizeLong()) +
              grammar::JsonHeapBytes(out.json);
  return out;
}

int64_t LeastParsedBytes(const Constraint& constraint) {
  switch (constraint.kind_case()) {
    case Constraint::kJsonSchema:
      return grammar::LeastJsonHeapBytes(constraint.json_schema(),
                                         grammar::kMaxSchemaJsonDepth);
    case Constraint::kStructuralTag:
      return grammar::LeastJsonHeapBytes(constraint.structural_tag(),
                                         grammar::kMaxStructuralTagJsonDepth);
    default:
      return 0;
  }
}

absl::StatusOr<CompiledConstraint> CompileConstraint(
    const grammar::GrammarCompiler& compiler, ParsedConstraint parsed,
    const CompileLimits& limits) {
  const Constraint& constraint = parsed.spec;
  const char* kind = ConstraintKindName(constraint);
  grammar::CompileOptions options;
  options.deadline = limits.deadline;
  options.max_states = limits.max_states;
  options.classify_ahead = limits.classify_ahead;
  std::vector<grammar::DroppedKeyword> dropped;
  absl::StatusOr<grammar::CompiledGrammar> compiled =
      absl::InvalidArgumentError("unset");
  switch (constraint.kind_case()) {
    case Constraint::kJsonSchema:
    case Constraint::kJsonObject: {
      auto converted = grammar::ParsedJsonSchemaToGrammar(
          constraint.kind_case() == Constraint::kJsonSchema
              ? std::move(parsed.json)
              : Json{{"type", "object"}},
          ToSchemaOptions(constraint.json_options(), limits));
      if (!converted.ok()) return Prefixed(converted.status(), kind);
      dropped = std::move(converted->dropped);
      compiled = compiler.Compile(std::move(converted->grammar), options);
      break;
    }
    case Constraint::kStructuralTag: {
      auto converted = grammar::ParsedStructuralTagGrammar(
          std::move(parsed.json),
          ToSchemaOptions(constraint.json_options(), limits));
      if (!converted.ok()) return Prefixed(converted.status(), kind);
      dropped = std::move(converted->dropped);
      compiled = compiler.Compile(std::move(converted->grammar), options);
      break;
    }
    case Constraint::kRegex:
      compiled = compiler.CompileRegex(constraint.regex(), options);
      break;
    case Constraint::kGrammar:
      compiled = compiler.CompileEbnf(
          constraint.grammar().text(),
          constraint.grammar().root_rule().empty()
              ? std::string_view("root")
              : std::string_view(constraint.grammar().root_rule()),
          options);
      break;
    case Constraint::kChoice: {
      std::vector<std::string> choices(constraint.choice().choices().begin(),
                                       constraint.choice().choices().end());
      auto grammar = grammar::ChoiceGrammar(choices);
      if (!grammar.ok()) return Prefixed(grammar.status(), kind);
      compiled = compiler.Compile(*std::move(grammar), options);
      break;
    }
    case Constraint::KIND_NOT_SET:
      return CanonicalText(constraint, parsed.json).status();
  }
  if (!compiled.ok()) return Prefixed(compiled.status(), kind);
  return CompiledConstraint{*std::move(compiled), std::move(dropped)};
}

absl::StatusOr<CompiledConstraint> CompileConstraint(
    const grammar::GrammarCompiler& compiler, const Constraint& constraint,
    const CompileLimits& limits) {
  absl::StatusOr<ParsedConstraint> parsed = ParseConstraint(constraint);
  if (!parsed.ok()) return parsed.status();
  return CompileConstraint(compiler, *std::move(parsed), limits);
}

}  // namespace grammard::service
