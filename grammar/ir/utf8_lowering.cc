#include "grammar/ir/utf8_lowering.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grammar/base/status_macros.h"
#include "grammar/base/utf8.h"

namespace grammard::grammar {
namespace {

using base::kMaxCodepoint;
using base::kSurrogateHi;
using base::kSurrogateLo;

void Split(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>* out) {
  if (lo > hi) return;
  if (lo <= kSurrogateHi && hi >= kSurrogateLo) {
    if (lo < kSurrogateLo) Split(lo, kSurrogateLo - 1, out);
    if (hi > kSurrogateHi) Split(kSurrogateHi + 1, hi, out);
    return;
  }
  // Different encoding lengths never share a sequence.
  for (uint32_t last : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= last && hi > last) {
      Split(lo, last, out);
      Split(last + 1, hi, out);
      return;
    }
  }
  if (hi <= 0x7F) {
    out->push_back({{{lo, hi}}});
    return;
  }
  // Where lo and hi differ above a continuation byte, that byte must span
  // 0x80..0xBF on both ends for the encodings to be a cross product.
  for (int i = 1; i < 4; ++i) {
    const uint32_t low_bits = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~low_bits) == (hi & ~low_bits)) continue;
    if ((lo & low_bits) != 0) {
      Split(lo, lo | low_bits, out);
      Split((lo | low_bits) + 1, hi, out);
      return;
    }
    if ((hi & low_bits) != low_bits) {
      Split(lo, (hi & ~low_bits) - 1, out);
      Split(hi & ~low_bits, hi, out);
      return;
    }
  }
  std::string a;
  std::string b;
  base::AppendUtf8(lo, &a);
  base::AppendUtf8(hi, &b);
  Utf8Sequence seq;
  for (size_t i = 0; i < a.size(); ++i) {
    seq.bytes.push_back(
        {static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i])});
  }
  out->push_back(std::move(seq));
}

class Lowerer {
 public:
  explicit Lowerer(Grammar* out) : out_(out) {}

  int32_t LowerClass(const std::vector<CharRange>& ranges) {
    std::string key;
    for (const CharRange& r : ranges) {
      key.append(reinterpret_cast<const char*>(&r.lo), sizeof(r.lo));
      key.append(reinterpret_cast<const char*>(&r.hi), sizeof(r.hi));
    }
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    std::vector<Utf8Sequence> seqs;
    for (const CharRange& r : ranges) Split(r.lo, r.hi, &seqs);
    std::vector<const Utf8Sequence*> all;
    all.reserve(seqs.size());
    for (const Utf8Sequence& s : seqs) all.push_back(&s);
    const int32_t lowered = Build(all, 0);
    cache_.emplace(std::move(key), lowered);
    return lowered;
  }

 private:
  // Builds the trie of `seqs` (all at least `depth` + 1 bytes long, in code
  // point order, so sequences sharing a leading range are adjacent).
  int32_t Build(const std::vector<const Utf8Sequence*>& seqs, size_t depth) {
    std::vector<int32_t> alternatives;
    std::vector<CharRange> last_byte;  // Sequences ending at this depth.
    size_t i = 0;
    while (i < seqs.size()) {
      const CharRange head = seqs[i]->bytes[depth];
      if (seqs[i]->bytes.size() == depth + 1) {
        last_byte.push_back(head);
        ++i;
        continue;
      }
      std::vector<const Utf8Sequence*> group;
      while (i < seqs.size() && seqs[i]->bytes.size() > depth + 1 &&
             seqs[i]->bytes[depth] == head) {
        group.push_back(seqs[i++]);
      }
      const int32_t first = out_->AddByteClass({head});
      const int32_t rest = Build(group, depth + 1);
      alternatives.push_back(out_->AddSequence(Flatten(first, rest)));
    }
    if (!last_byte.empty()) {
      alternatives.insert(alternatives.begin(),
                          out_->AddByteClass(std::move(last_byte)));
    }
    if (alternatives.empty()) return out_->AddByteClass({});
    if (alternatives.size() == 1) return alternatives[0];
    return out_->AddChoice(std::move(alternatives));
  }

  // [first] followed by `rest`, splicing rest in when it is itself a
  // sequence so chains of single ranges stay flat.
  std::vector<int32_t> Flatten(int32_t first, int32_t rest) const {
    std::vector<int32_t> children = {first};
    const Expr& r = out_->exprs[rest];
    if (r.kind == ExprKind::kSequence) {
      children.insert(children.end(), r.children.begin(), r.children.end());
    } else {
      children.push_back(rest);
    }
    return children;
  }

  Grammar* out_;
  std::map<std::string, int32_t> cache_;
};

}  // namespace

std::vector<Utf8Sequence> Utf8Sequences(uint32_t lo, uint32_t hi) {
  std::vector<Utf8Sequence> out;
  if (lo > kMaxCodepoint) return out;
  Split(lo, std::min(hi, kMaxCodepoint), &out);
  return out;
}

absl::StatusOr<Grammar> LowerToBytes(const Grammar& grammar,
                                     const GrammarLimits& limits) {
  Grammar out;
  out.exprs.reserve(grammar.exprs.size());
  Lowerer lowerer(&out);
  std::vector<int32_t> new_index(grammar.exprs.size(), -1);
  // Lowered classes are spliced into an enclosing sequence or choice of the
  // same kind, so that `"x" [é-ë]` stays one flat sequence of four items.
  std::vector<bool> lowered_class(grammar.exprs.size(), false);
  for (size_t i = 0; i < grammar.exprs.size(); ++i) {
    const Expr& e = grammar.exprs[i];
    if (e.kind == ExprKind::kCharClass) {
      new_index[i] = lowerer.LowerClass(e.ranges);
      lowered_class[i] = true;
    } else {
      Expr copy = e;
      copy.children.clear();
      for (int32_t child : e.children) {
        const Expr& lowered = out.exprs[new_index[child]];
        if (lowered_class[child] && lowered.kind == e.kind &&
            e.kind != ExprKind::kRepeat) {
          copy.children.insert(copy.children.end(), lowered.children.begin(),
                               lowered.children.end());
        } else {
          copy.children.push_back(new_index[child]);
        }
      }
      new_index[i] = static_cast<int32_t>(out.exprs.size());
      out.exprs.push_back(std::move(copy));
    }
    // Guards memory while building; the precise check follows.
    if (out.exprs.size() > limits.max_exprs) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "grammar too large once lowered to bytes: more than ",
          limits.max_exprs, " expressions (GrammarLimits::max_exprs)"));
    }
  }
  for (const Rule& rule : grammar.rules) {
    Rule& copy = out.rules[out.AddRule(rule.name, new_index[rule.body])];
    copy.distinct = rule.distinct;
    copy.member_bit = rule.member_bit;
    copy.required_members = rule.required_members;
    copy.member_guard = rule.member_guard;
    copy.member_dispatch = rule.member_dispatch;
    copy.max_chars = rule.max_chars;
  }
  out.root = grammar.root;
  GRAMMARD_RETURN_IF_ERROR(CheckSizeLimit(out, limits));
  return out;
}

bool IsByteLevel(const Grammar& grammar) {
  for (const Expr& e : grammar.exprs) {
    if (e.kind == ExprKind::kCharClass) return false;
  }
  return true;
}

}  // namespace grammard::grammar
