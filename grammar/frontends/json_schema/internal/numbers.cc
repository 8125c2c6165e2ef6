#include "grammar/frontends/json_schema/internal/numbers.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grammar/base/status_macros.h"

namespace grammard::grammar::json_schema_internal {
namespace {

// Plain notation must stay printable: 1e308 has 309 digits, which is fine;
// 1e100000 is not.
constexpr int64_t kMaxExponent = 4000;

// Builds a DFA from edges added in any order.
class DfaBuilder {
 public:
  int32_t Add(bool accepting) {
    dfa_.edges.emplace_back();
    dfa_.accepting.push_back(accepting);
    return dfa_.num_states() - 1;
  }
  void Edge(int32_t from, uint32_t lo, uint32_t hi, int32_t to) {
    dfa_.edges[from].push_back({lo, hi, to});
  }
  CharDfa Finish() {
    for (auto& edges : dfa_.edges) {
      std::sort(edges.begin(), edges.end(),
                [](const CharDfa::Edge& a, const CharDfa::Edge& b) {
                  return a.lo < b.lo;
                });
    }
    return Minimize(dfa_);
  }

 private:
  CharDfa dfa_;
};

// Outcomes of comparing a magnitude with the bound's, as mask bits.
enum Outcome : int { kLt = 0, kEq = 1, kGt = 2 };
constexpr int kAll = 7;

int Flip(int mask) {
  int out = mask & (1 << kEq);
  if (mask & (1 << kLt)) out |= 1 << kGt;
  if (mask & (1 << kGt)) out |= 1 << kLt;
  return out;
}

// The integer and fraction digits of |d|: int_part has no leading zeros
// ("0" for values below one), frac has no trailing zeros.
void SplitDigits(const Decimal& d, std::string* int_part, std::string* frac) {
  int_part->clear();
  frac->clear();
  const int64_t n = static_cast<int64_t>(d.digits.size());
  const int64_t point = n + d.exponent;  // digits before the point
  if (point <= 0) {
    *int_part = "0";
    frac->assign(static_cast<size_t>(-point), '0');
    frac->append(d.digits);
  } else if (point >= n) {
    *int_part = d.digits;
    int_part->append(static_cast<size_t>(point - n), '0');
  } else {
    *int_part = d.digits.substr(0, static_cast<size_t>(point));
    *frac = d.digits.substr(static_cast<size_t>(point));
  }
  if (int_part->empty()) *int_part = "0";
}

// Magnitudes (digits, optionally a point and more digits) whose comparison
// with `bound` is in `mask`, added to `b` starting from the existing state
// `entry` (which must not accept: a magnitude has at least one digit).
void AddMagnitudeCompare(DfaBuilder* b, int32_t entry, const Decimal& bound,
                         int mask) {
  std::string bi, bf;
  SplitDigits(bound, &bi, &bf);
  const int L = static_cast<int>(bi.size());
  const int F = static_cast<int>(bf.size());
  auto accepts = [mask](int outcome) { return ((mask >> outcome) & 1) != 0; };
  auto int_outcome = [L](int k, int st) {
    return k < L ? kLt : k == L ? st : kGt;
  };
  // Fraction states once the integer parts differ.
  const int32_t decided_lt = b->Add(accepts(kLt));
  const int32_t decided_gt = b->Add(accepts(kGt));
  b->Edge(decided_lt, '0', '9', decided_lt);
  b->Edge(decided_gt, '0', '9', decided_gt);
  // Fraction states while the integer parts are equal: (digits read, capped
  // at F; status of those digits against the bound's).
  std::map<std::pair<int, int>, int32_t> frac_ids;
  std::vector<std::pair<int, int>> frac_queue;
  auto frac_id = [&](int j, int st) {
    auto it = frac_ids.find({j, st});
    if (it != frac_ids.end()) return it->second;
    int final_outcome = st == kEq ? (j < F ? kLt : kEq) : st;
    int32_t id = b->Add(accepts(final_outcome));
    frac_ids[{j, st}] = id;
    frac_queue.emplace_back(j, st);
    return id;
  };
  auto after_point = [&](int outcome) {
    return outcome == kLt   ? decided_lt
           : outcome == kGt ? decided_gt
                            : frac_id(0, kEq);
  };
  // Integer states: (digits read, capped at L + 1; status of those digits
  // against the bound's first ones).
  std::map<std::pair<int, int>, int32_t> int_ids;
  std::vector<std::pair<int, int>> int_queue;
  int_ids[{0, kEq}] = entry;
  int_queue.emplace_back(0, kEq);
  auto int_id = [&](int k, int st) {
    auto it = int_ids.find({k, st});
    if (it != int_ids.end()) return it->second;
    // Ending here, equal integer parts leave x below a bound with a
    // fraction.
    int end = int_outcome(k, st);
    if (end == kEq && F > 0) end = kLt;
    int32_t id = b->Add(k > 0 && accepts(end));
    int_ids[{k, st}] = id;
    int_queue.emplace_back(k, st);
    return id;
  };
  while (!int_queue.empty()) {
    auto [k, st] = int_queue.back();
    int_queue.pop_back();
    const int32_t self = int_ids[{k, st}];
    for (int d = 0; d <= 9; ++d) {
      int nk = std::min(k + 1, L + 1);
      int nst = st;
      if (k < L && st == kEq) {
        int bd = bi[k] - '0';
        nst = d < bd ? kLt : d == bd ? kEq : kGt;
      }
      b->Edge(self, '0' + d, '0' + d, int_id(nk, nst));
    }
    if (k > 0) b->Edge(self, '.', '.', after_point(int_outcome(k, st)));
  }
  while (!frac_queue.empty()) {
    auto [j, st] = frac_queue.back();
    frac_queue.pop_back();
    const int32_t self = frac_ids[{j, st}];
    for (int d = 0; d <= 9; ++d) {
      int nj = std::min(j + 1, F);
      int nst = st;
      if (st == kEq) {
        int bd = j < F ? bf[j] - '0' : 0;
        nst = d < bd ? kLt : d == bd ? kEq : kGt;
      }
      b->Edge(self, '0' + d, '0' + d, frac_id(nj, nst));
    }
  }
}

// Texts -?digits(.digits)? whose value x has compare(x, bound) in `mask`.
// Which texts are well formed is left to the syntax automaton; only
// negative zero is assumed away (a '-' is followed by a nonzero magnitude).
CharDfa CompareDfa(const Decimal& bound, int mask) {
  Decimal mag = bound;
  mag.negative = false;
  int nonneg_mask, neg_mask;
  if (!bound.negative) {
    nonneg_mask = mask;
    // A negative x is below any bound >= 0.
    neg_mask = (mask & (1 << kLt)) ? kAll : 0;
  } else {
    nonneg_mask = (mask & (1 << kGt)) ? kAll : 0;
    neg_mask = Flip(mask);
  }
  DfaBuilder b;
  const int32_t start = b.Add(false);
  if (nonneg_mask != 0) AddMagnitudeCompare(&b, start, mag, nonneg_mask);
  if (neg_mask != 0) {
    const int32_t minus = b.Add(false);
    b.Edge(start, '-', '-', minus);
    AddMagnitudeCompare(&b, minus, mag, neg_mask);
  }
  return b.Finish();
}

// JSON number texts without exponent or negative zero; integers with no
// fraction other than zeros.
CharDfa SyntaxDfa(bool integer, bool zero_fraction) {
  DfaBuilder b;
  const int32_t start = b.Add(false);
  const int32_t minus = b.Add(false);
  const int32_t zero = b.Add(true);
  const int32_t digits = b.Add(true);
  const int32_t point = b.Add(false);
  const int32_t frac = b.Add(true);
  b.Edge(start, '-', '-', minus);
  b.Edge(start, '0', '0', zero);
  b.Edge(start, '1', '9', digits);
  b.Edge(minus, '1', '9', digits);
  b.Edge(digits, '0', '9', digits);
  if (integer && zero_fraction) {
    // 1.0 is an integer too: only zeros may follow the point.
    const int32_t zero_point = b.Add(false);
    const int32_t zero_frac = b.Add(true);
    b.Edge(digits, '.', '.', zero_point);
    b.Edge(zero, '.', '.', zero_point);
    b.Edge(zero_point, '0', '0', zero_frac);
    b.Edge(zero_frac, '0', '0', zero_frac);
  } else if (!integer) {
    b.Edge(digits, '.', '.', point);
    b.Edge(zero, '.', '.', point);
    b.Edge(point, '0', '9', frac);
    b.Edge(frac, '0', '9', frac);
    // -0.000 is negative zero; -0.001 is not.
    const int32_t neg_zero = b.Add(false);
    const int32_t neg_point = b.Add(false);
    b.Edge(minus, '0', '0', neg_zero);
    b.Edge(neg_zero, '.', '.', neg_point);
    b.Edge(neg_point, '0', '0', neg_point);
    b.Edge(neg_point, '1', '9', frac);
  }
  return b.Finish();
}

// Texts -?digits(.digits)? whose value is a multiple of `m` (> 0).
absl::StatusOr<CharDfa> MultipleDfa(const Decimal& m, const DfaLimits& limits) {
  // m = p / 10^s with p a positive integer.
  int64_t s = m.exponent < 0 ? -m.exponent : 0;
  int64_t p = 0;
  const int64_t cap = limits.max_states;
  for (char c : m.digits) {
    p = p * 10 + (c - '0');
    if (p > cap) break;
  }
  for (int64_t e = m.exponent; e > 0 && p <= cap; --e) p *= 10;
  if (p > cap || (p * (s + 2)) > cap) {
    return absl::ResourceExhaustedError(
        absl::StrCat("multipleOf ", m.ToString(), " needs more than ",
                     limits.max_states, " automaton states"));
  }
  // (10^k) mod p for the acceptance tests.
  std::vector<int64_t> pow10(static_cast<size_t>(s) + 1, 1 % p);
  for (size_t k = 1; k < pow10.size(); ++k) pow10[k] = (pow10[k - 1] * 10) % p;
  DfaBuilder b;
  const int32_t start = b.Add(false);
  const int32_t minus = b.Add(false);
  b.Edge(start, '-', '-', minus);
  // Int(r): ids [base_int, base_int + p). Frac(r, j): base_frac + j*p + r.
  const int32_t base_int = b.Add(true);  // Int(0): zero is a multiple
  for (int64_t r = 1; r < p; ++r) b.Add((r * pow10[s]) % p == 0);
  const int32_t base_frac = base_int + static_cast<int32_t>(p);
  for (int64_t j = 0; j <= s; ++j) {
    for (int64_t r = 0; r < p; ++r) b.Add((r * pow10[s - j]) % p == 0);
  }
  auto int_state = [&](int64_t r) {
    return base_int + static_cast<int32_t>(r);
  };
  auto frac_state = [&](int64_t r, int64_t j) {
    return base_frac + static_cast<int32_t>(j * p + r);
  };
  for (int d = 0; d <= 9; ++d) {
    b.Edge(start, '0' + d, '0' + d, int_state(d % p));
    b.Edge(minus, '0' + d, '0' + d, int_state(d % p));
  }
  for (int64_t r = 0; r < p; ++r) {
    for (int d = 0; d <= 9; ++d) {
      int64_t nr = (r * 10 + d) % p;
      b.Edge(int_state(r), '0' + d, '0' + d, int_state(nr));
      for (int64_t j = 0; j < s; ++j) {
        b.Edge(frac_state(r, j), '0' + d, '0' + d, frac_state(nr, j + 1));
      }
    }
    b.Edge(int_state(r), '.', '.', frac_state(r, 0));
    b.Edge(frac_state(r, s), '0', '0', frac_state(r, s));
  }
  return b.Finish();
}

// Big-number remainder of digits * 10^shift modulo a small divisor.
uint64_t Remainder(const std::string& digits, int64_t shift, uint64_t mod) {
  uint64_t r = 0;
  for (char c : digits) r = (r * 10 + static_cast<uint64_t>(c - '0')) % mod;
  for (int64_t i = 0; i < shift; ++i) r = (r * 10) % mod;
  return r;
}

}  // namespace

std::string Decimal::ToString() const {
  if (digits.empty()) return "0";
  std::string int_part, frac;
  SplitDigits(*this, &int_part, &frac);
  std::string out = negative ? "-" : "";
  out += int_part;
  if (!frac.empty()) absl::StrAppend(&out, ".", frac);
  return out;
}

absl::StatusOr<Decimal> ParseDecimal(std::string_view text) {
  auto bad = [&]() {
    return absl::InvalidArgumentError(
        absl::StrCat("not a JSON number: \"", std::string(text), "\""));
  };
  size_t i = 0;
  Decimal d;
  if (i < text.size() && text[i] == '-') {
    d.negative = true;
    ++i;
  }
  std::string mantissa;
  int64_t exponent = 0;
  size_t int_begin = i;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    mantissa.push_back(text[i++]);
  }
  if (i == int_begin) return bad();
  if (i < text.size() && text[i] == '.') {
    ++i;
    size_t frac_begin = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      mantissa.push_back(text[i++]);
      --exponent;
    }
    if (i == frac_begin) return bad();
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool neg = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
      neg = text[i] == '-';
      ++i;
    }
    size_t exp_begin = i;
    int64_t e = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      e = std::min<int64_t>(e * 10 + (text[i++] - '0'), 1000000000);
    }
    if (i == exp_begin) return bad();
    exponent += neg ? -e : e;
  }
  if (i != text.size()) return bad();
  size_t first = mantissa.find_first_not_of('0');
  if (first == std::string::npos) return Decimal{};
  size_t last = mantissa.find_last_not_of('0');
  exponent += static_cast<int64_t>(mantissa.size() - 1 - last);
  d.digits = mantissa.substr(first, last - first + 1);
  d.exponent = exponent;
  const int64_t magnitude = exponent + static_cast<int64_t>(d.digits.size());
  if (magnitude > kMaxExponent || exponent < -kMaxExponent) {
    return absl::InvalidArgumentError(
        absl::StrCat("number out of the supported range: ", std::string(text)));
  }
  return d;
}

