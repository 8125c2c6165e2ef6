// node_bench: one grammard serving a whole node. A node runs several
// data-parallel ranks, each stepping its own batch; the sidecar shares the
// node's CPUs with the engine feeding the GPUs, so what counts is its CPU
// per sequence-step and the tail of every rank's step.
//
// Starts the daemon, compiles a warm mix of constraints (the shared bench
// workloads and --warm_maskbench MaskBench schemas, all JSON compact), then
// runs --streams Decode streams (one per rank, one thread each) of --batch
// sequences, stepping as fast as they can. Each sequence takes uniform
// random allowed tokens (tests/load/step_sampler.h) until it terminates or
// has taken --max_tokens, then is closed and replaced: by a warm
// constraint (opened by grammar id), or, --new_per_s times a second over
// all streams, by a MaskBench schema never seen (opened by constraint; the
// stream steps its other sequences while it compiles). Phases, each
// --seconds long after --warmup_seconds untimed:
//
//   steady  the mix above;
//   storm   the same, and --storm_compiles other new schemas sent at once
//           (Compile, not waited for) by another client as it begins.
//
// One line per phase on stdout:
//
//   RESULT phase=P streams=N batch=B steps_per_s=... min_steps_per_s=...
//          step_p50_us=... step_p99_us=... cpu_us_per_seq_step=...
//          step_cpu_us_per_seq_step=... fill_us_per_seq_step=...
//          cpu_cores=... bytes_per_step=...
//          rss_mb=... compiles=... compile_failures=...
//
// steps_per_s is a stream's, the mean over streams (min_: the slowest);
// step_p50_us and step_p99_us are the worst stream's; the CPU figures are
// the daemon's user + system time in the phase (/proc/PID/stat) over the
// sequence-steps of all streams, step_ without the compile threads
// (/proc/PID/task, by thread name); fill_ the engine's share of a step,
// the time sequences spent advancing and filling rows (the sum of
// grammard_mask_fill_duration_seconds, wall time on the filling thread);
// cpu_cores the daemon's CPU time over the phase's
// wall time; bytes_per_step the serialized StepResult, mean; rss_mb the
// daemon's resident memory at the phase's end. Each stream's figures go to
// stderr.
//
// Cost: the daemon's start and warm compiles, then 2 x --seconds plus
// --warmup_seconds of both cores. Thread-safety: one thread per stream;
// results are read once the streams are joined.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grammar/base/status_macros.h"
#include "proto/grammard.grpc.pb.h"
#include "tests/load/bench_constraints.h"
#include "tests/load/decode_stream.h"
#include "tests/load/step_sampler.h"
#include "tests/support/daemon.h"
#include "tests/support/paths.h"

ABSL_FLAG(int, streams, 8, "Decode streams, one per rank (a thread each).");
ABSL_FLAG(int, batch, 64, "Sequences per stream, stepped together.");
ABSL_FLAG(int, seconds, 10, "Length of each timed phase.");
ABSL_FLAG(int, warmup_seconds, 5, "Untimed stepping before the phases.");
ABSL_FLAG(double, new_per_s, 0.5,
          "Sequences opened per second (all streams) under a MaskBench "
          "schema never seen.");
ABSL_FLAG(int, storm_compiles, 64,
          "New MaskBench schemas sent at once as the storm phase begins.");
ABSL_FLAG(std::string, workloads, "",
          "The shared bench workloads in the warm mix, by name "
          "(WORKLOADS.tsv), comma-separated; empty: all.");
ABSL_FLAG(int, warm_maskbench, 16,
          "MaskBench schemas in the warm mix (the first that compile).");
ABSL_FLAG(int, max_tokens, 96,
          "Tokens a sequence takes before it is closed and replaced.");
