#include "grammar/testing/reference_matcher.h"

#include <string>

#include "grammar/testing/earley_oracle.h"

namespace grammard::grammar {
namespace {

constexpr size_t kStride = ReferenceMatcher::kMaxInput + 1;

uint64_t Bit(size_t pos) { return uint64_t{1} << pos; }

// A decoder written apart from the engine's, so that a bug there cannot hide
// itself here: the code point of `bytes` if it is exactly one well-formed
// UTF-8 character, else -1.
int64_t DecodeOne(const std::string& bytes) {
  const auto b0 = static_cast<uint8_t>(bytes[0]);
  size_t len;
  int64_t value;
  if (b0 < 0x80) {
    len = 1;
    value = b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    value = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    value = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    value = b0 & 0x07;
  } else {
    return -1;
  }
  if (bytes.size() != len) return -1;
  for (size_t i = 1; i < len; ++i) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if ((b & 0xC0) != 0x80) return -1;
    value = value * 64 + (b & 0x3F);
  }
  static const int64_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (value < kMinForLength[len] || value > 0x10FFFF) return -1;
  if (value >= 0xD800 && value <= 0xDFFF) return -1;
  return value;
}

// The length a UTF-8 lead byte announces, 0 for a byte that cannot lead.
size_t LeadLength(uint8_t b) {
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) return 2;
  if ((b & 0xF0) == 0xE0) return 3;
  if ((b & 0xF8) == 0xF0) return 4;
  return 0;
}

}  // namespace

ReferenceMatcher::ReferenceMatcher(const Grammar& grammar) : g_(grammar) {
  // Which expressions generate at least one string: a plain fixpoint.
  productive_.assign(g_.exprs.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < g_.exprs.size(); ++i) {
      const Expr& e = g_.exprs[i];
      bool p = false;
      switch (e.kind) {
        case ExprKind::kBytes:
          p = true;
          break;
        case ExprKind::kCharClass:
        case ExprKind::kByteClass:
          p = !e.ranges.empty();
          break;
        case ExprKind::kSequence:
          p = true;
          for (int32_t c : e.children) p = p && productive_[c];
          break;
        case ExprKind::kChoice:
          for (int32_t c : e.children) p = p || productive_[c];
          break;
        case ExprKind::kRepeat:
          p = e.min == 0 || productive_[e.children[0]];
          break;
        case ExprKind::kRuleRef:
          p = productive_[g_.rules[e.rule].body];
          break;
      }
      if (p && !productive_[i]) {
        productive_[i] = true;
        changed = true;
      }
    }
  }
}

uint8_t ReferenceMatcher::Check(std::string_view input) {
  if (input.size() > kMaxInput) return EarleyOracle::kReject;
  input_ = input;
  const size_t cells = g_.exprs.size() * kStride;
  ends_state_.assign(cells, 0);
  ends_.assign(cells, 0);
  partial_state_.assign(cells, 0);
  partial_.assign(cells, false);
  const int32_t body = g_.rules[g_.root].body;
  uint8_t verdict = EarleyOracle::kReject;
  if (Ends(body, 0) & Bit(input.size())) verdict |= EarleyOracle::kComplete;
  if (Partial(body, 0)) verdict |= EarleyOracle::kPrefix;
  return verdict;
}

bool ReferenceMatcher::ClassContains(const Expr& expr, uint32_t value) const {
  for (const CharRange& r : expr.ranges) {
    if (value >= r.lo && value <= r.hi) return true;
  }
  return false;
}

uint64_t ReferenceMatcher::Step(int32_t expr, uint64_t from) {
  uint64_t to = 0;
  for (size_t q = 0; q <= input_.size(); ++q) {
    if (from & Bit(q)) to |= Ends(expr, q);
  }
  return to;
}