int Compare(const Decimal& a, const Decimal& b) {
  if (a.IsZero() && b.IsZero()) return 0;
  if (a.IsZero()) return b.negative ? 1 : -1;
  if (b.IsZero()) return a.negative ? -1 : 1;
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int sign = a.negative ? -1 : 1;
  const int64_t ma = a.exponent + static_cast<int64_t>(a.digits.size());
  const int64_t mb = b.exponent + static_cast<int64_t>(b.digits.size());
  if (ma != mb) return ma < mb ? -sign : sign;
  int c = a.digits.compare(b.digits);
  return c < 0 ? -sign : c > 0 ? sign : 0;
}

bool IsMultipleOf(const Decimal& a, const Decimal& b) {
  if (a.IsZero()) return true;
  if (b.IsZero()) return false;
  // a / b = (da / db) * 10^(ea - eb); db has no trailing zeros and neither
  // has da, so a negative shift can never divide evenly.
  const int64_t shift = a.exponent - b.exponent;
  if (shift < 0) return false;
  if (b.digits.size() > 18) return false;
  const uint64_t mod = std::stoull(b.digits);
  return Remainder(a.digits, shift, mod) == 0;
}

std::string NumberConstraints::Key() const {
  std::string key = integer ? (integer_zero_fraction ? "int" : "int0") : "num";
  if (lower) {
    absl::StrAppend(&key,
                    lower->exclusive ? ">" : ">=", lower->value.ToString());
  }
  if (upper) {
    absl::StrAppend(&key,
                    upper->exclusive ? "<" : "<=", upper->value.ToString());
  }
  for (const Decimal& m : multiple_of) absl::StrAppend(&key, "%", m.ToString());
  for (const Decimal& m : not_multiple_of) {
    absl::StrAppend(&key, "!%", m.ToString());
  }
  for (const Decimal& v : excluded) absl::StrAppend(&key, "!=", v.ToString());
  return key;
}

