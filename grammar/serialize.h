// SerializeGrammar: a CompiledGrammar as bytes, so that a cache can keep it
// outside the process (service/ shares them through Redis) and load it back
// with GrammarCompiler::Deserialize instead of compiling again.
//
// The bytes carry a format version, the engine version (kEngineVersion) and
// the vocabulary's fingerprint, and a CRC-32 of the rest. Loading checks all
// of them and every index in the data, so a blob from another version,
// another tokenizer, or damaged on the way is refused with a status — never
// trusted, never a crash. The vocabulary itself is not included: the loading
// compiler supplies it.
//
// Cost: linear in the grammar's memory (MemoryBytes); loading is a copy and
// a check, far cheaper than compiling (grammar/serialize_bench).
// Thread-safety: pure functions.
#ifndef GRAMMARD_GRAMMAR_SERIALIZE_H_
#define GRAMMARD_GRAMMAR_SERIALIZE_H_

#include <cstdint>
#include <string>

#include "grammar/compiled_grammar.h"

namespace grammard::grammar {

// Bumped whenever the layout of the bytes changes.
inline constexpr uint32_t kSerializeFormatVersion = 7;

std::string SerializeGrammar(const CompiledGrammar& grammar);

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_SERIALIZE_H_
