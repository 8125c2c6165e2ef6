// CompilePool: compiles constraints on a bounded set of threads, once.
//
// Submit first looks in the cache; a miss joins the compile of the same
// grammar already queued or running (single flight) or queues a new one.
// Each compile runs under a deadline counted from its start: past it the
// engine stops (DeadlineExceeded), the thread is free again, and nothing is
// cached, so a later request compiles afresh. Finished compiles go to the
// GrammarCache, failures included unless a retry could succeed.
//
// Fairness: compiles queue per client (a connection) and are served round
// robin, so one client's flood waits behind itself; a client may queue
// max_queue_per_client compiles, all clients max_queue. When every thread
// is busy with other clients' compiles, a client with none running still
// gets one of `threads` more threads at once: one client's slow compiles
// (each up to its deadline) cannot make another's wait. The bytes of the
// constraints queued or compiling have a budget (max_queue_bytes), and a
// constraint larger than max_constraint_bytes is refused before it is
// read. Every refusal is ResourceExhausted naming the flag. Constraints over
// a megabyte are read, and freed when not queued, one at a time on a thread
// of lower priority.
//
// CancelAll (on SIGTERM) fails the queued compiles and stops the running
// ones at once: the engine checks its deadline's flag as it checks the
// time.
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
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/grammard.pb.h"
#include "service/byte_budget.h"
#include "service/constraint.h"
#include "service/grammar_cache.h"
#include "service/service_metrics.h"
#include "service/shared_cache.h"
#include "service/sized_thread.h"
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
  // Blocks until done, `deadline`, or `cancelled()` (asked every 100 ms);
  // null if still compiling then.
  std::shared_ptr<const GrammarEntry> WaitUntil(
      std::chrono::steady_clock::time_point deadline,
      const std::function<bool()>& cancelled = nullptr) const;
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
    // Compiles waiting for a thread, over all clients and per client; more
    // is ResourceExhausted.
    int max_queue = 256;
    int max_queue_per_client = 64;
    // Bytes the constraints queued or compiling hold (for the JSON kinds,
    // the parsed document kept for the compile); 0: no limit.
    int64_t max_queue_bytes = int64_t{256} << 20;
    // The largest constraint (its wire size) that is compiled at all.
    int64_t max_constraint_bytes = int64_t{8} << 20;
    // The stack of each compile thread (see sized_thread.h).
    size_t stack_bytes = size_t{16} << 20;
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
  // CancelAll, then waits for the threads.
  ~CompilePool();

  // Fails the queued compiles (Cancelled), stops the running ones (their
  // grammars are not cached) and refuses new ones (Unavailable).
  void CancelAll();

  struct Submission {
    std::shared_ptr<CompileJob> job;
    bool cache_hit = false;
  };
  // InvalidArgument for a malformed constraint; ResourceExhausted when it
  // is too large or a queue or the byte budget is full. `client` names the
  // requester (its connection) for fairness.
  absl::StatusOr<Submission> Submit(
      std::shared_ptr<const TokenizerEntry> tokenizer,
      const grammard::v1::Constraint& constraint, std::string_view client = "");

  // Each compile's deadline, counted from its start.
  std::chrono::milliseconds timeout() const { return options_.timeout; }

  // A grammar by id, queued, running or cached; null if unknown.
  std::shared_ptr<CompileJob> Find(const std::string& id);

  // Charges the cached grammar `id` for what it holds now
  // (GrammarCache::Recharge): for a sequence that used it and closed.
  void Recharge(const std::string& id) { cache_->Recharge(id); }

 private:
  struct Task {
    std::shared_ptr<CompileJob> job;
    std::shared_ptr<const TokenizerEntry> tokenizer;
    ParsedConstraint constraint;  // handed to the compile
    std::string client;
    int64_t bytes = 0;  // charged to queue_bytes_
  };
  struct ClientQueue {
    std::deque<Task> tasks;
    int running = 0;
  };

  void Work();
  // The next task a thread may start (the fairness rules above), or false.
  bool TakeNext(Task* task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CanTakeAny() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Done(const Task& task);
  void UpdateQueueMetrics() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Run(Task& task);
  // The background thread: classifies ahead for grammars in to_classify_.
  void ClassifyInBackground();
  // The compile itself, timed and counted.
  std::shared_ptr<GrammarEntry> Compile(Task& task);
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
  std::map<std::string, ClientQueue, std::less<>> clients_ ABSL_GUARDED_BY(mu_);
  // Clients with queued tasks, in the order they are next served.
  std::deque<std::string> turns_ ABSL_GUARDED_BY(mu_);
  int queued_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  ByteBudget queue_bytes_;
  // Constraints larger than this are read (parsed for their canonical
  // form) one at a time on a thread of lower priority (nice 10), which also
  // frees the documents of those not queued: reading and freeing them then
  // yield to the decode steps. (A request's own thread cannot lower its
  // priority and raise it again without privileges; at nice 19 the reads
  // starved under load.)
  static constexpr int64_t kLargeConstraintBytes = int64_t{1} << 20;
  // Runs `job` on that thread, in order; returns once it ran if `wait`.
  void RunLowPriority(std::function<void()> job, bool wait);
  void RunLowPriorityJobs();
  absl::Mutex low_mu_;
  std::deque<std::function<void()>> low_jobs_ ABSL_GUARDED_BY(low_mu_);
  uint64_t low_queued_ ABSL_GUARDED_BY(low_mu_) = 0;  // jobs ever queued
  uint64_t low_done_ ABSL_GUARDED_BY(low_mu_) = 0;    // jobs ever run
  bool low_stop_ ABSL_GUARDED_BY(low_mu_) = false;
  std::unique_ptr<SizedThread> low_thread_;
  // Raised by CancelAll: every running compile's deadline reads it.
  std::atomic<bool> cancel_{false};
  std::unordered_map<std::string, std::shared_ptr<CompileJob>> in_flight_
      ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Grammars to classify in the background, newest last; weak, so that a
  // grammar the cache evicts is not kept for this.
  std::vector<std::weak_ptr<const GrammarEntry>> to_classify_
      ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_classifying_{false};
  std::vector<std::unique_ptr<SizedThread>> threads_;
  std::thread classifier_;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_COMPILE_POOL_H_
