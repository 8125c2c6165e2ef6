// step_bench: Decode-step throughput and latency of grammard as a client
// sees it. Starts the daemon (or uses --target), compiles one JSON schema,
// opens --streams Decode streams of --batch sequences each, and steps them
// as fast as it can: every step reports one random allowed token per
// sequence (a uniform pick from its mask row as encoded, seeded) and waits
// for the next masks; a sequence that terminates is closed and reopened.
// Prints one final line to stdout:
//
//   RESULT batch=B steps_per_s=... step_p50_us=... step_p99_us=...
//          bytes_per_step=... fill_p50_us=... bare_p50_us=...
//          overhead_p50_us=...
//
// steps_per_s counts steps of all streams; step_*_us is the client's round
// trip of one step; bytes_per_step the serialized StepResult; fill_p50_us
// the server's per-sequence mask fill time, estimated from the buckets of
// grammard_mask_fill_duration_seconds scraped before and after the timed
// steps; bare_p50_us the same steps' mask computation replayed in-process
// (no encoding, no wire), and overhead_p50_us what the service adds to it.
// Everything else goes to stderr, among it the daemon's own step p50 (from
// the buckets of grammard_step_duration_seconds, so only roughly), which
// splits the round trip into the daemon's share and the transport's.
//
// The daemon it starts, and the replay, classify the grammar's tokens
// entirely before stepping: first visits of states are the engine's cost
// (maskbench measures them), not the service's.
//
// Cost: as fast as the daemon goes; the client samples each mask row from
// its wire form on one thread per stream (tests/load/step_sampler.h), so
// the daemon is not left idle between steps by client work a node does on
// its GPU.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grammar/base/status_macros.h"
#include "grammar/base/thread_pool.h"
#include "grammar/compiler.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"
#include "proto/grammard.grpc.pb.h"
#include "service/constraint.h"
#include "tests/load/decode_stream.h"
#include "tests/load/prometheus_scrape.h"
#include "tests/load/step_sampler.h"
#include "tests/support/daemon.h"
#include "tests/support/paths.h"
#include "tools/grammarctl/constraint_spec.h"

ABSL_FLAG(int, batch, 1, "Sequences per stream, stepped together.");
ABSL_FLAG(int, streams, 1, "Concurrent Decode streams (one thread each).");
ABSL_FLAG(int, steps, 2000, "Timed steps per stream.");
ABSL_FLAG(int, warmup_steps, 200,
          "Untimed steps per stream first, so that a long-lived stream's "
          "steady state is timed (its cache of row encodings warm).");
ABSL_FLAG(bool, unix_socket, false,
          "Step through the daemon's Unix socket (--unix_socket), as an "
          "engine in the sidecar's pod would, instead of its TCP port.");
ABSL_FLAG(std::string, tokenizer, "llama3", "Tokenizer to decode with.");
ABSL_FLAG(std::string, schema, "",
          "JSON Schema file; empty: ../shared/bench/order_schema.json beside "
          "the source tree, else a built-in order schema.");
ABSL_FLAG(std::string, whitespace, "compact",
          "JSON layout: any, compact or indented. With any, a random walk "
          "spends nearly every step on whitespace.");
ABSL_FLAG(std::string, target, "",
          "A running grammard's address; empty: start one.");
ABSL_FLAG(int, metrics_port, 0,
          "With --target: its metrics port on 127.0.0.1 (0: no fill_p50_us).");
ABSL_FLAG(int, fill_threads, 2, "--fill_threads of the daemon started.");
ABSL_FLAG(uint32_t, seed, 1, "Random seed (stream i: seed + i).");
ABSL_FLAG(bool, keep_previous_rows, true,
          "Open sequences with keeps_previous_row: keep each one's first row "
          "so that an unchanged row comes as a reference.");

