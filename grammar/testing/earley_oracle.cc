#include "grammar/testing/earley_oracle.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grammar/base/status_macros.h"

namespace grammard::grammar {
namespace {

using ByteSet = std::array<uint64_t, 4>;

bool Contains(const ByteSet& set, uint8_t byte) {
  return (set[byte >> 6] >> (byte & 63)) & 1;
}

bool IsEmpty(const ByteSet& set) {
  return (set[0] | set[1] | set[2] | set[3]) == 0;
}

// A context-free grammar over byte sets, before filtering.
struct Cfg {
  std::vector<std::vector<int32_t>> prods;
  std::vector<int32_t> lhs;
  int32_t num_nts = 0;
  std::vector<ByteSet> terminals;
  size_t num_symbols = 0;
};

class Desugarer {
 public:
  Desugarer(const Grammar& g, size_t max_symbols)
      : g_(g), max_symbols_(max_symbols), expr_nt_(g.exprs.size(), -1) {}

  absl::StatusOr<Cfg> Run(int32_t* start_nt) {
    for (const Expr& e : g_.exprs) {
      if (e.kind == ExprKind::kCharClass) {
        return absl::InvalidArgumentError(
            "EarleyOracle needs a byte-level grammar; call LowerToBytes");
      }
    }
    ComputeNullable();
    rule_nt_.resize(g_.rules.size());
    for (int32_t& nt : rule_nt_) nt = NewNt();
    *start_nt = NewNt();
    AddProd(*start_nt, {rule_nt_[g_.root]});
    for (size_t r = 0; r < g_.rules.size(); ++r) {
      std::vector<int32_t> body;
      Symbols(g_.rules[r].body, &body);
      AddProd(rule_nt_[r], std::move(body));
      if (!status_.ok()) return status_;
    }
    return std::move(cfg_);
  }

 private:
  int32_t NewNt() { return cfg_.num_nts++; }

  // Which expressions match the empty string, by a plain fixpoint kept apart
  // from the engine's passes.
  void ComputeNullable() {
    nullable_.assign(g_.exprs.size(), false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < g_.exprs.size(); ++i) {
        const Expr& e = g_.exprs[i];
        bool n = false;
        switch (e.kind) {
          case ExprKind::kBytes:
            n = e.bytes.empty();
            break;
          case ExprKind::kSequence:
            n = true;
            for (int32_t c : e.children) n = n && nullable_[c];
            break;
          case ExprKind::kChoice:
            for (int32_t c : e.children) n = n || nullable_[c];
            break;
          case ExprKind::kRepeat:
            n = e.min == 0 || nullable_[e.children[0]];
            break;
          case ExprKind::kRuleRef:
            n = nullable_[g_.rules[e.rule].body];
            break;
          default:
            break;
        }
        if (n && !nullable_[i]) {
          nullable_[i] = true;
          changed = true;
        }
      }
    }
  }

  // item^count as one symbol, by doubling: O(log count) nonterminals.
  int32_t Power(int32_t item, int32_t count) {
    if (count == 1) return item;
    const int32_t half = Power(item, count / 2);
    const int32_t nt = NewNt();
    std::vector<int32_t> prod = {half, half};
    if (count % 2 == 1) prod.push_back(item);
    AddProd(nt, std::move(prod));
    return nt;
  }

  void AddProd(int32_t lhs, std::vector<int32_t> symbols) {
    cfg_.num_symbols += symbols.size() + 1;
    if (cfg_.num_symbols > max_symbols_ && status_.ok()) {
      status_ = absl::ResourceExhaustedError(
          absl::StrCat("EarleyOracle: desugared grammar exceeds ", max_symbols_,
                       " symbols"));
    }
    if (!status_.ok()) return;
    cfg_.lhs.push_back(lhs);
    cfg_.prods.push_back(std::move(symbols));
  }

  int32_t Terminal(const ByteSet& set) {
    auto it = terminal_ids_.find(set);
    if (it != terminal_ids_.end()) return ~it->second;
    const int32_t id = static_cast<int32_t>(cfg_.terminals.size());
    cfg_.terminals.push_back(set);
    terminal_ids_.emplace(set, id);
    return ~id;
  }

