// End-to-end tests of the compiler and matcher: masks equal a brute-force
// Earley oracle on random EBNF grammars and regexes with random and real
// vocabularies, and real grammars and inputs go through.
#include "grammar/compiler.h"

#include <dirent.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grammar/engine/grammar_data.h"
#include "grammar/engine/leaf_tokens.h"
#include "grammar/frontends/ebnf/ebnf_parser.h"
#include "grammar/frontends/ebnf/json_grammar.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "grammar/frontends/regex/regex_parser.h"
#include "grammar/ir/grammar_passes.h"
#include "grammar/ir/utf8_lowering.h"
#include "grammar/matcher.h"
#include "grammar/testing/earley_oracle.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"

namespace grammard::grammar {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Bit(const std::vector<uint32_t>& row, int32_t id) {
  return (row[id >> 5] >> (id & 31)) & 1;
}

// Random EBNF over a small alphabet with a two-byte character, so that
// tokens can split UTF-8 sequences. With `pooled`, about half of the atoms
// are copies of three larger expressions, so that equal expressions often
// end at the same place (`(P0 | "a" P0)`), which the compiler builds once.
class EbnfGen {
 public:
  explicit EbnfGen(uint32_t seed, bool pooled = false)
      : rng_(seed), pooled_(pooled) {}

  std::string Grammar() {
    int rules = 1 + rng_() % 3;
    std::string out;
    pool_.clear();
    if (pooled_) {
      rule_ = num_rules_ = 0;
      for (int k = 0; k < 3; ++k) pool_.push_back("(" + Expr(2, false) + ")");
    }
    for (int r = 0; r < rules; ++r) {
      out += (r == 0 ? std::string("root") : "r" + std::to_string(r)) + " ::= ";
      rule_ = r;
      num_rules_ = rules;
      // Every rule has a way to end: an alternative calling later rules only.
      out += Expr(3, true) + " | " + Expr(2, false) + "\n";
    }
    return out;
  }

 private:
  std::string Atom() {
    if (!pool_.empty() && rng_() % 2) return pool_[rng_() % pool_.size()];
    switch (rng_() % 6) {
      case 0:
        return "\"a\"";
      case 1:
        return "\"bc\"";
      case 2:
        return "[a-c]";
      case 3:
        return "\"\xC3\xA9\"";  // é
      case 4:
        return "[^a-z]";
      default:
        return "[ab\xC3\xA9]";
    }
  }
  std::string Expr(int depth, bool may_recurse) {
    int pick = depth <= 0 ? rng_() % 2 : rng_() % 8;
    switch (pick) {
      case 0:
        return Atom();
      case 1:
        if (rule_ + 1 < num_rules_ && rng_() % 2) {
          return "r" +
                 std::to_string(rule_ + 1 + rng_() % (num_rules_ - rule_ - 1));
        }
        return Atom();
      case 2:
        if (may_recurse) {
          int target = rng_() % (rule_ + 1);
          return Atom() + " " +
                 (target == 0 ? std::string("root")
                              : "r" + std::to_string(target));
        }
        return Atom();
      case 3:
        return Expr(depth - 1, may_recurse) + " " +
               Expr(depth - 1, may_recurse);
      case 4:
        return "(" + Expr(depth - 1, may_recurse) + " | " +
               Expr(depth - 1, may_recurse) + ")";
      case 5:
        return "(" + Expr(depth - 1, may_recurse) + ")" + "?*+"[rng_() % 3];
      case 6:
        return "(" + Expr(depth - 1, may_recurse) + "){" +
               std::to_string(rng_() % 2) + "," +
               std::to_string(1 + rng_() % 2) + "}";
      default:
        return "\"\"";
    }
  }

  std::mt19937 rng_;
  bool pooled_;
  std::vector<std::string> pool_;
  int rule_ = 0;
  int num_rules_ = 1;
};

std::shared_ptr<const Vocabulary> RandomVocab(std::mt19937* rng) {
  static const std::vector<std::string> kPieces = {
      "a", "b", "c", "\xC3", "\xA9", "\xC3\xA9", "z", "!", "7"};
  std::vector<std::string> tokens;
  for (int i = 0; i < 80; ++i) {
    std::string t;
    for (int k = 0, n = 1 + (*rng)() % 3; k < n; ++k)
      t += kPieces[(*rng)() % kPieces.size()];
    tokens.push_back(t);
  }
  tokens.push_back("</s>");
  int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
  return *Vocabulary::FromTokens(tokens, {eos}, {eos}, {"random", {}, 100});
}

// An EBNF grammar compiled for a random vocabulary drawn from `rng`.
absl::StatusOr<CompiledGrammar> CompileForRandomVocab(const std::string& ebnf,
                                                      std::mt19937* rng) {
  GrammarCompiler compiler(RandomVocab(rng));
  return compiler.CompileEbnf(ebnf);
}

// Walks random allowed tokens, comparing every mask bit with the oracle.
void CheckAgainstOracle(const CompiledGrammar& grammar,
                        const EarleyOracle& oracle, std::mt19937* rng,
                        int steps, const std::string& what) {
  const Vocabulary& vocab = grammar.vocabulary();
  GrammarMatcher m(grammar);
  std::vector<uint32_t> row(grammar.mask_words());
  std::string text;
  for (int step = 0; step < steps; ++step) {
    m.FillNextTokenMask(row.data());
    const bool complete = oracle.Check(text) & EarleyOracle::kComplete;
    ASSERT_EQ(m.CanTerminate(), complete) << what << " text '" << text << "'";
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < vocab.size(); ++id) {
      bool want = false;
      if (vocab.kind(id) == TokenKind::kText) {
        want = oracle.Check(text + std::string(vocab.bytes(id))) !=
               EarleyOracle::kReject;
      } else if (vocab.is_eos(id)) {
        want = complete;
      }
      ASSERT_EQ(Bit(row, id), want) << what << "\ntext '" << text << "' token "
                                    << id << " '" << vocab.bytes(id) << "'";
      if (want && !vocab.is_eos(id)) allowed.push_back(id);
    }
    if (allowed.empty()) break;
    int32_t pick = allowed[(*rng)() % allowed.size()];
    absl::Status accepted = m.AcceptToken(pick);
    // A grammar ambiguous enough to hold more than kMaxScanNodes stacks
    // stops here by design (see AmbiguityPastTheStackCapIsRefusedNotAHang).
    if (accepted.code() == absl::StatusCode::kResourceExhausted) break;
    ASSERT_TRUE(accepted.ok()) << accepted;
    text += vocab.bytes(pick);
  }
}

