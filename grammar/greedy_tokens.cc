#include "grammar/greedy_tokens.h"

#include <algorithm>

#include "grammar/engine/grammar_data.h"

namespace grammard::grammar {

int32_t LongestAllowedToken(const CompiledGrammar& grammar,
                            const uint32_t* mask, std::string_view rest) {
  const internal::TokenIndex& index = *grammar.data().index;
  for (size_t len = std::min<size_t>(rest.size(), 256); len > 0; --len) {
    const std::string_view want = rest.substr(0, len);
    int32_t lo = 0, hi = index.size();
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo) / 2;
      if (index.bytes(mid) < want) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    // Equal bytes may have several ids; any allowed one will do.
    for (int32_t i = lo; i < index.size() && index.bytes(i) == want; ++i) {
      const int32_t id = index.id(i);
      if ((mask[id >> 5] >> (id & 31)) & 1) return id;
    }
  }
  return -1;
}

}  // namespace grammard::grammar
