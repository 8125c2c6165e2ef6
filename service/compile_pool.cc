#include "service/compile_pool.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <new>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "service/cache_value.h"
#include "service/constraint.h"

namespace grammard::service {

std::string GrammarId(std::string_view tokenizer_fingerprint,
                      std::string_view canonical_constraint) {
  std::string key = absl::StrCat(grammar::kEngineVersion, "\n");
  key.append(tokenizer_fingerprint);
  key += "\n";
  key.append(canonical_constraint);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(key.data(), key.size(), digest, &len, EVP_sha256(), nullptr);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), 16));
}

namespace {

// The result of a compile the server gave up on because it is stopping.
std::shared_ptr<GrammarEntry> Stopping(const std::string& id) {
  auto entry = std::make_shared<GrammarEntry>();
  entry->id = id;
  entry->status = absl::CancelledError("compile: the server is stopping");
  return entry;
}

}  // namespace

CompileJob::CompileJob(std::shared_ptr<const GrammarEntry> entry)
    : id_(entry->id), entry_(std::move(entry)) {}

std::shared_ptr<const GrammarEntry> CompileJob::result() const {
  absl::MutexLock lock(&mu_);
  return entry_;
}

std::shared_ptr<const GrammarEntry> CompileJob::WaitUntil(
    std::chrono::steady_clock::time_point deadline,
    const std::function<bool()>& cancelled) const {
  // Slices of at most 100 ms, so that a caller that went away is noticed.
  constexpr auto kSlice = std::chrono::milliseconds(100);
  absl::MutexLock lock(&mu_);
  auto done = [](const std::shared_ptr<const GrammarEntry>* e) {
    return *e != nullptr;
  };
  while (entry_ == nullptr) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    if (cancelled && cancelled()) break;
    const auto until = deadline - now > kSlice ? now + kSlice : deadline;
    mu_.AwaitWithDeadline(
        absl::Condition(+done, &entry_),
        absl::Now() +
            absl::FromChrono(until - std::chrono::steady_clock::now()));
  }
  return entry_;
}

void CompileJob::OnDone(Listener listener) {
  std::shared_ptr<const GrammarEntry> entry;
  {
    absl::MutexLock lock(&mu_);
    if (entry_ == nullptr) {
      listeners_.push_back(std::move(listener));
      return;
    }
    entry = entry_;
  }
  listener(*entry);
}

void CompileJob::Finish(std::shared_ptr<const GrammarEntry> entry) {
  std::vector<Listener> listeners;
  {
    absl::MutexLock lock(&mu_);
    entry_ = entry;
    listeners.swap(listeners_);
  }
  for (Listener& listener : listeners) listener(*entry);
}

CompilePool::CompilePool(const Options& options, GrammarCache* cache,
                         ServiceMetrics* metrics, SharedCache* shared)
    : options_(options),
      cache_(cache),
      metrics_(metrics),
      shared_(shared),
      queue_bytes_(options.max_queue_bytes) {
  // `threads` for the compiles, and as many for clients with none running
  // while those are all busy (see the header).
  for (int i = 0; i < 2 * std::max(1, options_.threads); ++i) {
    threads_.push_back(std::make_unique<SizedThread>(options_.stack_bytes,
                                                     [this] { Work(); }));
  }
  if (options_.classify_in_background) {
    classifier_ = std::thread([this] { ClassifyInBackground(); });
  }
  low_thread_ = std::make_unique<SizedThread>(options_.stack_bytes,
                                              [this] { RunLowPriorityJobs(); });
}

CompilePool::~CompilePool() {
  CancelAll();
  threads_.clear();  // joins them
  if (classifier_.joinable()) classifier_.join();
  {
    absl::MutexLock lock(&low_mu_);
    low_stop_ = true;
  }
  low_thread_.reset();  // joins it, once its jobs ran
}

void CompilePool::CancelAll() {
  std::vector<Task> dropped;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cancel_.store(true);
    for (auto& [client, queue] : clients_) {
      for (Task& task : queue.tasks) {
        in_flight_.erase(task.job->id());
        dropped.push_back(std::move(task));
      }
      queue.tasks.clear();
    }
    turns_.clear();
    queued_ = 0;
    UpdateQueueMetrics();
  }
  stop_classifying_.store(true);
  for (Task& task : dropped) {
    queue_bytes_.Release(task.bytes);
    task.job->Finish(Stopping(task.job->id()));
  }
  metrics_->compile_queue_bytes->Set(static_cast<double>(queue_bytes_.used()));
}

