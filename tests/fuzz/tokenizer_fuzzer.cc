// libFuzzer target: tokenizer.json (and, after a NUL, tokenizer_config.json)
// → vocabulary loading, which must refuse lies (ids that repeat or run past
// any sensible size, unknown token kinds) without crashing.
#include <cstring>
#include <string_view>

#include "grammar/vocabulary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* text = reinterpret_cast<const char*>(data);
  const auto* nul = static_cast<const char*>(std::memchr(text, 0, size));
  const size_t json_size = nul == nullptr ? size : size_t(nul - text);
  const std::string_view config =
      nul == nullptr ? std::string_view()
                     : std::string_view(nul + 1, size - json_size - 1);
  grammard::grammar::VocabularyOptions options;
  options.name = "fuzz";
  auto vocab = grammard::grammar::Vocabulary::FromJson(
      std::string_view(text, json_size), config, options);
  if (vocab.ok() && (*vocab)->size() <= 0) __builtin_trap();
  return 0;
}
