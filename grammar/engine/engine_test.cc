// Property tests of the engine core (Nfa -> Pda -> TokenTable -> matcher)
// against a brute-force oracle that runs the Nfa directly with explicit
// stacks, on random grammars and random small vocabularies.
#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "grammar/engine/grammar_data.h"
#include "grammar/engine/leaf_tokens.h"
#include "grammar/engine/nfa.h"
#include "grammar/matcher.h"
#include "gtest/gtest.h"

namespace grammard::grammar::internal {
namespace {

// A tiny regular-expression tree with rule calls, built into an Nfa by the
// Thompson construction.
struct E {
  enum Kind { kRange, kSeq, kAlt, kStar, kCall, kEmpty } kind;
  uint8_t lo = 0, hi = 0;
  std::vector<E> kids;
  int32_t rule = 0;
};

E Range(char lo, char hi) {
  return {E::kRange, uint8_t(lo), uint8_t(hi), {}, 0};
}
E Seq(std::vector<E> kids) { return {E::kSeq, 0, 0, std::move(kids), 0}; }
E Alt(std::vector<E> kids) { return {E::kAlt, 0, 0, std::move(kids), 0}; }
E Star(E kid) { return {E::kStar, 0, 0, {std::move(kid)}, 0}; }
E Call(int32_t rule) { return {E::kCall, 0, 0, {}, rule}; }
E Empty() { return {E::kEmpty, 0, 0, {}, 0}; }

void Build(Nfa* nfa, int32_t rule, const E& e, int32_t from, int32_t to) {
  switch (e.kind) {
    case E::kRange:
      nfa->AddBytes(from, e.lo, e.hi, to);
      break;
    case E::kEmpty:
      nfa->AddEpsilon(from, to);
      break;
    case E::kCall:
      nfa->AddCall(from, e.rule, to);
      break;
    case E::kAlt:
      for (const E& k : e.kids) Build(nfa, rule, k, from, to);
      break;
    case E::kSeq: {
      int32_t cur = from;
      for (size_t i = 0; i < e.kids.size(); ++i) {
        int32_t next = i + 1 == e.kids.size() ? to : nfa->AddState(rule);
        Build(nfa, rule, e.kids[i], cur, next);
        cur = next;
      }
      if (e.kids.empty()) nfa->AddEpsilon(from, to);
      break;
    }
    case E::kStar: {
      int32_t a = nfa->AddState(rule), b = nfa->AddState(rule);
      nfa->AddEpsilon(from, a);
      Build(nfa, rule, e.kids[0], a, b);
      nfa->AddEpsilon(b, a);
      nfa->AddEpsilon(a, to);
      break;
    }
  }
}

Nfa BuildNfa(const std::vector<E>& rules) {
  Nfa nfa;
  for (size_t r = 0; r < rules.size(); ++r)
    nfa.AddRule("r" + std::to_string(r));
  for (size_t r = 0; r < rules.size(); ++r) {
    Build(&nfa, r, rules[r], nfa.rule_start(r), nfa.rule_accept(r));
  }
  nfa.Seal();
  return nfa;
}

// The oracle: configurations (nfa state, stack of return states).
class Oracle {
 public:
  explicit Oracle(const Nfa& nfa) : nfa_(nfa) {}

  // Reads `text` from the root rule's start. Returns whether some path read
  // it all; *complete says whether the root rule can end right there.
  bool Read(const std::string& text, bool* complete) const {
    std::set<Config> cur = Closure({{nfa_.rule_start(0), {}}}, complete);
    for (char ch : text) {
      std::set<Config> next;
      for (const Config& c : cur) {
        for (const auto& e : nfa_.bytes(c.first)) {
          if (e.lo <= uint8_t(ch) && uint8_t(ch) <= e.hi)
            next.insert({e.to, c.second});
        }
      }
      cur = Closure(next, complete);
      if (cur.empty()) return false;
    }
    return true;
  }

 private:
  using Config = std::pair<int32_t, std::vector<int32_t>>;

  std::set<Config> Closure(std::set<Config> set, bool* complete) const {
    *complete = false;
    std::vector<Config> work(set.begin(), set.end());
    while (!work.empty()) {
      Config c = work.back();
      work.pop_back();
      auto add = [&](Config n) {
        if (n.second.size() <= 64 && set.insert(n).second) work.push_back(n);
      };
      for (int32_t t : nfa_.epsilon(c.first)) add({t, c.second});
      for (const auto& call : nfa_.calls(c.first)) {
        auto stack = c.second;
        stack.push_back(call.to);
        add({nfa_.rule_start(call.rule), stack});
      }
      if (c.first == nfa_.rule_accept(nfa_.state_rule(c.first))) {
        if (c.second.empty()) {
          *complete = true;
        } else {
          auto stack = c.second;
          int32_t ret = stack.back();
          stack.pop_back();
          add({ret, stack});
        }
      }
    }
    return set;
  }

  const Nfa& nfa_;
};

// Random grammars over bytes 'a'..'d'. No left recursion: a rule calls rules
// of lower or equal index only right after reading a byte. Every rule can
// end: each has an alternative calling only higher rules.
class GrammarGen {
 public:
  explicit GrammarGen(uint32_t seed) : rng_(seed) {}

  std::vector<E> Rules() {
    int n = 1 + rng_() % 4;
    std::vector<E> rules;
    for (int r = 0; r < n; ++r) {
      num_rules_ = n;
      rule_ = r;
      rules.push_back(Alt({Expr(3, true), Expr(2, false)}));
    }
    return rules;
  }

 private:
  E Atom() {
    char lo = 'a' + rng_() % 4;
    char hi = std::min<char>('d', lo + rng_() % 2);
    return Range(lo, hi);
  }
  // any_call: calls to lower rules allowed (after a byte).
  E Expr(int depth, bool any_call) {
    int pick = depth <= 0 ? rng_() % 2 : rng_() % 7;
    switch (pick) {
      case 0:
        return Atom();
      case 1:
        if (rule_ + 1 < num_rules_ && rng_() % 2) {
          return Call(rule_ + 1 + rng_() % (num_rules_ - rule_ - 1));
        }
        return rng_() % 4 == 0 ? Empty() : Atom();
      case 2:
        if (any_call) return Seq({Atom(), Call(rng_() % (rule_ + 1))});
        return Atom();
      case 3:
      case 4: {
        std::vector<E> kids;
        for (int i = 0, k = 1 + rng_() % 3; i < k; ++i)
          kids.push_back(Expr(depth - 1, any_call));
        return Seq(std::move(kids));
      }
      case 5:
        return Alt({Expr(depth - 1, any_call), Expr(depth - 1, any_call)});
      default:
        return Star(Seq({Atom(), Expr(depth - 1, any_call)}));
    }
  }