absl::StatusOr<CharDfa> NumberDfa(const NumberConstraints& c,
                                  const DfaLimits& limits) {
  if (c.lower && c.upper) {
    int cmp = Compare(c.lower->value, c.upper->value);
    if (cmp > 0 || (cmp == 0 && (c.lower->exclusive || c.upper->exclusive))) {
      return EmptyDfa();
    }
  }
  CharDfa dfa = SyntaxDfa(c.integer, c.integer_zero_fraction);
  auto intersect = [&](const CharDfa& other) -> absl::Status {
    absl::StatusOr<CharDfa> next = Intersect(dfa, other, limits);
    if (!next.ok()) return next.status();
    dfa = *std::move(next);
    return absl::OkStatus();
  };
  auto subtract = [&](const CharDfa& other) -> absl::Status {
    absl::StatusOr<CharDfa> next = Subtract(dfa, other, limits);
    if (!next.ok()) return next.status();
    dfa = *std::move(next);
    return absl::OkStatus();
  };
  if (c.lower) {
    int mask = (1 << kGt) | (c.lower->exclusive ? 0 : 1 << kEq);
    GRAMMARD_RETURN_IF_ERROR(intersect(CompareDfa(c.lower->value, mask)));
  }
  if (c.upper) {
    int mask = (1 << kLt) | (c.upper->exclusive ? 0 : 1 << kEq);
    GRAMMARD_RETURN_IF_ERROR(intersect(CompareDfa(c.upper->value, mask)));
  }
  for (const Decimal& m : c.multiple_of) {
    absl::StatusOr<CharDfa> mult = MultipleDfa(m, limits);
    if (!mult.ok()) return mult.status();
    GRAMMARD_RETURN_IF_ERROR(intersect(*mult));
  }
  for (const Decimal& m : c.not_multiple_of) {
    absl::StatusOr<CharDfa> mult = MultipleDfa(m, limits);
    if (!mult.ok()) return mult.status();
    GRAMMARD_RETURN_IF_ERROR(subtract(*mult));
  }
  for (const Decimal& v : c.excluded) {
    GRAMMARD_RETURN_IF_ERROR(subtract(CompareDfa(v, 1 << kEq)));
  }
  return dfa;
}

bool SatisfiesNumber(const Decimal& d, const NumberConstraints& c) {
  if (c.integer && !d.IsInteger()) return false;
  if (c.lower) {
    int cmp = Compare(d, c.lower->value);
    if (cmp < 0 || (cmp == 0 && c.lower->exclusive)) return false;
  }
  if (c.upper) {
    int cmp = Compare(d, c.upper->value);
    if (cmp > 0 || (cmp == 0 && c.upper->exclusive)) return false;
  }
  for (const Decimal& m : c.multiple_of) {
    if (!IsMultipleOf(d, m)) return false;
  }
  for (const Decimal& m : c.not_multiple_of) {
    if (IsMultipleOf(d, m)) return false;
  }
  for (const Decimal& v : c.excluded) {
    if (Compare(d, v) == 0) return false;
  }
  return true;
}

}  // namespace grammard::grammar::json_schema_internal