namespace {

namespace v1 = grammard::v1;
using grammard::load::DecodeStream;
using Clock = std::chrono::steady_clock;

constexpr char kFillHistogram[] = "grammard_mask_fill_duration_seconds";
constexpr char kStepHistogram[] = "grammard_step_duration_seconds";

// Used when ../shared/bench is absent: the shape of a typical API payload.
constexpr char kBuiltinSchema[] = R"({
  "type": "object",
  "properties": {
    "order_id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"},
    "status": {"enum": ["pending", "paid", "shipped", "delivered"]},
    "customer": {
      "type": "object",
      "properties": {
        "name": {"type": "string", "maxLength": 80},
        "email": {"type": "string", "format": "email"},
        "vip": {"type": "boolean"}
      },
      "required": ["name", "email"],
      "additionalProperties": false
    },
    "items": {
      "type": "array", "minItems": 1, "maxItems": 20,
      "items": {
        "type": "object",
        "properties": {
          "sku": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"},
          "quantity": {"type": "integer", "minimum": 1, "maximum": 100},
          "unit_price": {"type": "number", "minimum": 0}
        },
        "required": ["sku", "quantity", "unit_price"],
        "additionalProperties": false
      }
    },
    "notes": {"type": ["string", "null"]},
    "total": {"type": "number"}
  },
  "required": ["order_id", "status", "customer", "items", "total"],
  "additionalProperties": false
})";

// Streams warm up, then wait here while the "before" metrics are scraped,
// so that only timed steps fall between the two scrapes.
class StartGate {
 public:
  void Arrive() {
    std::lock_guard<std::mutex> lock(mu_);
    ++arrived_;
    cv_.notify_all();
  }
  void WaitArrived(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return arrived_ >= n; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void WaitOpen() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;    // guarded by mu_
  bool open_ = false;  // guarded by mu_
};

// What one step reported: per sequence, its id and the token it accepted
// (-1: none yet), replayed in-process for the bare mask computation.
struct RecordedStep {
  bool timed = false;
  std::vector<std::pair<uint64_t, int32_t>> sequences;
};

struct StreamResult {
  absl::Status status;
  std::vector<double> step_us;  // timed steps only
  double result_bytes = 0;      // summed over timed steps
  int64_t reopened = 0;
  std::vector<RecordedStep> steps;  // warm-up and timed
};

struct Setup {
  std::string target;
  std::string grammar_id;
  v1::Tokenizer tokenizer;
};

// One stream's life: open, warm up, pass the gate, step, close.
class StreamRunner {
 public:
  StreamRunner(const Setup& setup, int index, StartGate* gate)
      : setup_(setup),
        rng_(absl::GetFlag(FLAGS_seed) + static_cast<uint32_t>(index)),
        gate_(gate),
        stub_(v1::Grammard::NewStub(grammard::load::Connect(
            setup.target, /*private_connection=*/true))),
        stream_(stub_.get(),
                std::chrono::system_clock::now() + std::chrono::hours(1)),
        sampler_(setup.tokenizer.vocab_size()) {}

  StreamResult Run() {
    bool arrived = false;
    result_.status = [&]() -> absl::Status {
      const int batch = absl::GetFlag(FLAGS_batch);
      for (int i = 0; i < batch; ++i) {
        sequences_.push_back(NewSequence());
        GRAMMARD_RETURN_IF_ERROR(Open(sequences_.back()));
      }
      for (Sequence& seq : sequences_) {
        auto status = stream_.WaitStatus(seq.id);
        if (!status.ok()) return status.status();
        GRAMMARD_RETURN_IF_ERROR(CheckReady(*status));
        seq.ready = true;
      }
      for (int i = 0; i < absl::GetFlag(FLAGS_warmup_steps); ++i) {
        GRAMMARD_RETURN_IF_ERROR(Step(/*timed=*/false));
      }
      gate_->Arrive();
      arrived = true;
      gate_->WaitOpen();
      for (int i = 0; i < absl::GetFlag(FLAGS_steps); ++i) {
        GRAMMARD_RETURN_IF_ERROR(Step(/*timed=*/true));
      }
      for (const Sequence& seq : sequences_) {
        GRAMMARD_RETURN_IF_ERROR(stream_.Close(seq.id));
      }
      return stream_.Finish();
    }();
    if (!arrived) gate_->Arrive();  // never hold the others up
    return std::move(result_);
  }