uint64_t ReferenceMatcher::Ends(int32_t expr, size_t pos) {
  const size_t cell = expr * kStride + pos;
  if (ends_state_[cell] == 2) return ends_[cell];
  if (ends_state_[cell] == 1) {
    saw_left_recursion_ = true;
    return 0;
  }
  ends_state_[cell] = 1;
  const Expr& e = g_.exprs[expr];
  const std::string_view rest = input_.substr(pos);
  uint64_t out = 0;
  switch (e.kind) {
    case ExprKind::kBytes:
      if (rest.substr(0, e.bytes.size()) == e.bytes) {
        out = Bit(pos + e.bytes.size());
      }
      break;
    case ExprKind::kByteClass:
      if (!rest.empty() && ClassContains(e, static_cast<uint8_t>(rest[0]))) {
        out = Bit(pos + 1);
      }
      break;
    case ExprKind::kCharClass: {
      if (rest.empty()) break;
      const size_t len = LeadLength(static_cast<uint8_t>(rest[0]));
      if (len == 0 || len > rest.size()) break;
      const int64_t cp = DecodeOne(std::string(rest.substr(0, len)));
      if (cp >= 0 && ClassContains(e, static_cast<uint32_t>(cp))) {
        out = Bit(pos + len);
      }
      break;
    }
    case ExprKind::kSequence:
      out = Bit(pos);
      for (int32_t c : e.children) out = Step(c, out);
      break;
    case ExprKind::kChoice:
      for (int32_t c : e.children) out |= Ends(c, pos);
      break;
    case ExprKind::kRepeat: {
      // After the minimum, stop once an iteration reaches nothing new: every
      // later iteration would then reach a subset of what is known.
      uint64_t current = Bit(pos);
      uint64_t known = e.min == 0 ? current : 0;
      for (int64_t i = 1; e.max == kUnbounded || i <= e.max; ++i) {
        current = Step(e.children[0], current);
        if (current == 0) break;
        if (i < e.min) continue;
        if (i > e.min && (current & ~known) == 0) break;
        known |= current;
      }
      out = known;
      break;
    }
    case ExprKind::kRuleRef:
      out = Ends(g_.rules[e.rule].body, pos);
      break;
  }
  ends_state_[cell] = 2;
  ends_[cell] = out;
  return out;
}

bool ReferenceMatcher::ClassPartial(const Expr& expr, size_t pos) const {
  const std::string_view rest = input_.substr(pos);
  if (rest.empty()) return !expr.ranges.empty();
  const size_t len = LeadLength(static_cast<uint8_t>(rest[0]));
  if (len <= rest.size()) return false;
  // Try every completion of the partial character.
  const size_t missing = len - rest.size();
  const size_t total = size_t{1} << (6 * missing);
  for (size_t tail = 0; tail < total; ++tail) {
    std::string candidate(rest);
    for (size_t k = 0; k < missing; ++k) {
      const size_t six_bits = (tail >> (6 * (missing - 1 - k))) & 0x3F;
      candidate.push_back(static_cast<char>(0x80 | six_bits));
    }
    const int64_t cp = DecodeOne(candidate);
    if (cp >= 0 && ClassContains(expr, static_cast<uint32_t>(cp))) return true;
  }
  return false;
}

bool ReferenceMatcher::Partial(int32_t expr, size_t pos) {
  const size_t cell = expr * kStride + pos;
  if (partial_state_[cell] == 2) return partial_[cell];
  if (partial_state_[cell] == 1) {
    saw_left_recursion_ = true;
    return false;
  }
  partial_state_[cell] = 1;
  const Expr& e = g_.exprs[expr];
  const std::string_view rest = input_.substr(pos);
  bool out = false;
  switch (e.kind) {
    case ExprKind::kBytes:
      out = e.bytes.size() > rest.size() &&
            std::string_view(e.bytes).substr(0, rest.size()) == rest;
      break;
    case ExprKind::kByteClass:
      out = rest.empty() && !e.ranges.empty();
      break;
    case ExprKind::kCharClass:
      out = ClassPartial(e, pos);
      break;
    case ExprKind::kSequence: {
      // Some child is cut off by the end of the input, and everything after
      // it can still be generated.
      uint64_t current = Bit(pos);
      for (size_t i = 0; i < e.children.size() && !out && current; ++i) {
        bool rest_productive = true;
        for (size_t k = i + 1; k < e.children.size(); ++k) {
          rest_productive = rest_productive && productive_[e.children[k]];
        }
        for (size_t q = 0; q <= input_.size() && rest_productive && !out; ++q) {
          if (current & Bit(q)) out = Partial(e.children[i], q);
        }
        current = Step(e.children[i], current);
      }
      break;
    }
    case ExprKind::kChoice:
      for (int32_t c : e.children) out = out || Partial(c, pos);
      break;
    case ExprKind::kRepeat: {
      // Some iteration (at most max) is cut off; later ones can be anything
      // the body generates, and it generates something since it was cut off.
      uint64_t current = Bit(pos);
      uint64_t tried = 0;
      for (int64_t i = 1; (e.max == kUnbounded || i <= e.max) && !out; ++i) {
        for (size_t q = 0; q <= input_.size() && !out; ++q) {
          if ((current & ~tried) & Bit(q)) out = Partial(e.children[0], q);
        }
        tried |= current;
        current = Step(e.children[0], current);
        if ((current & ~tried) == 0) break;
      }
      break;
    }
    case ExprKind::kRuleRef:
      out = Partial(g_.rules[e.rule].body, pos);
      break;
  }
  partial_state_[cell] = 2;
  partial_[cell] = out;
  return out;
}

}  // namespace grammard::grammar
