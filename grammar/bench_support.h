// What the engine's benchmarks of one feature share (counted_chars_bench,
// counted_members_bench, distinct_items_bench): the vocabulary they run on
// how they compile their schema, time and summarize.
//
// Cost: loading a vocabulary reads its tokenizer.json (about a second for
// 128K tokens); the rest is trivial. Thread-safety: pure functions.
#ifndef GRAMMARD_GRAMMAR_BENCH_SUPPORT_H_
#define GRAMMARD_GRAMMAR_BENCH_SUPPORT_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "grammar/vocabulary.h"

namespace grammard::grammar::bench {

using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d);

// The p-th percentile (0 to 100) of `v` by nearest rank; 0 when empty.
double Percentile(std::vector<double> v, double p);

// The vocabulary of the installed tokenizer `name`; or null, with the
// reason printed and in *exit_code what the benchmark ends with: 0 when the
// tokenizer is not installed (a skip, as tests do), 1 when it fails to load.
std::shared_ptr<const Vocabulary> LoadVocabulary(const std::string& name,
                                                 int* exit_code);

// `schema` converted with `options` and compiled; nullopt, with the error
// printed, when either fails.
std::optional<CompiledGrammar> CompileSchema(
    const GrammarCompiler& compiler, const std::string& schema,
    const JsonSchemaOptions& options = {});

}  // namespace grammard::grammar::bench

#endif  // GRAMMARD_GRAMMAR_BENCH_SUPPORT_H_