absl::StatusOr<EarleyOracle> OracleFor(const absl::StatusOr<Grammar>& parsed) {
  if (!parsed.ok()) return parsed.status();
  auto normalized = Normalize(*parsed);
  if (!normalized.ok()) return normalized.status();
  auto lowered = LowerToBytes(*normalized);
  if (!lowered.ok()) return lowered.status();
  return EarleyOracle::Create(*lowered);
}

// Compiles `text` for a random vocabulary and compares masks along random
// walks with the oracle's. Returns whether it compared: a grammar may fail
// only with an error that names one of `allowed_errors`.
bool MatchesTheOracle(const std::string& text, std::mt19937* rng, int steps,
                      const std::vector<std::string>& allowed_errors,
                      const std::string& root = "root") {
  GrammarCompiler compiler(RandomVocab(rng));
  auto compiled = compiler.CompileEbnf(text, root);
  if (!compiled.ok()) {
    const std::string why(compiled.status().message());
    bool allowed = false;
    for (const std::string& a : allowed_errors) {
      allowed = allowed || why.find(a) != std::string::npos;
    }
    EXPECT_TRUE(allowed) << compiled.status() << "\n" << text;
    return false;
  }
  auto oracle = OracleFor(ParseEbnf(text, root));
  EXPECT_TRUE(oracle.ok()) << oracle.status();
  if (!oracle.ok()) return false;
  CheckAgainstOracle(*compiled, *oracle, rng, steps, text);
  return true;
}

TEST(CompilerTest, RandomEbnfGrammarsMatchTheOracle) {
  int compared = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    // Only grammars that cannot complete may fail here.
    compared += MatchesTheOracle(EbnfGen(seed * 31 + 7).Grammar(), &rng, 10,
                                 {"accepts no string"});
  }
  EXPECT_GT(compared, 200);
}

TEST(CompilerTest, RepeatedExpressionsMatchTheOracle) {
  int compared = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    // A pooled atom may match nothing, which can make `atom root` left
    // recursive.
    compared +=
        MatchesTheOracle(EbnfGen(seed * 17 + 3, /*pooled=*/true).Grammar(),
                         &rng, 10, {"accepts no string", "left recursion"});
  }
  EXPECT_GT(compared, 200);
}

// A copy of every rule under new names, called beside the original: equal
// rules merge before compiling. With `mutate`, one literal of the copy
// differs, so that the copies it reaches must stay apart.
std::string WithCopiedRules(const std::string& text, bool mutate,
                            std::mt19937* rng) {
  const std::regex name(R"(\b(root|r[0-9]+)\b)");
  std::string copy = std::regex_replace(text, name, "c_$1");
  if (mutate) {
    std::vector<size_t> at;
    for (size_t p = copy.find("\"a\""); p != std::string::npos;
         p = copy.find("\"a\"", p + 1)) {
      at.push_back(p);
    }
    if (!at.empty()) copy.replace(at[(*rng)() % at.size()], 3, "\"bc\"");
  }
  return "top ::= root | \"\xC3\xA9\" c_root\n" + text + copy;
}

TEST(CompilerTest, CopiedRulesMatchTheOracle) {
  int compared = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed);
    const std::string text =
        WithCopiedRules(EbnfGen(seed * 13 + 5).Grammar(), seed % 2, &rng);
    compared += MatchesTheOracle(text, &rng, 10, {"accepts no string"}, "top");
  }
  EXPECT_GT(compared, 130);
}

// The call moves out of all of `g`'s states.
int NumCalls(const CompiledGrammar& g) {
  const internal::Pda& pda = g.data().pda;
  int calls = 0;
  for (int32_t s = 0; s < pda.num_states(); ++s) {
    calls += static_cast<int>(pda.CallsEnd(s) - pda.CallsBegin(s));
  }
  return calls;
}

// How many of `g`'s states each rule has.
std::map<std::string, int> StatesPerRule(const CompiledGrammar& g) {
  const internal::Pda& pda = g.data().pda;
  std::map<std::string, int> states;
  for (int32_t s = 0; s < pda.num_states(); ++s) {
    ++states[pda.RuleName(pda.StateRule(s))];
  }
  return states;
}

// Rules referred to only at their callers' ends, as a pattern's automaton
// or an object's member states are written, need no calls: a cycle of them
// is read inside the one rule that calls into it.
TEST(CompilerTest, RulesReferredToAtTheEndAreReadByTheirCallers) {
  GrammarCompiler compiler(*Vocabulary::FromTokens(
      {"a", "b", "ab", "<", ">", "c", "</s>"}, {6}, {6}, {"small", {}, 0}));
  auto g = compiler.CompileEbnf(
      "root ::= \"<\" s0 \">\" s0\n"
      "s0 ::= [^ab<>] s0 | \"a\" s1 | \"\"\n"
      "s1 ::= \"a\" s1 | \"b\" s0 | \"\"\n");
  ASSERT_TRUE(g.ok()) << g.status();
  const int calls = NumCalls(*g);
  // root calls s0 twice, the first time before ">" (so s0 stays a rule);
  // s0 reads s1, and itself again, without calls.
  EXPECT_EQ(calls, 2);
  GrammarMatcher m(*g);
  EXPECT_TRUE(m.AcceptString("<cab>aab").ok());
  EXPECT_TRUE(m.CanTerminate());
}

TEST(CompilerTest, RulesOnlyCopiedOrReadByCallersHaveNoStatesOfTheirOwn) {
  GrammarCompiler compiler(*Vocabulary::FromTokens(
      {"a", "b", "ab", "<", ">", "</s>"}, {5}, {5}, {"small", {}, 0}));
  // `pair` is copied into `root` (small, bounded), `rest` and `tail` are read
  // at the ends of their callers, `word` stays a call.
  auto g = compiler.CompileEbnf(
      "root ::= pair word rest\n"
      "pair ::= \"<\" \">\"\n"
      "rest ::= \"a\" tail | \"b\"\n"
      "tail ::= \"b\" rest | \"\"\n"
      "word ::= [ab]+ \">\"\n");
  ASSERT_TRUE(g.ok()) << g.status();
  std::map<std::string, int> states = StatesPerRule(*g);
  // A rule no call reaches keeps only its start, a state with no moves.
  EXPECT_EQ(states["pair"], 1);
  EXPECT_EQ(states["rest"], 1);
  EXPECT_EQ(states["tail"], 1);
  EXPECT_GT(states["word"], 1);
  EXPECT_GT(states["root"], 4);
  GrammarMatcher m(*g);
  EXPECT_TRUE(m.AcceptString("<>ab>aba").ok());
  EXPECT_TRUE(m.CanTerminate());
}

