#include "grammar/syntax/bounded_json.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace grammard::grammar {

absl::StatusOr<nlohmann::ordered_json> ParseBoundedJson(std::string_view text,
                                                        int max_depth) {
  // Per open container: its members so far (counted by commas), or -1 for
  // an array.
  std::vector<int> members;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (static_cast<int>(members.size()) >= max_depth) {
        return absl::InvalidArgumentError(
            absl::StrCat("JSON nested deeper than ", max_depth, " levels"));
      }
      members.push_back(c == '{' ? 1 : -1);
    } else if (c == ']' || c == '}') {
      if (!members.empty()) members.pop_back();
    } else if (c == ',' && !members.empty() && members.back() > 0 &&
               ++members.back() > kMaxJsonObjectMembers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a JSON object of more than ", kMaxJsonObjectMembers, " members"));
    }
  }
  nlohmann::ordered_json value = nlohmann::ordered_json::parse(
      text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  return value;
}

}  // namespace grammard::grammar
