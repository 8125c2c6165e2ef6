// TEST-ONLY. Shortcuts for tests that check strings against a grammar: the
// whole front-end pipeline (Normalize, LowerToBytes) up to an EarleyOracle,
// and reading test data files.
//
// Cost: that of the passes and EarleyOracle::Create. Thread-safety: pure
// functions.
#ifndef GRAMMARD_GRAMMAR_TESTING_ORACLE_PIPELINE_H_
#define GRAMMARD_GRAMMAR_TESTING_ORACLE_PIPELINE_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/ir/grammar_ir.h"
#include "grammar/testing/earley_oracle.h"

namespace grammard::grammar {

// Normalize, LowerToBytes, then EarleyOracle::Create.
absl::StatusOr<EarleyOracle> OracleFor(const Grammar& grammar);
// ParseEbnf first.
absl::StatusOr<EarleyOracle> OracleForEbnf(std::string_view text,
                                           std::string_view root_rule = "root");
// ParseRegex first.
absl::StatusOr<EarleyOracle> OracleForRegex(std::string_view pattern);

// The bytes of a file, or nullopt when it cannot be read.
std::optional<std::string> ReadFile(const std::string& path);

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_TESTING_ORACLE_PIPELINE_H_
