// CompilePool: compiles constraints on a bounded set of threads, once.
//
// Submit first looks in the cache; a miss joins the compile of the same
// grammar already queued or running (single flight) or queues a new one.
// Each compile runs under a deadline counted from its start: past it the
// engine stops (DeadlineExceeded), the thread is free again, and nothing is
// cached, so a later request compiles afresh. A full queue is
// ResourceExhausted. Finished compiles go to the GrammarCache, failures
// included unless a retry could succeed.
//
// With a SharedCache (the fleet's tier, e.g. Redis), a local miss looks
// there next, on the compile thread: a hit is loaded instead of compiled. A
// miss takes the fleet's compile lease, so one replica compiles while the
// others poll for its result until their deadline; if the lease lapses
// without a result (its holder died), one of them takes it over. Results go
// to both tiers; failures that would repeat are kept in the shared tier for
// negative_ttl only. Trouble with the shared tier never fails a request:
// the grammar is compiled here instead.
//
// A grammar is ready once its automaton is built (and its first states are
// classified, if Options::classify_ahead gives time for it); a background
// thread then classifies the rest, newest grammar first, yielding to
// everything else.
//
// Cost: Submit hashes the canonical constraint (SHA-256) and takes two
// mutexes; compiles run on the pool's threads.
// Thread-safety: every method may be called from any thread. Listeners run
// on a compile thread (or the caller's, if already done) and must not block.
#ifndef GRAMMARD_SERVICE_COMPILE_POOL_H_
#define GRAMMARD_SERVICE_COMPILE_POOL_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/grammard.pb.h"
#include "service/grammar_cache.h"
#include "service/service_metrics.h"
#include "service/shared_cache.h"
#include "service/tokenizer_registry.h"

namespace grammard::service {

// The id of a grammar: a digest of engine version, tokenizer fingerprint and
// canonical constraint (32 hex digits).
std::string GrammarId(std::string_view tokenizer_fingerprint,
                      std::string_view canonical_constraint);

// One grammar being compiled, or compiled.
class CompileJob {
 public:
  using Listener = std::function<void(const GrammarEntry&)>;

  explicit CompileJob(std::string id) : id_(std::move(id)) {}
  // A job that is already done.
  explicit CompileJob(std::shared_ptr<const GrammarEntry> entry);

  const std::string& id() const { return id_; }
  // Null while compiling.
  std::shared_ptr<const GrammarEntry> result() const;
  // Blocks until done or `deadline`; null if still compiling then.
  std::shared_ptr<const GrammarEntry> WaitUntil(
      std::chrono::steady_clock::time_point deadline) const;
  // Runs `listener` once the job is done (now, if it is).
  void OnDone(Listener listener);

 private:
  friend class CompilePool;
  void Finish(std::shared_ptr<const GrammarEntry> entry);

  const std::string id_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const GrammarEntry> entry_ ABSL_GUARDED_BY(mu_);
  std::vector<Listener> listeners_ ABSL_GUARDED_BY(mu_);
};

class CompilePool {
 public:
  struct Options {
    int threads = 2;
    // Compiles waiting for a thread; more is ResourceExhausted.
    int max_queue = 256;
    std::chrono::milliseconds timeout{30000};
    int32_t max_states = 100000;
    // Token classification done at compile time (grammar/compiler.h). None
    // by default: a typical JSON Schema is ready in about 2 ms instead of
    // 50, and its first masks (or the background thread below) classify
    // the states they reach, well under a decode step each.
    std::chrono::microseconds classify_ahead{0};
    // Then, on one low-priority background thread, the rest of each new
    // grammar's classification, so that its sequences rarely meet a state
    // no one has classified (milliseconds each, on the step's critical
    // path). Stops for a grammar once the cache drops it.
    bool classify_in_background = true;
    // How long the shared tier keeps grammars, and failures.
    std::chrono::milliseconds shared_ttl{std::chrono::hours(24)};
    std::chrono::milliseconds negative_ttl{std::chrono::seconds(60)};
  };

  // `cache`, `metrics` and `shared` (may be null: local only) must outlive
  // the pool.
  CompilePool(const Options& options, GrammarCache* cache,
              ServiceMetrics* metrics, SharedCache* shared = nullptr);
  // Fails queued compiles (Cancelled) and waits for running ones, which the
  // engine finishes or abandons at their deadline.
  ~CompilePool();

  struct Submission {
    std::shared_ptr<CompileJob> job;
    bool cache_hit = false;
  };
  // InvalidArgument for a malformed constraint; ResourceExhausted when the
  // queue is full.
  absl::StatusOr<Submission> Submit(
      std::shared_ptr<const TokenizerEntry> tokenizer,
      const grammard::v1::Constraint& constraint);

  // A grammar by id, queued, running or cached; null if unknown.
  std::shared_ptr<CompileJob> Find(const std::string& id);

  // Charges the cached grammar `id` for what it holds now
  // (GrammarCache::Recharge): for a sequence that used it and closed.
  void Recharge(const std::string& id) { cache_->Recharge(id); }

 private:
  struct Task {
    std::shared_ptr<CompileJob> job;
    std::shared_ptr<const TokenizerEntry> tokenizer;
    grammard::v1::Constraint constraint;
  };

  void Work();
  void Run(Task& task);
  // The background thread: classifies ahead for grammars in to_classify_.
  void ClassifyInBackground();
  // The compile itself, timed and counted.
  std::shared_ptr<GrammarEntry> Compile(const Task& task);
  // The grammar from the shared tier, waiting (until `until`) while another
  // replica holds the compile lease; null when this replica should compile
  // it, `*leased` saying whether it holds the lease.
  std::shared_ptr<GrammarEntry> FromFleet(
      const Task& task, std::chrono::steady_clock::time_point until,
      bool* leased);
  // A valid value of the shared tier for `id`; null if none, if it is
  // damaged or stale (counted), or if the tier failed (`*failed`).
  std::shared_ptr<GrammarEntry> Fetch(const Task& task, bool* failed);

  const Options options_;
  GrammarCache* const cache_;
  ServiceMetrics* const metrics_;
  SharedCache* const shared_;
  absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::shared_ptr<CompileJob>> in_flight_
      ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Grammars to classify in the background, newest last; weak, so that a
  // grammar the cache evicts is not kept for this.
  std::vector<std::weak_ptr<const GrammarEntry>> to_classify_
      ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_classifying_{false};
  std::vector<std::thread> threads_;
  std::thread classifier_;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_COMPILE_POOL_H_
