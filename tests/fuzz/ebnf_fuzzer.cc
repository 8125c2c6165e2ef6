// libFuzzer target: EBNF text → the EBNF parser and compiler (bounded by a
// state cap and a deadline), then a walk of the grammar when it compiles.
// Input: the text up to the first NUL, walk choices after it.
#include "grammar/compiler.h"
#include "tests/fuzz/fuzz_vocab.h"
#include "tests/fuzz/grammar_walk.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const grammard::grammar::GrammarCompiler compiler(
      grammard::fuzz::FuzzVocabulary());
  grammard::fuzz::CompileAndWalk(
      data, size,
      [](std::string_view text,
         const grammard::grammar::CompileOptions& options) {
        return compiler.CompileEbnf(text, "root", options);
      });
  return 0;
}
