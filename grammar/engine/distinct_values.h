// What a compiled grammar with run-time conditions needs beyond its
// automata. Distinct rules (Pda::IsDistinct): a check that their values can
// always be kept apart, and the tokens whose masks a matcher reads for real
// inside such values. Counted members (Pda::RequiredMembers): the same two;
// counted characters (Pda::MaxChars): the tokens by length (at the end of
// this header).
//
// A matcher drops a stack the moment a distinct value ends equal to one its
// frame has seen (stack.h). That keeps the language exact, and the mask exact
// too, as long as no value in the making can run out of distinct endings:
// `"ab` may still become "ab", "abc", "abd", ... but `tru` only `true`, so
// after [true, the token `tru` would lead nowhere. Hence the check: every
// stack inside a value (each state that reads bytes, with the frames below
// it down to the value's rule) must have infinitely many completions. That
// counts texts, not values: `0e` has infinitely many endings that are all
// zero, and whitespace spells one object many ways. So the check is
// necessary, not sufficient; the front end admits only values that can
// always become new ones (json_schema's SplitDistinct) and this catches
// the rest.
//
// Cost: O(states + calls + byte moves) for both. Thread-safety: pure
// functions of immutable inputs.
#ifndef GRAMMARD_GRAMMAR_ENGINE_DISTINCT_VALUES_H_
#define GRAMMARD_GRAMMAR_ENGINE_DISTINCT_VALUES_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "grammar/base/member_set.h"
#include "grammar/engine/pda.h"
#include "grammar/engine/token_index.h"

namespace grammard::grammar::internal {

// InvalidArgument naming the distinct rule and the state's rule when some
// stack inside one of its values has finitely many completions; OK when the
// Pda has no distinct rules.
absl::Status CheckDistinctValuesEndless(const Pda& pda);

// The tokens, in the index's byte order, holding a byte that may end a
// distinct value (a string's closing quote, an object's brace, a digit):
// only they can end one, so only they need reading for real where the
// mask's tables cannot know which values were seen. A value is refused
// only against one seen before it in its frame, so where no frame on any
// stack has seen one, only a token ending two values, one after the other,
// can be refused: `twice` holds those with two such bytes. Empty without
// distinct rules. O(states x 256 + calls x rounds + vocabulary bytes).
struct ValueEndingTokens {
  std::vector<int32_t> once;
  std::vector<int32_t> twice;
};
ValueEndingTokens TokensThatMayEndValues(const Pda& pda,
                                         const TokenIndex& index);

// Counted members (Pda::RequiredMembers, Guard) are kept the same way: a
// stack ends where a rule would return without the members it requires, or
// would call a guarded rule whose members are all counted. For the mask to
// stay exact that way, each requirement must stay reachable and a refused
// call must leave its caller a way on (the object's closing brace), which
// the front end sees to, and no call may return into a state where a rule
// with required members ends: then a token read within a rule that is not
// checking members and calls none that is (a string, a number) cannot end
// one or call a guarded one on the way, and its own tables hold. Inside a
// dispatch a refused call may strand its caller (a name prefix of written
// members only): a token ending there read a byte that leads into such a
// state, so it is read for real (TokensThatMayCheckMembers). Every call of a
// dispatch must end it (Pda::IsTailCall), so that what it calls counts in its
// caller's frame. InvalidArgument naming the rule when some call breaks these;
// OK without such rules.
absl::Status CheckRequiredMembersEndOnBytes(const Pda& pda);

// The tokens holding a byte that may end a rule with required members (an
// object's closing brace), that a guarded rule may read first (the
// separator before a member, a name's closing quote where others extend
// it), or that leads into a state some frame's members may strand (a
// character of a name where a dispatch branches), a bit per id of the
// vocabulary: where a frame below lacks some or has counted some, only
// they need reading for real. A state may strand where no continuation
// needs no member and the members its continuations may call do not cover
// what is known of the frame (a guarded dispatch: some member of its guard
// is not counted; a state of another rule before a member returns into
// it: none is). A token read from a stack whose top is outside a dispatch
// enters one only through a guarded call (its first byte) or with its
// frame empty, so there only the bytes that check members outside
// dispatches count: a string's closing quote or a name's letters do not.
// Whitespace and the colon after a name count nowhere, so a token that
// ends a number in whitespace is read from the tables. Empty without such
// rules.
// A stack top in a dispatch whose frame has counted none of the members
// that the dispatch may still call from its state (`reach`, by state) is
// read as one outside: no call on its way can be refused. One whose frame
// has counted some reads for real, beyond the outside filter, only the
// tokens of `in_dispatch` whose key meets the frame's members
// (DispatchTokenKeys).
//
// A separator (the first byte of a guarded call from outside a dispatch, a
// comma before the next member) can only be refused where its frame holds
// the whole guard. Where no frame on a stack does, and none may count a
// member by an unguarded call before a guarded one, a token refused at a
// separator must have counted a member on its way: by another separator,
// read on into a dispatch, or in a frame it opened. So a stack top outside
// a dispatch whose frames all have that slack reads for real only tokens
// holding another byte of the outside filter, a byte of the inside one after
// a separator, or a separator after a byte a counting rule may begin with
// (`outside_with_slack`; empty where the grammar has no separator): a
// string's `",` is read from the tables.
struct DispatchTokenKeys;
struct MemberCheckedTokens {
  std::vector<uint32_t> outside_dispatch;    // for a stack top outside one
  std::vector<uint32_t> in_dispatch;         // for a stack top in one
  std::vector<uint32_t> outside_with_slack;  // outside, frames with slack
  std::vector<std::pair<int32_t, MemberSet>> reach;  // sorted by state
  // By rule: the guards of the guarded calls of a rule whose frames count
  // members (none for others); by state: whether an unguarded call may
  // count a member in its frame before any guarded call.
  std::vector<std::vector<MemberSet>> frame_guards;
  std::vector<uint8_t> counts_unguarded;