  std::mt19937 rng_;
  int num_rules_ = 1;
  int rule_ = 0;
};

std::shared_ptr<const Vocabulary> RandomVocab(std::mt19937* rng) {
  std::vector<std::string> tokens;
  std::set<std::string> seen;
  // Half the vocabularies are large enough for trie subtrees that a walk
  // settles whole (token_index.h, subtree_bytes).
  const bool large = (*rng)() % 2;
  for (int i = 0, count = large ? 400 : 60; i < count; ++i) {
    std::string t;
    for (int k = 0, n = 1 + (*rng)() % (large ? 7 : 4); k < n; ++k)
      t.push_back("abcde"[(*rng)() % 5]);
    tokens.push_back(t);  // duplicates on purpose: equal bytes, distinct ids
  }
  tokens.push_back("<eos>");
  tokens.push_back("<special>");
  int32_t eos = tokens.size() - 2, special = tokens.size() - 1;
  auto v =
      Vocabulary::FromTokens(tokens, {eos, special}, {eos}, {"random", {}, 70});
  return *v;
}

bool Bit(const std::vector<uint32_t>& row, int32_t id) {
  return (row[id >> 5] >> (id & 31)) & 1;
}

TEST(EngineTest, MasksEqualTheOracleOnRandomGrammars) {
  int checked_steps = 0, grammars = 0;
  for (uint32_t seed = 1; seed <= 400; ++seed) {
    std::mt19937 rng(seed);
    GrammarGen gen(seed * 7919);
    std::vector<E> rules = gen.Rules();
    Nfa nfa = BuildNfa(rules);
    ASSERT_TRUE(nfa.PruneUnproductive(0).ok());  // every rule can complete
    auto pda = nfa.Determinize(0, 10000);
    ASSERT_TRUE(pda.ok()) << pda.status();
    auto vocab = RandomVocab(&rng);
    auto data =
        MakeGrammarData(std::make_shared<TokenIndex>(vocab), *std::move(pda));
    ASSERT_TRUE(data.ok()) << data.status();
    CompiledGrammar grammar(*data);
    GrammarMatcher m(grammar);
    Oracle oracle(nfa);
    ++grammars;
    std::string text;
    std::vector<int32_t> accepted;
    std::vector<std::vector<uint32_t>> masks;
    std::vector<uint32_t> row(grammar.mask_words());
    for (int step = 0; step < 12; ++step) {
      m.FillNextTokenMask(row.data());
      bool complete = false;
      ASSERT_TRUE(oracle.Read(text, &complete));
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->size(); ++id) {
        bool want = false;
        if (vocab->kind(id) == TokenKind::kText) {
          bool c;
          want = oracle.Read(text + std::string(vocab->bytes(id)), &c);
        } else if (vocab->is_eos(id)) {
          want = complete;
        }
        ASSERT_EQ(Bit(row, id), want)
            << "seed " << seed << " text '" << text << "' token " << id << " '"
            << vocab->bytes(id) << "'";
        if (want && !vocab->is_eos(id)) allowed.push_back(id);
      }
      EXPECT_EQ(m.CanTerminate(), complete);
      ++checked_steps;
      masks.push_back(row);

      // A fork sees the same mask.
      GrammarMatcher fork = m.Fork();
      std::vector<uint32_t> fork_row(row.size());
      fork.FillNextTokenMask(fork_row.data());
      ASSERT_EQ(fork_row, row);

      // Jump-forward bytes are forced: no other byte may follow.
      ForcedContinuation forced = m.JumpForward();
      std::string probe = text;
      for (char f : forced.bytes) {
        for (int b = 0; b < 256; ++b) {
          bool c;
          ASSERT_EQ(oracle.Read(probe + char(b), &c), b == uint8_t(f));
        }
        bool c;
        oracle.Read(probe, &c);
        ASSERT_FALSE(c);
        probe.push_back(f);
      }

      if (allowed.empty()) break;
      int32_t pick = allowed[rng() % allowed.size()];
      // A disallowed token is refused and changes nothing.
      for (int32_t id = 0; id < vocab->size(); ++id) {
        if (vocab->kind(id) == TokenKind::kText && !Bit(row, id)) {
          ASSERT_FALSE(m.AcceptToken(id).ok());
          break;
        }
      }
      ASSERT_TRUE(m.AcceptToken(pick).ok());
      accepted.push_back(pick);
      text += vocab->bytes(pick);
      if (rng() % 4 == 0 && m.num_accepted() >= 2) {
        // Rolling back restores the earlier position exactly.
        int32_t k = 1 + rng() % 2;
        ASSERT_TRUE(m.Rollback(k).ok());
        accepted.resize(accepted.size() - k);
        masks.resize(masks.size() - k + 1);
        text.clear();
        for (int32_t id : accepted) text += vocab->bytes(id);
        std::vector<uint32_t> again(row.size());
        m.FillNextTokenMask(again.data());
        ASSERT_EQ(again, masks.back()) << "seed " << seed;
        masks.pop_back();
      }
    }
  }
  EXPECT_EQ(grammars, 400);
  EXPECT_GT(checked_steps, 1000);
}

// A token set as a mask row, to compare sets stored either way.
std::vector<uint32_t> Row(const TokenSet& set, int32_t words) {
  std::vector<uint32_t> row(words, 0);
  bool clean = false;
  set.AddTo(row.data(), words, &clean);
  return row;
}

// Calls visit(index, pda, state, where) for every state that reads bytes
// of four random grammars over each of 100 random vocabularies (an index
// per vocabulary, its leaf cache shared by its grammars); stops at the
// first fatal failure.
void ForEachRandomState(
    const std::function<void(const TokenIndex&, const Pda&, int32_t,
                             const std::string&)>& visit) {
  for (uint32_t seed = 1; seed <= 100; ++seed) {
    std::mt19937 rng(seed);
    const TokenIndex index(RandomVocab(&rng));
    for (int g = 0; g < 4; ++g) {
      GrammarGen gen(seed * 7919 + g);
      Nfa nfa = BuildNfa(gen.Rules());
      ASSERT_TRUE(nfa.PruneUnproductive(0).ok());
      auto pda = nfa.Determinize(0, 10000);
      ASSERT_TRUE(pda.ok()) << pda.status();
      for (int32_t s = 0; s < pda->num_states(); ++s) {
        if (!pda->HasBytes(s)) continue;
        visit(index, *pda, s,
              "seed " + std::to_string(seed) + " grammar " + std::to_string(g) +
                  " state " + std::to_string(s));
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// Whether `sub` (token ids in byte order) is part of `all`.
bool IncludesIds(const TokenIndex& index, const std::vector<int32_t>& all,
                 const std::vector<int32_t>& sub) {
  return std::includes(all.begin(), all.end(), sub.begin(), sub.end(),
                       [&](int32_t a, int32_t b) {
                         return index.vocab().bytes(a) < index.vocab().bytes(b);
                       });
}

// Every string over `bytes` of 1 to `max_len` bytes: tokens long enough to
// tell apart the positions of a counted string near its bound.
std::shared_ptr<const Vocabulary> DenseVocab(const std::string& bytes,
                                             size_t max_len) {
  std::vector<std::string> tokens{""};
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].size() == max_len) continue;
    for (char c : bytes) tokens.push_back(tokens[i] + c);
  }
  tokens[0] = "<eos>";
  return *Vocabulary::FromTokens(tokens, {0}, {0}, {"dense", {}, 0});
}

// The Pda of `rules` (rule 0 the root), pruned and determinized.
Pda PdaOf(const std::vector<E>& rules, int32_t max_states = 10000) {
  Nfa nfa = BuildNfa(rules);
  EXPECT_TRUE(nfa.PruneUnproductive(0).ok());
  auto pda = nfa.Determinize(0, max_states);
  EXPECT_TRUE(pda.ok()) << pda.status();
  return pda.ok() ? *std::move(pda) : Pda();
}

// A walk's leavers as (first, end, offsets) per run.
std::vector<std::vector<int32_t>> Runs(const LeafWalk& walk) {
  std::vector<std::vector<int32_t>> out;
  for (const LeafWalk::Run& r : walk.runs) {
    std::vector<int32_t> run{r.begin, r.end};
    run.insert(run.end(), walk.offsets.begin() + r.offsets_begin,
               walk.offsets.begin() + r.offsets_end);
    out.push_back(std::move(run));
  }
  return out;
}

// ReadSortedSharingRemainders reads a remainder once for all tokens whose
// first bytes lead back to the very set it began from: read together,
// every token must reach what it reaches read alone, from sets along random
// texts (strings of a repeated byte loop back most).
TEST(EngineTest, TokensReadTogetherReachWhatEachReachesAlone) {
  int compared = 0, looping = 0;
  for (uint32_t seed = 1; seed <= 1000; ++seed) {
    std::mt19937 rng(seed);
    GrammarGen gen(seed * 7919);
    Nfa nfa = BuildNfa(gen.Rules());
    ASSERT_TRUE(nfa.PruneUnproductive(0).ok());
    auto pda = nfa.Determinize(0, 10000);
    ASSERT_TRUE(pda.ok()) << pda.status();
    auto vocab = RandomVocab(&rng);
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < vocab->size(); ++id) {
      if (vocab->kind(id) == TokenKind::kText) ids.push_back(id);
    }
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
      return vocab->bytes(a) < vocab->bytes(b);
    });
    StackPool pool;
    Stepper stepper(*pda);
    std::vector<int32_t> scan;
    // From the root, as a matcher reads, or from a state below an unknown
    // caller, as classifying does (a token may then escape its rule).
    const int32_t root = seed % 2 ? pool.Add(pda->RuleStart(0), kBottom)
                                  : pool.Add(rng() % pda->num_states(), kOpen);
    stepper.Close(&pool, &root, 1, &scan);
    for (int step = 0; step < 10 && !scan.empty(); ++step) {
      std::vector<Stepper::TokenReach> together(vocab->size());
      stepper.ReadSortedSharingRemainders(
          &pool, scan.data(), scan.data() + scan.size(), *vocab, ids,
          [&](int32_t id, const Stepper::TokenReach& r) { together[id] = r; });
      for (int32_t id : ids) {
        Stepper::TokenReach alone{};
        stepper.ReadSorted(
            &pool, scan.data(), scan.data() + scan.size(), *vocab, {id},
            [&](int32_t, const Stepper::TokenReach& r) { alone = r; });
        const Stepper::TokenReach& t = together[id];
        ASSERT_EQ(std::make_tuple(t.read_all, t.alive, t.last.bottom,
                                  t.last.open, t.last.overflow, t.escaped),
                  std::make_tuple(alone.read_all, alone.alive,
                                  alone.last.bottom, alone.last.open,
                                  alone.last.overflow, alone.escaped))
            << "seed " << seed << " step " << step << " token '"
            << vocab->bytes(id) << "'";
        ++compared;
      }
      // On along a byte the set may read, back into itself when it can.
      std::vector<int32_t> next;
      for (char b : std::string("abcde")) {
        next.clear();
        stepper.Step(&pool, scan.data(), scan.data() + scan.size(),
                     static_cast<uint8_t>(b), &next);
        if (next == scan) {
          ++looping;
          break;
        }
      }
      if (next != scan) {
        const char b = "abcde"[rng() % 5];
        next.clear();
        stepper.Step(&pool, scan.data(), scan.data() + scan.size(),
                     static_cast<uint8_t>(b), &next);
      }
      scan = next;
    }
  }
  EXPECT_GT(compared, 100000);
  EXPECT_GT(looping, 100);  // sets that read a byte back into themselves
}

