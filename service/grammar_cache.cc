#include "service/grammar_cache.h"

#include <utility>

namespace grammard::service {

size_t GrammarEntry::Bytes() const {
  size_t bytes = sizeof(*this) + id.size() + status.message().size();
  if (grammar.has_value()) bytes += grammar->MemoryBytes();
  for (const auto& d : dropped) {
    bytes += d.keyword.size() + d.pointer.size() + d.reason.size();
  }
  return bytes;
}

GrammarCache::GrammarCache(size_t max_bytes, ServiceMetrics* metrics)
    : max_bytes_(max_bytes), metrics_(metrics) {}

std::shared_ptr<const GrammarEntry> GrammarCache::Find(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) {
    metrics_->cache_misses->Increment();
    return nullptr;
  }
  metrics_->cache_hits->Increment();
  Lru::iterator slot = it->second;
  lru_.splice(lru_.begin(), lru_, slot);
  // Token tables built since the last charge (grammars grow as sequences
  // visit new states) count from now on.
  ChargeLocked(*slot);
  std::shared_ptr<const GrammarEntry> entry = slot->entry;
  EvictLocked(0);
  UpdateGaugesLocked();
  return entry;
}

void GrammarCache::Recharge(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  ChargeLocked(*it->second);
  EvictLocked(0);
  UpdateGaugesLocked();
}

void GrammarCache::ChargeLocked(Slot& slot) {
  const size_t bytes = slot.entry->Bytes();
  bytes_ += bytes - slot.bytes;
  slot.bytes = bytes;
}

void GrammarCache::Insert(std::shared_ptr<const GrammarEntry> entry) {
  const size_t bytes = entry->Bytes();
  absl::MutexLock lock(&mu_);
  auto old = by_id_.find(entry->id);
  if (old != by_id_.end()) EraseLocked(old->second);
  if (bytes > max_bytes_) return;
  EvictLocked(bytes);
  lru_.push_front(Slot{entry, bytes});
  by_id_[entry->id] = lru_.begin();
  bytes_ += bytes;
  UpdateGaugesLocked();
}

void GrammarCache::EvictLocked(size_t room) {
  while (!lru_.empty() && bytes_ + room > max_bytes_) {
    EraseLocked(std::prev(lru_.end()));
    metrics_->cache_evictions->Increment();
  }
}

void GrammarCache::UpdateGaugesLocked() {
  metrics_->cache_bytes->Set(static_cast<double>(bytes_));
  metrics_->cache_entries->Set(static_cast<double>(lru_.size()));
}

void GrammarCache::EraseLocked(Lru::iterator it) {
  bytes_ -= it->bytes;
  by_id_.erase(it->entry->id);
  lru_.erase(it);
  UpdateGaugesLocked();
}

bool GrammarCache::Contains(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  return by_id_.count(id) != 0;
}

size_t GrammarCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

size_t GrammarCache::size() const {
  absl::MutexLock lock(&mu_);
  return lru_.size();
}

}  // namespace grammard::service
