#include "grammar/frontends/choice/choice.h"

#include <set>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grammar/base/utf8.h"

namespace grammard::grammar {

absl::StatusOr<Grammar> ChoiceGrammar(const std::vector<std::string>& choices) {
  if (choices.empty()) {
    return absl::InvalidArgumentError("choice: the list is empty");
  }
  Grammar g;
  std::vector<int32_t> alternatives;
  std::set<std::string_view> seen;
  for (size_t i = 0; i < choices.size(); ++i) {
    size_t offset = 0;
    if (!base::IsValidUtf8(choices[i], &offset)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "choice: choice ", i, " is not valid UTF-8 (byte ", offset, ")"));
    }
    // Duplicates would only give the compiler identical branches to merge.
    if (seen.insert(choices[i]).second) {
      alternatives.push_back(g.AddBytes(choices[i]));
    }
  }
  g.root = g.AddRule("root", g.AddChoice(std::move(alternatives)));
  return g;
}

}  // namespace grammard::grammar
