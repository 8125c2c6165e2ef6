#include "tools/grammarctl/constraint_spec.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace grammard::grammarctl {
namespace {

namespace v1 = grammard::v1;

// JSON text starts with '{' (a schema or a tag) or is a boolean schema;
// anything else names a file.
absl::StatusOr<std::string> JsonTextOrFile(const std::string& value) {
  const size_t first = value.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return absl::InvalidArgumentError("empty JSON value");
  }
  if (value[first] == '{' || value == "true" || value == "false") return value;
  return ReadUserFile(value);
}

}  // namespace

std::string UserPath(const std::string& path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || cwd == nullptr || *cwd == '\0') {
    return path;
  }
  return absl::StrCat(cwd, "/", path);
}

absl::StatusOr<std::string> ReadUserFile(const std::string& path) {
  const std::string resolved = UserPath(path);
  std::ifstream in(resolved, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", resolved));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::StatusOr<v1::Constraint> BuildConstraint(const ConstraintSpec& spec) {
  std::vector<std::string> kinds;
  if (!spec.json_schema.empty()) kinds.push_back("--json_schema");
  if (!spec.regex.empty()) kinds.push_back("--regex");
  if (!spec.ebnf.empty()) kinds.push_back("--ebnf");
  if (!spec.choices.empty()) kinds.push_back("--choices");
  if (spec.json_object) kinds.push_back("--json_object");
  if (!spec.structural_tag.empty()) kinds.push_back("--structural_tag");
  if (kinds.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "give exactly one of --json_schema, --regex, --ebnf, --choices, "
        "--json_object, --structural_tag (got ",
        kinds.empty() ? "none" : absl::StrJoin(kinds, ", "), ")"));
  }
  v1::Constraint constraint;
  if (!spec.json_schema.empty()) {
    absl::StatusOr<std::string> text = JsonTextOrFile(spec.json_schema);
    if (!text.ok()) return text.status();
    constraint.set_json_schema(*text);
  } else if (!spec.regex.empty()) {
    constraint.set_regex(spec.regex);
  } else if (!spec.ebnf.empty()) {
    absl::StatusOr<std::string> text = ReadUserFile(spec.ebnf);
    if (!text.ok()) return text.status();
    constraint.mutable_grammar()->set_text(*text);
  } else if (!spec.choices.empty()) {
    for (absl::string_view choice : absl::StrSplit(spec.choices, ',')) {
      constraint.mutable_choice()->add_choices(std::string(choice));
    }
  } else if (spec.json_object) {
    constraint.mutable_json_object();
  } else {
    absl::StatusOr<std::string> text = JsonTextOrFile(spec.structural_tag);
    if (!text.ok()) return text.status();
    constraint.set_structural_tag(*text);
  }

  // Only non-default options are set: an empty json_options message would
  // still serialize, and could give the same constraint another grammar id.
  if (spec.whitespace == "compact") {
    constraint.mutable_json_options()->set_whitespace(
        v1::JsonOptions::WHITESPACE_COMPACT);
  } else if (spec.whitespace == "indented") {
    constraint.mutable_json_options()->set_whitespace(
        v1::JsonOptions::WHITESPACE_INDENTED);
  } else if (!spec.whitespace.empty() && spec.whitespace != "any") {
    return absl::InvalidArgumentError(
        absl::StrCat("--whitespace must be any, compact or indented, not ",
                     spec.whitespace));
  }
  if (spec.lenient) constraint.mutable_json_options()->set_lenient(true);
  return constraint;
}

}  // namespace grammard::grammarctl
