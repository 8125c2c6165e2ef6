// CharDfa: deterministic automata over Unicode code points, the tool the JSON
// Schema front end uses wherever string or number constraints must be
// combined: a `pattern` together with `minLength`/`maxLength`, a `format`
// with a `pattern`, "any key except the declared ones", `not` around a
// string constraint, numeric ranges intersected with `multipleOf`.
//
//   CharNfa nfa;
//   absl::StatusOr<CharNfa::Fragment> f = nfa.AddRegex(regex_grammar, limits);
//   absl::StatusOr<CharDfa> dfa = Determinize(nfa, *f, limits);
//   absl::StatusOr<CharDfa> both = Intersect(*dfa, LengthDfa(1, 10), limits);
//   bool ok = Matches(*both, "hello");
//
// Every DFA is partial: a missing edge goes to an implicit dead state. State
// 0 is the start. Operations return trimmed automata (every state reachable
// and able to reach acceptance; an empty language is a single non-accepting
// state with no edges), so emptiness is a one-state check; all but
// LimitLength also minimise them, so equal languages give equal sizes.
//
// Cost: subset construction and products are exponential in the worst case;
// DfaLimits bounds the states made and the wall-clock time, and the build
// fails with ResourceExhausted or DeadlineExceeded instead of running on.
// Minimisation is Moore's refinement, O(rounds * edges).
// Thread-safety: plain values and pure functions.
#ifndef GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_CHAR_DFA_H_
#define GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_CHAR_DFA_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grammar/base/deadline.h"
#include "grammar/base/utf8.h"
#include "grammar/ir/grammar_ir.h"

namespace grammard::grammar::json_schema_internal {

struct DfaLimits {
  // States of any one automaton built (NFA or DFA).
  int32_t max_states = 20000;
  // Once this passes every construction (and the conversion using these
  // limits) fails with DeadlineExceeded.
  Deadline deadline{};

  absl::Status CheckDeadline() const;
};

// Code points past Unicode that stand for the anchors ^ and $ on NFA edges
// until ResolveAnchors gives them their meaning.
inline constexpr uint32_t kStartAnchor = 0x110000;
inline constexpr uint32_t kEndAnchor = 0x110001;

// A Thompson NFA over code point ranges, built from pieces.
class CharNfa {
 public:
  struct Fragment {
    int32_t start;
    int32_t accept;
  };

  int32_t AddState();
  int32_t num_states() const { return static_cast<int32_t>(edges_.size()); }
  void AddEdge(int32_t from, uint32_t lo, uint32_t hi, int32_t to);
  void AddEpsilon(int32_t from, int32_t to);

  // The language of expression `expr` of a code point level grammar built
  // from kBytes (UTF-8), kCharClass, kSequence, kChoice and kRepeat, such as
  // a regex_parser.h result. References to the anchor rules of
  // ParseRegexKeepingAnchors become edges reading kStartAnchor or
  // kEndAnchor; other kinds are InvalidArgument.
  absl::StatusOr<Fragment> AddExpr(const Grammar& grammar, int32_t expr,
                                   const DfaLimits& limits);
  // Any string (including the empty one).
  Fragment AddAnyString();
  // `f` with its anchor edges given their meaning: the strings `f` reads
  // when each kStartAnchor edge may be taken only before the first code
  // point and each kEndAnchor edge only after the last (no code point read
  // after it). A copy of the states in each of those three phases, then
  // determinized as usual: exact, and three times the NFA at most.
  absl::StatusOr<Fragment> ResolveAnchors(Fragment f, const DfaLimits& limits);

  struct Edge {
    uint32_t lo;
    uint32_t hi;
    int32_t to;
  };
  const std::vector<Edge>& edges(int32_t s) const { return edges_[s]; }
  const std::vector<int32_t>& epsilon(int32_t s) const { return epsilon_[s]; }

 private:
  absl::Status Build(const Grammar& g, int32_t expr, int32_t from, int32_t to,
                     const DfaLimits& limits, int depth);

  std::vector<std::vector<Edge>> edges_;
  std::vector<std::vector<int32_t>> epsilon_;
};

struct CharDfa {
  struct Edge {
    uint32_t lo;
    uint32_t hi;
    int32_t to;
  };
  // Per state, sorted by lo and disjoint.
  std::vector<std::vector<Edge>> edges;
  std::vector<char> accepting;

  int32_t num_states() const { return static_cast<int32_t>(edges.size()); }
  bool IsEmpty() const { return !accepting[0] && edges[0].empty(); }
};

// The subset construction from `fragment` of `nfa`, minimised.
absl::StatusOr<CharDfa> Determinize(const CharNfa& nfa,
                                    CharNfa::Fragment fragment,
                                    const DfaLimits& limits);

// Small automata.
CharDfa EmptyDfa();
CharDfa AnyStringDfa();
// Exactly the given strings (UTF-8; invalid bytes are InvalidArgument).
absl::StatusOr<CharDfa> LiteralsDfa(const std::vector<std::string>& words);
// Strings of min..max code points (max < 0: no upper bound).
CharDfa LengthDfa(int64_t min, int64_t max);

absl::StatusOr<CharDfa> Intersect(const CharDfa& a, const CharDfa& b,
                                  const DfaLimits& limits);
absl::StatusOr<CharDfa> Union(const CharDfa& a, const CharDfa& b,
                              const DfaLimits& limits);
// Strings of `a` that are not strings of `b`.
absl::StatusOr<CharDfa> Subtract(const CharDfa& a, const CharDfa& b,
                                 const DfaLimits& limits);
// Every string over all code points not in `a`.
CharDfa Complement(const CharDfa& a);
// `a` restricted to strings of min..max code points (max < 0: unbounded).
// Trimmed but not minimised (see MinimizeWithin).
absl::StatusOr<CharDfa> LimitLength(const CharDfa& a, int64_t min, int64_t max,
                                    const DfaLimits& limits);

// Removes unreachable and dead states, then merges equivalent states.
CharDfa Minimize(const CharDfa& dfa);
// The same, failing with DeadlineExceeded past limits.deadline; without
// `merge_states` it only trims (still minimal in the emptiness sense).
absl::StatusOr<CharDfa> MinimizeWithin(const CharDfa& dfa,
                                       const DfaLimits& limits,
                                       bool merge_states);

// Whether the UTF-8 string `text` is in the language (false for invalid
// UTF-8).
bool Matches(const CharDfa& dfa, std::string_view text);

// A string of the language, shortest first; false when it is empty.
bool Example(const CharDfa& dfa, std::string* out);

// Whether every prefix of a string of the language goes on into infinitely
// many strings of it (`[a-z]+` does; `ab|cd` and `x[0-9]{2}` do not): what
// keeping strings distinct at run time needs (SplitDistinct). False for
// the empty language. O(states + edges).
bool AlwaysGrows(const CharDfa& dfa);

// The strict UTF-8 helpers of the syntax layer.
using base::AppendUtf8;
using base::DecodeUtf8;
using base::kMaxCodepoint;
// The number of code points, or -1 for invalid UTF-8.
int64_t CodepointCount(std::string_view text);

}  // namespace grammard::grammar::json_schema_internal

#endif  // GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_CHAR_DFA_H_
