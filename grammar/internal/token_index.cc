#include "grammar/internal/token_index.h"

#include <algorithm>

namespace grammard::grammar::internal {

TokenIndex::TokenIndex(std::shared_ptr<const Vocabulary> vocab)
    : vocab_(std::move(vocab)) {
  for (int32_t id = 0; id < vocab_->size(); ++id) {
    if (vocab_->kind(id) == TokenKind::kText && !vocab_->bytes(id).empty()) {
      ids_.push_back(id);
    }
  }
  std::sort(ids_.begin(), ids_.end(), [&](int32_t a, int32_t b) {
    std::string_view x = vocab_->bytes(a), y = vocab_->bytes(b);
    return x != y ? x < y : a < b;
  });
  lcp_.assign(ids_.size(), 0);
  for (size_t i = 1; i < ids_.size(); ++i) {
    std::string_view x = vocab_->bytes(ids_[i - 1]), y = vocab_->bytes(ids_[i]);
    size_t n = std::min(x.size(), y.size()), k = 0;
    while (k < n && x[k] == y[k]) ++k;
    lcp_[i] = static_cast<int32_t>(k);
  }
}

int32_t TokenIndex::SkipPast(int32_t i, int32_t depth) const {
  int32_t j = i + 1;
  while (j < size() && lcp_[j] >= depth) ++j;
  return j;
}

int32_t TokenIndex::LongestPrefix(std::string_view text) const {
  for (size_t len = text.size(); len > 0; --len) {
    std::string_view want = text.substr(0, len);
    auto it = std::lower_bound(
        ids_.begin(), ids_.end(), want,
        [&](int32_t id, std::string_view w) { return vocab_->bytes(id) < w; });
    if (it != ids_.end() && vocab_->bytes(*it) == want) return *it;
  }
  return -1;
}

}  // namespace grammard::grammar::internal
