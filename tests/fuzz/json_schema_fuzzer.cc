// libFuzzer target: JSON Schema text → the bounded JSON parse, the schema
// converter (strict, then lenient) and, when it converts, the compiler and a
// walk of the grammar. Input: the schema up to the first NUL, walk choices
// after it.
#include <chrono>
#include <cstring>
#include <string_view>

#include "grammar/compiler.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "tests/fuzz/fuzz_vocab.h"
#include "tests/fuzz/grammar_walk.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const grammard::grammar::GrammarCompiler compiler(
      grammard::fuzz::FuzzVocabulary());
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t text_size = nul == nullptr ? size : size_t(nul - data);
  const std::string_view text(reinterpret_cast<const char*>(data), text_size);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  for (bool strict : {true, false}) {
    grammard::grammar::JsonSchemaOptions options;
    options.strict = strict;
    options.deadline = deadline;
    // Schemas of odd length take any member order, so that mutations reach
    // both that (with its required members counted at run time) and the
    // default.
    if (text_size % 2 == 1) {
      options.property_order =
          grammard::grammar::JsonPropertyOrder::kAnyRepeatable;
    }
    auto converted = grammard::grammar::JsonSchemaToGrammar(text, options);
    if (!converted.ok()) continue;
    grammard::grammar::CompileOptions compile;
    compile.max_states = 2000;
    compile.deadline = deadline;
    auto compiled = compiler.Compile(std::move(converted->grammar), compile);
    if (compiled.ok() && nul != nullptr) {
      grammard::fuzz::WalkGrammar(*compiled, nul + 1, size - text_size - 1);
    }
    break;
  }
  return 0;
}