ABSL_FLAG(int, fill_threads, 2, "--fill_threads of the daemon.");
ABSL_FLAG(int, classify_ahead_ms, 600000,
          "--classify_ahead_ms of the daemon: by default every token of a "
          "grammar is classified before it is ready, so that steps time the "
          "service, not first visits of states (the engine's cost, which "
          "maskbench measures); 0 leaves them to the steps and the "
          "background.");
ABSL_FLAG(bool, unix_socket, false,
          "Step through the daemon's Unix socket (--unix_socket), as an "
          "engine in the sidecar's pod would, instead of its TCP port.");
ABSL_FLAG(std::string, tokenizer, "llama3", "Tokenizer to decode with.");
ABSL_FLAG(uint32_t, seed, 1, "Random seed (stream i: seed + i).");

namespace {

namespace v1 = grammard::v1;
using grammard::load::DecodeStream;
using Clock = std::chrono::steady_clock;

enum Phase { kWarmup, kSteady, kStorm, kStop };
constexpr const char* kPhaseNames[] = {"warmup", "steady", "storm"};
constexpr int kTimedPhases = 2;  // steady, storm

// The daemon's compile threads (service/compile_pool.cc names them).
bool IsCompileThread(const std::string& name) {
  return name == "gd-compile" || name == "gd-classify" || name == "gd-read";
}

// User + system seconds from a /proc stat line (fields 14 and 15, after
// the parenthesized name, which may hold spaces).
double StatSeconds(const std::string& stat, std::string* name) {
  const size_t open = stat.find('('), close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos) return 0;
  if (name != nullptr) *name = stat.substr(open + 1, close - open - 1);
  std::istringstream in(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i >= 14) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct DaemonSample {
  double all = 0;      // CPU seconds of the whole process, exited threads too
  double compile = 0;  // of its compile threads (which never exit)
  double fill = 0;     // seconds its sequences spent advancing and filling
  double rss_mb = 0;
};

DaemonSample SampleDaemon(const grammard::testing::Daemon& daemon) {
  DaemonSample sample;
  sample.fill = grammard::testing::Metric(
      daemon, "grammard_mask_fill_duration_seconds_sum");
  const std::string proc = "/proc/" + std::to_string(daemon.pid());
  sample.all = StatSeconds(ReadAll(proc + "/stat"), nullptr);
  if (DIR* dir = opendir((proc + "/task").c_str())) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      std::string name;
      const double s =
          StatSeconds(ReadAll(proc + "/task/" + e->d_name + "/stat"), &name);
      if (IsCompileThread(name)) sample.compile += s;
    }
    closedir(dir);
  }
  std::istringstream status(ReadAll(proc + "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0)
      sample.rss_mb = std::stod(line.substr(6)) / 1024;
  }
  return sample;
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const size_t rank =
      static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::max<size_t>(rank, 1) - 1];
}

v1::Constraint Compact(v1::Constraint c) {
  if (c.has_json_schema() || c.has_json_object()) {
    c.mutable_json_options()->set_whitespace(
        v1::JsonOptions::WHITESPACE_COMPACT);
  }
  return c;
}

// What all streams share: the warm grammars, the new schemas and the clock
// they arrive by, the phase.
struct Shared {
  std::string target;
  v1::Tokenizer tokenizer;
  std::vector<std::string> warm_ids;
  std::vector<v1::Constraint> fresh;  // each sent once
  std::atomic<size_t> next_fresh{0};
  Clock::time_point start;  // of the warm-up: new schemas arrive from then
  std::atomic<int64_t> fresh_opened{0};
  std::atomic<int> phase{kWarmup};

  // Whether the next open takes a new schema: one is due by now.
  bool TakeFresh() {
    const double due =
        absl::GetFlag(FLAGS_new_per_s) *
        std::chrono::duration<double>(Clock::now() - start).count();
    int64_t opened = fresh_opened.load();
    while (static_cast<double>(opened) < due) {
      if (fresh_opened.compare_exchange_weak(opened, opened + 1)) return true;
    }
    return false;
  }
  // A schema no one sent yet; null when all are spent.
  const v1::Constraint* NextFresh() {
    const size_t i = next_fresh++;
    return i < fresh.size() ? &fresh[i] : nullptr;
  }
};

