// Greedy tokenization under a mask: the longest vocabulary token that is a
// prefix of a text and is allowed by a mask row. Benchmarks and conformance
// runners feed reference texts this way where no real encoder is at hand
// (the method the engine benchmark and MaskBench's published runs name).
//
// Cost: O(L log V) for L = min(text length, 256) and V tokens.
// Thread-safety: a pure function of immutable data.
#ifndef GRAMMARD_GRAMMAR_GREEDY_TOKENS_H_
#define GRAMMARD_GRAMMAR_GREEDY_TOKENS_H_

#include <cstdint>
#include <string_view>

#include "grammar/compiled_grammar.h"

namespace grammard::grammar {

// The id of the longest text token of `grammar`'s vocabulary that is a
// prefix of `rest` and whose bit is set in `mask` (mask_words() words), or
// -1 when there is none.
int32_t LongestAllowedToken(const CompiledGrammar& grammar,
                            const uint32_t* mask, std::string_view rest);

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_GREEDY_TOKENS_H_
