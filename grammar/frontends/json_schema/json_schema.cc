#include "grammar/frontends/json_schema/json_schema.h"

#include <memory>
#include <utility>

#include "grammar/base/status_macros.h"
#include "grammar/frontends/json_schema/internal/converter.h"
#include "grammar/frontends/json_schema/internal/schema_doc.h"

namespace grammard::grammar {
namespace {

namespace jsi = json_schema_internal;

jsi::Draft ToDraft(JsonSchemaDraft draft) {
  switch (draft) {
    case JsonSchemaDraft::k4:
      return jsi::Draft::k4;
    case JsonSchemaDraft::k6:
      return jsi::Draft::k6;
    case JsonSchemaDraft::k7:
      return jsi::Draft::k7;
    case JsonSchemaDraft::k2019_09:
      return jsi::Draft::k2019;
    case JsonSchemaDraft::k2020_12:
      break;
  }
  return jsi::Draft::k2020;
}

jsi::PropertyOrder ToOrder(JsonPropertyOrder order) {
  switch (order) {
    case JsonPropertyOrder::kRequiredFirst:
      return jsi::PropertyOrder::kRequiredFirst;
    case JsonPropertyOrder::kAny:
      return jsi::PropertyOrder::kAny;
    case JsonPropertyOrder::kAnyWhenSmall:
      return jsi::PropertyOrder::kAnyWhenSmall;
    case JsonPropertyOrder::kAnyRepeatable:
      return jsi::PropertyOrder::kAnyRepeatable;
    case JsonPropertyOrder::kAsWritten:
      break;
  }
  return jsi::PropertyOrder::kAsWritten;
}

absl::StatusOr<jsi::JsonLayout> ToLayout(const JsonSchemaOptions& options) {
  jsi::JsonLayout layout;
  layout.flexible = options.whitespace == JsonWhitespace::kAny;
  layout.max_whitespace = options.max_whitespace_run;
  layout.item_separator = options.item_separator;
  layout.key_separator = options.key_separator;
  if (options.whitespace == JsonWhitespace::kIndented) {
    if (options.indent < 0 || options.indent > 16) {
      return absl::InvalidArgumentError(
          "JsonSchemaOptions::indent must be within 0..16");
    }
    layout.indent = options.indent;
  }
  // Separators are written verbatim, so they must keep the text JSON.
  for (const std::string* sep :
       {&options.item_separator, &options.key_separator}) {
    const char want = sep == &options.item_separator ? ',' : ':';
    int punctuation = 0;
    for (char c : *sep) {
      if (c == want) {
        ++punctuation;
      } else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
        punctuation = 2;
      }
    }
    if (punctuation != 1) {
      return absl::InvalidArgumentError(
          "JSON separators must be one ',' (items) or ':' (keys) with "
          "optional whitespace");
    }
  }
  return layout;
}

absl::StatusOr<JsonSchemaResult> Convert(
    const jsi::JsonLayout& layout,
    absl::StatusOr<std::unique_ptr<jsi::SchemaDoc>> doc,
    const JsonSchemaOptions& options) {
  if (!doc.ok()) return doc.status();
  jsi::ConvertOptions convert;
  convert.strict = options.strict;
  convert.order = ToOrder(options.property_order);
  convert.layout = layout;
  convert.layout.any_member_order =
      options.property_order == JsonPropertyOrder::kAny ||
      options.property_order == JsonPropertyOrder::kAnyWhenSmall ||
      options.property_order == JsonPropertyOrder::kAnyRepeatable;
  convert.layout.number_variants = (*doc)->draft() != jsi::Draft::k4;
  convert.dfa.max_states = options.max_automaton_states;
  convert.dfa.deadline = options.deadline;
  convert.max_alternatives = options.max_alternatives;
  convert.max_exprs = static_cast<int64_t>(
      std::min<uint64_t>(options.max_grammar_exprs, uint64_t{1} << 40));

  Grammar raw;
  std::vector<jsi::DroppedKeyword> dropped;
  GRAMMARD_RETURN_IF_ERROR(
      jsi::ConvertSchema(doc->get(), convert, &raw, &dropped));
  JsonSchemaResult result;
  result.grammar = std::move(raw);
  for (jsi::DroppedKeyword& d : dropped) {
    result.dropped.push_back(DroppedKeyword{
        std::move(d.keyword), std::move(d.pointer), std::move(d.reason)});
  }
  return result;
}

}  // namespace

absl::StatusOr<JsonSchemaResult> JsonSchemaToGrammar(
    std::string_view schema_json, const JsonSchemaOptions& options) {
  absl::StatusOr<jsi::JsonLayout> layout = ToLayout(options);
  if (!layout.ok()) return layout.status();
  return Convert(
      *layout,
      jsi::SchemaDoc::Parse(schema_json, ToDraft(options.default_draft),
                            options.documents),
      options);
}

absl::StatusOr<JsonSchemaResult> ParsedJsonSchemaToGrammar(
    nlohmann::ordered_json schema, const JsonSchemaOptions& options) {
  absl::StatusOr<jsi::JsonLayout> layout = ToLayout(options);
  if (!layout.ok()) return layout.status();
  return Convert(
      *layout,
      jsi::SchemaDoc::FromJson(
          std::move(schema), ToDraft(options.default_draft), options.documents),
      options);
}

}  // namespace grammard::grammar