struct PhaseResult {
  std::vector<double> step_us;
  double bytes = 0;
  int64_t sequence_steps = 0;
  int64_t compiles = 0;  // new schemas this stream opened
  int64_t compile_failures = 0;
};

// One rank's stream: keeps --batch sequences stepping until the phases end.
class StreamRunner {
 public:
  StreamRunner(Shared* shared, int index)
      : shared_(*shared),
        rng_(absl::GetFlag(FLAGS_seed) + static_cast<uint32_t>(index)),
        stub_(v1::Grammard::NewStub(grammard::load::Connect(
            shared->target, /*private_connection=*/true))),
        stream_(stub_.get(),
                std::chrono::system_clock::now() + std::chrono::hours(2)),
        sampler_(shared->tokenizer.vocab_size()) {}

  absl::Status Run() {
    sequences_.resize(static_cast<size_t>(absl::GetFlag(FLAGS_batch)));
    for (Sequence& seq : sequences_) GRAMMARD_RETURN_IF_ERROR(Open(&seq));
    while (shared_.phase.load() != kStop) GRAMMARD_RETURN_IF_ERROR(Step());
    for (const Sequence& seq : sequences_) {
      GRAMMARD_RETURN_IF_ERROR(stream_.Close(seq.id));
    }
    return stream_.Finish();
  }

  const PhaseResult& result(int phase) const { return results_[phase]; }

 private:
  struct Sequence {
    uint64_t id = 0;
    int32_t pending = -1;  // the token to report at the next step
    int tokens = 0;
    bool ready = false;
    grammard::load::KeptRow previous;
  };

  absl::Status Open(Sequence* seq) {
    *seq = Sequence();
    seq->id = next_id_++;
    v1::OpenSequence open;
    open.set_sequence_id(seq->id);
    open.set_tokenizer(shared_.tokenizer.name());
    open.set_keeps_previous_row(true);
    const v1::Constraint* fresh =
        shared_.TakeFresh() ? shared_.NextFresh() : nullptr;
    if (fresh != nullptr) {
      *open.mutable_constraint() = *fresh;
      if (const int p = shared_.phase.load(); p != kWarmup && p != kStop) {
        ++results_[p - 1].compiles;
      }
    } else {
      open.set_grammar_id(shared_.warm_ids[rng_() % shared_.warm_ids.size()]);
    }
    return stream_.Open(open);
  }

