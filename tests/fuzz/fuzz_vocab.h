// A small vocabulary for the grammar fuzzers: every single byte, a few
// multi-byte words (JSON punctuation, keywords, UTF-8 letters), and an EOS
// special token last. Small, so each input compiles and masks in
// microseconds and the fuzzer spends its time on the parsers.
//
// Cost: built once per process. Thread-safety: immutable once built.
#ifndef GRAMMARD_TESTS_FUZZ_FUZZ_VOCAB_H_
#define GRAMMARD_TESTS_FUZZ_FUZZ_VOCAB_H_

#include <memory>

#include "grammar/vocabulary.h"

namespace grammard::fuzz {

const std::shared_ptr<const grammar::Vocabulary>& FuzzVocabulary();

}  // namespace grammard::fuzz

#endif  // GRAMMARD_TESTS_FUZZ_FUZZ_VOCAB_H_