 private:
  struct Sequence {
    uint64_t id = 0;
    int32_t pending = -1;  // the token to report at the next step
    bool ready = false;
    grammard::load::KeptRow previous;  // with --keep_previous_rows
  };

  Sequence NewSequence() {
    Sequence seq;
    seq.id = next_id_++;
    return seq;
  }

  static absl::Status CheckReady(const v1::SequenceStatus& status) {
    if (status.state() == v1::GRAMMAR_STATE_READY) return absl::OkStatus();
    return absl::Status(static_cast<absl::StatusCode>(status.error().code()),
                        status.error().message());
  }

  absl::Status Open(const Sequence& seq) {
    v1::OpenSequence open;
    open.set_sequence_id(seq.id);
    open.set_tokenizer(setup_.tokenizer.name());
    open.set_grammar_id(setup_.grammar_id);
    open.set_keeps_previous_row(absl::GetFlag(FLAGS_keep_previous_rows));
    return stream_.Open(open);
  }

  absl::Status Step(bool timed) {
    if (std::none_of(sequences_.begin(), sequences_.end(),
                     [](const Sequence& seq) { return seq.ready; })) {
      // All reopened (batch 1, say): an empty step would measure nothing.
      if (auto status = stream_.WaitStatus(sequences_[0].id); !status.ok()) {
        return status.status();
      }
    }
    step_.Clear();
    step_.set_step_id(++step_id_);
    stepped_.clear();
    RecordedStep recorded;
    recorded.timed = timed;
    for (Sequence& seq : sequences_) {
      if (!seq.ready) {
        // Reopened: it joins once its READY status has come in.
        auto status = stream_.Status(seq.id);
        if (!status.has_value()) continue;
        GRAMMARD_RETURN_IF_ERROR(CheckReady(*status));
        seq.ready = true;
      }
      v1::SequenceStep* s = step_.add_sequences();
      s->set_sequence_id(seq.id);
      if (seq.pending >= 0) s->add_accepted_tokens(seq.pending);
      stepped_.push_back(&seq);
      recorded.sequences.emplace_back(seq.id, seq.pending);
    }
    result_.steps.push_back(std::move(recorded));
    const Clock::time_point start = Clock::now();
    GRAMMARD_RETURN_IF_ERROR(stream_.Step(step_, &result_step_));
    if (timed) {
      result_.step_us.push_back(
          std::chrono::duration<double, std::micro>(Clock::now() - start)
              .count());
      result_.result_bytes += static_cast<double>(result_step_.ByteSizeLong());
    }
    sampler_.BeginStep();
    const bool keep = absl::GetFlag(FLAGS_keep_previous_rows);
    for (size_t i = 0; i < stepped_.size(); ++i) {
      Sequence& seq = *stepped_[i];
      auto token = sampler_.Next(result_step_.sequences(static_cast<int>(i)),
                                 keep ? &seq.previous : nullptr, &rng_);
      if (!token.ok()) return token.status();
      if (*token >= 0) {
        seq.pending = *token;
      } else {
        terminated_.push_back(&seq);
      }
    }
    // Reopened once the step is read: later rows may refer to their rows.
    for (Sequence* seq : terminated_) {
      GRAMMARD_RETURN_IF_ERROR(stream_.Close(seq->id));
      *seq = NewSequence();
      GRAMMARD_RETURN_IF_ERROR(Open(*seq));
      ++result_.reopened;
    }
    terminated_.clear();
    return absl::OkStatus();
  }