  absl::Status Step() {
    const int phase = shared_.phase.load();
    step_.Clear();
    step_.set_step_id(++step_id_);
    stepped_.clear();
    Sequence* waiting = nullptr;
    for (Sequence& seq : sequences_) {
      if (!seq.ready) {
        auto status = stream_.Status(seq.id);
        if (!status.has_value()) {
          waiting = &seq;
          continue;
        }
        if (status->state() != v1::GRAMMAR_STATE_READY) {
          // A new schema the daemon refused (MaskBench has some it cannot
          // enforce exactly): replaced, counted.
          if (phase != kWarmup) ++results_[phase - 1].compile_failures;
          GRAMMARD_RETURN_IF_ERROR(stream_.Close(seq.id));
          GRAMMARD_RETURN_IF_ERROR(Open(&seq));
          waiting = &seq;
          continue;
        }
        seq.ready = true;
      }
      v1::SequenceStep* s = step_.add_sequences();
      s->set_sequence_id(seq.id);
      if (seq.pending >= 0) s->add_accepted_tokens(seq.pending);
      stepped_.push_back(&seq);
    }
    if (stepped_.empty()) {  // all compiling
      return stream_.WaitStatus(waiting->id).status();
    }
    const Clock::time_point start = Clock::now();
    GRAMMARD_RETURN_IF_ERROR(stream_.Step(step_, &result_));
    if (phase != kWarmup && phase != kStop) {
      PhaseResult& r = results_[phase - 1];
      r.step_us.push_back(
          std::chrono::duration<double, std::micro>(Clock::now() - start)
              .count());
      r.bytes += static_cast<double>(result_.ByteSizeLong());
      r.sequence_steps += static_cast<int64_t>(stepped_.size());
    }
    if (result_.sequences_size() != static_cast<int>(stepped_.size())) {
      return absl::InternalError("a StepResult of another size");
    }
    sampler_.BeginStep();
    const int max_tokens = absl::GetFlag(FLAGS_max_tokens);
    for (size_t i = 0; i < stepped_.size(); ++i) {
      Sequence& seq = *stepped_[i];
      auto token = sampler_.Next(result_.sequences(static_cast<int>(i)),
                                 &seq.previous, &rng_);
      if (!token.ok()) {
        return absl::Status(
            token.status().code(),
            absl::StrCat("sequence ", seq.id, ": ", token.status().message()));
      }
      if (*token >= 0 && ++seq.tokens < max_tokens) {
        seq.pending = *token;
      } else {
        done_.push_back(&seq);
      }
    }
    // Replaced once the step is read: later rows may refer to their rows.
    for (Sequence* seq : done_) {
      GRAMMARD_RETURN_IF_ERROR(stream_.Close(seq->id));
      GRAMMARD_RETURN_IF_ERROR(Open(seq));
    }
    done_.clear();
    return absl::OkStatus();
  }

  Shared& shared_;
  std::mt19937 rng_;
  std::unique_ptr<v1::Grammard::Stub> stub_;
  DecodeStream stream_;
  grammard::load::StepSampler sampler_;
  std::vector<Sequence> sequences_;
  std::vector<Sequence*> stepped_;
  std::vector<Sequence*> done_;  // this step's, to replace
  uint64_t next_id_ = 1;
  uint64_t step_id_ = 0;
  v1::Step step_;
  v1::StepResult result_;
  PhaseResult results_[kTimedPhases];
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "node_bench: %s\n", message.c_str());
  return 1;
}

absl::StatusOr<v1::CompileResponse> Compile(v1::Grammard::Stub* stub,
                                            const std::string& tokenizer,
                                            const v1::Constraint& constraint,
                                            bool wait) {
  v1::CompileRequest request;
  request.set_tokenizer(tokenizer);
  *request.mutable_constraint() = constraint;
  request.set_wait(wait);
  v1::CompileResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::minutes(1));
  grpc::Status s = stub->Compile(&context, request, &response);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        s.error_message());
  }
  return response;
}

