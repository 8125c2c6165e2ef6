// Drives a compiled grammar the way decoding does, for the fuzzers: fill a
// mask, accept an allowed token chosen by the input's bytes, roll back now
// and then (byte 0xff), fork now and then (0xfe: the fork's mask must be
// the same, and the bytes its JumpForward forces must be accepted), until
// the input or the grammar ends. A live matcher must allow a token, and an
// allowed token must be accepted.
//
// Cost: a few mask fills per input byte. Thread-safety: a pure function.
#ifndef GRAMMARD_TESTS_FUZZ_GRAMMAR_WALK_H_
#define GRAMMARD_TESTS_FUZZ_GRAMMAR_WALK_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/compiled_grammar.h"
#include "grammar/compiler.h"

namespace grammard::fuzz {

void WalkGrammar(const grammar::CompiledGrammar& grammar,
                 const uint8_t* choices, size_t size);

// The EBNF and regex targets: the input up to its first NUL is the text,
// compiled by `compile` under a state cap and a deadline; what follows
// the NUL drives WalkGrammar.
using CompileText = std::function<absl::StatusOr<grammar::CompiledGrammar>(
    std::string_view text, const grammar::CompileOptions& options)>;
void CompileAndWalk(const uint8_t* data, size_t size,
                    const CompileText& compile);

}  // namespace grammard::fuzz

#endif  // GRAMMARD_TESTS_FUZZ_GRAMMAR_WALK_H_