  const Setup& setup_;
  std::mt19937 rng_;
  StartGate* const gate_;
  std::unique_ptr<v1::Grammard::Stub> stub_;
  DecodeStream stream_;
  grammard::load::StepSampler sampler_;
  std::vector<Sequence> sequences_;
  std::vector<Sequence*> stepped_;
  std::vector<Sequence*> terminated_;  // this step's, to reopen
  uint64_t next_id_ = 1;
  uint64_t step_id_ = 0;
  v1::Step step_;
  v1::StepResult result_step_;
  StreamResult result_;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "step_bench: %s\n", message.c_str());
  return 1;
}

absl::StatusOr<std::string> SchemaText() {
  if (const std::string flag = absl::GetFlag(FLAGS_schema); !flag.empty()) {
    return grammard::grammarctl::ReadUserFile(flag);
  }
  const std::string root = grammard::testing::SourceRoot();
  if (!root.empty()) {
    auto text = grammard::grammarctl::ReadUserFile(
        root + "/../shared/bench/order_schema.json");
    if (text.ok()) return text;
  }
  std::fprintf(stderr,
               "step_bench: ../shared/bench not found; using the "
               "built-in order schema\n");
  return std::string(kBuiltinSchema);
}

// Compiles the schema once, so that every open is by grammar id (as a node
// that warmed its grammars up would do).
absl::Status Prepare(v1::Grammard::Stub* stub, const std::string& schema,
                     Setup* setup) {
  grammard::grammarctl::ConstraintSpec spec;
  spec.json_schema = schema;
  spec.whitespace = absl::GetFlag(FLAGS_whitespace);
  auto constraint = grammard::grammarctl::BuildConstraint(spec);
  if (!constraint.ok()) return constraint.status();
  const auto deadline =
      std::chrono::system_clock::now() + std::chrono::minutes(2);
  {
    v1::ListTokenizersResponse list;
    grpc::ClientContext context;
    context.set_deadline(deadline);
    grpc::Status s =
        stub->ListTokenizers(&context, v1::ListTokenizersRequest(), &list);
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    for (const v1::Tokenizer& t : list.tokenizers()) {
      if (t.name() == absl::GetFlag(FLAGS_tokenizer)) setup->tokenizer = t;
    }
    if (setup->tokenizer.name().empty()) {
      return absl::NotFoundError("the server has no tokenizer " +
                                 absl::GetFlag(FLAGS_tokenizer));
    }
  }
  v1::CompileRequest request;
  request.set_tokenizer(setup->tokenizer.name());
  *request.mutable_constraint() = *constraint;
  request.set_wait(true);
  v1::CompileResponse response;
  grpc::ClientContext context;
  context.set_deadline(deadline);
  grpc::Status s = stub->Compile(&context, request, &response);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  if (response.state() != v1::GRAMMAR_STATE_READY) {
    return absl::FailedPreconditionError(
        absl::StrCat("compile: ", v1::GrammarState_Name(response.state()), " ",
                     response.error().message()));
  }
  std::fprintf(stderr, "step_bench: compiled %s in %.1f ms (%d states)\n",
               response.grammar_id().c_str(), response.compile_seconds() * 1e3,
               response.num_states());
  setup->grammar_id = response.grammar_id();
  return absl::OkStatus();
}

struct Scraped {
  std::vector<grammard::load::Bucket> fill, step;
};

absl::StatusOr<Scraped> Scrape(int port) {
  auto text = grammard::testing::HttpGet(port, "/metrics");
  if (!text.ok()) return text.status();
  Scraped scraped;
  for (auto [name, out] : {std::pair{kFillHistogram, &scraped.fill},
                           std::pair{kStepHistogram, &scraped.step}}) {
    auto buckets = grammard::load::HistogramBuckets(*text, name);
    if (!buckets.ok()) return buckets.status();
    *out = *std::move(buckets);
  }
  return scraped;
}