// The tokenizer, the warm grammars, the new schemas (MaskBench's, shuffled,
// after those taken for the warm mix).
absl::Status Prepare(v1::Grammard::Stub* stub, Shared* shared) {
  const std::optional<std::string> data = grammard::testing::SharedDataDir();
  if (!data.has_value()) {
    return absl::NotFoundError(
        grammard::testing::MissingDataMessage("../shared/data"));
  }
  {
    v1::ListTokenizersResponse list;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    grpc::Status s =
        stub->ListTokenizers(&context, v1::ListTokenizersRequest(), &list);
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    for (const v1::Tokenizer& t : list.tokenizers()) {
      if (t.name() == absl::GetFlag(FLAGS_tokenizer)) shared->tokenizer = t;
    }
    if (shared->tokenizer.name().empty()) {
      return absl::NotFoundError("the daemon has no tokenizer " +
                                 absl::GetFlag(FLAGS_tokenizer));
    }
  }
  std::vector<v1::Constraint> schemas =
      grammard::load::MaskBenchSchemas(*data, /*limit_per_file=*/200);
  std::shuffle(schemas.begin(), schemas.end(),
               std::mt19937(absl::GetFlag(FLAGS_seed)));
  const std::vector<std::string> chosen =
      absl::StrSplit(absl::GetFlag(FLAGS_workloads), ',', absl::SkipEmpty());
  size_t workloads = 0;
  size_t next = 0;
  const auto compile_warm = [&](const v1::Constraint& c) -> absl::Status {
    auto response =
        Compile(stub, shared->tokenizer.name(), Compact(c), /*wait=*/true);
    if (!response.ok()) return response.status();
    if (response->state() != v1::GRAMMAR_STATE_READY) {
      return absl::FailedPreconditionError(response->error().message());
    }
    shared->warm_ids.push_back(response->grammar_id());
    return absl::OkStatus();
  };
  for (const grammard::load::Workload& w :
       grammard::load::BenchWorkloads(*data)) {
    if (!chosen.empty() &&
        std::find(chosen.begin(), chosen.end(), w.name) == chosen.end()) {
      continue;
    }
    GRAMMARD_RETURN_IF_ERROR(compile_warm(w.constraint));
    ++workloads;
  }
  if (shared->warm_ids.empty() && absl::GetFlag(FLAGS_warm_maskbench) == 0) {
    return absl::InvalidArgumentError("no warm constraint (--workloads)");
  }
  while (shared->warm_ids.size() <
             workloads +
                 static_cast<size_t>(absl::GetFlag(FLAGS_warm_maskbench)) &&
         next < schemas.size()) {
    compile_warm(schemas[next++]).IgnoreError();  // some cannot be enforced
  }
  for (; next < schemas.size(); ++next) {
    shared->fresh.push_back(Compact(schemas[next]));
  }
  std::fprintf(stderr,
               "node_bench: warm mix of %zu constraints (%zu workloads), "
               "%zu new schemas in reserve\n",
               shared->warm_ids.size(), workloads, shared->fresh.size());
  return absl::OkStatus();
}

