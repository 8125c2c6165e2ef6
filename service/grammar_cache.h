// GrammarCache: the process-local tier of compiled grammars, keyed by grammar
// id (a digest of tokenizer, constraint, options and engine version), bounded
// in bytes with least-recently-used eviction.
//
// Entries are finished compiles: ready grammars, and failures that would fail
// again (bad schemas), so a repeated bad request costs a lookup. Failures
// that a retry might not repeat (deadline, cancellation) are never inserted.
//
// Entries are charged what they hold in memory when inserted, again at every
// hit, and whenever Recharge says they grew: a compiled grammar grows as
// sequences visit its states and as the background classifier fills it in.
//
// Cost: Find and Insert are a hash lookup and a list splice under a mutex.
// Thread-safety: every method may be called from any thread.
#ifndef GRAMMARD_SERVICE_GRAMMAR_CACHE_H_
#define GRAMMARD_SERVICE_GRAMMAR_CACHE_H_

#include <cstddef>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "grammar/compiled_grammar.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "service/service_metrics.h"

namespace grammard::service {

// A finished compile. Immutable once published.
struct GrammarEntry {
  std::string id;
  absl::Status status;  // OK iff `grammar` is set
  std::optional<grammar::CompiledGrammar> grammar;
  std::vector<grammar::DroppedKeyword> dropped;
  double compile_seconds = 0;

  // What the entry holds in memory, for the cache's budget.
  size_t Bytes() const;
};

class GrammarCache {
 public:
  // `metrics` must outlive the cache.
  GrammarCache(size_t max_bytes, ServiceMetrics* metrics);

  // Counts a hit or a miss. A hit is charged again for what its grammar
  // holds now (token tables are built as sequences use it), evicting others
  // if that goes over the budget; a grammar over the whole budget is
  // evicted too, but the caller's copy stays usable.
  std::shared_ptr<const GrammarEntry> Find(const std::string& id);

  // Inserts (or replaces) the entry, evicting the least recently used ones
  // until it fits; an entry larger than the whole budget is not kept.
  void Insert(std::shared_ptr<const GrammarEntry> entry);

  // Charges `id`, if cached, for what its grammar holds now, counting no hit
  // and leaving its place in the LRU order; the least recently used entries
  // (it too) go if that is over the budget. For growth no hit would charge:
  // a grammar classified in the background, or one whose sequences closed.
  void Recharge(const std::string& id);

  // Whether `id` is cached, counting neither a hit nor a miss.
  bool Contains(const std::string& id) const;
  size_t bytes() const;
  size_t size() const;

 private:
  struct Slot {
    std::shared_ptr<const GrammarEntry> entry;
    size_t bytes;
  };
  using Lru = std::list<Slot>;  // most recently used first

  void EraseLocked(Lru::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Charges `slot` for its entry's bytes now.
  void ChargeLocked(Slot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts the least recently used entries until `room` more bytes fit.
  void EvictLocked(size_t room) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateGaugesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_bytes_;
  ServiceMetrics* const metrics_;
  mutable absl::Mutex mu_;
  Lru lru_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, Lru::iterator> by_id_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_GRAMMAR_CACHE_H_