absl::StatusOr<CompilePool::Submission> CompilePool::Submit(
    std::shared_ptr<const TokenizerEntry> tokenizer,
    const grammard::v1::Constraint& constraint, std::string_view client) {
  // Its size before anything reads it (the canonical form parses JSON).
  const int64_t bytes = static_cast<int64_t>(constraint.ByteSizeLong());
  if (options_.max_constraint_bytes > 0 &&
      bytes > options_.max_constraint_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "compile: the constraint is ", bytes, " bytes; at most ",
        options_.max_constraint_bytes, " (--max_constraint_bytes)"));
  }
  auto over_budget = [&](int64_t charge, const char* what) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "compile: the constraints queued hold ", queue_bytes_.used(),
        " bytes; this one's ", charge, what, " would pass the budget of ",
        queue_bytes_.limit(), " (--compile_queue_bytes); retry later"));
  };
  // Charged from here on: reading it (a JSON document several times its
  // size) counts as much as keeping it queued.
  if (!queue_bytes_.TryCharge(bytes)) return over_budget(bytes, "");
  int64_t charged = bytes;
  absl::Cleanup uncharge = [&] { queue_bytes_.Release(charged); };
  // One large document read at a time, behind the decode steps: a dozen
  // clients sending 6 MB schemas at once took both cores from them for
  // 160 ms, and read one at a time at normal priority still took one core
  // for as long, pushing a bystander's step p99 past 100 ms.
  const bool large = bytes > kLargeConstraintBytes;
  absl::StatusOr<ParsedConstraint> parsed;
  if (large) {
    RunLowPriority(
        [&] {
          // Refused before it is built when even its least parsed size
          // does not fit: building and freeing such documents was most of
          // what a flood of them cost.
          const int64_t least = LeastParsedBytes(constraint);
          if (least > charged) {
            if (!queue_bytes_.TryCharge(least - charged)) {
              parsed = over_budget(least, " once parsed");
              return;
            }
            charged = least;
          }
          parsed = ParseConstraint(constraint);
        },
        /*wait=*/true);
  } else {
    parsed = ParseConstraint(constraint);
  }
  // A large document this submission does not queue (refused, or found
  // compiled) is freed behind the steps too: freeing a 6 MB enum's 35 MB
  // of nodes takes tens of milliseconds.
  bool queued = false;
  absl::Cleanup free_large = [&] {
    if (!large || queued || !parsed.ok()) return;
    auto document = std::make_shared<ParsedConstraint>(*std::move(parsed));
    RunLowPriority([document]() mutable { document.reset(); },
                   /*wait=*/false);
  };
  if (!parsed.ok()) return parsed.status();
  // What the task keeps is the parsed document, not the text: charge that.
  if (parsed->bytes > charged) {
    if (!queue_bytes_.TryCharge(parsed->bytes - charged)) {
      return over_budget(parsed->bytes, " once parsed");
    }
  } else {
    queue_bytes_.Release(charged - parsed->bytes);
  }
  charged = parsed->bytes;
  const std::string id =
      GrammarId(tokenizer->vocab->fingerprint(), parsed->canonical);
  // Both lookups under mu_: a finishing compile enters the cache before it
  // leaves in_flight_, so one of the two always has it. (Looking in the
  // cache outside mu_ let a compile finish between the lookups and be
  // compiled a second time.)
  absl::MutexLock lock(&mu_);
  auto running = in_flight_.find(id);
  if (running != in_flight_.end()) return Submission{running->second, false};
  if (auto entry = cache_->Find(id)) {
    return Submission{std::make_shared<CompileJob>(std::move(entry)), true};
  }
  if (stopping_) {
    return absl::UnavailableError("compile: the server is stopping");
  }
  if (queued_ >= options_.max_queue) {
    return absl::ResourceExhaustedError(
        absl::StrCat("compile: the queue is full (", queued_,
                     " compiles waiting, --compile_queue); retry later"));
  }
  auto found = clients_.find(client);
  if (found != clients_.end() && static_cast<int>(found->second.tasks.size()) >=
                                     options_.max_queue_per_client) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "compile: this client has ", found->second.tasks.size(),
        " compiles waiting (--compile_queue_per_client); retry later"));
  }
  // The task holds the charge now; Done releases it.
  std::move(uncharge).Cancel();
  auto job = std::make_shared<CompileJob>(id);
  in_flight_.emplace(id, job);
  ClientQueue& queue =
      found != clients_.end() ? found->second : clients_[std::string(client)];
  if (queue.tasks.empty()) turns_.emplace_back(client);
  queued = true;
  queue.tasks.push_back(Task{job, std::move(tokenizer), *std::move(parsed),
                             std::string(client), charged});
  ++queued_;
  UpdateQueueMetrics();
  return Submission{std::move(job), false};
}

std::shared_ptr<CompileJob> CompilePool::Find(const std::string& id) {
  absl::MutexLock lock(&mu_);  // as in Submit
  auto running = in_flight_.find(id);
  if (running != in_flight_.end()) return running->second;
  if (auto entry = cache_->Find(id)) {
    return std::make_shared<CompileJob>(std::move(entry));
  }
  return nullptr;
}