// States of a call-free rule that read alike for a token's length share
// one table when the rule is large (a bounded repeat); a small rule's
// states each keep their own.
TEST(EngineTest, OnlyLargeCallFreeRulesShareTables) {
  auto index = std::make_shared<TokenIndex>(DenseVocab("x", 3));
  for (int repeat : {10, 100}) {
    std::vector<E> xs(repeat, Alt({Empty(), Range('x', 'x')}));
    const Pda pda = PdaOf({Seq(std::move(xs))});
    auto data = MakeGrammarData(index, pda);
    ASSERT_TRUE(data.ok()) << data.status();
    int32_t reading = 0;
    for (int32_t s = 0; s < pda.num_states(); ++s) reading += pda.HasBytes(s);
    ASSERT_EQ(reading, repeat);
    if (repeat < 64) {
      EXPECT_EQ((*data)->table.num_tables(), reading);
    } else {
      // Those with four or more x to go read every token alike.
      EXPECT_EQ((*data)->table.num_tables(), 4);
    }
  }
}

TEST(EngineTest, ByteFiltersAreMadeOncePerKeyUpToTheirBound) {
  std::mt19937 rng(14);
  const TokenIndex index(RandomVocab(&rng));
  int made = 0;
  const auto make = [&] {
    ++made;
    return std::vector<uint32_t>(index.all_bits().size(), made);
  };
  const auto first = index.ByteFilter("a", make);
  EXPECT_EQ(index.ByteFilter("a", make), first);
  EXPECT_EQ(made, 1);
  EXPECT_NE(index.ByteFilter("b", make), first);
  EXPECT_EQ(made, 2);
  // Past the bound, each is made when asked for and is what make made.
  for (size_t k = 2; k < TokenIndex::kMaxByteFilters; ++k) {
    index.ByteFilter("k" + std::to_string(k), make);
  }
  const int before = made;
  const auto late = index.ByteFilter("late", make);
  EXPECT_EQ((*late)[0], static_cast<uint32_t>(before + 1));
  index.ByteFilter("late", make);
  EXPECT_EQ(made, before + 2);
  EXPECT_EQ(index.ByteFilter("a", make), first);
}

TEST(EngineTest, TokensWithAByteAreThoseWhoseBytesHoldIt) {
  // Against a direct reading of every token, on random vocabularies, for
  // bytes held by some tokens and by none (a special token holds none).
  std::mt19937 rng(13);
  for (int trial = 0; trial < 20; ++trial) {
    const std::shared_ptr<const Vocabulary> vocab = RandomVocab(&rng);
    const TokenIndex index(vocab);
    for (char byte : std::string("abcdez<")) {
      const std::vector<uint32_t>& row =
          index.TokensWithByte(static_cast<uint8_t>(byte));
      ASSERT_EQ(row.size(), index.all_bits().size());
      for (int32_t id = 0; id < vocab->size(); ++id) {
        const bool holds = vocab->kind(id) == TokenKind::kText &&
                           vocab->bytes(id).find(byte) != std::string::npos;
        EXPECT_EQ(Bit(row, id), holds) << trial << " " << byte << " " << id;
      }
    }
  }
}

TEST(EngineTest, TokensSortByBytesAsTheirBytesCompare) {
  // Against sorting by the bytes themselves (ties by id), on random
  // vocabularies and subsets of every size, across the switch to a bitset
  // at 1/16 of the tokens; ids of no text token go first.
  std::mt19937 rng(17);
  for (int trial = 0; trial < 200; ++trial) {
    const std::shared_ptr<const Vocabulary> vocab = RandomVocab(&rng);
    const TokenIndex index(vocab);
    std::vector<int32_t> ids;
    const int32_t keep_in = 1 + static_cast<int32_t>(rng() % 64);
    for (int32_t id = 0; id < vocab->size(); ++id) {
      if (static_cast<int32_t>(rng() % 64) < keep_in) ids.push_back(id);
    }
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<int32_t> expected = ids;
    const auto text = [&](int32_t id) {
      return vocab->kind(id) == TokenKind::kText && !vocab->bytes(id).empty();
    };
    std::sort(expected.begin(), expected.end(), [&](int32_t a, int32_t b) {
      if (text(a) != text(b)) return !text(a);
      std::string_view x = text(a) ? vocab->bytes(a) : "";
      std::string_view y = text(b) ? vocab->bytes(b) : "";
      return x != y ? x < y : a < b;
    });
    index.SortByBytes(&ids);
    EXPECT_EQ(ids, expected) << trial << " " << keep_in;
  }
}

TEST(EngineTest, TokenSetsKeepIdsWhileFewerThanAQuarterOfTheWords) {
  // Rows of 64 words with 0 to 40 bits set, about the boundary (16 ids):
  // the same row back, as ids exactly while count * 4 < words.
  std::mt19937 rng(7);
  const int32_t words = 64;
  for (int count = 0; count <= 40; ++count) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<uint32_t> bits(words, 0);
      for (int set = 0; set < count;) {
        const uint32_t id = rng() % (32 * words);
        if ((bits[id >> 5] >> (id & 31)) & 1) continue;
        bits[id >> 5] |= 1u << (id & 31);
        ++set;
      }
      const TokenSet tokens = TokenSet::FromBits(bits);
      EXPECT_EQ(tokens.is_bitset(), count * 4 >= words) << count;
      EXPECT_EQ(tokens.empty(), count == 0) << count;
      EXPECT_EQ(Row(tokens, words), bits) << count;
    }
  }
}

TEST(EngineTest, LeafWalksMadeTogetherEqualWalksMadeApart) {
  // Groups of up to 6 leaf states of random grammars walked in one pass
  // (with subtree walks shared through one cache across the grammars of a
  // vocabulary), against each walked alone with a fresh cache. A third of
  // the groups cap their product at 2 tuples, so that most of their
  // subtrees give up on it part way and step their lanes apart.
  int groups = 0, walks = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    std::mt19937 rng(seed);
    const std::shared_ptr<const Vocabulary> vocab =
        seed % 2 == 0 ? DenseVocab("abcde", 4) : RandomVocab(&rng);
    const TokenIndex index(vocab);
    const int32_t words = (vocab->size() + 31) / 32;
    for (int g = 0; g < 4; ++g) {
      GrammarGen gen(seed * 7919 + g);
      const Pda pda = PdaOf(gen.Rules());
      std::vector<int32_t> leaves;
      for (int32_t s = 0; s < pda.num_states(); ++s) {
        if (pda.HasBytes(s) && LeafForm(pda, s, 1 << 20)) leaves.push_back(s);
      }
      for (size_t begin = 0; begin < leaves.size(); begin += 6) {
        const std::vector<int32_t> group(
            leaves.begin() + begin,
            leaves.begin() + std::min(leaves.size(), begin + 6));
        std::vector<char> share;
        for (size_t j = 0; j < group.size(); ++j) share.push_back(rng() % 2);
        const std::vector<LeafWalk> together =
            WalkLeaves(pda, index, group, share, index.leaf_cache(),
                       groups % 3 == 0 ? 2 : kMaxProductStates);
        ASSERT_EQ(together.size(), group.size());
        ++groups;
        for (size_t j = 0; j < group.size(); ++j) {
          const TokenIndex alone_index(vocab);
          const LeafWalk alone = WalkLeaf(pda, alone_index, group[j],
                                          alone_index.leaf_cache(), share[j]);
          const std::string where = "seed " + std::to_string(seed) +
                                    " grammar " + std::to_string(g) +
                                    " state " + std::to_string(group[j]);
          ASSERT_EQ(Row(together[j].accepted, words),
                    Row(alone.accepted, words))
              << where;
          ASSERT_EQ(Runs(together[j]), Runs(alone)) << where;
          ++walks;
        }
      }
    }
  }
  EXPECT_GT(groups, 200);
  EXPECT_GT(walks, 800);
}

