#include <algorithm>
#include <optional>
#include <vector>

#include "grammar/engine/leaf_tokens.h"
#include "grammar/engine/token_table.h"

namespace grammard::grammar::internal {

// States of a rule ReadAsLinks checks before taking it for a chain's link
// (JSON's `char` has about two dozen).
constexpr int32_t kMaxChainLinkStates = 64;

// Whether `state` starts a rule that ReadAsLinks can read: the rule calls
// nothing, never comes back to its start and ends only where no byte
// follows, so that a token splits into its strings one way only and
// `state` marks the places between them.
bool StartsChainLink(const Pda& pda, int32_t state) {
  if (pda.RuleStart(pda.StateRule(state)) != state || pda.IsFinal(state)) {
    return false;
  }
  std::vector<int32_t> seen{state};
  for (size_t k = 0; k < seen.size(); ++k) {
    const int32_t s = seen[k];
    if (pda.CallsBegin(s) != pda.CallsEnd(s) ||
        (pda.IsFinal(s) && pda.HasBytes(s))) {
      return false;
    }
    for (int32_t c = 0; c < pda.num_byte_classes(); ++c) {
      const int32_t t = pda.Next(s, pda.ClassByte(c));
      if (t == state) return false;
      if (t == Pda::kDead ||
          std::find(seen.begin(), seen.end(), t) != seen.end()) {
        continue;
      }
      if (static_cast<int32_t>(seen.size()) >= kMaxChainLinkStates) {
        return false;
      }
      seen.push_back(t);
    }
  }
  return true;
}

namespace {

// LinkCodes of the chain's link starting at `state`: one walk of the whole
// trie, since a token of the link's strings never dies (llama3: 2.4 ms).
LinkCodes ReadLinkCodes(const Pda& pda, const TokenIndex& index,
                        int32_t state) {
  LinkCodes codes;
  codes.by_id.assign(index.vocab().size(), 0);
  auto mark = [&](int32_t begin, int32_t end, int32_t strings,
                  LinkReading::End how) {
    const uint32_t code = (static_cast<uint32_t>(strings) << 2) | how;
    for (int32_t t = begin; t < end; ++t) codes.by_id[index.id(t)] = code;
  };
  // Per depth of the trie path: the rule's state (`state` between strings)
  // and the strings read whole so far.
  struct Level {
    int32_t in, strings;
  };
  std::vector<Level> levels(index.max_token_length() + 1);
  levels[0] = {state, 0};
  for (int32_t node = 1; node < index.num_nodes();) {
    const int32_t depth = index.node_depth(node);
    const Level from = levels[depth - 1];
    const int32_t end = index.node_end(node);
    const int32_t to = pda.Next(from.in, index.node_byte(node));
    if (to == Pda::kDead) {
      // Nothing of the first string is the callers' (and a token dying in
      // it is no one's uncertain token).
      if (from.strings > 0) {
        mark(index.node_tokens_begin(node), index.node_tokens_begin(end),
             from.strings,
             from.in == state ? LinkReading::kLeaves : LinkReading::kDies);
      }
      node = end;
      continue;
    }
    Level& here = levels[depth];
    here = pda.IsFinal(to) ? Level{state, from.strings + 1}
                           : Level{to, from.strings};
    if (here.strings > 0) {
      mark(index.node_tokens_begin(node), index.node_tokens_end(node),
           here.strings,
           here.in == state ? LinkReading::kBetween : LinkReading::kInside);
    }
    ++node;
  }
  return codes;
}

}  // namespace

std::optional<LinkReading> ReadAsLinks(const Pda& pda, const TokenIndex& index,
                                       int32_t state,
                                       const std::vector<int32_t>& uncertain) {
  if (!StartsChainLink(pda, state)) return std::nullopt;
  // The codes depend only on the link's DFA: every grammar of the
  // vocabulary with the same link (JSON's `char`) reads them from the cache.
  const std::optional<std::string> form =
      LeafForm(pda, state, kMaxChainLinkStates);
  const std::string key = form ? "L" + *form : std::string();
  std::shared_ptr<const LinkCodes> codes;
  if (!key.empty()) codes = index.leaf_cache()->Find<LinkCodes>(key);
  if (codes == nullptr) {
    codes = std::make_shared<const LinkCodes>(ReadLinkCodes(pda, index, state));
    if (!key.empty()) index.leaf_cache()->Insert(key, codes);
  }
  LinkReading out;
  out.strings.reserve(uncertain.size());
  out.end.reserve(uncertain.size());
  out.words = (index.vocab().size() + 31) / 32;
  std::vector<uint32_t> within(out.words, 0);
  for (size_t k = 0; k < uncertain.size(); ++k) {
    // A token the trie walk did not mark cannot be uncertain; read as one
    // that leaves after no string, it is left unsettled.
    const int32_t id = uncertain[k];
    const uint32_t code = codes->by_id[id];
    const auto n = static_cast<uint16_t>(code >> 2);
    const auto how = static_cast<LinkReading::End>(code & 3);
    out.strings.push_back(n);
    out.end.push_back(how);
    out.longest = std::max<int32_t>(out.longest, n);
    if (n == 0 || how == LinkReading::kLeaves) {
      out.leaving.push_back(static_cast<int32_t>(k));
    } else if (how == LinkReading::kDies) {
      out.dying.push_back(static_cast<int32_t>(k));
    } else {
      within[id >> 5] |= 1u << (id & 31);
    }
  }
  out.within = TokenSet::FromBits(std::move(within));
  return out;
}

size_t LinkReading::MemoryBytes() const {
  return strings.size() * sizeof(uint16_t) + end.size() * sizeof(End) +
         within.MemoryBytes() +
         (leaving.size() + dying.size()) * sizeof(int32_t);
}

bool SameChainReading(const Pda& pda, int32_t state, int32_t a, int32_t b,
                      int32_t longest) {
  const int32_t rule = pda.StateRule(state);
  // Rules apart, leaving them lands in different callers.
  if (pda.StateRule(a) != pda.StateRule(b)) return false;
  for (int32_t i = 0; i < longest; ++i) {
    if (a == b) return true;  // the same from here on
    if (pda.IsFinal(a) != pda.IsFinal(b)) return false;
    for (int32_t c = 0; c < pda.num_byte_classes(); ++c) {
      const uint8_t byte = pda.ClassByte(c);
      if (pda.Next(a, byte) != pda.Next(b, byte)) return false;
    }
    const PdaCall *ca = pda.CallsBegin(a), *cb = pda.CallsBegin(b);
    if (pda.CallsEnd(a) - ca != pda.CallsEnd(b) - cb) return false;
    int32_t next_a = -1, next_b = -1;
    for (; ca != pda.CallsEnd(a); ++ca, ++cb) {
      if (ca->rule != cb->rule) return false;
      if (ca->rule == rule) {
        next_a = ca->return_state;
        next_b = cb->return_state;
      } else if (ca->return_state != cb->return_state) {
        return false;
      }
    }
    if (next_a < 0) return true;  // the chain ends at both
    a = next_a;
    b = next_b;
  }
  return true;
}

ChainSplit SplitByCallChain(const Pda& pda, int32_t state, int32_t return_state,
                            const std::vector<int32_t>& uncertain,
                            const LinkReading& reading) {
  const int32_t rule = pda.StateRule(state);
  const int32_t longest = reading.longest;
  // The chain: at[i] is the callers' state after i + 1 of the rule's
  // strings. It is followed up to the first state that does not call the
  // rule again (`missing`), or as far as the longest token reaches.
  // forced[i]: at[0..i] can read a string of the rule in no other way (not
  // final, no other calls, no byte the rule may start with), so that a
  // token dying there dies in every reading.
  std::vector<char> forced;
  int32_t missing = longest;
  for (int32_t at = return_state, i = 0; i < longest; ++i) {
    int32_t next = -1;
    bool alone = !pda.IsFinal(at) && (i == 0 || forced[i - 1]);
    for (const PdaCall* c = pda.CallsBegin(at); c != pda.CallsEnd(at); ++c) {
      if (c->rule == rule) {
        next = c->return_state;
      } else {
        alone = false;
      }
    }
    for (int32_t c = 0; c < pda.num_byte_classes() && alone; ++c) {
      alone = pda.Next(state, pda.ClassByte(c)) == Pda::kDead ||
              pda.Next(at, pda.ClassByte(c)) == Pda::kDead;
    }
    forced.push_back(alone);
    if (next < 0) {
      missing = i;
      break;
    }
    at = next;
  }
  ChainSplit out;
  out.far = missing == longest;
  if (out.far) {
    // Far from the chain's end: what ReadAsLinks sorted out, but for the
    // tokens that die, by where they die.
    out.accepted = reading.within;
    std::vector<int32_t> at;
    std::merge(reading.leaving.begin(), reading.leaving.end(),
               reading.dying.begin(), reading.dying.end(),
               std::back_inserter(at));
    for (int32_t k : at) {
      if (reading.end[k] != LinkReading::kDies || reading.strings[k] == 0 ||
          !forced[reading.strings[k] - 1]) {
        out.unsettled.push_back(uncertain[k]);
      }
    }
    return out;
  }
  std::vector<int32_t> accepted_ids;
  for (size_t k = 0; k < uncertain.size(); ++k) {
    const int32_t n = reading.strings[k];
    const LinkReading::End how = reading.end[k];
    // The chain state the token's last part is read from, and the last
    // one it needs to call the rule again.
    const int32_t last = n - 1;
    const int32_t needs =
        how == LinkReading::kInside || how == LinkReading::kDies ? last
                                                                 : last - 1;
    bool accepted = false, unsettled = false;
    if (n == 0) {
      unsettled = true;
    } else if (missing <= needs) {
      unsettled = !forced[missing];
    } else if (how == LinkReading::kDies) {
      unsettled = !forced[last];
    } else if (how == LinkReading::kLeaves) {
      unsettled = true;
    } else {
      accepted = true;
    }
    if (accepted) accepted_ids.push_back(uncertain[k]);
    if (unsettled) out.unsettled.push_back(uncertain[k]);
  }
  out.accepted = TokenSet::FromIds(std::move(accepted_ids), reading.words);
  return out;
}

}  // namespace grammard::grammar::internal
