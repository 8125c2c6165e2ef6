#include "grammar/frontends/json_schema/internal/char_dfa.h"

#include <random>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "grammar/frontends/regex/regex_parser.h"
#include "gtest/gtest.h"

namespace grammard::grammar::json_schema_internal {
namespace {

CharDfa FromRegex(const std::string& pattern) {
  absl::StatusOr<Grammar> g = ParseRegex(pattern);
  EXPECT_TRUE(g.ok()) << g.status();
  CharNfa nfa;
  absl::StatusOr<CharNfa::Fragment> f =
      nfa.AddExpr(*g, g->rules[g->root].body, DfaLimits{});
  EXPECT_TRUE(f.ok()) << f.status();
  absl::StatusOr<CharDfa> dfa = Determinize(nfa, *f, DfaLimits{});
  EXPECT_TRUE(dfa.ok()) << dfa.status();
  return *dfa;
}

TEST(CharDfaTest, RegexMatches) {
  CharDfa d = FromRegex("[a-c]+x|y{2,3}");
  EXPECT_TRUE(Matches(d, "abx"));
  EXPECT_TRUE(Matches(d, "yy"));
  EXPECT_TRUE(Matches(d, "yyy"));
  EXPECT_FALSE(Matches(d, "yyyy"));
  EXPECT_FALSE(Matches(d, "x"));
  EXPECT_FALSE(Matches(d, ""));
}

TEST(CharDfaTest, MinimizedSizes) {
  // (a|b)*abb has a 4-state minimal DFA.
  EXPECT_EQ(FromRegex("(a|b)*abb").num_states(), 4);
  EXPECT_EQ(FromRegex("[^x]").num_states(), 2);
  EXPECT_TRUE(FromRegex("[]").IsEmpty());
}

TEST(CharDfaTest, UnicodeAndLength) {
  CharDfa d = FromRegex("é.");
  EXPECT_TRUE(Matches(d, "éa"));
  EXPECT_TRUE(Matches(d, "é😀"));
  EXPECT_FALSE(Matches(d, "é\n"));
  absl::StatusOr<CharDfa> len =
      LimitLength(FromRegex("[a-z]*"), 2, 3, DfaLimits{});
  ASSERT_TRUE(len.ok());
  EXPECT_FALSE(Matches(*len, "a"));
  EXPECT_TRUE(Matches(*len, "ab"));
  EXPECT_TRUE(Matches(*len, "abc"));
  EXPECT_FALSE(Matches(*len, "abcd"));
  CharDfa l = LengthDfa(1, -1);
  EXPECT_FALSE(Matches(l, ""));
  EXPECT_TRUE(Matches(l, "ü"));
  EXPECT_TRUE(Matches(l, "long enough"));
}

TEST(CharDfaTest, SetOperations) {
  CharDfa a = FromRegex("[a-z]+");
  absl::StatusOr<CharDfa> keys = LiteralsDfa({"id", "name", "ü"});
  ASSERT_TRUE(keys.ok());
  absl::StatusOr<CharDfa> other = Subtract(a, *keys, DfaLimits{});
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(Matches(*other, "id"));
  EXPECT_TRUE(Matches(*other, "i"));
  EXPECT_TRUE(Matches(*other, "idx"));
  EXPECT_FALSE(Matches(*other, "name"));
  CharDfa not_a = Complement(a);
  EXPECT_TRUE(Matches(not_a, ""));
  EXPECT_TRUE(Matches(not_a, "A"));
  EXPECT_FALSE(Matches(not_a, "abc"));
  absl::StatusOr<CharDfa> u = Union(a, *keys, DfaLimits{});
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(Matches(*u, "ü"));
  EXPECT_TRUE(Matches(*u, "zz"));
  absl::StatusOr<CharDfa> none =
      Intersect(FromRegex("a+"), FromRegex("b+"), DfaLimits{});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->IsEmpty());
  std::string example;
  EXPECT_TRUE(Example(*other, &example));
  EXPECT_TRUE(Matches(*other, example)) << example;
}

// A random regex over a, b and c, in the syntax both ParseRegex and
// std::regex (ECMAScript) read alike. What a star or a count repeats never
// matches the empty string: std::regex loops on `((a)?)*`.
std::string RandomRegex(std::mt19937* rng, int depth, bool may_be_empty) {
  const int kinds = depth == 0 ? 2 : may_be_empty ? 7 : 4;
  switch (static_cast<int>((*rng)() % kinds)) {
    case 0:
      return std::string(1, "abc"[(*rng)() % 3]);
    case 1:
      return (*rng)() % 2 ? "[ab]" : "[^a]";
    case 2:
      return RandomRegex(rng, depth - 1, may_be_empty) +
             RandomRegex(rng, depth - 1, false);
    case 3:
      return "(" + RandomRegex(rng, depth - 1, may_be_empty) + "|" +
             RandomRegex(rng, depth - 1, may_be_empty) + ")";
    case 4:
      return "(" + RandomRegex(rng, depth - 1, false) + ")*";
    case 5:
      return "(" + RandomRegex(rng, depth - 1, false) + ")?";
    default:
      return "(" + RandomRegex(rng, depth - 1, false) + "){1,3}";
  }
}

// Whether states x and y of `d` accept the same strings: a walk of the pairs
// they reach together on every code point range (a brute-force oracle).
bool SameLanguage(const CharDfa& d, int32_t x, int32_t y) {
  auto next = [&](int32_t s, uint32_t cp) {
    if (s < 0) return -1;
    for (const CharDfa::Edge& e : d.edges[s]) {
      if (e.lo <= cp && cp <= e.hi) return e.to;
    }
    return -1;
  };
  std::vector<uint32_t> probes;  // a code point from every range boundary
  for (const auto& row : d.edges) {
    for (const CharDfa::Edge& e : row) {
      probes.push_back(e.lo);
      probes.push_back(e.hi);
      if (e.hi < kMaxCodepoint) probes.push_back(e.hi + 1);
    }
  }
  std::vector<std::pair<int32_t, int32_t>> work{{x, y}}, seen;
  while (!work.empty()) {
    const auto [a, b] = work.back();
    work.pop_back();
    if (std::find(seen.begin(), seen.end(), std::make_pair(a, b)) !=
        seen.end()) {
      continue;
    }
    seen.push_back({a, b});
    const bool fa = a >= 0 && d.accepting[a], fb = b >= 0 && d.accepting[b];
    if (fa != fb) return false;
    for (uint32_t cp : probes) {
      const int32_t na = next(a, cp), nb = next(b, cp);
      if (na >= 0 || nb >= 0) work.push_back({na, nb});
    }
  }
  return true;
}

// Determinizing and minimizing keep a regex's language (std::regex on every
// string of up to five letters) and leave no two states that accept alike.
TEST(CharDfaTest, MinimizedDfasMatchAndAreMinimal) {
  std::mt19937 rng(7);
  std::vector<std::string> texts{""};
  for (size_t i = 0; i < texts.size() && texts.size() < 364; ++i) {
    if (texts[i].size() == 5) continue;
    for (char c : std::string("abc")) texts.push_back(texts[i] + c);
  }
  int merged_somewhere = 0;
  for (int round = 0; round < 300; ++round) {
    const std::string pattern = RandomRegex(&rng, 4, true);
    const CharDfa d = FromRegex(pattern);
    const std::regex re(pattern);
    for (const std::string& t : texts) {
      ASSERT_EQ(Matches(d, t), std::regex_match(t, re))
          << pattern << " on '" << t << "'";
    }
    for (int32_t x = 0; x < d.num_states(); ++x) {
      for (int32_t y = x + 1; y < d.num_states(); ++y) {
        ASSERT_FALSE(SameLanguage(d, x, y))
            << pattern << ": states " << x << " and " << y;
      }
    }
    merged_somewhere += d.num_states() > 2;
  }
  EXPECT_GT(merged_somewhere, 100);
}

TEST(CharDfaTest, LimitsAreErrors) {
  absl::StatusOr<Grammar> g = ParseRegex("(a|b)*a(a|b){12}");
  ASSERT_TRUE(g.ok());
  CharNfa nfa;
  DfaLimits limits;
  limits.max_states = 1000;
  absl::StatusOr<CharNfa::Fragment> f =
      nfa.AddExpr(*g, g->rules[g->root].body, limits);
  ASSERT_TRUE(f.ok());
  absl::StatusOr<CharDfa> d = Determinize(nfa, *f, limits);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted);
  limits.max_states = 100000;
  limits.deadline = std::chrono::steady_clock::now();
  d = Determinize(nfa, *f, limits);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(CharDfaTest, Utf8Helpers) {
  EXPECT_EQ(CodepointCount("aé😀"), 3);
  EXPECT_EQ(CodepointCount("\xff"), -1);
  EXPECT_EQ(CodepointCount("\xed\xa0\x80"), -1);  // a surrogate
  std::string s;
  AppendUtf8(0x1F600, &s);
  EXPECT_EQ(s, "😀");
}

TEST(CharDfaTest, AlwaysGrows) {
  EXPECT_TRUE(AlwaysGrows(FromRegex("[a-z]+")));
  EXPECT_TRUE(AlwaysGrows(FromRegex("a(b|c)*d*")));
  EXPECT_FALSE(AlwaysGrows(FromRegex("ab|cd")));
  EXPECT_FALSE(AlwaysGrows(FromRegex("x[0-9]{2}")));
  EXPECT_FALSE(AlwaysGrows(FromRegex("a+|b")));  // "b" ends there
  EXPECT_FALSE(AlwaysGrows(FromRegex("[]")));
}

// Against brute force over {a, b}: with n states, a prefix goes on into
// infinitely many strings exactly when it goes on into one more than n
// characters longer (a longer one repeats a state).
TEST(CharDfaTest, AlwaysGrowsAgreesWithCountingStrings) {
  static const char* kPieces[] = {"a",  "b",     "ab",      "(a|b)",   "a*",
                                  "b+", "(ab)?", "[ab]{2}", "(a|bb)*", "b?"};
  std::mt19937 rng(5);
  int grows = 0, checked = 0;
  for (int round = 0; round < 300 && checked < 60; ++round) {
    std::string re;
    for (int k = 0, n = 1 + rng() % 3; k < n; ++k) re += kPieces[rng() % 10];
    if (rng() % 3 == 0) re += std::string("|") + kPieces[rng() % 10];
    const CharDfa d = FromRegex(re);
    const int n = d.num_states();
    if (n > 7 || d.IsEmpty()) continue;
    ++checked;
    const int longest = 6 + n + 1;
    std::vector<std::string> accepted;
    std::vector<std::string> level = {""};
    for (int len = 0; len <= longest; ++len) {
      std::vector<std::string> next;
      for (const std::string& w : level) {
        if (Matches(d, w)) accepted.push_back(w);
        next.push_back(w + "a");
        next.push_back(w + "b");
      }
      level.swap(next);
    }
    bool want = true;
    for (const std::string& w : accepted) {
      for (size_t cut = 0; cut <= w.size() && cut <= 6; ++cut) {
        const std::string p = w.substr(0, cut);
        bool longer = false;
        for (const std::string& v : accepted) {
          longer = longer ||
                   (v.size() > p.size() + n && v.compare(0, p.size(), p) == 0);
        }
        want = want && longer;
      }
    }
    grows += want;
    EXPECT_EQ(AlwaysGrows(d), want) << re;
  }
  EXPECT_GE(checked, 40);
  EXPECT_GT(grows, 5);
  EXPECT_LT(grows, checked - 5);
}

}  // namespace
}  // namespace grammard::grammar::json_schema_internal
