#include "tests/fuzz/fuzz_vocab.h"

#include <cstdlib>
#include <string>
#include <vector>

namespace grammard::fuzz {

const std::shared_ptr<const grammar::Vocabulary>& FuzzVocabulary() {
  static const auto* vocab = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, char(b)));
    for (const char* word :
         {"{\"", "\":", "\",", "\"}", "true", "false", "null", "  ", "\n", "ab",
          "abc", "12", "-1", ".5", "e+", "\xc3\xa9", "\xe2\x82\xac"}) {
      tokens.push_back(word);
    }
    tokens.push_back("</s>");
    const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
    grammar::VocabularyOptions options;
    options.name = "fuzz";
    auto v = grammar::Vocabulary::FromTokens(tokens, {eos}, {eos}, options);
    if (!v.ok()) std::abort();
    return new std::shared_ptr<const grammar::Vocabulary>(*v);
  }();
  return *vocab;
}

}  // namespace grammard::fuzz