// The bare mask computation of every timed step: the same sequences accept
// the same tokens and fill their rows in-process, on a pool of the daemon's
// --fill_threads, with nothing encoded or sent. Matchers are created before
// a step's clock starts.
absl::StatusOr<std::vector<double>> BareStepTimes(
    const std::string& schema, const std::vector<StreamResult>& results) {
  const std::string name = absl::GetFlag(FLAGS_tokenizer);
  const std::optional<std::string> dir = grammard::testing::TokenizerDir(name);
  if (!dir.has_value()) {
    return absl::NotFoundError("no tokenizer folder for " + name +
                               " (run tools/setup.sh)");
  }
  grammard::grammar::VocabularyOptions options;
  options.name = name;
  auto vocab = grammard::grammar::Vocabulary::FromDirectory(*dir, options);
  if (!vocab.ok()) return vocab.status();
  grammard::grammar::GrammarCompiler compiler(*vocab);
  grammard::grammarctl::ConstraintSpec spec;
  spec.json_schema = schema;
  spec.whitespace = absl::GetFlag(FLAGS_whitespace);
  auto constraint = grammard::grammarctl::BuildConstraint(spec);
  if (!constraint.ok()) return constraint.status();
  grammard::service::CompileLimits limits;  // all classified, as the daemon
  limits.classify_ahead = std::chrono::minutes(10);
  auto compiled =
      grammard::service::CompileConstraint(compiler, *constraint, limits);
  if (!compiled.ok()) return compiled.status();

  grammard::grammar::ThreadPool pool(absl::GetFlag(FLAGS_fill_threads));
  const size_t words = static_cast<size_t>((*vocab)->size() + 31) / 32;
  std::vector<double> times;
  for (const StreamResult& r : results) {
    std::unordered_map<uint64_t,
                       std::unique_ptr<grammard::grammar::GrammarMatcher>>
        matchers;
    std::vector<grammard::grammar::GrammarMatcher*> stepped;
    std::vector<uint32_t> rows;
    for (const RecordedStep& step : r.steps) {
      stepped.clear();
      for (const auto& [id, token] : step.sequences) {
        auto& m = matchers[id];
        if (m == nullptr) {
          m = std::make_unique<grammard::grammar::GrammarMatcher>(
              compiled->grammar);
        }
        stepped.push_back(m.get());
      }
      rows.resize(stepped.size() * words);
      std::atomic<bool> refused{false};
      const Clock::time_point start = Clock::now();
      pool.ParallelFor(static_cast<int64_t>(stepped.size()), [&](int64_t i) {
        const auto k = static_cast<size_t>(i);
        const int32_t token = step.sequences[k].second;
        if (token >= 0 && !stepped[k]->AcceptToken(token).ok()) refused = true;
        stepped[k]->FillNextTokenMask(rows.data() + k * words);
      });
      if (step.timed) {
        times.push_back(
            std::chrono::duration<double, std::micro>(Clock::now() - start)
                .count());
      }
      if (refused) {
        return absl::InternalError(
            "replay: a token the daemon accepted was refused in-process");
      }
    }
  }
  return times;
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const size_t rank =
      static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::max<size_t>(rank, 1) - 1];
}