  // Appends the symbols that `e` expands to inside a sequence.
  void Symbols(int32_t e, std::vector<int32_t>* out) {
    if (!status_.ok()) return;
    const Expr& expr = g_.exprs[e];
    switch (expr.kind) {
      case ExprKind::kBytes:
        for (char c : expr.bytes) {
          ByteSet set = {0, 0, 0, 0};
          const auto byte = static_cast<uint8_t>(c);
          set[byte >> 6] |= uint64_t{1} << (byte & 63);
          out->push_back(Terminal(set));
        }
        return;
      case ExprKind::kByteClass: {
        ByteSet set = {0, 0, 0, 0};
        for (const CharRange& r : expr.ranges) {
          for (uint32_t b = r.lo; b <= r.hi; ++b) {
            set[b >> 6] |= uint64_t{1} << (b & 63);
          }
        }
        out->push_back(Terminal(set));
        return;
      }
      case ExprKind::kSequence:
        for (int32_t child : expr.children) Symbols(child, out);
        return;
      case ExprKind::kRuleRef:
        out->push_back(rule_nt_[expr.rule]);
        return;
      case ExprKind::kChoice:
      case ExprKind::kRepeat:
        out->push_back(ExprNt(e));
        return;
      case ExprKind::kCharClass:
        return;  // Rejected in Run.
    }
  }

  int32_t ExprNt(int32_t e) {
    if (expr_nt_[e] >= 0) return expr_nt_[e];
    const int32_t nt = NewNt();
    expr_nt_[e] = nt;
    const Expr& expr = g_.exprs[e];
    if (expr.kind == ExprKind::kChoice) {
      for (int32_t child : expr.children) {
        std::vector<int32_t> alt;
        Symbols(child, &alt);
        AddProd(nt, std::move(alt));
      }
      return nt;
    }
    // One symbol per copy of the body keeps unrolling linear.
    std::vector<int32_t> body;
    Symbols(expr.children[0], &body);
    int32_t item;
    if (body.size() == 1) {
      item = body[0];
    } else {
      item = NewNt();
      AddProd(item, std::move(body));
    }
    if (nullable_[expr.children[0]] && expr.max != kUnbounded) {
      // With an empty-matching body, up to n copies is exactly n copies. A
      // chain of n optional steps would make every Earley set walk all n.
      if (expr.max == 0) {
        AddProd(nt, {});
      } else {
        AddProd(nt, {Power(item, expr.max)});
      }
      return nt;
    }
    std::vector<int32_t> prod(static_cast<size_t>(expr.min), item);
    if (expr.max == kUnbounded) {
      // star ::= "" | item star
      const int32_t star = NewNt();
      AddProd(star, {});
      AddProd(star, {item, star});
      prod.push_back(star);
    } else if (expr.max > expr.min) {
      // opt_k ::= "" | item opt_{k-1}, with opt_1 ::= "" | item.
      int32_t opt = -1;
      for (int32_t k = 1; k <= expr.max - expr.min && status_.ok(); ++k) {
        const int32_t next = NewNt();
        AddProd(next, {});
        AddProd(next, opt < 0 ? std::vector<int32_t>{item}
                              : std::vector<int32_t>{item, opt});
        opt = next;
      }
      prod.push_back(opt);
    }
    AddProd(nt, std::move(prod));
    return nt;
  }