// Whether a rule is copied into its callers does not depend on whether its
// references to another rule are one shared expression or one each.
TEST(CompilerTest, SharedReferencesWeighAsMuchAsCopies) {
  GrammarCompiler compiler(*Vocabulary::FromTokens({"a", "z", "aa", "</s>"},
                                                   {3}, {3}, {"small", {}, 0}));
  for (bool shared : {false, true}) {
    Grammar g;
    const int32_t x = g.AddRule("x", g.AddBytes("a"));
    const int32_t one = g.AddRuleRef(x);
    std::vector<int32_t> refs;
    for (int k = 0; k < 70; ++k) {
      refs.push_back(shared ? one : g.AddRuleRef(x));
    }
    // 70 references: bounded, but too large to copy into `root`.
    const int32_t link = g.AddRule("link", g.AddSequence(refs));
    g.root =
        g.AddRule("root", g.AddSequence({g.AddRuleRef(link), g.AddBytes("z")}));
    absl::StatusOr<CompiledGrammar> c = compiler.Compile(g);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_GT(StatesPerRule(*c)["link"], 1) << (shared ? "shared" : "copies");
  }
}

// A rule two callers would each read at their ends stays a rule: copies
// of a long string's counted chain, one per object member ending in it,
// were most of some schemas' states.
TEST(CompilerTest, RulesTwoCallersWouldCopyStayRules) {
  GrammarCompiler compiler(*Vocabulary::FromTokens(
      {"a", "b", "0", "<", ">", "x", "y", "</s>"}, {7}, {7}, {"small", {}, 0}));
  // `a` is called (before `b`), `b` is read at root's end: both end with
  // `tail`, which root would read once through `b` and `a` once more.
  auto g = compiler.CompileEbnf(
      "root ::= a b\n"
      "a ::= \"x\" tail\n"
      "b ::= \"y\" tail\n"
      "tail ::= \"<\" [ab]* \">\" [0-9]{40}\n");
  ASSERT_TRUE(g.ok()) << g.status();
  std::map<std::string, int> states = StatesPerRule(*g);
  // Copied, `tail` had one state and `a` and `root` 44 and 45.
  EXPECT_GT(states["tail"], 40);
  EXPECT_LT(states["a"], 5);
  EXPECT_LT(states["root"], 10);
  GrammarMatcher m(*g);
  const std::string tail = "<ab>" + std::string(40, '0');
  EXPECT_TRUE(m.AcceptString("x" + tail + "y" + tail).ok());
  EXPECT_TRUE(m.CanTerminate());
}

// ...unless it is a small loop: the tail of keys that avoid the same names,
// one rule in every key once equal rules are merged, is read inside each
// key, whose states then call nothing and classify by a leaf walk.
TEST(CompilerTest, SmallLoopsTwoCallersEndInAreReadByBoth) {
  GrammarCompiler compiler(*Vocabulary::FromTokens(
      {"a", "b", "\"", "x", "y", ":", "</s>"}, {6}, {6}, {"small", {}, 0}));
  auto g = compiler.CompileEbnf(
      "root ::= k1 \":\" k2 \":\"\n"
      "k1 ::= \"\\\"\" \"x\"* \"a\" loop\n"
      "k2 ::= \"\\\"\" \"y\"* \"b\" loop\n"
      "loop ::= [ab] loop | \"x\" back | \"\\\"\"\n"
      "back ::= [abx] loop | \"\\\"\"\n");
  ASSERT_TRUE(g.ok()) << g.status();
  std::map<std::string, int> states = StatesPerRule(*g);
  // Kept rules, `loop` and `back` had states of their own, which k1 and k2
  // called.
  EXPECT_EQ(states["loop"], 1);
  EXPECT_EQ(states["back"], 1);
  EXPECT_EQ(NumCalls(*g), 2);  // root calls k1 and k2, and that is all
  GrammarMatcher m(*g);
  EXPECT_TRUE(m.AcceptString("\"xxabxb\":\"bxa\":").ok());
  EXPECT_TRUE(m.CanTerminate());
}

// Random right-linear rule sets, some rules also called before the end.
TEST(CompilerTest, RulesReadAtTheirCallersEndMatchTheOracle) {
  int compared = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed);
    const int n = 2 + rng() % 4;
    const char* kAtoms[] = {"\"a\"",        "\"bc\"", "[a-c]",
                            "\"\xC3\xA9\"", "[^a-z]", "\"\""};
    auto atom = [&] { return std::string(kAtoms[rng() % 6]); };
    auto rule = [&] { return "r" + std::to_string(rng() % n); };
    std::string text = "root ::= " + atom() + " " + rule() + " | " +
                       (rng() % 2 ? rule() + " " + atom() + " " + rule()
                                  : atom() + " " + rule()) +
                       "\n";
    for (int r = 0; r < n; ++r) {
      text += "r" + std::to_string(r) + " ::= " + atom();
      for (int k = 0, alts = 1 + rng() % 3; k < alts; ++k) {
        text += " | " + atom() + " " + rule();
        if (rng() % 4 == 0) text += "?";
      }
      text += "\n";
    }
    compared += MatchesTheOracle(text, &rng, 12, {"left recursion"});
  }
  EXPECT_GT(compared, 120);
}