TEST(EngineTest, LeafStatesClassifyAsTheGeneralTrieWalkDoes) {
  // The leaf path against ClassifyState on every state whose rule calls
  // nothing from there on, with one cache per vocabulary shared by several
  // grammars: a walk made for one grammar's state serves another's.
  int leaf_states = 0, leavers = 0, cached = 0, unsettled = 0;
  ForEachRandomState([&](const TokenIndex& index, const Pda& pda, int32_t s,
                         const std::string& where) {
    const int32_t words = (index.vocab().size() + 31) / 32;
    const size_t before = index.leaf_cache()->bytes();
    std::optional<StateTokens> leaf =
        ClassifyLeafState(pda, index, s, index.leaf_cache());
    ASSERT_EQ(leaf.has_value(), LeafForm(pda, s, 1 << 20).has_value());
    if (!leaf) return;
    ++leaf_states;
    cached += index.leaf_cache()->bytes() == before;
    const StateTokens all = ClassifyState(pda, index, s);
    ASSERT_EQ(Row(leaf->accepted, words), Row(all.accepted, words)) << where;
    ASSERT_EQ(leaf->uncertain, all.uncertain) << where;
    leavers += !leaf->uncertain.empty();
    // Out of budget at once: the same accepted tokens, and leavers left
    // uncertain rather than rejected.
    std::optional<StateTokens> unread =
        ClassifyLeafState(pda, index, s, index.leaf_cache(), 0);
    ASSERT_EQ(Row(unread->accepted, words), Row(all.accepted, words));
    ASSERT_TRUE(IncludesIds(index, unread->uncertain, all.uncertain)) << where;
    unsettled += unread->uncertain.size() > all.uncertain.size();
  });
  EXPECT_GT(leaf_states, 1000);
  EXPECT_GT(leavers, 200);   // the callers' part is exercised
  EXPECT_GT(cached, 50);     // and walks made before are reused
  EXPECT_GT(unsettled, 50);  // the budget leaves leavers the callers reject
}

TEST(EngineTest, MixedStatesAcceptAsTheGeneralTrieWalkDoes) {
  // States whose rule calls others further on: the DFA walk with the
  // tokens below calling states read by stack steps accepts exactly what
  // ClassifyState accepts, and leaves at least its uncertain tokens
  // uncertain (it does not follow those that leave into the callers).
  int mixed = 0, deferred = 0, extra_uncertain = 0;
  ForEachRandomState([&](const TokenIndex& index, const Pda& pda, int32_t s,
                         const std::string& where) {
    if (LeafForm(pda, s, 1 << 20)) return;
    const int32_t words = (index.vocab().size() + 31) / 32;
    std::optional<StateTokens> got = ClassifyMixedState(
        pda, index, s, kLeafFollowBudget, index.vocab().size());
    ASSERT_TRUE(got.has_value()) << where;
    ++mixed;
    const StateTokens all = ClassifyState(pda, index, s);
    ASSERT_EQ(Row(got->accepted, words), Row(all.accepted, words)) << where;
    ASSERT_TRUE(std::is_sorted(got->uncertain.begin(), got->uncertain.end(),
                               [&](int32_t a, int32_t b) {
                                 return index.vocab().bytes(a) <
                                        index.vocab().bytes(b);
                               }))
        << where;
    ASSERT_TRUE(IncludesIds(index, got->uncertain, all.uncertain)) << where;
    extra_uncertain += got->uncertain.size() > all.uncertain.size();
    // Past the cap on tokens read by stack steps: the general walk's.
    if (!ClassifyMixedState(pda, index, s, kLeafFollowBudget, 0)) ++deferred;
  });
  EXPECT_GT(mixed, 1000);
  EXPECT_GT(deferred, 500);  // the stack steps are exercised
  EXPECT_GT(extra_uncertain, 20);
}

// ClassifyMixedState of rule 0's start, which must read exactly `stepped`
// tokens by stack steps (nullopt when allowed one fewer), against
// ClassifyState: the same accepted tokens, at least its uncertain ones.
// The accepted tokens' bytes, in id order.
std::vector<std::string> MixedStartAccepts(const Pda& pda,
                                           const TokenIndex& index,
                                           int32_t stepped) {
  const int32_t words = (index.vocab().size() + 31) / 32;
  const int32_t start = pda.RuleStart(0);
  std::optional<StateTokens> got =
      ClassifyMixedState(pda, index, start, kLeafFollowBudget, stepped);
  EXPECT_TRUE(got.has_value()) << "more than " << stepped << " stepped";
  if (!got) return {};
  EXPECT_FALSE(
      ClassifyMixedState(pda, index, start, kLeafFollowBudget, stepped - 1))
      << "fewer than " << stepped << " stepped";
  const StateTokens all = ClassifyState(pda, index, start);
  EXPECT_EQ(Row(got->accepted, words), Row(all.accepted, words));
  EXPECT_TRUE(IncludesIds(index, got->uncertain, all.uncertain));
  const std::vector<uint32_t> row = Row(got->accepted, words);
  std::vector<std::string> accepted;
  for (int32_t id = 0; id < index.vocab().size(); ++id) {
    if (Bit(row, id)) accepted.emplace_back(index.vocab().bytes(id));
  }
  return accepted;
}

TEST(EngineTest, MixedStatesStepOnlyTheTokensACalleeMayBegin) {
  // r0 ::= 'a' r1 'd' (and r1 ::= 'b' 'c'): after 'a' the rule only calls r1,
  // so of the tokens going on past 'a' only those going on with 'b' ("ab",
  // "abX": 5 of 20) are read by stack steps; the others die there.
  const Pda pda = PdaOf({Seq({Range('a', 'a'), Call(1), Range('d', 'd')}),
                         Seq({Range('b', 'b'), Range('c', 'c')})});
  const TokenIndex index(DenseVocab("abcd", 3));
  EXPECT_EQ(MixedStartAccepts(pda, index, 5),
            (std::vector<std::string>{"a", "ab", "abc"}));
}

TEST(EngineTest, MixedStatesWalkOnTheirOwnBytes) {
  // r0 ::= 'a' ('c' | r1) 'd' (and r1 ::= 'b' 'c'): after 'a' the rule reads
  // 'c' itself or calls r1. Of the tokens going on past 'a' only those
  // going on with 'b' ("ab", "abX": 5 of 20) are read by stack steps; those
  // on 'c' are walked on, the others die.
  const Pda pda = PdaOf(
      {Seq({Range('a', 'a'), Alt({Range('c', 'c'), Call(1)}), Range('d', 'd')}),
       Seq({Range('b', 'b'), Range('c', 'c')})});
  const TokenIndex index(DenseVocab("abcd", 3));
  EXPECT_EQ(MixedStartAccepts(pda, index, 5),
            (std::vector<std::string>{"a", "ab", "ac", "abc", "acd"}));
}

TEST(EngineTest, MixedStatesLookThroughCalleesThatCallFirst) {
  // r0 ::= 'a' r1 'd', r1 ::= r2 'c' | 'e', r2 ::= 'b': r1 may begin with
  // 'e' itself or with r2's 'b', so of the tokens going on past 'a' those
  // on 'b' or 'e' ("ab", "ae": 2 of 5) are read by stack steps, the others
  // die; where a rule on the way may match nothing, all 5 are.
  const TokenIndex index(DenseVocab("abcde", 2));
  const auto grammar = [](E r2) {
    return PdaOf({Seq({Range('a', 'a'), Call(1), Range('d', 'd')}),
                  Alt({Seq({Call(2), Range('c', 'c')}), Range('e', 'e')}),
                  std::move(r2)});
  };
  EXPECT_EQ(MixedStartAccepts(grammar(Range('b', 'b')), index, 2),
            (std::vector<std::string>{"a", "ab", "ae"}));
  EXPECT_EQ(
      MixedStartAccepts(grammar(Alt({Empty(), Range('b', 'b')})), index, 5),
      (std::vector<std::string>{"a", "ab", "ac", "ae"}));
}

// A string counted the way JSON Schema's maxLength is: r0 ::= 'e' r1{0,n}
// 'e', the counted rule r1 random, so that r1 returns to n states of r0
// that read alike until near their bound.
std::vector<E> CountedGrammar(uint32_t seed) {
  std::mt19937 rng(seed);
  GrammarGen gen(seed);
  // Half the time a character of one or two bytes, as UTF-8's are.
  std::vector<E> inner =
      seed % 4 == 1
          ? std::vector<E>{Alt(
                {Range('a', 'a'), Seq({Range('b', 'b'), Range('a', 'b')})})}
          : gen.Rules();
  const int n = 3 + static_cast<int>(rng() % 12);
  E counted = Empty();
  for (int i = 0; i < n; ++i)
    counted = Alt({Empty(), Seq({Call(1), std::move(counted)})});
  std::vector<E> rules{Seq({Range('e', 'e'), counted, Range('e', 'e')})};
  // The inner rules, renumbered one up; their calls too.
  std::function<void(E*)> shift = [&](E* e) {
    if (e->kind == E::kCall) ++e->rule;
    for (E& k : e->kids) shift(&k);
  };
  for (E& r : inner) {
    shift(&r);
    rules.push_back(std::move(r));
  }
  return rules;
}

