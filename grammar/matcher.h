// GrammarMatcher: the state of one sequence being decoded under a grammar.
//
// Per decode step an inference engine asks for the mask of tokens allowed
// next, samples one, and accepts it:
//
//   GrammarMatcher m(grammar);
//   std::vector<uint32_t> row(grammar.mask_words());
//   while (!m.IsTerminated()) {
//     m.FillNextTokenMask(row.data());
//     int32_t token = Sample(logits, row);
//     if (!m.AcceptToken(token).ok()) ...;  // cannot happen for masked
//     sampling
//   }
//
// The mask is exact: token t is allowed iff the text so far followed by t's
// bytes is a prefix of some string of the language; an end-of-sequence id is
// allowed iff the text so far is a complete string; special tokens, tokens
// without bytes and ids past the tokenizer (padding) never are.
//
// Cost: FillNextTokenMask ORs one precomputed bitset per stack top and checks
// only the few tokens whose fate depends on the stack below; AcceptToken is
// O(bytes of the token). Rollback(k) is O(k); history is kept for the whole
// sequence. Memory grows with the text accepted (a few stack nodes per byte).
// Inside a value of a distinct rule (uniqueItems: grammar_ir.h) the tables
// cannot know which values were seen, so the mask also reads for real every
// allowed token that holds a byte able to end a value (a quote, a digit, a
// brace): about a microsecond per such token, plus the values' keys
// compared (base/json_value_key.h); the matcher then also keeps the text.
// In a frame that counts members (required ones, each once) the tokens that
// may end it or call a member are read for real likewise, once per set of
// stacks: the steps of a string inside such an object reuse the first read.
// Thread-safety: one matcher per sequence, used by one thread at a time;
// distinct matchers of one CompiledGrammar may run on any threads.
#ifndef GRAMMARD_GRAMMAR_MATCHER_H_
#define GRAMMARD_GRAMMAR_MATCHER_H_

#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "grammar/base/thread_pool.h"
#include "grammar/compiled_grammar.h"
#include "grammar/engine/stack.h"

namespace grammard::grammar {
namespace internal {
class TokenSet;
struct DispatchTokenKeys;
}  // namespace internal

// What the grammar forces next (see JumpForward).
struct ForcedContinuation {
  std::string bytes;
  // A tokenization of a prefix of `bytes` (greedy, longest token first); may
  // cover less than all of it where no token ends exactly on a forced byte.
  std::vector<int32_t> token_ids;
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(CompiledGrammar grammar);

  GrammarMatcher(const GrammarMatcher&) = delete;
  GrammarMatcher& operator=(const GrammarMatcher&) = delete;
  GrammarMatcher(GrammarMatcher&&) = default;
  GrammarMatcher& operator=(GrammarMatcher&&) = default;

  const CompiledGrammar& grammar() const { return grammar_; }

  // Writes grammar().mask_words() words: bit i % 32 of word i / 32 is set iff
  // token i may come next. Never all zero while !IsTerminated(). After
  // termination only the end-of-sequence ids are set.
  void FillNextTokenMask(uint32_t* row);

  // Names the next mask without writing it, for telling equal masks apart
  // cheaply: matchers (of any grammars) whose keys are equal have equal
  // masks, and so does one matcher at two positions. False, with `key`
  // cleared, where the mask depends on reading the stacks deeper than the
  // tables go; only filling tells then. A key is valid while the grammar
  // lives. Cost: FillNextTokenMask's table lookups without its row writes
  // (a few per stack top).
  bool NextMaskKey(std::vector<uintptr_t>* key);

  // Accepts a token; an id that is not allowed (or out of range) is an
  // InvalidArgument error naming it, and the state is left unchanged.
  absl::Status AcceptToken(int32_t id);
  // Accepts raw bytes (for prompts that prefill part of the output); one
  // history entry, like a token.
  absl::Status AcceptString(std::string_view bytes);

  // An end-of-sequence id has been accepted.
  bool IsTerminated() const { return terminated_; }
  // The text so far is a complete string of the language.
  bool CanTerminate() const;

  // Undoes the last k accepted tokens (or strings). InvalidArgument if k
  // exceeds the number accepted.
  absl::Status Rollback(int32_t k);
  int32_t num_accepted() const {
    return static_cast<int32_t>(history_.size()) - 1;
  }

  // How many leading tokens of `draft` would be accepted in order; the state
  // is unchanged.
  int32_t ValidateTokens(const std::vector<int32_t>& draft);

  // The bytes every continuation must start with (stopping where the text
  // could end or where several bytes are possible), at most max_bytes.
  ForcedContinuation JumpForward(size_t max_bytes = 1024);

