#include "grammar/bench_support.h"

#include <algorithm>
#include <cstdio>

#include "tests/support/paths.h"

namespace grammard::grammar::bench {

double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100 * v.size()))];
}

std::shared_ptr<const Vocabulary> LoadVocabulary(const std::string& name,
                                                 int* exit_code) {
  auto dir = testing::TokenizerDir(name);
  if (!dir) {
    std::fprintf(stderr, "%s\n",
                 testing::MissingDataMessage("tokenizer " + name).c_str());
    *exit_code = 0;
    return nullptr;
  }
  auto vocab = Vocabulary::FromDirectory(*dir, {name, {}, 0});
  if (!vocab.ok()) {
    std::fprintf(stderr, "%s\n", vocab.status().ToString().c_str());
    *exit_code = 1;
    return nullptr;
  }
  return *std::move(vocab);
}

std::optional<CompiledGrammar> CompileSchema(const GrammarCompiler& compiler,
                                             const std::string& schema,
                                             const JsonSchemaOptions& options) {
  auto converted = JsonSchemaToGrammar(schema, options);
  if (!converted.ok()) {
    std::fprintf(stderr, "%s\n", converted.status().ToString().c_str());
    return std::nullopt;
  }
  auto grammar = compiler.Compile(std::move(converted->grammar));
  if (!grammar.ok()) {
    std::fprintf(stderr, "%s\n", grammar.status().ToString().c_str());
    return std::nullopt;
  }
  return *std::move(grammar);
}

}  // namespace grammard::grammar::bench