TEST(CompilerTest, RandomRegexesMatchTheOracle) {
  const char* kAtoms[] = {"a",        "b", "[ab]", "[^a]",
                          "\xC3\xA9", ".", "\\d",  "c"};
  int compared = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    std::string re;
    for (int i = 0, n = 1 + rng() % 5; i < n; ++i) {
      std::string atom = kAtoms[rng() % 8];
      if (rng() % 3 == 0) atom = "(" + atom + "|" + kAtoms[rng() % 8] + ")";
      re += atom;
      switch (rng() % 6) {
        case 0:
          re += "*";
          break;
        case 1:
          re += "+";
          break;
        case 2:
          re += "?";
          break;
        case 3:
          re += "{1,3}";
          break;
        default:
          break;
      }
    }
    auto vocab = RandomVocab(&rng);
    GrammarCompiler compiler(vocab);
    auto compiled = compiler.CompileRegex(re);
    ASSERT_TRUE(compiled.ok()) << re << ": " << compiled.status();
    auto oracle = OracleFor(ParseRegex(re));
    ASSERT_TRUE(oracle.ok()) << oracle.status();
    CheckAgainstOracle(*compiled, *oracle, &rng, 8, re);
    ++compared;
  }
  EXPECT_EQ(compared, 300);
}

// NextMaskKey is a promise: equal keys, equal masks. Several random walks
// per random grammar meet at positions again and again; every repeat of a
// key must bring its first row back.
TEST(CompilerTest, EqualMaskKeysMeanEqualMasks) {
  int repeats = 0, keyed = 0, steps = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed);
    const std::string text = EbnfGen(seed * 31 + 7).Grammar();
    auto compiled = CompileForRandomVocab(text, &rng);
    if (!compiled.ok()) continue;
    std::map<std::vector<uintptr_t>, std::vector<uint32_t>> seen;
    std::vector<uintptr_t> key;
    for (int walk = 0; walk < 4; ++walk) {
      GrammarMatcher m(*compiled);
      for (int step = 0; step < 12 && !m.IsTerminated(); ++step) {
        std::vector<uint32_t> row(compiled->mask_words());
        m.FillNextTokenMask(row.data());
        ++steps;
        if (m.NextMaskKey(&key)) {
          ++keyed;
          auto [it, inserted] = seen.emplace(key, row);
          if (!inserted) {
            ++repeats;
            ASSERT_EQ(it->second, row)
                << text << "\nwalk " << walk << " step " << step;
          }
        } else {
          EXPECT_TRUE(key.empty());
        }
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < compiled->vocabulary().size(); ++id) {
          if (Bit(row, id)) allowed.push_back(id);
        }
        if (allowed.empty()) break;
        if (!m.AcceptToken(allowed[rng() % allowed.size()]).ok()) break;
      }
    }
  }
  // Most positions have a key, and keys recur, or this proves nothing.
  EXPECT_GT(keyed, steps * 9 / 10) << keyed << " of " << steps;
  EXPECT_GT(repeats, 1000);
}

// One position reached by different texts has one key: inside a string the
// key (and so the mask) stays put.
TEST(CompilerTest, APositionReachedAgainKeepsItsKey) {
  auto vocab =
      *Vocabulary::FromTokens({"a", "b", "</s>"}, {2}, {2}, {"ab", {}, 0});
  GrammarCompiler compiler(vocab);
  auto compiled = compiler.CompileRegex("a*b");
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  GrammarMatcher m(*compiled);
  std::vector<uintptr_t> start, after_one, after_two, done;
  ASSERT_TRUE(m.NextMaskKey(&start));
  ASSERT_TRUE(m.AcceptToken(0).ok());
  ASSERT_TRUE(m.NextMaskKey(&after_one));
  ASSERT_TRUE(m.AcceptToken(0).ok());
  ASSERT_TRUE(m.NextMaskKey(&after_two));
  EXPECT_EQ(after_one, after_two);
  ASSERT_TRUE(m.AcceptToken(1).ok());
  ASSERT_TRUE(m.NextMaskKey(&done));
  EXPECT_NE(done, after_two);  // only the end of sequence now
}

// `schema` converted with `options` and compiled for a vocabulary of
// `tokens`, the last of which ends the text.
absl::StatusOr<CompiledGrammar> CompileSchema(
    std::string_view schema, const JsonSchemaOptions& options,
    const std::vector<std::string>& tokens) {
  absl::StatusOr<JsonSchemaResult> converted =
      JsonSchemaToGrammar(schema, options);
  if (!converted.ok()) return converted.status();
  const int32_t end = static_cast<int32_t>(tokens.size()) - 1;
  GrammarCompiler compiler(*Vocabulary::FromTokens(tokens, {end}, {end}, {}));
  return compiler.Compile(converted->grammar);
}

TEST(CompilerTest, AnyOrderObjectsReadEachKeyOnce) {
  // Members in any order: a state per set of members written, each reading
  // the members left. The members are rules those states call, so the
  // automaton grows with the sets, not with sets times key bytes (as
  // inline keys, 1,344 states here; 380 with keys as rules, 315 with
  // whole members).
  JsonSchemaOptions options;
  options.property_order = JsonPropertyOrder::kAny;
  absl::StatusOr<CompiledGrammar> g = CompileSchema(
      R"({"properties": {"alpha": {}, "bravo": {}, "charlie": {},
                         "delta": {}, "echo": {}, "foxtrot": {}},
          "additionalProperties": false})",
      options, {"{", "}", "\"", "a", ":", ",", "1", "</s>"});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_LT(g->num_states(), 400);
}