Pda RandomPda(uint32_t seed) {
  Nfa nfa = BuildNfa(seed % 2 ? CountedGrammar(seed)
                              : GrammarGen(seed * 7919).Rules());
  EXPECT_TRUE(nfa.PruneUnproductive(0).ok());
  auto pda = nfa.Determinize(0, 10000);
  EXPECT_TRUE(pda.ok()) << pda.status();
  return *std::move(pda);
}

// What reading `w` from `state` above an unknown caller does, after each
// prefix: whether some stack lives, and whether some path left the rule.
std::vector<std::pair<bool, bool>> Trace(const Pda& pda, int32_t state,
                                         const std::string& w) {
  StackPool pool;
  Stepper stepper(pda);
  std::vector<int32_t> cur, next;
  const int32_t top = pool.Add(state, kOpen);
  CloseFlags f = stepper.Close(&pool, &top, 1, &cur);
  std::vector<std::pair<bool, bool>> out{{!cur.empty(), f.open}};
  for (char c : w) {
    next.clear();
    f = stepper.Step(&pool, cur.data(), cur.data() + cur.size(),
                     static_cast<uint8_t>(c), &next);
    cur.swap(next);
    out.push_back({!cur.empty(), f.open});
  }
  return out;
}

TEST(EngineTest, AlikeStatesReadTheirNextBytesAlike) {
  // Against every string over the grammars' bytes up to the shared depth
  // (at most 4 bytes): the same survivals and the same leavings.
  std::vector<std::string> strings{""};
  for (size_t i = 0; i < strings.size() && strings[i].size() < 4; ++i) {
    for (char c : std::string("abcde")) strings.push_back(strings[i] + c);
  }
  int alike_pairs = 0, apart_pairs = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    const Pda pda = RandomPda(seed);
    for (int32_t rule = 0; rule < pda.num_rules(); ++rule) {
      const Pda::Alike alike = pda.AlikeUpTo(rule, 6);
      const std::vector<int32_t>& states = alike.states;
      for (size_t i = 0; i < states.size() && i < 12; ++i) {
        for (size_t j = i + 1; j < states.size() && j < 12; ++j) {
          const int32_t depth = alike.SharedDepth(states[i], states[j]);
          (depth >= 2 ? alike_pairs : apart_pairs)++;
          for (const std::string& w : strings) {
            if (static_cast<int32_t>(w.size()) > depth) break;
            ASSERT_EQ(Trace(pda, states[i], w), Trace(pda, states[j], w))
                << "seed " << seed << " rule " << rule << " states "
                << states[i] << ", " << states[j] << " depth " << depth << " '"
                << w << "'";
          }
        }
      }
    }
  }
  EXPECT_GT(alike_pairs, 200);
  EXPECT_GT(apart_pairs, 200);
}

TEST(EngineTest, AlikeOfARuleTooLargeForOneLevelComparesNothing) {
  // A counted string of 10 characters has a dozen states: with work for
  // fewer than two levels of them, no state is alike to another (level 0
  // alone never lets a context be shared), and none is walked.
  E counted = Empty();
  for (int i = 0; i < 10; ++i)
    counted = Alt({Empty(), Seq({Range('b', 'c'), std::move(counted)})});
  const Pda pda = PdaOf({Seq({Range('a', 'a'), counted, Range('a', 'a')})});
  const Pda::Alike wide = pda.AlikeUpTo(0, 4);
  ASSERT_GE(wide.states.size(), 12u);
  EXPECT_EQ(wide.depth, 4);
  const auto n = static_cast<int64_t>(wide.states.size());
  const Pda::Alike narrow = pda.AlikeUpTo(0, 4, 2 * n - 1);
  EXPECT_EQ(narrow.depth, -1);
  EXPECT_TRUE(narrow.states.empty());
  EXPECT_EQ(narrow.SharedDepth(wide.states[1], wide.states[2]), -1);
  EXPECT_EQ(pda.AlikeUpTo(0, 4, 2 * n).depth, 1);
  // Asked for at least two levels past level 0, work for three is too
  // little; for four, they are compared.
  EXPECT_EQ(pda.AlikeUpTo(0, 4, 3 * n - 1, /*min_depth=*/2).depth, -1);
  EXPECT_EQ(pda.AlikeUpTo(0, 4, 3 * n, /*min_depth=*/2).depth, 2);
}

TEST(EngineTest, LeaversOutOfBudgetThatLandNowhereAreRejected) {
  // The root rule 'a' [b-c]? has no caller: a token that leaves it with
  // bytes left ("ad", "bb" after the optional byte) dies, and needs no
  // byte read in the callers to say so, even with no budget for any.
  const Pda pda =
      PdaOf({Seq({Range('a', 'a'), Alt({Empty(), Range('b', 'c')})})});
  auto index = std::make_shared<TokenIndex>(DenseVocab("abcd", 3));
  const int32_t start = pda.RuleStart(0);
  std::optional<StateTokens> unread =
      ClassifyLeafState(pda, *index, start, index->leaf_cache(), 0);
  ASSERT_TRUE(unread.has_value());
  EXPECT_TRUE(unread->uncertain.empty());
  EXPECT_TRUE(ClassifyState(pda, *index, start).uncertain.empty());
}

// Classifies the start of `rule` (a leaf state) through the index's leaf
// cache, checks it against the general trie walk, and returns how many
// entries the cache gained.
size_t LeafCacheEntriesAdded(const TokenIndex& index, const E& rule) {
  const Pda pda = PdaOf({rule}, 1000);
  const int32_t start = pda.RuleStart(0);
  LeafCache* cache = index.leaf_cache();
  const size_t before = cache->entries();
  std::optional<StateTokens> leaf = ClassifyLeafState(pda, index, start, cache);
  EXPECT_TRUE(leaf.has_value());
  if (!leaf) return 0;
  const int32_t words = (index.vocab().size() + 31) / 32;
  const StateTokens all = ClassifyState(pda, index, start);
  EXPECT_EQ(Row(leaf->accepted, words), Row(all.accepted, words));
  EXPECT_EQ(leaf->uncertain, all.uncertain);
  return cache->entries() - before;
}

TEST(EngineTest, LeafWalksShareTheSubtreesOfFirstBytesThatLeadToOneForm) {
  // [a-c] [a-e]* and then [a-d] [a-e]*: every first byte leads to the same
  // looping state, so the second walk finds the subtrees of a, b and c
  // walked and walks only d's (one cache entry per subtree walked, one per
  // whole walk, and the first walk's number for the looping state's form).
  const TokenIndex index(DenseVocab("abcde", 4));
  EXPECT_EQ(LeafCacheEntriesAdded(
                index, Seq({Range('a', 'c'), Star(Range('a', 'e'))})),
            5u);
  EXPECT_EQ(LeafCacheEntriesAdded(
                index, Seq({Range('a', 'd'), Star(Range('a', 'e'))})),
            2u);
}

TEST(EngineTest, LargeLeafFormsShareTheSubtreesOfSmallTargets) {
  // A key that must avoid many names: its whole form is large, but most
  // first bytes lead to the inside of any string. Here a [a-e]* after b, d
  // and e (walked before, under [a-e] [a-e]*), c [a-b]* after c (new), and
  // a 300-state count after a (too large to key). The second walk adds its
  // whole walk, c's subtree and the number of c's target form; it walks a
  // afresh and takes b's, d's and e's subtrees from the cache.
  const TokenIndex index(DenseVocab("abcde", 4));
  E count = Empty();
  for (int i = 0; i < 300; ++i) {
    count = Alt({Empty(), Seq({Range('a', 'e'), count})});
  }
  EXPECT_EQ(LeafCacheEntriesAdded(
                index, Seq({Range('a', 'e'), Star(Range('a', 'e'))})),
            7u);
  EXPECT_EQ(LeafCacheEntriesAdded(
                index, Alt({Seq({Range('a', 'a'), count}),
                            Seq({Alt({Range('b', 'b'), Range('d', 'e')}),
                                 Star(Range('a', 'e'))}),
                            Seq({Range('c', 'c'), Star(Range('a', 'b'))})})),
            3u);
}

TEST(EngineTest, LeafCacheNumbersKeysAndNeverGivesANumberTwice) {
  // Room for about two numbered keys of 40 bytes.
  LeafCache cache(100);
  const std::string a(40, 'a'), b(40, 'b'), c(40, 'c');
  const uint64_t id_a = cache.IdOf(a);
  EXPECT_EQ(cache.IdOf(a), id_a);
  const uint64_t id_b = cache.IdOf(b);
  EXPECT_NE(id_b, id_a);
  EXPECT_EQ(cache.IdOf(a), id_a);       // now the most recently used
  const uint64_t id_c = cache.IdOf(c);  // drops b, the least recently used
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_NE(id_c, id_a);
  EXPECT_NE(id_c, id_b);
  EXPECT_EQ(cache.IdOf(a), id_a);
  // b again: a number neither it nor anything else had, so that what was
  // kept under its old one can never be read as another key's.
  const uint64_t again = cache.IdOf(b);
  EXPECT_NE(again, id_a);
  EXPECT_NE(again, id_b);
  EXPECT_NE(again, id_c);
}

