#include "service/wire_text.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "grammar/base/utf8.h"

namespace grammard::service {

absl::Status CheckUtf8(std::string_view value, std::string_view field) {
  size_t at = 0;
  if (grammar::base::IsValidUtf8(value, &at)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(field), " is not valid UTF-8 (byte ", at, " of ",
                   value.size(), ")"));
}

absl::Status CheckName(std::string_view value, std::string_view field,
                       size_t max_bytes) {
  if (value.size() > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), " is ", value.size(),
                     " bytes long; at most ", max_bytes));
  }
  return CheckUtf8(value, field);
}

absl::Status CheckConstraintUtf8(const grammard::v1::Constraint& constraint) {
  using grammard::v1::Constraint;
  absl::Status s;
  switch (constraint.kind_case()) {
    case Constraint::kJsonSchema:
      s = CheckUtf8(constraint.json_schema(), "constraint.json_schema");
      break;
    case Constraint::kRegex:
      s = CheckUtf8(constraint.regex(), "constraint.regex");
      break;
    case Constraint::kGrammar:
      s = CheckUtf8(constraint.grammar().text(), "constraint.grammar.text");
      if (s.ok()) {
        s = CheckUtf8(constraint.grammar().root_rule(),
                      "constraint.grammar.root_rule");
      }
      break;
    case Constraint::kChoice:
      for (int i = 0; i < constraint.choice().choices_size() && s.ok(); ++i) {
        s = CheckUtf8(constraint.choice().choices(i),
                      absl::StrCat("constraint.choice.choices[", i, "]"));
      }
      break;
    case Constraint::kStructuralTag:
      s = CheckUtf8(constraint.structural_tag(), "constraint.structural_tag");
      break;
    case Constraint::kJsonObject:
    case Constraint::KIND_NOT_SET:
      break;
  }
  if (!s.ok()) return s;
  s = CheckUtf8(constraint.json_options().item_separator(),
                "constraint.json_options.item_separator");
  if (!s.ok()) return s;
  return CheckUtf8(constraint.json_options().key_separator(),
                   "constraint.json_options.key_separator");
}

std::string CutMessage(absl::string_view message) {
  if (message.size() <= kMaxErrorMessageBytes) return std::string(message);
  return absl::StrCat(message.substr(0, kMaxErrorMessageBytes), "... (",
                      message.size() - kMaxErrorMessageBytes, " more bytes)");
}

void SetError(const absl::Status& status, grammard::v1::Error* error) {
  error->set_code(static_cast<int32_t>(status.code()));
  error->set_message(CutMessage(status.message()));
}

}  // namespace grammard::service