void CompilePool::UpdateQueueMetrics() {
  metrics_->compile_queue_depth->Set(static_cast<double>(queued_));
  metrics_->compile_queue_bytes->Set(static_cast<double>(queue_bytes_.used()));
}

bool CompilePool::CanTakeAny() const {
  if (turns_.empty()) return false;
  if (running_ < std::max(1, options_.threads)) return true;
  for (const std::string& client : turns_) {
    if (clients_.find(client)->second.running == 0) return true;
  }
  return false;
}

bool CompilePool::TakeNext(Task* task) {
  const bool room = running_ < std::max(1, options_.threads);
  for (auto turn = turns_.begin(); turn != turns_.end(); ++turn) {
    ClientQueue& queue = clients_.find(*turn)->second;
    if (!room && queue.running > 0) continue;
    *task = std::move(queue.tasks.front());
    queue.tasks.pop_front();
    ++queue.running;
    ++running_;
    --queued_;
    // Its next compile waits for the others' turns.
    std::string client = std::move(*turn);
    turns_.erase(turn);
    if (!queue.tasks.empty()) turns_.push_back(std::move(client));
    UpdateQueueMetrics();
    return true;
  }
  return false;
}

void CompilePool::Done(const Task& task) {
  queue_bytes_.Release(task.bytes);
  absl::MutexLock lock(&mu_);
  --running_;
  auto it = clients_.find(task.client);
  if (--it->second.running == 0 && it->second.tasks.empty()) {
    clients_.erase(it);
  }
  UpdateQueueMetrics();
}

void CompilePool::Work() {
  // Named so that a node's tools (and tests/load/node_bench) can tell the
  // compiles' CPU from the steps' in /proc/PID/task.
  pthread_setname_np(pthread_self(), "gd-compile");
  for (;;) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](CompilePool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->stopping_ || p->CanTakeAny();
          },
          this));
      if (stopping_) return;
      TakeNext(&task);
    }
    Run(task);
    Done(task);
  }
}

void CompilePool::RunLowPriority(std::function<void()> job, bool wait) {
  absl::MutexLock lock(&low_mu_);
  low_jobs_.push_back(std::move(job));
  const uint64_t ticket = ++low_queued_;
  if (!wait) return;
  auto ran = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(low_mu_) {
    return low_done_ >= ticket;
  };
  low_mu_.Await(absl::Condition(&ran));
}

void CompilePool::RunLowPriorityJobs() {
  pthread_setname_np(pthread_self(), "gd-read");
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  absl::MutexLock lock(&low_mu_);
  for (;;) {
    low_mu_.Await(absl::Condition(
        +[](CompilePool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->low_mu_) {
          return p->low_stop_ || !p->low_jobs_.empty();
        },
        this));
    if (low_jobs_.empty()) return;  // stopping, and nothing left to free
    std::function<void()> job = std::move(low_jobs_.front());
    low_jobs_.pop_front();
    low_mu_.Unlock();
    job();
    job = nullptr;  // what it held is freed on this thread too
    low_mu_.Lock();
    ++low_done_;
  }
}

void CompilePool::ClassifyInBackground() {
  // Behind compiles and steps: the work only saves later steps time.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  pthread_setname_np(pthread_self(), "gd-classify");
  for (;;) {
    std::shared_ptr<const GrammarEntry> entry;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](CompilePool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->stopping_ || !p->to_classify_.empty();
          },
          this));
      if (stopping_) return;
      entry = to_classify_.back().lock();
      to_classify_.pop_back();
    }
    // In slices, and only while the cache keeps the grammar: an evicted
    // one is not worth the time, nor the memory this reference holds.
    // Each slice's tables are charged to the cache as it goes, so that its
    // budget bounds what classified grammars hold.
    constexpr auto kSlice = std::chrono::milliseconds(100);
    bool done = false;
    while (!done && entry != nullptr && cache_->Contains(entry->id) &&
           !stop_classifying_.load()) {
      done = entry->grammar->ClassifyAhead(
          std::chrono::steady_clock::now() + kSlice, &stop_classifying_);
      cache_->Recharge(entry->id);
    }
  }
}