// Also every context below, each built on demand as the two are compared.
void ExpectSameContext(const Pda& pda, const ContextTokens& a,
                       const ContextTokens& b, int32_t words,
                       const std::string& where) {
  ASSERT_EQ(a.return_state, b.return_state) << where;
  ASSERT_EQ(Row(a.accepted, words), Row(b.accepted, words)) << where;
  ASSERT_EQ(a.uncertain, b.uncertain) << where;
  ASSERT_EQ(a.below == nullptr, b.below == nullptr) << where;
  if (a.below == nullptr) return;
  for (int32_t r : pda.ReturnStates(pda.StateRule(a.return_state))) {
    const ContextTokens* da = a.Context(r);
    const ContextTokens* db = b.Context(r);
    ASSERT_TRUE(da != nullptr && db != nullptr) << where;
    ExpectSameContext(pda, *da, *db, words, where + " below");
  }
}

// Expects `table`'s context of `state` below `return_state` to be the one
// a fresh table of the same grammar builds before any other; false when
// there is none (or the two disagree on that).
bool ExpectContextAsFresh(const std::shared_ptr<const TokenIndex>& index,
                          const Pda& pda, const TokenTable& table,
                          int32_t state, int32_t return_state,
                          const std::string& where) {
  const int32_t words = (index->vocab().size() + 31) / 32;
  const ContextTokens* got = table.Context(state, return_state);
  auto fresh_data = MakeGrammarData(index, pda);
  EXPECT_TRUE(fresh_data.ok()) << where;
  if (!fresh_data.ok()) return false;
  const TokenTable& fresh = (*fresh_data)->table;
  fresh.For(state);
  const ContextTokens* want = fresh.Context(state, return_state);
  EXPECT_EQ(got == nullptr, want == nullptr) << where;
  if (got == nullptr || want == nullptr) return false;
  ExpectSameContext(pda, *got, *want, words, where);
  return true;
}

// A rule called from more places than a build once read below a context
// (64): every caller's context is there, built as it is asked for, and
// settles the tokens leaving the string into it.
TEST(EngineTest, ContextsBelowAWidelyCalledRuleAreAllBuilt) {
  // Rule 2 a string, rule 1 it and some bytes no token holds,
  // called from 70 places of the root, each between its own spellings of
  // its number over {c,d} and {a,b}.
  constexpr int kCallers = 70;
  std::vector<E> callers;
  for (int i = 0; i < kCallers; ++i) {
    std::vector<E> before, after;
    for (int bit = 0; bit < 7; ++bit) {
      const bool one = (i >> bit) & 1;
      before.push_back(Range(one ? 'd' : 'c', one ? 'd' : 'c'));
      after.push_back(Range(one ? 'b' : 'a', one ? 'b' : 'a'));
    }
    std::vector<E> seq = before;
    seq.push_back(Call(1));
    seq.insert(seq.end(), after.begin(), after.end());
    callers.push_back(Seq(std::move(seq)));
  }
  const Pda pda =
      PdaOf({Alt(std::move(callers)), Seq({Call(2), Star(Range('y', 'y'))}),
             Seq({Range('q', 'q'), Star(Range('x', 'x'))})});
  auto index = std::make_shared<TokenIndex>(DenseVocab("abx", 3));
  auto data = MakeGrammarData(index, pda);
  ASSERT_TRUE(data.ok()) << data.status();
  const TokenTable& table = (*data)->table;
  int below = 0;
  for (int32_t s = 0; s < pda.num_states(); ++s) {
    if (pda.StateRule(s) != 2) continue;
    const StateTokens* tokens = table.For(s);
    if (tokens == nullptr || tokens->uncertain.empty()) continue;
    for (int32_t wrapper : pda.ReturnStates(2)) {
      const ContextTokens* ctx = table.Context(s, wrapper);
      ASSERT_NE(ctx, nullptr);
      for (int32_t r : pda.ReturnStates(pda.StateRule(wrapper))) {
        const ContextTokens* caller = ctx->Context(r);
        ASSERT_NE(caller, nullptr) << "state " << s << " caller " << r;
        EXPECT_LT(caller->uncertain.size(), ctx->uncertain.size());
        ++below;
      }
    }
  }
  EXPECT_GE(below, kCallers);
}

TEST(EngineTest, ContextsBuiltFromAlikeReturnStatesEqualFreshOnes) {
  // One table builds every context of a state in turn, later ones from
  // earlier alike ones; a fresh table per context builds it from nothing.
  int shared = 0, contexts = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed);
    const Pda pda = RandomPda(seed);
    auto index = std::make_shared<TokenIndex>(
        seed % 4 == 1 ? DenseVocab("abe", 6) : RandomVocab(&rng));
    auto data = MakeGrammarData(index, pda);
    ASSERT_TRUE(data.ok()) << data.status();
    const TokenTable& table = (*data)->table;
    for (int32_t s = 0; s < pda.num_states(); ++s) {
      const StateTokens* tokens = table.For(s);
      if (tokens == nullptr || tokens->uncertain.empty()) continue;
      const std::vector<int32_t>& returns = pda.ReturnStates(pda.StateRule(s));
      for (size_t k = 0; k < returns.size(); ++k) {
        const int32_t r = returns[k];
        for (size_t e = 0; e < k; ++e) {
          if (pda.StateRule(returns[e]) == pda.StateRule(r) &&
              pda.AlikeUpTo(pda.StateRule(r), 32).SharedDepth(returns[e], r) >
                  0) {
            ++shared;
            break;
          }
        }
        contexts += ExpectContextAsFresh(index, pda, table, s, r,
                                         "seed " + std::to_string(seed) +
                                             " state " + std::to_string(s) +
                                             " return " + std::to_string(r));
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
  EXPECT_GT(contexts, 500);
  EXPECT_GT(shared, 200);  // most of them built from an alike one
}

// A string counted as JSON Schema's minLength/maxLength count characters:
// r0 ::= 'e' r1{m,n} tail, r1 a random character that cannot go on once
// it may end (a choice of fixed-length sequences with distinct first
// bytes, as UTF-8 and JSON escapes are), the tail sometimes a byte the
// character may start with too, or more characters without a bound, so
// that the chain's states are not always the only reading.
std::vector<E> ChainGrammar(std::mt19937* rng) {
  std::vector<E> branches;
  for (char first : std::string("abcd")) {
    if ((*rng)() % 3 == 0) continue;
    std::vector<E> seq{Range(first, first)};
    for (int k = 0, len = (*rng)() % 3; k < len; ++k) {
      const char lo = "abcde"[(*rng)() % 5];
      seq.push_back(Range(lo, std::min<char>('e', lo + (*rng)() % 3)));
    }
    branches.push_back(Seq(std::move(seq)));
  }
  if (branches.empty()) branches.push_back(Range('a', 'a'));
  const int min = (*rng)() % 3, more = 1 + (*rng)() % 8;
  std::vector<E> root{Range('e', 'e')};
  for (int i = 0; i < min; ++i) root.push_back(Call(1));
  E optional = Empty();
  for (int i = 0; i < more; ++i)
    optional = Alt({Empty(), Seq({Call(1), std::move(optional)})});
  root.push_back(std::move(optional));
  switch ((*rng)() % 3) {
    case 0:
      root.push_back(Range('e', 'e'));
      break;
    case 1:
      root.push_back(
          Alt({Range('e', 'e'), Seq({Range('a', 'b'), Range('e', 'e')})}));
      break;
    default:
      root.push_back(Star(Call(1)));
      root.push_back(Range('e', 'e'));
  }
  return {Seq(std::move(root)), Alt(std::move(branches))};
}

TEST(EngineTest, ChainContextsGiveTheOraclesMasks) {
  // Contexts of the counted character's start are split along the chain of
  // counts (SplitByCallChain); the masks they make must be the oracle's.
  int chains = 0, steps = 0;
  for (uint32_t seed = 1; seed <= 150; ++seed) {
    std::mt19937 rng(seed);
    Nfa nfa = BuildNfa(ChainGrammar(&rng));
    ASSERT_TRUE(nfa.PruneUnproductive(0).ok());
    auto pda = nfa.Determinize(0, 10000);
    ASSERT_TRUE(pda.ok()) << pda.status();
    auto index = std::make_shared<TokenIndex>(
        seed % 3 == 0 ? DenseVocab("abcde", 4) : RandomVocab(&rng));
    const int32_t link = pda->RuleStart(1);
    auto data = MakeGrammarData(index, *pda);
    ASSERT_TRUE(data.ok()) << data.status();
    const StateTokens* tokens = (*data)->table.For(link);
    ASSERT_NE(tokens, nullptr);
    chains += ReadAsLinks(*pda, *index, link, tokens->uncertain).has_value();
    CompiledGrammar grammar(*data);
    Oracle oracle(nfa);
    const Vocabulary& vocab = index->vocab();
    for (int walk = 0; walk < 4; ++walk) {
      GrammarMatcher m(grammar);
      std::string text;
      std::vector<uint32_t> row(grammar.mask_words());
      for (int step = 0; step < 10; ++step) {
        m.FillNextTokenMask(row.data());
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < vocab.size(); ++id) {
          if (vocab.kind(id) != TokenKind::kText) continue;
          bool complete;
          const bool want =
              oracle.Read(text + std::string(vocab.bytes(id)), &complete);
          ASSERT_EQ(Bit(row, id), want)
              << "seed " << seed << " text '" << text << "' token '"
              << vocab.bytes(id) << "'";
          if (want) allowed.push_back(id);
        }
        ++steps;
        if (allowed.empty()) break;
        const int32_t pick = allowed[rng() % allowed.size()];
        ASSERT_TRUE(m.AcceptToken(pick).ok());
        text += vocab.bytes(pick);
      }
    }
  }
  EXPECT_GT(chains, 120);  // most characters are a chain's link
  EXPECT_GT(steps, 1500);
}