  const Grammar& g_;
  const size_t max_symbols_;
  Cfg cfg_;
  absl::Status status_;
  std::vector<bool> nullable_;
  std::vector<int32_t> rule_nt_;
  std::vector<int32_t> expr_nt_;
  std::map<ByteSet, int32_t> terminal_ids_;
};

// Horn propagation over productions: `ok(sym)` seeds terminals, and a
// production holds once every nonterminal in it does.
std::vector<bool> Propagate(const Cfg& cfg, bool terminals_count,
                            const std::vector<bool>& prod_alive) {
  std::vector<bool> nt(cfg.num_nts, false);
  std::vector<int32_t> waiting(cfg.prods.size(), 0);
  std::vector<std::vector<int32_t>> users(cfg.num_nts);
  std::vector<int32_t> queue;
  for (size_t p = 0; p < cfg.prods.size(); ++p) {
    if (!prod_alive[p]) continue;
    bool possible = true;
    for (int32_t sym : cfg.prods[p]) {
      if (sym < 0) {
        possible = possible && terminals_count && !IsEmpty(cfg.terminals[~sym]);
      } else {
        ++waiting[p];
        users[sym].push_back(static_cast<int32_t>(p));
      }
    }
    if (!possible) {
      waiting[p] = -1;
    } else if (waiting[p] == 0 && !nt[cfg.lhs[p]]) {
      nt[cfg.lhs[p]] = true;
      queue.push_back(cfg.lhs[p]);
    }
  }
  for (size_t head = 0; head < queue.size(); ++head) {
    for (int32_t p : users[queue[head]]) {
      if (waiting[p] > 0 && --waiting[p] == 0 && !nt[cfg.lhs[p]]) {
        nt[cfg.lhs[p]] = true;
        queue.push_back(cfg.lhs[p]);
      }
    }
  }
  return nt;
}

// A set of (position, origin) pairs, cleared between Earley sets.
class ItemSet {
 public:
  void Clear(size_t expected) {
    size_t capacity = 64;
    while (capacity < 2 * expected) capacity *= 2;
    if (slots_.size() < capacity) slots_.resize(capacity);
    std::fill(slots_.begin(), slots_.end(), kEmpty);
    count_ = 0;
  }

  // Whether the pair was new.
  bool Insert(int32_t pos, int32_t origin) {
    if (2 * (count_ + 1) > slots_.size()) Grow();
    return InsertKey(Key(pos, origin));
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  static uint64_t Key(int32_t pos, int32_t origin) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) |
           static_cast<uint32_t>(origin);
  }

  bool InsertKey(uint64_t key) {
    const size_t mask = slots_.size() - 1;
    size_t i = ((key * 0x9E3779B97F4A7C15ull) >> 20) & mask;
    while (slots_[i] != kEmpty) {
      if (slots_[i] == key) return false;
      i = (i + 1) & mask;
    }
    slots_[i] = key;
    ++count_;
    return true;
  }

  void Grow() {
    std::vector<uint64_t> old;
    old.swap(slots_);
    slots_.assign(old.size() * 2, kEmpty);
    count_ = 0;
    for (uint64_t key : old) {
      if (key != kEmpty) InsertKey(key);
    }
  }

  std::vector<uint64_t> slots_;
  size_t count_ = 0;
};

struct Item {
  int32_t pos;
  int32_t origin;
};

}  // namespace

absl::StatusOr<EarleyOracle> EarleyOracle::Create(const Grammar& grammar,
                                                  size_t max_symbols) {
  GRAMMARD_RETURN_IF_ERROR(grammar.Validate());
  int32_t start_nt = -1;
  absl::StatusOr<Cfg> cfg = Desugarer(grammar, max_symbols).Run(&start_nt);
  if (!cfg.ok()) return cfg.status();

  // Keep only productions whose every symbol derives some string.
  std::vector<bool> all(cfg->prods.size(), true);
  const std::vector<bool> productive =
      Propagate(*cfg, /*terminals_count=*/true, all);
  std::vector<bool> alive(cfg->prods.size(), false);
  for (size_t p = 0; p < cfg->prods.size(); ++p) {
    alive[p] = productive[cfg->lhs[p]];
    for (int32_t sym : cfg->prods[p]) {
      alive[p] = alive[p] &&
                 (sym < 0 ? !IsEmpty(cfg->terminals[~sym]) : productive[sym]);
    }
  }

  EarleyOracle oracle;
  oracle.nt_nullable_ = Propagate(*cfg, /*terminals_count=*/false, alive);
  oracle.terminals_ = cfg->terminals;
  oracle.nt_prods_.resize(cfg->num_nts);
  int32_t next_pos = 0;
  for (size_t p = 0; p < cfg->prods.size(); ++p) {
    if (!alive[p]) continue;
    const int32_t id = static_cast<int32_t>(oracle.prod_lhs_.size());
    oracle.prod_lhs_.push_back(cfg->lhs[p]);
    oracle.nt_prods_[cfg->lhs[p]].push_back(id);
    oracle.prod_first_pos_.push_back(next_pos);
    for (int32_t sym : cfg->prods[p]) {
      oracle.pos_next_.push_back(sym);
      oracle.pos_prod_.push_back(id);
    }
    oracle.pos_next_.push_back(kEndOfProduction);
    oracle.pos_prod_.push_back(id);
    next_pos += static_cast<int32_t>(cfg->prods[p].size()) + 1;
    if (cfg->lhs[p] == start_nt) oracle.start_prod_ = id;
  }
  return oracle;
}