void CompilePool::Run(Task& task) {
  const std::string& id = task.job->id();
  bool leased = false;
  std::shared_ptr<GrammarEntry> entry;
  if (shared_ != nullptr) {
    entry = FromFleet(task, std::chrono::steady_clock::now() + options_.timeout,
                      &leased);
  }
  const bool compiled_here = entry == nullptr;
  if (compiled_here) entry = Compile(task);
  // A deadline or cancellation says nothing about the grammar: the next
  // request should try again rather than find this failure.
  const bool cacheable =
      entry->status.code() != absl::StatusCode::kDeadlineExceeded &&
      entry->status.code() != absl::StatusCode::kCancelled &&
      entry->status.code() != absl::StatusCode::kUnavailable;
  if (shared_ != nullptr && compiled_here && cacheable) {
    shared_
        ->Put(id, EncodeCacheValue(*entry),
              entry->status.ok() ? options_.shared_ttl : options_.negative_ttl)
        .IgnoreError();  // counted by the tier; the local tier still has it
  }
  if (leased) shared_->ReleaseLease(id);
  if (cacheable) cache_->Insert(entry);
  {
    absl::MutexLock lock(&mu_);
    in_flight_.erase(id);
    if (options_.classify_in_background && entry->grammar.has_value()) {
      to_classify_.push_back(entry);
    }
  }
  task.job->Finish(std::move(entry));
}

std::shared_ptr<GrammarEntry> CompilePool::Fetch(const Task& task,
                                                 bool* failed) {
  absl::StatusOr<std::optional<std::string>> value =
      shared_->Get(task.job->id());
  if (!value.ok()) {
    *failed = true;
    return nullptr;
  }
  if (!value->has_value()) return nullptr;
  absl::StatusOr<std::shared_ptr<GrammarEntry>> entry =
      DecodeCacheValue(**value, task.job->id(), *task.tokenizer->compiler);
  if (!entry.ok()) {
    // Compiled again and overwritten by whoever takes the lease next.
    metrics_->redis_rejected->Increment();
    return nullptr;
  }
  metrics_->redis_hits->Increment();
  return *std::move(entry);
}

std::shared_ptr<GrammarEntry> CompilePool::FromFleet(
    const Task& task, std::chrono::steady_clock::time_point until,
    bool* leased) {
  const std::string& id = task.job->id();
  bool failed = false;
  if (auto hit = Fetch(task, &failed)) return hit;
  if (failed) return nullptr;
  metrics_->redis_misses->Increment();
  bool counted_wait = false;
  absl::Duration pause = absl::Milliseconds(10);
  for (;;) {
    absl::StatusOr<bool> taken = shared_->AcquireLease(id);
    if (!taken.ok()) return nullptr;
    if (*taken) {
      *leased = true;
      return nullptr;
    }
    if (!counted_wait) {
      metrics_->redis_remote_waits->Increment();
      counted_wait = true;
    }
    // Another replica compiles it: wait for its value, or for its lease to
    // go (finished without a value to share, or died) and try to take it.
    for (;;) {
      if (absl::FromChrono(until - std::chrono::steady_clock::now()) < pause) {
        return nullptr;
      }
      {
        absl::MutexLock lock(&mu_);
        if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), pause)) {
          return Stopping(id);
        }
      }
      pause = std::min(pause * 1.5, absl::Milliseconds(100));
      if (auto hit = Fetch(task, &failed)) return hit;
      if (failed) return nullptr;
      absl::StatusOr<bool> held = shared_->LeaseHeld(id);
      if (!held.ok()) return nullptr;
      if (!*held) break;
    }
  }
}

std::shared_ptr<GrammarEntry> CompilePool::Compile(Task& task) {
  metrics_->compiles_running->Add(1);
  const char* kind = ConstraintKindName(task.constraint.spec);
  const auto start = std::chrono::steady_clock::now();
  CompileLimits limits;
  limits.deadline = grammar::Deadline(start + options_.timeout, &cancel_);
  limits.max_states = options_.max_states;
  limits.classify_ahead = options_.classify_ahead;
  absl::StatusOr<CompiledConstraint> compiled =
      absl::InternalError("not compiled");
  try {
    compiled = CompileConstraint(*task.tokenizer->compiler,
                                 std::move(task.constraint), limits);
  } catch (const std::bad_alloc&) {
    // The sizes that grow a compile are bounded (states, expressions), so
    // this is the machine running out: not this constraint's fault, and
    // not cached (see Run).
    compiled = absl::UnavailableError(
        "compile: the daemon ran out of memory; retry later");
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  metrics_->compiles_running->Add(-1);
  metrics_->CompileSeconds(kind)->Observe(seconds);

  auto entry = std::make_shared<GrammarEntry>();
  entry->id = task.job->id();
  entry->compile_seconds = seconds;
  if (compiled.ok()) {
    entry->grammar = std::move(compiled->grammar);
    entry->dropped = std::move(compiled->dropped);
  } else if (limits.deadline.cancelled()) {
    entry->status = Stopping(task.job->id())->status;
  } else {
    entry->status = compiled.status();
    if (entry->status.code() == absl::StatusCode::kDeadlineExceeded) {
      entry->status = absl::DeadlineExceededError(
          absl::StrCat(entry->status.message(), " (compile deadline ",
                       options_.timeout.count(), " ms)"));
    }
  }
  return entry;
}

}  // namespace grammard::service