int Run() {
  const int streams = absl::GetFlag(FLAGS_streams);
  const int batch = absl::GetFlag(FLAGS_batch);
  if (streams < 1 || batch < 1 || absl::GetFlag(FLAGS_seconds) < 1) {
    return Fail("--streams, --batch and --seconds must be >= 1");
  }
  grammard::testing::DaemonOptions options;
  options.unix_socket = absl::GetFlag(FLAGS_unix_socket);
  options.tokenizers = {absl::GetFlag(FLAGS_tokenizer)};
  options.flags = {
      absl::StrCat("--fill_threads=", absl::GetFlag(FLAGS_fill_threads)),
      absl::StrCat("--classify_ahead_ms=",
                   absl::GetFlag(FLAGS_classify_ahead_ms))};
  auto daemon = grammard::testing::Daemon::Start(options);
  if (!daemon.ok()) return Fail(daemon.status().ToString());
  Shared shared;
  shared.target = absl::GetFlag(FLAGS_unix_socket) ? (*daemon)->unix_target()
                                                   : (*daemon)->target();
  auto stub = v1::Grammard::NewStub(grammard::load::Connect(shared.target));
  if (absl::Status s = Prepare(stub.get(), &shared); !s.ok()) {
    return Fail(s.ToString());
  }

  std::vector<std::unique_ptr<StreamRunner>> runners;
  std::vector<absl::Status> statuses(static_cast<size_t>(streams));
  for (int i = 0; i < streams; ++i) {
    runners.push_back(std::make_unique<StreamRunner>(&shared, i));
  }
  shared.start = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < streams; ++i) {
    threads.emplace_back([&, i] {
      statuses[static_cast<size_t>(i)] = runners[static_cast<size_t>(i)]->Run();
    });
  }
  const auto phase_length = std::chrono::seconds(absl::GetFlag(FLAGS_seconds));
  std::this_thread::sleep_for(
      std::chrono::seconds(absl::GetFlag(FLAGS_warmup_seconds)));
  DaemonSample samples[kTimedPhases + 1];
  Clock::time_point at[kTimedPhases + 1];
  int64_t storm_sent = 0;
  std::thread storm;
  for (int p = 0; p <= kTimedPhases; ++p) {
    samples[p] = SampleDaemon(**daemon);
    at[p] = Clock::now();
    shared.phase = p == kTimedPhases ? kStop : kSteady + p;
    if (p == kStorm - 1) {
      // Another client's burst, on a connection of its own.
      storm = std::thread([&] {
        auto storm_stub =
            v1::Grammard::NewStub(grammard::load::Connect(shared.target, true));
        for (int i = 0; i < absl::GetFlag(FLAGS_storm_compiles); ++i) {
          const v1::Constraint* c = shared.NextFresh();
          if (c == nullptr) break;
          if (Compile(storm_stub.get(), shared.tokenizer.name(), *c,
                      /*wait=*/false)
                  .ok()) {
            ++storm_sent;
          }
        }
      });
    }
    if (p < kTimedPhases) std::this_thread::sleep_for(phase_length);
  }
  for (std::thread& t : threads) t.join();
  storm.join();
  for (int i = 0; i < streams; ++i) {
    const absl::Status& s = statuses[static_cast<size_t>(i)];
    if (!s.ok()) return Fail(absl::StrCat("stream ", i, ": ", s.ToString()));
  }

  for (int p = 0; p < kTimedPhases; ++p) {
    const double seconds =
        std::chrono::duration<double>(at[p + 1] - at[p]).count();
    double steps_sum = 0, steps_min = INFINITY, p50 = 0, p99 = 0, bytes = 0;
    int64_t steps = 0, sequence_steps = 0, compiles = 0, failures = 0;
    for (int i = 0; i < streams; ++i) {
      const PhaseResult& r = runners[static_cast<size_t>(i)]->result(p);
      const double rate = static_cast<double>(r.step_us.size()) / seconds;
      const double s50 = Percentile(r.step_us, 0.5);
      const double s99 = Percentile(r.step_us, 0.99);
      std::fprintf(stderr,
                   "node_bench: %s stream %d: %.1f steps/s, p50 %.1f us, "
                   "p99 %.1f us\n",
                   kPhaseNames[p + 1], i, rate, s50, s99);
      steps_sum += rate;
      steps_min = std::min(steps_min, rate);
      p50 = std::max(p50, s50);
      p99 = std::max(p99, s99);
      bytes += r.bytes;
      steps += static_cast<int64_t>(r.step_us.size());
      sequence_steps += r.sequence_steps;
      compiles += r.compiles;
      failures += r.compile_failures;
    }
    if (p == kStorm - 1) compiles += storm_sent;
    const double cpu = samples[p + 1].all - samples[p].all;
    const double compile_cpu = samples[p + 1].compile - samples[p].compile;
    const double fill = samples[p + 1].fill - samples[p].fill;
    const double per_seq_step = 1e6 / static_cast<double>(sequence_steps);
    std::printf(
        "RESULT phase=%s streams=%d batch=%d steps_per_s=%.1f "
        "min_steps_per_s=%.1f step_p50_us=%.1f step_p99_us=%.1f "
        "cpu_us_per_seq_step=%.3f step_cpu_us_per_seq_step=%.3f "
        "fill_us_per_seq_step=%.3f "
        "cpu_cores=%.2f bytes_per_step=%.0f rss_mb=%.1f compiles=%lld "
        "compile_failures=%lld\n",
        kPhaseNames[p + 1], streams, batch, steps_sum / streams, steps_min, p50,
        p99, cpu * per_seq_step, (cpu - compile_cpu) * per_seq_step,
        fill * per_seq_step, cpu / seconds, bytes / static_cast<double>(steps),
        samples[p + 1].rss_mb, static_cast<long long>(compiles),
        static_cast<long long>(failures));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return Run();
}