TEST(EngineTest, ChainContextsBuiltFromAlikeOnesEqualFreshOnes) {
  // Every position of a counted character in one table, later ones from
  // earlier alike positions, against a fresh table per position.
  int shared = 0, contexts = 0;
  for (uint32_t seed = 1; seed <= 100; ++seed) {
    std::mt19937 rng(seed);
    const Pda pda = PdaOf(ChainGrammar(&rng));
    auto index = std::make_shared<TokenIndex>(
        seed % 2 == 0 ? DenseVocab("abcde", 3) : RandomVocab(&rng));
    const int32_t link = pda.RuleStart(1);
    auto data = MakeGrammarData(index, pda);
    ASSERT_TRUE(data.ok()) << data.status();
    const TokenTable& table = (*data)->table;
    const StateTokens* tokens = table.For(link);
    if (tokens == nullptr || tokens->uncertain.empty()) continue;
    const std::vector<int32_t>& returns = pda.ReturnStates(1);
    for (size_t k = 0; k < returns.size(); ++k) {
      const int32_t r = returns[k];
      for (size_t e = 0; e < k; ++e) {
        if (pda.AlikeUpTo(0, 32).SharedDepth(returns[e], r) > 0) {
          ++shared;
          break;
        }
      }
      contexts += ExpectContextAsFresh(
          index, pda, table, link, r,
          "seed " + std::to_string(seed) + " return " + std::to_string(r));
      if (::testing::Test::HasFailure()) return;
    }
  }
  EXPECT_GT(contexts, 300);
  EXPECT_GT(shared, 100);
}

TEST(EngineTest, ChainContextsOfTwoRulesAreNotShared) {
  // Two rules count the same character alike, one followed by 'a' and the
  // other by 'b': their positions read the link's bytes alike, but a token
  // leaving either rule lands in a different caller.
  E counted = Empty();
  for (int i = 0; i < 6; ++i)
    counted = Alt({Empty(), Seq({Call(1), std::move(counted)})});
  const Pda pda = PdaOf(
      {Alt({Seq({Call(2), Range('a', 'a')}), Seq({Call(3), Range('b', 'b')})}),
       Range('c', 'd'), counted, counted});
  auto index = std::make_shared<TokenIndex>(DenseVocab("abcd", 3));
  const int32_t link = pda.RuleStart(1);
  auto data = MakeGrammarData(index, pda);
  ASSERT_TRUE(data.ok()) << data.status();
  const TokenTable& table = (*data)->table;
  ASSERT_NE(table.For(link), nullptr);
  int across = 0;
  const std::vector<int32_t>& returns = pda.ReturnStates(1);
  for (int32_t r : returns) {
    for (int32_t other : returns) {
      if (pda.StateRule(other) == pda.StateRule(r)) continue;
      ++across;
      EXPECT_FALSE(SameChainReading(pda, link, r, other, 3));
    }
    ExpectContextAsFresh(index, pda, table, link, r,
                         "return " + std::to_string(r));
  }
  EXPECT_GT(across, 10);
}

TEST(EngineTest, ChainLinksAreReadOncePerVocabulary) {
  // Two grammars counting the same character differently: the second
  // reads its link's tokens from the first's walk, kept in the
  // vocabulary's cache, and gets the reading a fresh walk gives.
  std::mt19937 rng(7);
  std::vector<E> first = ChainGrammar(&rng);
  const std::shared_ptr<const Vocabulary> vocab = DenseVocab("abcde", 4);
  auto index = std::make_shared<TokenIndex>(vocab);
  std::optional<LinkReading> readings[2];
  for (int g = 0; g < 2; ++g) {
    std::vector<E> rules = first;
    if (g == 1) {
      // One more counted character before the tail.
      rules[0] = Seq({Call(1), std::move(rules[0])});
    }
    const Pda pda = PdaOf(rules);
    const int32_t link = pda.RuleStart(1);
    auto data = MakeGrammarData(index, pda);
    ASSERT_TRUE(data.ok()) << data.status();
    const StateTokens* tokens = (*data)->table.For(link);
    ASSERT_NE(tokens, nullptr);
    const size_t before = index->leaf_cache()->entries();
    readings[g] = ReadAsLinks(pda, *index, link, tokens->uncertain);
    ASSERT_TRUE(readings[g].has_value());
    EXPECT_EQ(index->leaf_cache()->entries() - before, g == 0 ? 1u : 0u);
    auto fresh = std::make_shared<TokenIndex>(vocab);
    std::optional<LinkReading> want =
        ReadAsLinks(pda, *fresh, link, tokens->uncertain);
    EXPECT_EQ(readings[g]->strings, want->strings);
    EXPECT_EQ(readings[g]->end, want->end);
  }
}

CompiledGrammar Compile(Nfa nfa, std::shared_ptr<const Vocabulary> vocab) {
  auto pda = nfa.Determinize(0, 10000);
  EXPECT_TRUE(pda.ok());
  return CompiledGrammar(
      *MakeGrammarData(std::make_shared<TokenIndex>(vocab), *std::move(pda)));
}

// Pruning against a fixpoint oracle: a state is live when its rule's end is
// reachable through bytes, epsilons and calls of rules whose start is live;
// recomputed from scratch until nothing changes.
std::vector<bool> LiveByFixpoint(const Nfa& nfa) {
  std::vector<bool> productive(nfa.num_rules(), false), live;
  for (bool changed = true; changed;) {
    changed = false;
    live.assign(nfa.num_states(), false);
    for (int32_t r = 0; r < nfa.num_rules(); ++r)
      live[nfa.rule_accept(r)] = true;
    for (bool grew = true; grew;) {
      grew = false;
      for (int32_t s = 0; s < nfa.num_states(); ++s) {
        if (live[s]) continue;
        bool on = false;
        for (const auto& e : nfa.bytes(s)) on |= live[e.to];
        for (int32_t t : nfa.epsilon(s)) on |= live[t];
        for (const auto& c : nfa.calls(s)) {
          on |= live[c.to] && productive[c.rule];
        }
        if (on) live[s] = grew = true;
      }
    }
    for (int32_t r = 0; r < nfa.num_rules(); ++r) {
      if (!productive[r] && live[nfa.rule_start(r)]) {
        productive[r] = changed = true;
      }
    }
  }
  return live;
}

TEST(EngineTest, PruningKeepsExactlyTheEdgesIntoLiveStates) {
  int pruned_edges = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    GrammarGen gen(seed * 104729);
    std::vector<E> rules = gen.Rules();
    // A rule that only calls itself never completes, and neither does what
    // must go through it.
    std::mt19937 rng(seed);
    for (size_t r = 0; r < rules.size(); ++r) {
      if (rng() % 3 == 0) {
        rules[r] = Seq({Range('a', 'a'), Call(static_cast<int32_t>(r))});
      }
    }
    Nfa before = BuildNfa(rules);
    const std::vector<bool> live = LiveByFixpoint(before);
    std::vector<bool> productive(before.num_rules());
    for (int32_t r = 0; r < before.num_rules(); ++r)
      productive[r] = live[before.rule_start(r)];
    Nfa after = before;
    absl::Status status = after.PruneUnproductive(0);
    ASSERT_EQ(status.ok(), productive[0]) << "seed " << seed << " " << status;
    if (!status.ok()) continue;
    for (int32_t s = 0; s < before.num_states(); ++s) {
      std::vector<int32_t> want_bytes, got_bytes, want_eps, got_eps;
      std::vector<std::pair<int32_t, int32_t>> want_calls, got_calls;
      for (const auto& e : before.bytes(s))
        if (live[e.to]) want_bytes.push_back(e.to);
      for (const auto& e : after.bytes(s)) got_bytes.push_back(e.to);
      for (int32_t t : before.epsilon(s))
        if (live[t]) want_eps.push_back(t);
      for (int32_t t : after.epsilon(s)) got_eps.push_back(t);
      for (const auto& c : before.calls(s))
        if (live[c.to] && productive[c.rule])
          want_calls.push_back({c.rule, c.to});
      for (const auto& c : after.calls(s)) got_calls.push_back({c.rule, c.to});
      ASSERT_EQ(got_bytes, want_bytes) << "seed " << seed << " state " << s;
      ASSERT_EQ(got_eps, want_eps) << "seed " << seed << " state " << s;
      ASSERT_EQ(got_calls, want_calls) << "seed " << seed << " state " << s;
      pruned_edges += (before.bytes(s).size() + before.epsilon(s).size() +
                       before.calls(s).size()) -
                      (after.bytes(s).size() + after.epsilon(s).size() +
                       after.calls(s).size());
    }
  }
  EXPECT_GT(pruned_edges, 50);  // the random grammars do leave dead paths
}

