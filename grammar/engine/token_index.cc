#include "grammar/engine/token_index.h"

#include <algorithm>

#include "grammar/engine/leaf_tokens.h"

namespace grammard::grammar::internal {

TokenIndex::TokenIndex(std::shared_ptr<const Vocabulary> vocab)
    : vocab_(std::move(vocab)),
      leaf_cache_(std::make_unique<LeafCache>(kLeafCacheBytes)) {
  for (int32_t id = 0; id < vocab_->size(); ++id) {
    if (vocab_->kind(id) == TokenKind::kText && !vocab_->bytes(id).empty()) {
      ids_.push_back(id);
    }
  }
  all_bits_.assign((vocab_->size() + 31) / 32, 0);
  for (int32_t id : ids_) all_bits_[id >> 5] |= 1u << (id & 31);
  std::sort(ids_.begin(), ids_.end(), [&](int32_t a, int32_t b) {
    std::string_view x = vocab_->bytes(a), y = vocab_->bytes(b);
    return x != y ? x < y : a < b;
  });
  position_.assign(vocab_->size(), -1);
  for (size_t i = 0; i < ids_.size(); ++i) {
    position_[ids_[i]] = static_cast<int32_t>(i);
  }
  longest_first_ = ids_;
  std::stable_sort(longest_first_.begin(), longest_first_.end(),
                   [&](int32_t a, int32_t b) {
                     return vocab_->bytes(a).size() > vocab_->bytes(b).size();
                   });
  lcp_.assign(ids_.size(), 0);
  for (size_t i = 1; i < ids_.size(); ++i) {
    std::string_view x = vocab_->bytes(ids_[i - 1]), y = vocab_->bytes(ids_[i]);
    size_t n = std::min(x.size(), y.size()), k = 0;
    while (k < n && x[k] == y[k]) ++k;
    lcp_[i] = static_cast<int32_t>(k);
  }
  BuildTrie();
  for (uint16_t depth : node_depth_) {
    max_token_length_ = std::max<int32_t>(max_token_length_, depth);
  }
}

TokenIndex::~TokenIndex() = default;

void TokenIndex::SortByBytes(std::vector<int32_t>* ids) const {
  const auto rank = [&](int32_t id) {
    return id >= 0 && id < static_cast<int32_t>(position_.size())
               ? position_[id]
               : -1;
  };
  if (ids->size() * 16 < ids_.size()) {
    std::sort(ids->begin(), ids->end(), [&](int32_t a, int32_t b) {
      const int32_t x = rank(a), y = rank(b);
      return x != y ? x < y : a < b;
    });
    return;
  }
  std::vector<uint64_t> marks((ids_.size() + 63) / 64, 0);
  auto out = ids->begin();
  for (int32_t id : *ids) {
    const int32_t p = rank(id);
    if (p < 0) {
      *out++ = id;
    } else {
      marks[p >> 6] |= uint64_t{1} << (p & 63);
    }
  }
  std::sort(ids->begin(), out);
  for (size_t w = 0; w < marks.size(); ++w) {
    for (uint64_t m = marks[w]; m != 0; m &= m - 1) {
      *out++ = ids_[w * 64 + static_cast<size_t>(__builtin_ctzll(m))];
    }
  }
}

void TokenIndex::BuildTrie() {
  // Tokens in byte order give the trie's nodes in depth-first order: token i
  // adds one node per byte past what it shares with token i - 1.
  node_byte_.push_back(0);
  node_depth_.push_back(0);
  node_end_.push_back(0);
  std::vector<int32_t> path{
      0};  // path[d] = node at depth d on the current branch
  std::vector<int32_t> token_node(ids_.size());
  std::vector<int32_t> parent{-1};
  for (int32_t i = 0; i < size(); ++i) {
    std::string_view b = bytes(i);
    size_t keep = static_cast<size_t>(
        std::min<int32_t>(lcp_[i], static_cast<int32_t>(b.size())));
    keep = std::min(keep, path.size() - 1);
    for (size_t d = keep + 1; d < path.size(); ++d)
      node_end_[path[d]] = num_nodes();
    path.resize(keep + 1);
    for (size_t d = keep; d < b.size(); ++d) {
      parent.push_back(path.back());
      path.push_back(num_nodes());
      node_byte_.push_back(static_cast<uint8_t>(b[d]));
      node_depth_.push_back(
          static_cast<uint16_t>(std::min<size_t>(d + 1, 65535)));
      node_end_.push_back(0);
    }
    token_node[i] = path[b.size()];
  }
  for (int32_t n : path) node_end_[n] = num_nodes();
  // Tokens are in trie order already; count them per node.
  node_tokens_.assign(num_nodes() + 1, 0);
  for (int32_t n : token_node) ++node_tokens_[n + 1];
  for (int32_t n = 0; n < num_nodes(); ++n)
    node_tokens_[n + 1] += node_tokens_[n];
  BuildSubtreeBytes(parent);
}

void TokenIndex::BuildSubtreeBytes(const std::vector<int32_t>& parent) {
  // Worth a set only where skipping saves many steps; smaller subtrees are
  // walked.
  constexpr int32_t kMinSubtree = 16;
  std::vector<uint64_t> all(4 * static_cast<size_t>(num_nodes()), 0);
  for (int32_t n = num_nodes() - 1; n > 0; --n) {  // children before parents
    uint64_t* up = &all[4 * static_cast<size_t>(parent[n])];
    const uint64_t* own = &all[4 * static_cast<size_t>(n)];
    for (int w = 0; w < 4; ++w) up[w] |= own[w];
    up[node_byte_[n] >> 6] |= uint64_t{1} << (node_byte_[n] & 63);
  }
  subtree_slot_.assign(num_nodes(), -1);
  for (int32_t n = 0; n < num_nodes(); ++n) {
    if (node_end_[n] - n - 1 < kMinSubtree) continue;
    subtree_slot_[n] = static_cast<int32_t>(subtree_bytes_.size() / 4);
    subtree_bytes_.insert(subtree_bytes_.end(),
                          &all[4 * static_cast<size_t>(n)],
                          &all[4 * static_cast<size_t>(n)] + 4);
  }
}

const std::vector<uint32_t>& TokenIndex::TokensWithByte(uint8_t byte) const {
  std::call_once(byte_rows_once_, [&] {
    for (std::vector<uint32_t>& row : byte_rows_) {
      row.assign(all_bits_.size(), 0);
    }
    for (int32_t id : ids_) {
      for (const char ch : vocab_->bytes(id)) {
        byte_rows_[static_cast<uint8_t>(ch)][id >> 5] |= 1u << (id & 31);
      }
    }
  });
  return byte_rows_[byte];
}

std::shared_ptr<const std::vector<uint32_t>> TokenIndex::ByteFilter(
    const std::string& key,
    const std::function<std::vector<uint32_t>()>& make) const {
  {
    std::lock_guard<std::mutex> lock(byte_filters_mu_);
    auto it = byte_filters_.find(key);
    if (it != byte_filters_.end()) return it->second;
  }
  auto made = std::make_shared<const std::vector<uint32_t>>(make());
  std::lock_guard<std::mutex> lock(byte_filters_mu_);
  if (byte_filters_.size() < kMaxByteFilters) byte_filters_.emplace(key, made);
  return made;
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
