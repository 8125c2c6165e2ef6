// Serialized grammars: a loaded grammar gives the same masks as the one that
// was saved, on random walks; bytes of another version or tokenizer, and
// damaged bytes (flipped, cut short, or altered behind a valid checksum),
// are refused or at worst load into a grammar that still runs safely.
#include "grammar/serialize.h"

#include <zlib.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/engine/grammar_data.h"
#include "grammar/frontends/ebnf/json_grammar.h"
#include "grammar/matcher.h"
#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

std::shared_ptr<const Vocabulary> TestVocab(const std::string& name) {
  std::vector<std::string> tokens;
  for (const char* t :
       {"{",     "}",    "[",  "]",  ",",  ":",   "\"",  "\"a", "b\"",
        "a",     "b",    "1",  "12", "0",  "-",   ".",   "e",   "true",
        "false", "null", " ",  "\n", "\\", "\\n", "{\"", "\":", "\",",
        "x",     "y",    "xy", "(",  ")",  "+",   "*"}) {
    tokens.push_back(t);
  }
  tokens.push_back("</s>");
  const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
  return *Vocabulary::FromTokens(tokens, {eos}, {eos}, {name, {}, 0});
}

struct Case {
  const char* name;
  absl::StatusOr<CompiledGrammar> (*compile)(const GrammarCompiler&,
                                             const CompileOptions&);
};

std::vector<Case> Cases() {
  return {
      {"json",
       [](const GrammarCompiler& c, const CompileOptions& o) {
         return c.CompileEbnf(BuiltinJsonEbnf(), "root", o);
       }},
      {"regex",
       [](const GrammarCompiler& c, const CompileOptions& o) {
         return c.CompileRegex("(xy|x)+[0-9]*", o);
       }},
      {"recursive ebnf",
       [](const GrammarCompiler& c, const CompileOptions& o) {
         return c.CompileEbnf(
             "root ::= e\ne ::= t (\"+\" t)*\nt ::= f (\"*\" f)*\n"
             "f ::= [0-9]+ | \"(\" e \")\"\n",
             "root", o);
       }},
  };
}

// Masks of both grammars along one random walk of allowed tokens.
void ExpectSameMasks(const CompiledGrammar& a, const CompiledGrammar& b,
                     uint32_t seed) {
  GrammarMatcher ma(a), mb(b);
  std::mt19937 rng(seed);
  std::vector<uint32_t> ra(a.mask_words()), rb(b.mask_words());
  for (int step = 0; step < 40 && !ma.IsTerminated(); ++step) {
    ma.FillNextTokenMask(ra.data());
    mb.FillNextTokenMask(rb.data());
    ASSERT_EQ(ra, rb) << "step " << step;
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < a.vocabulary().size(); ++id) {
      if ((ra[id >> 5] >> (id & 31)) & 1) allowed.push_back(id);
    }
    ASSERT_FALSE(allowed.empty());
    const int32_t pick = allowed[rng() % allowed.size()];
    ASSERT_TRUE(ma.AcceptToken(pick).ok());
    ASSERT_TRUE(mb.AcceptToken(pick).ok());
  }
}

// Token tables are built as matchers first need them: a random walk builds
// some, the others stay for later.
std::string SerializeAfterWalks(const CompiledGrammar& g, int walks) {
  for (int seed = 1; seed <= walks; ++seed) ExpectSameMasks(g, g, 100 + seed);
  return SerializeGrammar(g);
}

// Saved with none, some or all of its tables built (all: many walks), a
// grammar loads with the same tables built and gives the same masks.
TEST(SerializeTest, LoadedGrammarGivesTheSameMasks) {
  GrammarCompiler compiler(TestVocab("v"));
  CompileOptions on_demand;
  on_demand.classify_ahead = std::chrono::microseconds(0);
  for (const Case& c : Cases()) {
    for (int walks : {0, 1, 50}) {
      SCOPED_TRACE(testing::Message() << c.name << ", walks " << walks);
      absl::StatusOr<CompiledGrammar> g = c.compile(compiler, on_demand);
      ASSERT_TRUE(g.ok()) << g.status();
      const std::string bytes = SerializeAfterWalks(*g, walks);
      const internal::TokenTable& table = g->data().table;
      EXPECT_EQ(table.num_built() == 0, walks == 0);
      absl::StatusOr<CompiledGrammar> loaded = compiler.Deserialize(bytes);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      EXPECT_EQ(loaded->num_states(), g->num_states());
      EXPECT_EQ(loaded->data().table.num_built(), table.num_built());
      EXPECT_EQ(loaded->MemoryBytes() + table.alike_bytes(), g->MemoryBytes());
      EXPECT_EQ(SerializeGrammar(*loaded), bytes);
      for (uint32_t seed = 1; seed <= 20; ++seed)
        ExpectSameMasks(*g, *loaded, seed);
    }
  }
}