uint8_t EarleyOracle::Check(std::string_view input) const {
  if (start_prod_ < 0) return kReject;
  const int32_t n = static_cast<int32_t>(input.size());
  std::vector<Item> items;
  std::vector<size_t> set_begin = {0};
  // Per finished set, the items waiting for a nonterminal, sorted by it.
  std::vector<std::pair<int32_t, int32_t>> waiting;
  std::vector<size_t> waiting_begin = {0};
  std::vector<int32_t> predicted(nt_prods_.size(), -1);
  ItemSet seen;
  seen.Clear(64);

  auto add = [&](int32_t pos, int32_t origin) {
    if (seen.Insert(pos, origin)) items.push_back({pos, origin});
  };
  add(prod_first_pos_[start_prod_], 0);

  for (int32_t j = 0;; ++j) {
    for (size_t k = set_begin[j]; k < items.size(); ++k) {
      const Item item = items[k];
      const int32_t sym = pos_next_[item.pos];
      if (sym == kEndOfProduction) {
        // Completions with origin j are covered by the nullable skip below.
        if (item.origin == j) continue;
        const int32_t lhs = prod_lhs_[pos_prod_[item.pos]];
        const auto first = waiting.begin() + waiting_begin[item.origin];
        const auto last = waiting.begin() + waiting_begin[item.origin + 1];
        auto it = std::lower_bound(first, last, std::make_pair(lhs, INT32_MIN));
        for (; it != last && it->first == lhs; ++it) {
          const Item& parent = items[it->second];
          add(parent.pos + 1, parent.origin);
        }
      } else if (sym >= 0) {
        if (predicted[sym] != j) {
          predicted[sym] = j;
          for (int32_t p : nt_prods_[sym]) add(prod_first_pos_[p], j);
        }
        if (nt_nullable_[sym]) add(item.pos + 1, item.origin);
      }
    }
    for (size_t k = set_begin[j]; k < items.size(); ++k) {
      const int32_t sym = pos_next_[items[k].pos];
      if (sym >= 0) waiting.push_back({sym, static_cast<int32_t>(k)});
    }
    std::sort(waiting.begin() + waiting_begin[j], waiting.end());
    waiting_begin.push_back(waiting.size());
    if (j == n) break;

    const auto byte = static_cast<uint8_t>(input[j]);
    const size_t end = items.size();
    set_begin.push_back(end);
    seen.Clear(end - set_begin[j]);
    for (size_t k = set_begin[j]; k < end; ++k) {
      const int32_t sym = pos_next_[items[k].pos];
      if (sym < 0 && sym != kEndOfProduction &&
          Contains(terminals_[~sym], byte)) {
        add(items[k].pos + 1, items[k].origin);
      }
    }
    if (items.size() == end) return kReject;
  }

  uint8_t verdict = kReject;
  const int32_t accept = prod_first_pos_[start_prod_] + 1;
  for (size_t k = set_begin[n]; k < items.size(); ++k) {
    const Item& item = items[k];
    const int32_t sym = pos_next_[item.pos];
    if (item.pos == accept && item.origin == 0) verdict |= kComplete;
    if (sym < 0 && sym != kEndOfProduction) verdict |= kPrefix;
  }
  return verdict;
}

}  // namespace grammard::grammar