TEST(CompilerTest, CountedMembersWithAlikeValuesShareThem) {
  // kAny counts an object of more than six members at run time, each member
  // a rule of its own reading the rest of its name; members whose values
  // are alike call one rule for the separator and the value, not a copy of
  // the separator's states each (whose tokens lead into a call at once:
  // each was classified by the general walk at its first mask).
  JsonSchemaOptions options;
  options.property_order = JsonPropertyOrder::kAny;
  for (const char* value :
       {R"({"type": "string", "format": "date-time"})",
        R"({"type": "object", "properties": {"x": {"type": "integer"}}})",
        R"({"type": "integer"})"}) {
    std::string properties;
    for (char c = 'a'; c <= 'x'; ++c) {
      absl::StrAppend(&properties, properties.empty() ? "" : ", ", "\"",
                      std::string(2, c), "\": ", value);
    }
    absl::StatusOr<CompiledGrammar> g = CompileSchema(
        R"({"properties": {)" + properties + R"(},
            "additionalProperties": false})",
        options, {"{", "}", "\"", "a", "b", "1", ":", ",", "</s>"});
    ASSERT_TRUE(g.ok()) << g.status();
    const std::map<std::string, int> states = StatesPerRule(*g);
    EXPECT_EQ(states.count("member_value"), 1u) << value;
    EXPECT_EQ(states.count("member_value-1"), 0u) << value;
    int members = 0;
    for (const auto& [rule, n] : states) {
      if (rule.rfind("member_next", 0) != 0) continue;
      ++members;
      // The name's last byte, its closing quote, the call and the end
      // (the first byte is read where the names part).
      EXPECT_LE(n, 4) << value << " " << rule;
    }
    EXPECT_EQ(members, 25) << value;  // and the separator's dispatch
  }
  absl::StatusOr<CompiledGrammar> g = CompileSchema(
      R"({"properties": {"aa": {"type": "integer"}, "bb": {"type": "integer"},
                         "cc": {"type": "integer"}, "dd": {"type": "integer"},
                         "ee": {"type": "integer"}, "ff": {"type": "integer"},
                         "gg": {"type": "string"}},
          "additionalProperties": false})",
      options, {"{", "}", "\"", "a", "b", "g", "1", ":", ",", "</s>"});
  ASSERT_TRUE(g.ok()) << g.status();
  for (const char* good : {R"({"bb":1,"gg":"a","aa":11})", R"({})"}) {
    GrammarMatcher m(*g);
    EXPECT_TRUE(m.AcceptString(good).ok() && m.CanTerminate()) << good;
  }
  for (const char* bad :
       {R"({"aa":1,"aa":1})", R"({"aa":"a")", R"({"gg":1)", R"({"ab":1)"}) {
    GrammarMatcher m(*g);
    EXPECT_FALSE(m.AcceptString(bad).ok()) << bad;
  }
}

TEST(CompilerTest, RepeatableObjectsReadTheirOptionalMembersOnce) {
  // kAnyRepeatable: a state per set of required members written (16 here),
  // each of which may go on with any of 20 optional members. Those are one
  // rule every state calls, not a choice of 20 calls copied into each.
  JsonSchemaOptions options;
  options.property_order = JsonPropertyOrder::kAnyRepeatable;
  std::string properties;
  for (char c = 'a'; c <= 'x'; ++c) {
    properties += std::string(properties.empty() ? "" : ", ") + "\"" + c + c +
                  "\": {\"type\": \"integer\"}";
  }
  absl::StatusOr<CompiledGrammar> g = CompileSchema(
      R"({"properties": {)" + properties + R"(},
          "required": ["aa", "bb", "cc", "dd"],
          "additionalProperties": false})",
      options,
      {"{", "}", "\"", "a", "b", "c", "d", "k", ":", ",", "1", "</s>"});
  ASSERT_TRUE(g.ok()) << g.status();
  const int calls = NumCalls(*g);
  EXPECT_LT(calls, 150);  // 410 as copies
  GrammarMatcher m(*g);
  EXPECT_TRUE(
      m.AcceptString(R"({"kk":1,"cc":1,"bb":1,"aa":1,"kk":1,"dd":1})").ok());
  EXPECT_TRUE(m.CanTerminate());
}

TEST(CompilerTest, RulesUnderLargeCountsAreCalledNotCopied) {
  // 200 items of a 24-digit pattern: the item is called once per count, not
  // copied into each (some 27 states a count; whitespace, small, is still
  // copied).
  absl::StatusOr<CompiledGrammar> g = CompileSchema(
      R"({"type": "array", "maxItems": 200,
          "items": {"type": "string", "pattern": "^[0-9a-f]{24}$"}})",
      {}, {"[", "]", "\"", "a", "0", ",", " ", "</s>"});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_LT(g->num_states(), 2000);
  GrammarMatcher m(*g);
  const std::string item = "\"" + std::string(23, '0') + "a\"";
  EXPECT_TRUE(m.AcceptString("[" + item + ", " + item + "]").ok());
  EXPECT_TRUE(m.CanTerminate());
}

// A slice of a real vocabulary: every llama3 token whose bytes are JSON
// punctuation, digits, a few letters, spaces or newlines.
TEST(CompilerTest, JsonWithARealVocabularySliceMatchesTheOracle) {
  auto dir = testing::TokenizerDir("llama3");
  if (!dir) GTEST_SKIP() << testing::MissingDataMessage("tokenizer llama3");
  auto full = Vocabulary::FromDirectory(*dir, {"llama3", {}, 0});
  ASSERT_TRUE(full.ok());
  const std::string kChars = "{}[]:,\"0123456789.-eEtrufalsn \n\\";
  std::vector<std::string> tokens;
  for (int32_t id = 0; id < (*full)->tokenizer_size(); ++id) {
    std::string_view b = (*full)->bytes(id);
    if ((*full)->kind(id) == TokenKind::kText && !b.empty() &&
        b.find_first_not_of(kChars) == std::string_view::npos) {
      tokens.emplace_back(b);
    }
  }
  ASSERT_GT(tokens.size(), 500u) << tokens.size();
  tokens.push_back("<|eot|>");
  int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
  auto vocab = *Vocabulary::FromTokens(tokens, {eos}, {eos}, {"slice", {}, 0});
  GrammarCompiler compiler(vocab);
  auto compiled = compiler.CompileEbnf(BuiltinJsonEbnf());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto oracle = OracleFor(ParseEbnf(BuiltinJsonEbnf()));
  ASSERT_TRUE(oracle.ok());
  std::mt19937 rng(1);
  CheckAgainstOracle(*compiled, *oracle, &rng, 12, "json");
}