TEST(EngineTest, PathsThatCanNeverCompleteArePruned) {
  // r0 ::= "a" | "b" r1 ;  r1 ::= "c" r1   (r1 never completes)
  Nfa nfa = BuildNfa({Alt({Range('a', 'a'), Seq({Range('b', 'b'), Call(1)})}),
                      Seq({Range('c', 'c'), Call(1)})});
  ASSERT_TRUE(nfa.PruneUnproductive(0).ok());
  auto vocab = *Vocabulary::FromTokens({"a", "b", "bc", "<eos>"}, {3}, {3}, {});
  GrammarMatcher m(Compile(std::move(nfa), vocab));
  std::vector<uint32_t> row(1);
  m.FillNextTokenMask(row.data());
  EXPECT_EQ(row[0], 1u);  // only "a"
  ASSERT_TRUE(m.AcceptToken(0).ok());
  m.FillNextTokenMask(row.data());
  EXPECT_EQ(row[0], 1u << 3);  // then only the end
  ASSERT_TRUE(m.AcceptToken(3).ok());
  EXPECT_TRUE(m.IsTerminated());
}

TEST(EngineTest, RootThatCanNeverCompleteIsAnError) {
  Nfa nfa = BuildNfa({Seq({Range('a', 'a'), Call(0)})});
  absl::Status s = nfa.PruneUnproductive(0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("rule 'r0' can never complete"), std::string::npos)
      << s;
}

TEST(EngineTest, DeterminizeStopsAtTheStateCap) {
  // (a|b)*a(a|b)(a|b)(a|b)(a|b)(a|b)(a|b): 2^7 DFA states.
  std::vector<E> seq{Star(Range('a', 'b')), Range('a', 'a')};
  for (int i = 0; i < 6; ++i) seq.push_back(Range('a', 'b'));
  Nfa nfa = BuildNfa({Seq(seq)});
  EXPECT_TRUE(nfa.Determinize(0, 1000).ok());
  auto capped = nfa.Determinize(0, 50);
  ASSERT_FALSE(capped.ok());
  EXPECT_EQ(capped.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(EngineTest, EachRuleIsMinimizedOnItsOwn) {
  // r1 reads up to 800 x's, a chain of distinct states that takes a round
  // each to tell apart; r2's "p" and "q" lead to two subsets that read
  // alike, which still merge.
  std::vector<E> chain;
  for (int i = 0; i < 800; ++i)
    chain.push_back(Alt({Range('x', 'x'), Empty()}));
  Nfa nfa = BuildNfa({Seq({Call(1), Call(2)}), Seq(chain),
                      Alt({Seq({Range('p', 'p'), Range('r', 'r')}),
                           Seq({Range('q', 'q'), Range('r', 'r')})})});
  auto pda = nfa.Determinize(0, 10000);
  ASSERT_TRUE(pda.ok()) << pda.status();
  std::vector<int32_t> states(3, 0);
  for (int32_t s = 0; s < pda->num_states(); ++s) ++states[pda->StateRule(s)];
  EXPECT_EQ(states[1], 801);
  EXPECT_EQ(states[2], 3);  // start, after p or q, after r
}

// Byte classes are as coarse as the moves allow: two neighbouring bytes
// share a class exactly when every state moves alike on them. Saving and
// loading (which finds the classes again from byte runs) keeps every move.
TEST(EngineTest, ByteClassesAreTheRangesNoStateTellsApart) {
  int split_somewhere = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    GrammarGen gen(seed * 104729);
    Nfa nfa = BuildNfa(gen.Rules());
    ASSERT_TRUE(nfa.PruneUnproductive(0).ok());
    auto pda = nfa.Determinize(0, 10000);
    ASSERT_TRUE(pda.ok()) << pda.status();
    for (int b = 1; b < 256; ++b) {
      bool alike = true;
      for (int32_t s = 0; s < pda->num_states() && alike; ++s) {
        alike = pda->Next(s, static_cast<uint8_t>(b - 1)) ==
                pda->Next(s, static_cast<uint8_t>(b));
      }
      ASSERT_EQ(alike, pda->ByteClass(static_cast<uint8_t>(b - 1)) ==
                           pda->ByteClass(static_cast<uint8_t>(b)))
          << "seed " << seed << " bytes " << b - 1 << ", " << b;
    }
    for (int32_t c = 0; c < pda->num_byte_classes(); ++c) {
      const uint8_t first = pda->ClassByte(c);
      ASSERT_EQ(pda->ByteClass(first), c);
      if (c > 0) {
        ASSERT_EQ(pda->ByteClass(first - 1), c - 1);
      }
    }
    EXPECT_LT(pda->num_byte_classes(), 256);
    split_somewhere += pda->num_byte_classes() > 1;
    ByteWriter out;
    pda->Save(&out);
    ByteReader in(out.bytes());
    auto loaded = Pda::Load(&in);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_EQ(loaded->num_states(), pda->num_states());
    EXPECT_EQ(loaded->num_byte_classes(), pda->num_byte_classes());
    for (int32_t s = 0; s < pda->num_states(); ++s) {
      for (int b = 0; b < 256; ++b) {
        ASSERT_EQ(loaded->Next(s, static_cast<uint8_t>(b)),
                  pda->Next(s, static_cast<uint8_t>(b)))
            << "seed " << seed << " state " << s << " byte " << b;
      }
    }
  }
  EXPECT_GT(split_somewhere, 150);
}

TEST(EngineTest, MatcherErrorsLeaveStateUnchanged) {
  Nfa nfa = BuildNfa({Seq({Range('a', 'a'), Range('b', 'b')})});
  auto vocab = *Vocabulary::FromTokens({"a", "b", "ab", "<eos>", "<s>"}, {3, 4},
                                       {3}, {"", {}, 40});
  GrammarMatcher m(Compile(std::move(nfa), vocab));
  std::vector<uint32_t> row(2);
  m.FillNextTokenMask(row.data());
  EXPECT_EQ(row[0], (1u << 0) | (1u << 2));
  EXPECT_EQ(row[1], 0u);
  EXPECT_EQ(m.AcceptToken(1).code(),
            absl::StatusCode::kInvalidArgument);  // "b" first
  EXPECT_EQ(m.AcceptToken(3).code(),
            absl::StatusCode::kInvalidArgument);  // eos too early
  EXPECT_EQ(m.AcceptToken(4).code(),
            absl::StatusCode::kInvalidArgument);  // special
  EXPECT_EQ(m.AcceptToken(39).code(),
            absl::StatusCode::kInvalidArgument);  // padding
  EXPECT_EQ(m.AcceptToken(40).code(),
            absl::StatusCode::kInvalidArgument);  // out of range
  EXPECT_EQ(m.AcceptToken(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Rollback(1).code(), absl::StatusCode::kInvalidArgument);
  std::vector<uint32_t> again(2);
  m.FillNextTokenMask(again.data());
  EXPECT_EQ(again, row);
  EXPECT_EQ(m.ValidateTokens({0, 1, 3, 0}), 3);
  EXPECT_EQ(m.num_accepted(), 0);
  ForcedContinuation f = m.JumpForward();
  EXPECT_EQ(f.bytes, "ab");
  EXPECT_EQ(f.token_ids, std::vector<int32_t>{2});
  ASSERT_TRUE(m.AcceptString("ab").ok());
  EXPECT_TRUE(m.CanTerminate());
  ASSERT_TRUE(m.AcceptToken(3).ok());
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_EQ(m.AcceptToken(0).code(), absl::StatusCode::kFailedPrecondition);
  m.FillNextTokenMask(again.data());
  EXPECT_EQ(again[0], 1u << 3);
  ASSERT_TRUE(m.Rollback(1).ok());
  EXPECT_FALSE(m.IsTerminated());
  m.Reset();
  EXPECT_EQ(m.num_accepted(), 0);
}

}  // namespace
}  // namespace grammard::grammar::internal
