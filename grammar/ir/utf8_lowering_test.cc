#include "grammar/ir/utf8_lowering.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "grammar/base/utf8.h"
#include "grammar/frontends/ebnf/ebnf_parser.h"
#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

using Seq = std::vector<CharRange>;

std::vector<Seq> Sequences(uint32_t lo, uint32_t hi) {
  std::vector<Seq> out;
  for (const Utf8Sequence& s : Utf8Sequences(lo, hi)) out.push_back(s.bytes);
  return out;
}

TEST(Utf8SequencesTest, SplitsAtLengthAndContinuationBoundaries) {
  EXPECT_EQ(Sequences(0, 0x7F), (std::vector<Seq>{{{0, 0x7F}}}));
  EXPECT_EQ(Sequences(0x80, 0x7FF),
            (std::vector<Seq>{{{0xC2, 0xDF}, {0x80, 0xBF}}}));
  EXPECT_EQ(Sequences(0x800, 0xFFFF),
            (std::vector<Seq>{{{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}},
                              {{0xE1, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}},
                              {{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}},
                              {{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}}}));
  EXPECT_EQ(Sequences(0x10000, 0x10FFFF),
            (std::vector<Seq>{
                {{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
                {{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
                {{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}}}));
  EXPECT_EQ(Sequences(0, 0x10FFFF).size(), 9u);
  // é..ë share their lead byte; U+00FF..U+0100 cross a continuation boundary.
  EXPECT_EQ(Sequences(0xE9, 0xEB),
            (std::vector<Seq>{{{0xC3, 0xC3}, {0xA9, 0xAB}}}));
  EXPECT_EQ(Sequences(0xFF, 0x100),
            (std::vector<Seq>{{{0xC3, 0xC3}, {0xBF, 0xBF}},
                              {{0xC4, 0xC4}, {0x80, 0x80}}}));
  EXPECT_TRUE(Sequences(0xD800, 0xDFFF).empty());
  EXPECT_TRUE(Sequences(0x110000, 0x120000).empty());
  EXPECT_EQ(Sequences(0x10FFFF, 0x20000000).size(), 1u);
}

// Whether `bytes` is one of the strings the lowered expression matches in
// full: a direct walk over byte classes, sequences and choices.
class LoweredClass {
 public:
  LoweredClass(const Grammar& g, int32_t expr) : g_(g), expr_(expr) {}

  bool Matches(const std::string& bytes) const {
    return Ends(expr_, bytes, 0) & (uint64_t{1} << bytes.size());
  }

 private:
  uint64_t Ends(int32_t e, const std::string& s, size_t pos) const {
    const Expr& x = g_.exprs[e];
    switch (x.kind) {
      case ExprKind::kByteClass: {
        if (pos >= s.size()) return 0;
        const auto b = static_cast<uint8_t>(s[pos]);
        for (const CharRange& r : x.ranges) {
          if (b >= r.lo && b <= r.hi) return uint64_t{1} << (pos + 1);
        }
        return 0;
      }
      case ExprKind::kSequence: {
        uint64_t cur = uint64_t{1} << pos;
        for (int32_t c : x.children) {
          uint64_t next = 0;
          for (size_t q = 0; q <= s.size(); ++q) {
            if (cur & (uint64_t{1} << q)) next |= Ends(c, s, q);
          }
          cur = next;
        }
        return cur;
      }
      case ExprKind::kChoice: {
        uint64_t out = 0;
        for (int32_t c : x.children) out |= Ends(c, s, pos);
        return out;
      }
      default:
        ADD_FAILURE() << "unexpected kind in a lowered class";
        return 0;
    }
  }

  const Grammar& g_;
  int32_t expr_;
};

bool InRanges(const std::vector<CharRange>& ranges, uint32_t cp) {
  for (const CharRange& r : ranges) {
    if (cp >= r.lo && cp <= r.hi) return true;
  }
  return false;
}

std::string Encode(uint32_t cp) {
  std::string out;
  base::AppendUtf8(cp, &out);
  return out;
}

// Byte strings that are not a single well-formed UTF-8 character.
std::vector<std::string> MalformedSamples() {
  return {"",
          "\x80",
          "\xBF",
          "\xC0\x80",          // Overlong NUL.
          "\xC1\xBF",          // Overlong U+007F.
          "\xE0\x80\x80",      // Overlong.
          "\xE0\x9F\xBF",      // Overlong U+07FF.
          "\xED\xA0\x80",      // U+D800.
          "\xED\xBF\xBF",      // U+DFFF.
          "\xF0\x8F\xBF\xBF",  // Overlong U+FFFF.
          "\xF4\x90\x80\x80",  // U+110000.
          "\xF5\x80\x80\x80",
          "\xFF",
          "\xC3",  // Truncated.
          "\xE2\x82",
          "\xF0\x9F\x98",
          "a\x80",
          "\xC3\xA9\xA9",  // Trailing continuation.
          "ab"};
}

// Lowers `ranges` and checks membership for `code_points` and malformed
// inputs against the ranges themselves.
void CheckClass(const std::vector<CharRange>& ranges,
                const std::vector<uint32_t>& code_points) {
  Grammar g;
  g.root = g.AddRule("root", g.AddCharClass(ranges));
  const std::vector<CharRange> normal = g.exprs[0].ranges;
  absl::StatusOr<Grammar> lowered = LowerToBytes(g);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  ASSERT_TRUE(IsByteLevel(*lowered));
  ASSERT_TRUE(lowered->Validate().ok());
  const LoweredClass cls(*lowered, lowered->rules[0].body);
  for (uint32_t cp : code_points) {
    if (!base::IsScalarValue(cp)) continue;
    ASSERT_EQ(cls.Matches(Encode(cp)), InRanges(normal, cp))
        << "U+" << std::hex << cp << " class " << g.ToString();
  }
  for (const std::string& bad : MalformedSamples()) {
    EXPECT_FALSE(cls.Matches(bad)) << g.ToString();
  }
}

std::vector<uint32_t> BoundaryValues() {
  std::vector<uint32_t> out;
  for (uint32_t b : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFu, 0x1000u,
                     0xD7FFu, 0xE000u, 0xFFFFu, 0x10000u, 0x3FFFFu, 0x40000u,
                     0xFFFFFu, 0x100000u, 0x10FFFFu}) {
    for (int d = -2; d <= 2; ++d) {
      const int64_t v = static_cast<int64_t>(b) + d;
      if (v >= 0 && v <= 0x10FFFF) out.push_back(static_cast<uint32_t>(v));
    }
  }
  // Every continuation-byte boundary below U+1000.
  for (uint32_t v = 0; v < 0x1000; v += 0x40) {
    out.push_back(v);
    if (v > 0) out.push_back(v - 1);
  }
  return out;
}

TEST(LowerToBytesTest, ExhaustiveOverAllScalarValues) {
  std::vector<uint32_t> all;
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) all.push_back(cp);
  CheckClass({}, all);  // Nothing.
  CheckClass({{0, 0x10FFFF}}, all);
  CheckClass({{'a', 'a'}, {0xE9, 0xEB}, {0x4E00, 0x9FA5}, {0x1F600, 0x1F64F}},
             all);
  std::vector<CharRange> negated = ComplementCodepointRanges({{'a', 'a'}});
  CheckClass(negated, all);
}

TEST(LowerToBytesTest, RandomClassesAtBoundariesAndRandomPoints) {
  std::mt19937 rng(12345);
  const std::vector<uint32_t> boundaries = BoundaryValues();
  std::uniform_int_distribution<uint32_t> any(0, 0x10FFFF);
  for (int round = 0; round < 300; ++round) {
    // Range ends drawn mostly near encoding boundaries, where bugs live.
    std::vector<CharRange> ranges;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      auto pick = [&] {
        return rng() % 2 ? boundaries[rng() % boundaries.size()] : any(rng);
      };
      uint32_t lo = pick();
      uint32_t hi = pick();
      if (lo > hi) std::swap(lo, hi);
      ranges.push_back({lo, hi});
    }
    std::vector<uint32_t> points = boundaries;
    for (const CharRange& r : ranges) {
      for (int d = -1; d <= 1; ++d) {
        points.push_back(r.lo + d);
        points.push_back(r.hi + d);
      }
    }
    for (int i = 0; i < 500; ++i) points.push_back(any(rng));
    CheckClass(ranges, points);
  }
}

TEST(LowerToBytesTest, KeepsTheRestOfTheGrammar) {
  absl::StatusOr<Grammar> g = ParseEbnf(
      "root ::= \"x\" [a-c]* item{2,3} | \"\"\nitem ::= [\xC3\xA9-\xC3\xAB] "
      "[a-c] %[\\x80]");
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Grammar> lowered = LowerToBytes(*g);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_TRUE(IsByteLevel(*lowered));
  EXPECT_FALSE(IsByteLevel(*g));
  EXPECT_EQ(lowered->ToString(),
            "root ::= \"x\" %[a-c]* item{2,3} | \"\"\n"
            "item ::= %[\\xc3] %[\\xa9-\\xab] %[a-c] %[\\x80]\n");
  EXPECT_EQ(lowered->exprs[lowered->rules[1].body].children.size(), 4u);
}

TEST(LowerToBytesTest, SharesIdenticalClasses) {
  Grammar g;
  const int32_t a = g.AddCharClass({{0x100, 0x2000}});
  const int32_t b = g.AddCharClass({{0x100, 0x2000}});
  g.root = g.AddRule("root", g.AddSequence({a, b}));
  absl::StatusOr<Grammar> lowered = LowerToBytes(g);
  ASSERT_TRUE(lowered.ok());
  const Expr& seq = lowered->exprs[lowered->rules[0].body];
  ASSERT_EQ(seq.children.size(), 2u);
  EXPECT_EQ(seq.children[0], seq.children[1]);
}

TEST(LowerToBytesTest, MergesSequencesIntoATrie) {
  Grammar g;
  g.root = g.AddRule("root", g.AddCharClass({{'a', 'a'}}, /*negated=*/true));
  absl::StatusOr<Grammar> lowered = LowerToBytes(g);
  ASSERT_TRUE(lowered.ok());
  EXPECT_EQ(lowered->ToString(),
            "root ::= %[\\x00-`b-\\x7f] | %[\\xc2-\\xdf] %[\\x80-\\xbf] | "
            "%[\\xe0] %[\\xa0-\\xbf] %[\\x80-\\xbf] | %[\\xe1-\\xec] "
            "%[\\x80-\\xbf] %[\\x80-\\xbf] | %[\\xed] %[\\x80-\\x9f] "
            "%[\\x80-\\xbf] | %[\\xee\\xef] %[\\x80-\\xbf] %[\\x80-\\xbf] | "
            "%[\\xf0] %[\\x90-\\xbf] %[\\x80-\\xbf] %[\\x80-\\xbf] | "
            "%[\\xf1-\\xf3] %[\\x80-\\xbf] %[\\x80-\\xbf] %[\\x80-\\xbf] | "
            "%[\\xf4] %[\\x80-\\x8f] %[\\x80-\\xbf] %[\\x80-\\xbf]\n");
  // [\u0100-\u017F]: one lead byte range shared by two continuations.
  Grammar h;
  h.root = h.AddRule("root", h.AddCharClass({{0x100, 0x17F}, {0x180, 0x1BF}}));
  EXPECT_EQ(LowerToBytes(h)->ToString(),
            "root ::= %[\\xc4-\\xc6] %[\\x80-\\xbf]\n");
  Grammar k;
  k.root = k.AddRule("root", k.AddCharClass({{0x100, 0x101}, {0x13F, 0x140}}));
  EXPECT_EQ(LowerToBytes(k)->ToString(),
            "root ::= %[\\xc4] %[\\x80\\x81\\xbf] | %[\\xc5] %[\\x80]\n");
}

TEST(LowerToBytesTest, LoweredGrammarsRoundTripThroughEbnf) {
  for (const char* text : {"root ::= \"x\" [^a] | [\xC3\xA9-\xC3\xAB]* \"y\" | "
                           "[\\u0100-\\u017f]+\n",
                           "root ::= ([^\"\\\\\\x00-\\x1f] | \"\\\\\" [nrt])* "
                           "r\nr ::= [] | [^]"}) {
    absl::StatusOr<Grammar> g = ParseEbnf(text);
    ASSERT_TRUE(g.ok()) << g.status();
    absl::StatusOr<Grammar> lowered = LowerToBytes(*g);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    absl::StatusOr<Grammar> again = ParseEbnf(lowered->ToString());
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << lowered->ToString();
    EXPECT_TRUE(StructurallyEqual(*lowered, *again)) << lowered->ToString();
  }
}

TEST(LowerToBytesTest, RespectsTheSizeLimit) {
  Grammar g;
  std::vector<int32_t> classes;
  for (uint32_t i = 0; i < 50; ++i) {
    classes.push_back(g.AddCharClass({{0x100 + 3 * i, 0x10000 + 1000 * i}}));
  }
  g.root = g.AddRule("root", g.AddChoice(classes));
  GrammarLimits limits;
  limits.max_exprs = 100;
  absl::StatusOr<Grammar> lowered = LowerToBytes(g, limits);
  EXPECT_EQ(lowered.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(lowered.status().message()).find("max_exprs"),
            std::string::npos);
  EXPECT_TRUE(LowerToBytes(g).ok());
}

}  // namespace
}  // namespace grammard::grammar
