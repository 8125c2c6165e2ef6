#include "grammar/testing/oracle_pipeline.h"

#include <fstream>
#include <sstream>

#include "grammar/frontends/ebnf/ebnf_parser.h"
#include "grammar/frontends/regex/regex_parser.h"
#include "grammar/ir/grammar_passes.h"
#include "grammar/ir/utf8_lowering.h"

namespace grammard::grammar {

absl::StatusOr<EarleyOracle> OracleFor(const Grammar& grammar) {
  absl::StatusOr<Grammar> normal = Normalize(grammar);
  if (!normal.ok()) return normal.status();
  absl::StatusOr<Grammar> bytes = LowerToBytes(*normal);
  if (!bytes.ok()) return bytes.status();
  return EarleyOracle::Create(*bytes);
}

absl::StatusOr<EarleyOracle> OracleForEbnf(std::string_view text,
                                           std::string_view root_rule) {
  absl::StatusOr<Grammar> g = ParseEbnf(text, root_rule);
  if (!g.ok()) return g.status();
  return OracleFor(*g);
}

absl::StatusOr<EarleyOracle> OracleForRegex(std::string_view pattern) {
  absl::StatusOr<Grammar> g = ParseRegex(pattern);
  if (!g.ok()) return g.status();
  return OracleFor(*g);
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace grammard::grammar
