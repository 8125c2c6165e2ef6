#include "grammar/frontends/ebnf/json_grammar.h"

namespace grammard::grammar {
namespace internal {
// Generated from json.ebnf by the json_ebnf_data genrule.
extern const char kJsonEbnf[];
}  // namespace internal

std::string_view BuiltinJsonEbnf() { return internal::kJsonEbnf; }

}  // namespace grammard::grammar