  // Back to the start of the grammar, history cleared.
  void Reset();

  // A new matcher at the same position, with its own (empty) history. Costs
  // O(nodes on the current stacks), not O(text accepted); with distinct
  // rules, whose seen values reach back into the text, O(state kept).
  GrammarMatcher Fork() const;

  // Bytes of this matcher's own state (its stacks, history and the scratch
  // its masks keep, by capacity), not of the grammar it shares. O(1).
  size_t MemoryBytes() const;

 private:
  struct Position {
    size_t scan_begin;  // into scan_
    size_t scan_end;
    size_t pool_size;
    size_t text_size;  // of the stepper's text (grammars with distinct rules)
    bool can_end;
    bool terminated;
  };

  const int32_t* scan_begin() const {
    return scan_.data() + history_.back().scan_begin;
  }
  const int32_t* scan_end() const {
    return scan_.data() + history_.back().scan_end;
  }
  // Reads `bytes` from the current position and pushes the result as a new
  // history entry; on failure leaves everything as it was.
  absl::Status Advance(std::string_view bytes);
  void Start();
  // The token sets whose union is the next mask (sorted, unique) into
  // sets_, and the stack tops whose remaining tokens must be read into
  // reads_; whether some stack top is inside a distinct value into
  // in_value_.
  void PlanMask();
  // Whether the stack of `top` is inside a value of a distinct rule.
  bool InValue(int32_t top) const;
  // Whether some frame of the stack of `top` lacks members its rule
  // requires (Pda::RequiredMembers) or has counted some its rule guards a
  // call by (Pda::CallsGuarded).
  bool InCheckingFrame(int32_t top) const;
  // Whether no frame of the stack of `top` may refuse a guarded call before
  // a member is counted (MemberCheckedTokens::outside_with_slack).
  bool FramesHaveSlack(int32_t top) const;
  // Whether a frame on some stack has seen a distinct value (holds a
  // record).
  bool AnyValueSeen() const;
  // Every stack top's whole stack, each node's state, counted members and
  // counted characters, into `key`; false (nothing worth keeping) when the
  // grammar has distinct rules (their records are not in it) or the stacks
  // are too many to compare cheaply.
  bool CheckKey(std::vector<int64_t>* key) const;

  struct Read {
    const int32_t* top;  // into scan_
    const std::vector<int32_t>* pending;
  };

  CompiledGrammar grammar_;
  internal::StackPool pool_;
  internal::Stepper stepper_;
  std::vector<int32_t> scan_;  // scan sets of every history entry, in order
  std::vector<Position> history_;
  bool terminated_ = false;
  std::vector<int32_t> tmp_a_, tmp_b_;
  std::vector<const internal::TokenSet*> sets_;
  std::vector<Read> reads_;
  std::vector<int32_t> tops_;     // the stack tops' states, for WalkTogether
  std::vector<int32_t> reading_;  // stack-dependent tokens to read
  bool in_value_ = false;
  // Whether a token may end a rule lacking required members or call a once
  // member counted already (or do so in a frame that may start within the
  // token), and the sets of sets_ that may hold such tokens, each with the
  // tokens that may check members from its stack's top: PlanMask's.
  bool checking_ = false;
  std::vector<std::pair<const internal::TokenSet*, const uint32_t*>>
      risky_sets_;
  // Stack tops in a dispatch with risky sets: their tokens read for real by
  // key, and their frames' members (MemberCheckedTokens::For).
  std::vector<std::pair<const internal::DispatchTokenKeys*, MemberSet>>
      risky_keyed_;
  // The last real read of checking_'s tokens: the stacks it read them from
  // (CheckKey) and those it allowed. A string inside a counted object reads
  // the same tokens from the same stacks at each of its steps, and nothing
  // else decides them.
  std::vector<int64_t> check_key_, next_check_key_;
  std::vector<int32_t> check_allowed_;
  // Tokens longer than this may pass a counted string's bound (Pda::
  // MaxChars) and are read for real: PlanMask's, INT32_MAX when none may.
  int32_t counted_slack_ = INT32_MAX;
};

// Fills the mask rows of a batch: row i, at masks + i * stride_words, for
// matchers[i] (null entries are skipped), spread over the pool's threads.
// Each matcher must be distinct.
void FillMasks(const std::vector<GrammarMatcher*>& matchers, uint32_t* masks,
               size_t stride_words, ThreadPool* pool);

}  // namespace grammard::grammar

#endif  // GRAMMARD_GRAMMAR_MATCHER_H_