// States whose rule calls nothing from there on are classified from a walk
// shared through the vocabulary's leaf cache (leaf_tokens.h); on real
// grammars and a real vocabulary that equals the general trie walk, token
// for token, whichever grammar made the walk.
TEST(CompilerTest, LeafStatesOfRealGrammarsClassifyAsTheGeneralWalk) {
  auto dir = testing::TokenizerDir("llama3");
  if (!dir) GTEST_SKIP() << testing::MissingDataMessage("tokenizer llama3");
  auto vocab = Vocabulary::FromDirectory(*dir, {"llama3", {}, 0});
  ASSERT_TRUE(vocab.ok());
  GrammarCompiler compiler(*vocab);
  CompileOptions lazy;
  lazy.classify_ahead = std::chrono::microseconds(0);
  const std::vector<absl::StatusOr<CompiledGrammar>> grammars = {
      compiler.CompileEbnf(BuiltinJsonEbnf(), "root", lazy),
      // The same string rule below other callers: walks are reused, rests
      // read anew.
      compiler.CompileEbnf(R"(root ::= "[" s ("," s)* "]" | "{" s ":" d "}"
s ::= "\"" ([^"\\] | "\\" ["\\/bfnrt])* "\""
d ::= [0-9]+ ("." [0-9]+)?)",
                           "root", lazy),
      compiler.CompileRegex(R"([a-z]{0,40}(@[a-z]+\.(com|org))?)", lazy),
      compiler.CompileRegex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)", lazy),
      compiler.CompileRegex(R"(( |\n)*[^ \n]+)", lazy),
  };
  int leaf_states = 0, with_leavers = 0;
  for (const auto& g : grammars) {
    ASSERT_TRUE(g.ok()) << g.status();
    const internal::GrammarData& data = g->data();
    const int32_t words = g->mask_words();
    for (int32_t s = 0; s < data.pda.num_states(); ++s) {
      if (!data.pda.HasBytes(s)) continue;
      std::optional<internal::StateTokens> leaf = internal::ClassifyLeafState(
          data.pda, *data.index, s, data.index->leaf_cache());
      if (!leaf) continue;
      ++leaf_states;
      const internal::StateTokens all =
          internal::ClassifyState(data.pda, *data.index, s);
      std::vector<uint32_t> a(words, 0), b(words, 0);
      bool clean = false;
      leaf->accepted.AddTo(a.data(), words, &clean);
      all.accepted.AddTo(b.data(), words, &clean);
      ASSERT_EQ(a, b) << "state " << s;
      ASSERT_EQ(leaf->uncertain, all.uncertain) << "state " << s;
      with_leavers += !leaf->uncertain.empty();
    }
  }
  EXPECT_GT(leaf_states, 40);
  EXPECT_GT(with_leavers, 10);
}

// Every bench workload's input is accepted token by token (longest allowed
// token first) and may end there, with the real tokenizers.
TEST(CompilerTest, BenchInputsGoThroughWithRealTokenizers) {
  auto data = testing::SharedDataDir();
  if (!data) GTEST_SKIP() << testing::MissingDataMessage("../shared/data");
  const std::string bench = *data + "/../bench";
  struct Case {
    const char* kind;
    const char* grammar;
    const char* input;
  };
  const Case kCases[] = {{"json", "", "json_doc.json"},
                         {"regex", "datetime.regex", "datetime.txt"},
                         {"regex", "email.regex", "email.txt"},
                         {"ebnf", "sql.ebnf", "sql.txt"},
                         {"ebnf", "arith.ebnf", "arith.txt"},
                         {"ebnf", "arith_nows.ebnf", "arith_nows.txt"}};
  for (const char* tok : {"llama3", "qwen3"}) {
    auto dir = testing::TokenizerDir(tok);
    if (!dir)
      GTEST_SKIP() << testing::MissingDataMessage(std::string("tokenizer ") +
                                                  tok);
    auto vocab = Vocabulary::FromDirectory(*dir, {tok, {}, 0});
    ASSERT_TRUE(vocab.ok());
    GrammarCompiler compiler(*vocab);
    for (const Case& c : kCases) {
      std::string g = c.grammar[0] ? ReadFile(bench + "/" + c.grammar) : "";
      while (!g.empty() && g.back() == '\n' && std::string(c.kind) == "regex")
        g.pop_back();
      auto compiled = std::string(c.kind) == "json"
                          ? compiler.CompileEbnf(BuiltinJsonEbnf())
                      : std::string(c.kind) == "regex"
                          ? compiler.CompileRegex(g)
                          : compiler.CompileEbnf(g);
      ASSERT_TRUE(compiled.ok()) << c.input << ": " << compiled.status();
      GrammarMatcher m(*compiled);
      std::string input = ReadFile(bench + "/" + c.input);
      std::vector<uint32_t> row(compiled->mask_words());
      size_t pos = 0;
      while (pos < input.size()) {
        m.FillNextTokenMask(row.data());
        int32_t best = -1;
        for (int32_t id = 0; id < (*vocab)->size(); ++id) {
          std::string_view b = (*vocab)->bytes(id);
          if (Bit(row, id) && !b.empty() &&
              input.compare(pos, b.size(), b) == 0 &&
              (best < 0 || b.size() > (*vocab)->bytes(best).size())) {
            best = id;
          }
        }
        ASSERT_GE(best, 0) << tok << " " << c.input << " stuck at byte " << pos;
        ASSERT_TRUE(m.AcceptToken(best).ok());
        pos += (*vocab)->bytes(best).size();
      }
      EXPECT_TRUE(m.CanTerminate()) << tok << " " << c.input;
    }
  }
}

// Every GBNF grammar of llama.cpp compiles, and so does every EBNF grammar
// of XGrammar's tests that our parser accepts.
TEST(CompilerTest, RealGrammarsCompile) {
  auto data = testing::SharedDataDir();
  if (!data) GTEST_SKIP() << testing::MissingDataMessage("../shared/data");
  auto vocab = *Vocabulary::FromTokens(
      {"a", "{", "}", " ", "\"", "x", "1", "</s>"}, {7}, {7}, {});
  GrammarCompiler compiler(vocab);
  const std::string dir = *data + "/grammars/llama.cpp";
  int compiled = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() < 5 || name.substr(name.size() - 5) != ".gbnf") continue;
      auto g = compiler.CompileEbnf(ReadFile(dir + "/" + name));
      EXPECT_TRUE(g.ok()) << name << ": " << g.status();
      ++compiled;
    }
    closedir(d);
  }
  EXPECT_GE(compiled, 8);
  std::ifstream lines(*data + "/grammars/xgrammar/ebnf_grammars.jsonl");
  int parsed = 0, ok = 0;
  for (std::string line; std::getline(lines, line);) {
    size_t at = line.find("\"grammar\": \"");
    if (at == std::string::npos) continue;
    // The grammar text is the last JSON string on the line.
    std::string text;
    for (size_t i = at + 12; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) {
        char c = line[++i];
        text += c == 'n' ? '\n' : c == 't' ? '\t' : c;
      } else {
        text += line[i];
      }
    }
    if (!ParseEbnf(text).ok()) continue;
    ++parsed;
    auto g = compiler.CompileEbnf(text);
    if (g.ok()) {
      ++ok;
    } else {
      // Grammars that parse may still be refused, but only with a reason.
      EXPECT_FALSE(g.status().message().empty());
    }
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GE(ok * 10, parsed * 9) << ok << " of " << parsed;
}

