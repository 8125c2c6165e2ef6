// Exact decimal numbers and the automata that constrain JSON number text:
// ranges (minimum, maximum, exclusive bounds), multipleOf and excluded
// values, all exact for numbers of any size because they work on the digits,
// never on doubles.
//
//   Decimal lo = *ParseDecimal("-2.5");
//   NumberConstraints c;
//   c.integer = true;
//   c.lower = Bound{lo, /*exclusive=*/false};
//   c.multiple_of.push_back(*ParseDecimal("3"));
//   absl::StatusOr<CharDfa> dfa = NumberDfa(c, limits);  // 0, 3, 6, ...
//
// The text these automata accept is a JSON number without an exponent and
// without a negative zero: -?(0|[1-9][0-9]*)(\.[0-9]+)?, and for integers
// no fraction other than zeros (1.0 is an integer; draft 4: no fraction). So
// 1e2 for a bounded number (valid in JSON Schema) is refused: the grammar
// accepts a subset of the valid texts, never an invalid one, and the subset is
// what models and serializers write.
//
// Cost: a comparison automaton has O(digits of the bound) states; multipleOf
// p/10^s has O(p * (s + 2)) states, refused past DfaLimits::max_states.
// Thread-safety: plain values and pure functions.
#ifndef GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_NUMBERS_H_
#define GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_NUMBERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/frontends/json_schema/internal/char_dfa.h"

namespace grammard::grammar::json_schema_internal {

// sign * digits * 10^exponent, normalised: digits has no leading or trailing
// zeros and is empty for zero (which is never negative).
struct Decimal {
  bool negative = false;
  std::string digits;
  int64_t exponent = 0;

  bool IsZero() const { return digits.empty(); }
  bool IsInteger() const { return exponent >= 0 || digits.empty(); }
  // Plain notation, e.g. "-12.5", "0.001", "1000".
  std::string ToString() const;
  bool operator==(const Decimal& o) const {
    return negative == o.negative && digits == o.digits &&
           exponent == o.exponent;
  }
};

// A JSON number's text (exponents allowed). InvalidArgument otherwise, and
// for exponents so large that the plain notation would not fit in memory.
absl::StatusOr<Decimal> ParseDecimal(std::string_view text);

// -1, 0 or 1.
int Compare(const Decimal& a, const Decimal& b);

// Whether a is an integer multiple of b (b > 0).
bool IsMultipleOf(const Decimal& a, const Decimal& b);

struct Bound {
  Decimal value;
  bool exclusive = false;
};

struct NumberConstraints {
  bool integer = false;
  // Integers may be written with a zero fraction (1.0); not in draft 4,
  // whose integers have no fraction part at all.
  bool integer_zero_fraction = true;
  std::optional<Bound> lower;
  std::optional<Bound> upper;
  std::vector<Decimal> multiple_of;      // each > 0
  std::vector<Decimal> not_multiple_of;  // from `not`
  std::vector<Decimal> excluded;         // values the number must not equal

  bool Unconstrained() const {
    return !lower && !upper && multiple_of.empty() && not_multiple_of.empty() &&
           excluded.empty();
  }
  // A canonical description, usable as a cache key.
  std::string Key() const;
};

// The number texts satisfying `c` (see the file comment for the syntax).
absl::StatusOr<CharDfa> NumberDfa(const NumberConstraints& c,
                                  const DfaLimits& limits);

// Whether the value `d` satisfies `c`.
bool SatisfiesNumber(const Decimal& d, const NumberConstraints& c);

}  // namespace grammard::grammar::json_schema_internal

#endif  // GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_NUMBERS_H_
