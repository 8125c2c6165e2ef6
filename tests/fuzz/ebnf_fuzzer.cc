// libFuzzer target: EBNF text → the EBNF parser and compiler (bounded by a
// state cap and a deadline), then a walk of the grammar when it compiles.
// Input: the grammar text up to the first NUL, walk choices after it.
#include <chrono>
#include <cstring>
#include <string_view>

#include "grammar/compiler.h"
#include "tests/fuzz/fuzz_vocab.h"
#include "tests/fuzz/grammar_walk.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const grammard::grammar::GrammarCompiler compiler(
      grammard::fuzz::FuzzVocabulary());
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t text_size = nul == nullptr ? size : size_t(nul - data);
  grammard::grammar::CompileOptions options;
  options.max_states = 2000;
  options.deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  auto compiled = compiler.CompileEbnf(
      std::string_view(reinterpret_cast<const char*>(data), text_size), "root",
      options);
  if (compiled.ok() && nul != nullptr) {
    grammard::fuzz::WalkGrammar(*compiled, nul + 1, size - text_size - 1);
  }
  return 0;
}
