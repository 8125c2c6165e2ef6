// EncodeCacheValue / DecodeCacheValue: a finished compile (GrammarEntry) as
// the bytes the shared tier stores, and back.
//
// Layout: "GDC1", a flags byte (1 = deflated), the body's length (u64), the
// body. Body: a JSON header (id, status, dropped keywords, compile time)
// with its u32 length, then SerializeGrammar's bytes for a ready grammar.
// The body is deflated when that saves at least a fifth (token tables are
// bitsets that compress well).
//
// Decoding trusts nothing: a damaged value (zlib's Adler-32, the grammar's
// CRC-32), one of another format, engine or tokenizer, or one filed under
// another id is an error, and the caller treats it as a miss.
//
// Cost: linear in the value; deflate at level 1. Thread-safety: pure
// functions.
#ifndef GRAMMARD_SERVICE_CACHE_VALUE_H_
#define GRAMMARD_SERVICE_CACHE_VALUE_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/compiler.h"
#include "service/grammar_cache.h"

namespace grammard::service {

std::string EncodeCacheValue(const GrammarEntry& entry);

// `id` is the key the value was read under; `compiler` the tokenizer's.
absl::StatusOr<std::shared_ptr<GrammarEntry>> DecodeCacheValue(
    std::string_view value, const std::string& id,
    const grammar::GrammarCompiler& compiler);

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_CACHE_VALUE_H_
