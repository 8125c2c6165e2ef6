// libFuzzer target: the per-sequence work of Decode steps → service::
// Sequence over a JSON grammar, fed steps decoded from the input (a
// rollback count, accepted tokens, draft tokens; ids may be anything),
// including a reasoning section. Refused steps must leave the sequence
// usable, rows must never be all zero, and no id may index out of bounds.
#include <cstdlib>
#include <vector>

#include "grammar/compiler.h"
#include "service/sequence.h"
#include "tests/fuzz/fuzz_vocab.h"

namespace {

const grammard::grammar::CompiledGrammar& Json() {
  static const auto* grammar = [] {
    grammard::grammar::GrammarCompiler compiler(
        grammard::fuzz::FuzzVocabulary());
    auto g = compiler.CompileEbnf(R"(
root ::= value
value ::= object | array | "true" | "false" | "null" | number | string
object ::= "{" ws (string ws ":" ws value (ws "," ws string ws ":" ws value)*)? ws "}"
array ::= "[" ws (value (ws "," ws value)*)? ws "]"
string ::= "\"" [a-c]* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws ::= [ \n]*
)");
    if (!g.ok()) std::abort();
    return new grammard::grammar::CompiledGrammar(*g);
  }();
  return *grammar;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int32_t vocab = grammard::fuzz::FuzzVocabulary()->size();
  const int32_t eos = vocab - 1;
  grammard::service::ReasoningOptions reasoning{(data[0] & 1) != 0, eos - 1};
  grammard::service::Sequence seq(1, Json(), reasoning);
  std::vector<uint32_t> rows;
  size_t i = 1;
  auto next = [&]() -> int32_t {
    if (i + 1 >= size) return 0;
    const int32_t v = (data[i] << 8 | data[i + 1]) - 300;  // some negative
    i += 2;
    return v;
  };
  while (i < size) {
    const int32_t rollback = data[i++] % 4;
    std::vector<int32_t> tokens, drafts;
    for (int n = i < size ? data[i++] % 4 : 0; n > 0; --n) {
      tokens.push_back(next());
    }
    for (int n = i < size ? data[i++] % 3 : 0; n > 0; --n) {
      drafts.push_back(next());
    }
    if (!seq.Advance(rollback, tokens).ok()) continue;
    rows.assign(static_cast<size_t>(seq.mask_words()) * (1 + drafts.size()), 0);
    seq.FillRows(drafts, rows.data());
    bool any = false;
    for (size_t w = 0; w < static_cast<size_t>(seq.mask_words()); ++w) {
      any |= rows[w] != 0;
    }
    if (!any && !seq.IsTerminated()) __builtin_trap();
  }
  return 0;
}