TEST(CompilerTest, ErrorsNameTheProblem) {
  auto vocab = *Vocabulary::FromTokens({"a", "</s>"}, {1}, {1}, {});
  GrammarCompiler compiler(vocab);
  auto undefined = compiler.CompileEbnf("root ::= missing");
  ASSERT_FALSE(undefined.ok());
  EXPECT_NE(undefined.status().message().find("missing"), std::string::npos);
  auto left = compiler.CompileEbnf("root ::= root \"a\" | \"a\"");
  ASSERT_FALSE(left.ok());
  EXPECT_NE(left.status().message().find("left recursion"), std::string::npos);
  auto never = compiler.CompileEbnf("root ::= \"a\" root");
  ASSERT_FALSE(never.ok());
  EXPECT_NE(never.status().message().find("accepts no string"),
            std::string::npos);
  auto backref = compiler.CompileRegex("(a)\\1");
  ASSERT_FALSE(backref.ok());
  CompileOptions late;
  late.deadline = std::chrono::steady_clock::now();
  auto expired = compiler.CompileEbnf(R"(root ::= "a"+)", "root", late);
  EXPECT_EQ(expired.status().code(), absl::StatusCode::kDeadlineExceeded);
  // The classic exponential determinization: the 13th byte from the end.
  auto big = compiler.CompileRegex("[ab]*a[ab]{12}", {500});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
}

// A compile cancelled before it starts stops in its first stage, parsing:
// a 40,000-rule grammar took 45 ms to parse (1.4 s under tsan) before
// anything looked at the deadline, and a server shutting down waited for it.
TEST(CompilerTest, ACancelledCompileStopsWhileParsing) {
  auto vocab = *Vocabulary::FromTokens({"a", "</s>"}, {1}, {1}, {});
  GrammarCompiler compiler(vocab);
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 40000; ++i) {
    absl::StrAppend(&chain, "r", i, " ::= r", i + 1, "\n");
  }
  absl::StrAppend(&chain, "r40000 ::= \"a\"\n");
  std::atomic<bool> cancel{true};
  CompileOptions options;
  options.deadline = Deadline(Deadline::Clock::time_point::max(), &cancel);
  auto cancelled = compiler.CompileEbnf(chain, "root", options);
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(cancelled.status().message().find("parsing"), std::string::npos)
      << cancelled.status();
}

// Front ends hand over grammars as built; Compile is where they are
// normalised: unreachable rules are dropped before they count against the
// size limit or are checked for left recursion, and what is left is bounded.
TEST(CompilerTest, CompileNormalisesWhatFrontEndsHandOver) {
  auto vocab = *Vocabulary::FromTokens({"a", "</s>"}, {1}, {1}, {});
  GrammarCompiler compiler(vocab);
  Grammar g;
  g.root = g.AddRule("root", g.AddBytes("a"));
  // Unreachable: one large rule, one left-recursive.
  const int32_t large =
      g.AddRule("large", g.AddRepeat(g.AddBytes("a"), 0, 5000));
  const int32_t recursive = g.AddRule("recursive");
  g.rules[recursive].body =
      g.AddSequence({g.AddRuleRef(recursive), g.AddBytes("a")});
  CompileOptions small;
  small.max_grammar_exprs = 100;
  absl::StatusOr<CompiledGrammar> compiled = compiler.Compile(g, small);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  // Reached, each is refused.
  auto reaching = [&](int32_t rule) {
    Grammar out = g;
    out.rules[out.root].body =
        out.AddChoice({out.AddBytes("a"), out.AddRuleRef(rule)});
    return out;
  };
  compiled = compiler.Compile(reaching(large), small);
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kResourceExhausted)
      << compiled.status();
  compiled = compiler.Compile(reaching(recursive));
  EXPECT_NE(compiled.status().message().find("left recursion"),
            std::string::npos)
      << compiled.status();
}

// Speculative decoding rolls back whole drafts: 300 tokens back must land
// exactly where the matcher was, masks included, in O(k).
TEST(CompilerTest, RollbackReachesFarBack) {
  auto vocab =
      *Vocabulary::FromTokens({"(", ")", "()", "x", "</s>"}, {4}, {4}, {});
  GrammarCompiler compiler(vocab);
  auto grammar = compiler.CompileEbnf(R"g(root ::= item*
item ::= "(" root ")" | "x")g");
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  GrammarMatcher m(*grammar);
  std::vector<std::vector<uint32_t>> masks;
  std::vector<uint32_t> row(grammar->mask_words());
  // Nest 150 deep, then close half: a stack that changes at every step.
  std::vector<int32_t> tokens(150, 0);
  tokens.insert(tokens.end(), 75, 1);
  tokens.insert(tokens.end(), 75, 3);
  for (int32_t t : tokens) {
    m.FillNextTokenMask(row.data());
    masks.push_back(row);
    ASSERT_TRUE(m.AcceptToken(t).ok());
  }
  ASSERT_EQ(m.num_accepted(), 300);
  for (int back : {1, 99, 200}) {
    ASSERT_TRUE(m.Rollback(back).ok());
    m.FillNextTokenMask(row.data());
    EXPECT_EQ(row, masks[m.num_accepted()]) << "after " << back;
  }
  EXPECT_EQ(m.num_accepted(), 0);
  EXPECT_FALSE(m.Rollback(1).ok());
}