TEST(SerializeTest, AnotherTokenizerIsRefused) {
  GrammarCompiler saver(TestVocab("v"));
  std::vector<std::string> tokens = {"a", "b", "</s>"};
  GrammarCompiler other(
      *Vocabulary::FromTokens(tokens, {2}, {2}, {"w", {}, 0}));
  const std::string bytes = SerializeGrammar(*saver.CompileRegex("a+"));
  absl::StatusOr<CompiledGrammar> loaded = other.Deserialize(bytes);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(loaded.status().message().find("tokenizer"), std::string::npos);
}

// The header is magic, format version, engine version...: altering the
// engine version string is what a blob of another release looks like.
TEST(SerializeTest, AnotherEngineOrFormatIsRefused) {
  GrammarCompiler compiler(TestVocab("v"));
  std::string bytes = SerializeGrammar(*compiler.CompileRegex("a+"));
  const size_t engine_at = bytes.find(kEngineVersion);
  ASSERT_NE(engine_at, std::string::npos);
  std::string other_engine = bytes;
  other_engine[engine_at + std::strlen(kEngineVersion) - 1] ^= 1;
  EXPECT_EQ(compiler.Deserialize(other_engine).status().code(),
            absl::StatusCode::kFailedPrecondition);
  std::string other_format = bytes;
  other_format[8] += 1;  // the format version follows the 8-byte magic
  absl::Status s = compiler.Deserialize(other_format).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("format version"), std::string::npos);
  EXPECT_EQ(compiler.Deserialize("not a grammar").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(SerializeTest, DamagedBytesAreRefused) {
  GrammarCompiler compiler(TestVocab("v"));
  const std::string bytes =
      SerializeAfterWalks(*compiler.CompileEbnf(BuiltinJsonEbnf()), 20);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string damaged = bytes;
    const size_t at = rng() % damaged.size();
    damaged[at] ^= static_cast<char>(1 + rng() % 255);
    EXPECT_FALSE(compiler.Deserialize(damaged).ok()) << "byte " << at;
  }
  for (size_t len = 0; len < bytes.size(); len += 1 + len / 8) {
    EXPECT_FALSE(compiler.Deserialize(bytes.substr(0, len)).ok()) << len;
  }
  EXPECT_FALSE(compiler.Deserialize(bytes + "x").ok());
}

// Damage behind a recomputed checksum reaches the structural checks: each
// load must fail cleanly or give a grammar whose matcher runs within bounds
// (AddressSanitizer builds make any stray read fatal).
TEST(SerializeTest, AlteredPayloadWithValidChecksumIsSafe) {
  GrammarCompiler compiler(TestVocab("v"));
  const std::string bytes =
      SerializeAfterWalks(*compiler.CompileEbnf(BuiltinJsonEbnf()), 20);
  // Payload = the last string: its u64 length sits right before it, the
  // CRC before that.
  uint64_t payload_len = 0;
  size_t payload_at = 0;
  for (size_t at = 8; at + 8 <= bytes.size(); ++at) {
    std::memcpy(&payload_len, bytes.data() + at, 8);
    if (at + 8 + payload_len == bytes.size()) {
      payload_at = at + 8;
      break;
    }
  }
  ASSERT_GT(payload_at, 12u);
  std::mt19937 rng(11);
  int refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string damaged = bytes;
    for (int k = 0, n = 1 + rng() % 4; k < n; ++k) {
      damaged[payload_at + rng() % payload_len] = static_cast<char>(rng());
    }
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(damaged.data() + payload_at),
              static_cast<uInt>(payload_len)));
    std::memcpy(&damaged[payload_at - 12], &crc, 4);
    absl::StatusOr<CompiledGrammar> g = compiler.Deserialize(damaged);
    if (!g.ok()) {
      ++refused;
      continue;
    }
    GrammarMatcher m(*g);
    std::vector<uint32_t> row(g->mask_words());
    for (int step = 0; step < 10 && !m.IsTerminated(); ++step) {
      m.FillNextTokenMask(row.data());
      int32_t pick = -1;
      for (int32_t id = 0; id < g->vocabulary().size() && pick < 0; ++id) {
        if ((row[id >> 5] >> (id & 31)) & 1) pick = id;
      }
      if (pick < 0 || !m.AcceptToken(pick).ok()) break;
    }
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace grammard::grammar