int Run() {
  const int batch = absl::GetFlag(FLAGS_batch);
  const int streams = absl::GetFlag(FLAGS_streams);
  if (batch < 1 || streams < 1 || absl::GetFlag(FLAGS_steps) < 1) {
    return Fail("--batch, --streams and --steps must be >= 1");
  }
  auto schema = SchemaText();
  if (!schema.ok()) return Fail(schema.status().ToString());

  Setup setup;
  setup.target = absl::GetFlag(FLAGS_target);
  int metrics_port = absl::GetFlag(FLAGS_metrics_port);
  std::unique_ptr<grammard::testing::Daemon> daemon;
  if (setup.target.empty()) {
    grammard::testing::DaemonOptions options;
    options.unix_socket = absl::GetFlag(FLAGS_unix_socket);
    options.tokenizers = {absl::GetFlag(FLAGS_tokenizer)};
    // Every token classified before the grammar is ready: this measures a
    // step's steady cost, not the first visits of states (see
    // --classify_ahead_ms in service/main.cc).
    options.flags = {
        absl::StrCat("--fill_threads=", absl::GetFlag(FLAGS_fill_threads)),
        "--classify_ahead_ms=600000"};
    auto started = grammard::testing::Daemon::Start(options);
    if (!started.ok()) return Fail(started.status().ToString());
    daemon = *std::move(started);
    setup.target = absl::GetFlag(FLAGS_unix_socket) ? daemon->unix_target()
                                                    : daemon->target();
    metrics_port = daemon->metrics_port();
  }
  {
    auto stub = v1::Grammard::NewStub(grammard::load::Connect(setup.target));
    if (absl::Status s = Prepare(stub.get(), *schema, &setup); !s.ok()) {
      return Fail(s.ToString());
    }
  }

  StartGate gate;
  std::vector<StreamResult> results(static_cast<size_t>(streams));
  std::vector<std::thread> threads;
  for (int i = 0; i < streams; ++i) {
    threads.emplace_back([&, i] {
      results[static_cast<size_t>(i)] = StreamRunner(setup, i, &gate).Run();
    });
  }
  gate.WaitArrived(streams);
  absl::StatusOr<Scraped> before = absl::UnavailableError("no --metrics_port");
  if (metrics_port > 0) before = Scrape(metrics_port);
  const Clock::time_point start = Clock::now();
  gate.Open();
  for (std::thread& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();

  std::vector<double> step_us;
  double bytes = 0;
  int64_t reopened = 0;
  for (const StreamResult& r : results) {
    if (!r.status.ok()) return Fail(r.status.ToString());
    step_us.insert(step_us.end(), r.step_us.begin(), r.step_us.end());
    bytes += r.result_bytes;
    reopened += r.reopened;
  }
  double fill_p50_us = std::nan("");
  if (before.ok()) {
    auto after = Scrape(metrics_port);
    if (!after.ok()) return Fail(after.status().ToString());
    fill_p50_us =
        1e6 * grammard::load::HistogramQuantile(
                  grammard::load::Subtract(after->fill, before->fill), 0.5);
    std::fprintf(
        stderr, "step_bench: server step p50 %.1f us\n",
        1e6 * grammard::load::HistogramQuantile(
                  grammard::load::Subtract(after->step, before->step), 0.5));
  } else {
    std::fprintf(stderr, "step_bench: no fill times: %s\n",
                 before.status().ToString().c_str());
  }
  double bare_p50_us = std::nan("");
  if (auto bare = BareStepTimes(*schema, results); bare.ok()) {
    bare_p50_us = Percentile(*bare, 0.5);
  } else {
    std::fprintf(stderr, "step_bench: no bare mask times: %s\n",
                 bare.status().ToString().c_str());
  }
  const double step_p50_us = Percentile(step_us, 0.5);
  std::fprintf(stderr,
               "step_bench: %d stream(s) x %d sequences, %zu timed steps in "
               "%.2f s, %lld sequences reopened\n",
               streams, batch, step_us.size(), seconds,
               static_cast<long long>(reopened));
  std::printf(
      "RESULT batch=%d steps_per_s=%.1f step_p50_us=%.1f step_p99_us=%.1f "
      "bytes_per_step=%.0f fill_p50_us=%.2f bare_p50_us=%.1f "
      "overhead_p50_us=%.1f\n",
      batch, static_cast<double>(step_us.size()) / seconds, step_p50_us,
      Percentile(step_us, 0.99), bytes / static_cast<double>(step_us.size()),
      fill_p50_us, bare_p50_us, step_p50_us - bare_p50_us);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return Run();
}