// Found by ebnf_fuzzer: an ambiguous grammar whose parse stacks double at
// every nesting level ("," may continue either optional `root`). Past the
// cap a token is refused with ResourceExhausted instead of stalling the
// matcher for seconds, and the matcher stays usable.
TEST(CompilerTest, AmbiguityPastTheStackCapIsRefusedNotAHang) {
  auto vocab =
      *Vocabulary::FromTokens({"a", "0", "2", ",", "</s>"}, {4}, {4}, {});
  GrammarCompiler compiler(vocab);
  auto grammar = compiler.CompileEbnf(
      R"g(root ::= "a" [0-9]+ ("," root)? [0-9]+ ("," root)?)g");
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  GrammarMatcher m(*grammar);
  std::vector<uint32_t> row(grammar->mask_words());
  absl::Status refused;
  for (int level = 0; level < 64 && refused.ok(); ++level) {
    for (int32_t t : {0, 2, 1, 2, 1, 2, 3}) {  // "a20202,": 5 splits a level
      m.FillNextTokenMask(row.data());
      refused = m.AcceptToken(t);
      if (!refused.ok()) break;
    }
  }
  ASSERT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("ambiguous"), std::string::npos) << refused;
  m.FillNextTokenMask(row.data());  // still usable, at the last position
  EXPECT_TRUE(m.Rollback(1).ok());
}

// A rule called from more places than a token table follows at once (its
// tokens that leave it become uncertain, settled per caller on demand)
// gives the oracle's masks all the same.
TEST(CompilerTest, RulesCalledFromManyPlacesMatchTheOracle) {
  std::string text = "root ::= item+\nitem ::= ";
  for (int i = 0; i < 48; ++i) {
    text += (i ? " | \"p" : "\"p") + std::to_string(i) + "\" w \"s" +
            std::to_string(i) + ";\"";
  }
  text += "\nw ::= [ab]+ \"q\"\n";
  std::mt19937 rng(5);
  const std::string kPieces[] = {"a", "b", "q", "s", ";", "p", "1",
                                 "2", "3", "0", "4", "5", "6", "qs"};
  // Continuations all differ, so the rule keeps 48 return states.
  std::vector<std::string> tokens;
  for (int i = 0; i < 400; ++i) {
    std::string t;
    for (int k = 0, n = 1 + rng() % 4; k < n; ++k) t += kPieces[rng() % 14];
    tokens.push_back(t);
  }
  tokens.push_back("</s>");
  const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
  GrammarCompiler compiler(
      *Vocabulary::FromTokens(tokens, {eos}, {eos}, {"pieces", {}, 0}));
  auto compiled = compiler.CompileEbnf(text);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto oracle = OracleFor(ParseEbnf(text));
  ASSERT_TRUE(oracle.ok()) << oracle.status();
  for (int walk = 0; walk < 20; ++walk)
    CheckAgainstOracle(*compiled, *oracle, &rng, 30, "many callers");
}

// A rule that tail-calls itself from many alternatives (an object state that
// optional members leave unchanged) once doubled its return states per
// alternative while compiling: 2^64 of them here.
TEST(CompilerTest, ARuleTailCallingItselfFromManyPlacesCompiles) {
  std::string text = "root ::= \"x\" s \"y\" | \"z\" s \"w\"\ns ::= \"e\"";
  for (int i = 0; i < 64; ++i) {
    text += " | \"a" + std::to_string(i) + "\" s";
  }
  std::mt19937 rng(3);
  auto compiled = CompileForRandomVocab(text, &rng);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  GrammarMatcher m(*compiled);
  EXPECT_TRUE(m.AcceptString("xa7a63ey").ok());
  EXPECT_TRUE(m.CanTerminate());
}

// Asked not to classify ahead, compiling builds no token table: each is
// built when a matcher first needs it, and matchers racing for the same
// tables from many threads see the masks one matcher sees alone.
TEST(CompilerTest, TablesAreBuiltOnDemandAlikeFromManyThreads) {
  std::vector<std::string> tokens;
  std::mt19937 rng(3);
  const std::string kChars = "{}[]:,\"0123456789.-eEtrufalsnxyz \n\\";
  for (int i = 0; i < 3000; ++i) {
    std::string t;
    for (int len = 1 + rng() % 4; len > 0; --len)
      t += kChars[rng() % kChars.size()];
    tokens.push_back(t);
  }
  tokens.push_back("</s>");
  const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
  GrammarCompiler compiler(
      *Vocabulary::FromTokens(tokens, {eos}, {eos}, {"random", {}, 0}));
  // One walk's masks, choosing by `seed` among the allowed tokens.
  auto walk = [](const CompiledGrammar& g, uint32_t seed) {
    GrammarMatcher m(g);
    std::mt19937 pick(seed);
    std::vector<std::vector<uint32_t>> masks;
    std::vector<uint32_t> row(g.mask_words());
    for (int step = 0; step < 60 && !m.IsTerminated(); ++step) {
      m.FillNextTokenMask(row.data());
      masks.push_back(row);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < g.vocabulary().size(); ++id) {
        if (Bit(row, id)) allowed.push_back(id);
      }
      if (allowed.empty() ||
          !m.AcceptToken(allowed[pick() % allowed.size()]).ok())
        break;
    }
    return masks;
  };
  CompileOptions on_demand;
  on_demand.classify_ahead = std::chrono::microseconds(0);
  auto alone = compiler.CompileEbnf(BuiltinJsonEbnf(), "root", on_demand);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->data().table.num_built(), 0);
  std::vector<std::vector<std::vector<uint32_t>>> expected;
  for (uint32_t seed = 0; seed < 8; ++seed) {
    expected.push_back(walk(*alone, seed));
    EXPECT_GT(alone->data().table.num_built(), 0);
  }
  auto shared = compiler.CompileEbnf(BuiltinJsonEbnf(), "root", on_demand);
  ASSERT_TRUE(shared.ok()) << shared.status();
  std::vector<std::vector<std::vector<uint32_t>>> got(expected.size());
  std::vector<std::thread> threads;
  for (uint32_t seed = 0; seed < expected.size(); ++seed) {
    threads.emplace_back([&, seed] { got[seed] = walk(*shared, seed); });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(got, expected);
  EXPECT_EQ(shared->data().table.num_built(), alone->data().table.num_built());
  // By default compiling classifies ahead: a grammar this small entirely,
  // so walks build nothing more.
  auto ahead = compiler.CompileEbnf(BuiltinJsonEbnf());
  ASSERT_TRUE(ahead.ok()) << ahead.status();
  const int32_t built = ahead->data().table.num_built();
  EXPECT_GE(built, alone->data().table.num_built());
  for (uint32_t seed = 0; seed < expected.size(); ++seed)
    EXPECT_EQ(walk(*ahead, seed), expected[seed]);
  EXPECT_EQ(ahead->data().table.num_built(), built);
}

}  // namespace
}  // namespace grammard::grammar
