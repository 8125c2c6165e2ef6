// Drives a compiled grammar the way decoding does, for the fuzzers: fill a
// mask, accept an allowed token chosen by the input's bytes, roll back now
// and then, until the input or the grammar ends.
//
// Cost: a few mask fills per input byte. Thread-safety: a pure function.
#ifndef GRAMMARD_TESTS_FUZZ_GRAMMAR_WALK_H_
#define GRAMMARD_TESTS_FUZZ_GRAMMAR_WALK_H_

#include <cstddef>
#include <cstdint>

#include "grammar/compiled_grammar.h"

namespace grammard::fuzz {

void WalkGrammar(const grammar::CompiledGrammar& grammar,
                 const uint8_t* choices, size_t size);

}  // namespace grammard::fuzz

#endif  // GRAMMARD_TESTS_FUZZ_GRAMMAR_WALK_H_