  struct Filter {
    const uint32_t* bits;            // tokens read for real
    const DispatchTokenKeys* keyed;  // and these where their keys say so
  };
  // The filter for a stack top in `state` whose frame counted `members`,
  // all of whose frames have slack or not; the first call for a dispatch
  // state builds its keys.
  Filter For(const Pda& pda, const TokenIndex& index, int32_t state,
             const MemberSet& members, bool frames_have_slack) const;
  // The position of a dispatch state in `reach`, -1 for other states.
  int32_t ReachIndex(int32_t state) const;

  MemberCheckedTokens();
  ~MemberCheckedTokens();
  MemberCheckedTokens(MemberCheckedTokens&&);
  MemberCheckedTokens& operator=(MemberCheckedTokens&&);

 private:
  struct LazyKeys;
  std::unique_ptr<LazyKeys[]> keys_;  // by position in `reach`
  friend MemberCheckedTokens TokensThatMayCheckMembers(const Pda& pda,
                                                       const TokenIndex& index);
};
MemberCheckedTokens TokensThatMayCheckMembers(const Pda& pda,
                                              const TokenIndex& index);

// What a token read from a dispatch state may run into, as the members it
// may be refused or stranded by: the guards of the calls on its way (a
// nested dispatch's, the member's it ends in) and, where it ends inside a
// dispatch, every member that dispatch may still call. A token whose key
// misses the frame's members passes every guard and strands nothing, and
// past the member's call it is read as from outside a dispatch. Only the
// tokens of in_dispatch and not of outside_dispatch are listed (the others
// never or always read); those a walk of the trie cannot follow (a return
// out of the dispatch) are kept `always`. A names trie's states list the
// tokens that spell on along its names, a few hundred at the root.
// A token that ends inside the dispatch or a member's own bytes, along one
// way into each state it may end in, needs no key: the stepper keeps a
// state reached there unless a guarded call on its way met a frame holding
// its whole guard, so its `Fate` says whether any such state stays, exactly,
// at the cost of a few word operations per guard instead of a real read
// (`","c` toward unwritten "content_type" where "content_id" is written).
// Those that some way reaches without a guarded call are never refused and
// not listed.
// Cost: one walk of the token trie along the states' bytes, on first use.
struct DispatchTokenKeys {
  struct Group {
    MemberSet key;
    bool always = false;
    std::vector<int32_t> tokens;  // ids
  };
  struct Fate {
    // The guards of each way, way k's ending at way_ends[k].
    std::vector<MemberSet> guards;
    std::vector<uint32_t> way_ends;
    std::vector<int32_t> tokens;  // ids
    // Whether a frame that counted `members` refuses every way.
    bool Refused(const MemberSet& members) const;
  };
  std::vector<Group> groups;
  std::vector<Fate> fates;
};

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_ENGINE_DISTINCT_VALUES_H_
