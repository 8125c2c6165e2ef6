// soak: a bounded run of many Decode streams against the real daemon, then
// an overload of compiles, with the daemon's memory sampled. Not a test: it
// reports, one line per phase on stdout:
//
//   RESULT phase=soak seconds=S streams=N batch=B sequences=... steps=...
//          errors=... compiles=... rss_warm_mb=... rss_end_mb=...
//          rss_max_mb=... step_p50_us=... step_p99_us=...
//   RESULT phase=overload compiles=N exhausted=... exhausted_p99_ms=...
//          step_p99_before_us=... step_p99_during_us=... errors=...
//
// Soak: --streams streams of --batch sequences step as fast as they can;
// every sequence runs --max_tokens uniform random allowed tokens (or to its
// end), then closes and a new one opens: under one of a few cached schemas,
// or (--new_fraction of the time) a schema never seen, which the daemon
// compiles while the others step; its cache is --cache_mb, which they fill
// early. rss_warm_mb is the daemon's resident memory after the first
// quarter of the run, rss_end_mb at the end.
//
// Overload: a daemon with one compile thread and a queue of 4 gets
// --overload_compiles new schemas at once; the refused ones must come back
// RESOURCE_EXHAUSTED at once, while a stream of cached sequences keeps
// stepping (its p99 before and during the burst).
//
// Cost: --seconds of both cores, plus about 10 s for the overload.
// Thread-safety: one thread per stream; totals under a mutex.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/grammard.grpc.pb.h"
#include "proto/mask_rows.h"
#include "tests/load/decode_stream.h"
#include "tests/support/daemon.h"
#include "tests/support/paths.h"
#include "tools/grammarctl/masked_sampler.h"

ABSL_FLAG(int, seconds, 120, "Length of the soak phase.");
ABSL_FLAG(int, streams, 8, "Concurrent Decode streams (one thread each).");
ABSL_FLAG(int, batch, 16, "Sequences per stream.");
ABSL_FLAG(int, max_tokens, 48, "Tokens per sequence before it is replaced.");
ABSL_FLAG(double, new_fraction, 0.2,
          "Share of new sequences opened under a schema never seen.");
ABSL_FLAG(int, overload_compiles, 64, "New schemas sent at once (overload).");
ABSL_FLAG(int64_t, cache_mb, 64,
          "--cache_bytes of the soak's daemon, in MiB: small, so that new "
          "schemas fill it early and memory must level off.");
ABSL_FLAG(std::string, tokenizer, "llama3", "Tokenizer to decode with.");
ABSL_FLAG(uint32_t, seed, 1, "Random seed (stream i: seed + i).");

namespace {

namespace v1 = grammard::v1;
using Clock = std::chrono::steady_clock;

const char* const kCachedSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},
        "age":{"type":"integer","minimum":0,"maximum":150}},
        "required":["name","age"],"additionalProperties":false})",
    R"({"type":"array","items":{"enum":["red","green","blue"]},"maxItems":8})",
    R"({"type":"object","properties":{"ok":{"type":"boolean"},
        "items":{"type":"array","items":{"type":"number"}}},
        "required":["ok"]})",
    R"({"type":"object","properties":{"id":{"type":"string",
        "pattern":"^[A-Z]{3}-[0-9]{4}$"},"tags":{"type":"array",
        "items":{"type":"string","maxLength":12},"uniqueItems":false}},
        "required":["id"],"additionalProperties":false})",
};

// A schema no earlier run sent: its enum values carry the counter.
std::string NewSchema(uint64_t n) {
  return absl::StrCat(R"({"type":"object","properties":{"v":{"enum":["a)", n,
                      R"(","b)", n, R"("]},"n":{"type":"integer"}},)",
                      R"("required":["v","n"],"additionalProperties":false})");
}

v1::Constraint Compact(std::string schema) {
  v1::Constraint c;
  c.set_json_schema(std::move(schema));
  c.mutable_json_options()->set_whitespace(v1::JsonOptions::WHITESPACE_COMPACT);
  return c;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  size_t rank =
      static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::max<size_t>(rank, 1) - 1];
}

double RssMb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::stod(line.substr(6)) / 1024.0;  // kB
    }
  }
  return std::nan("");
}

struct Totals {
  std::mutex mu;
  int64_t sequences = 0;
  int64_t steps = 0;
  int64_t errors = 0;
  std::vector<std::string> first_errors;
  void Error(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (errors++ < 5) first_errors.push_back(what);
  }
};

std::atomic<uint64_t> new_schemas{0};

struct TimedStep {
  Clock::time_point at;
  double us;
};

// One stream: keeps `batch` sequences going until `stop`.
void RunStream(const std::string& target, const v1::Tokenizer& tokenizer,
               int batch, uint32_t seed, double new_fraction,
               const std::atomic<bool>& stop, Totals* totals,
               std::vector<TimedStep>* steps_out) {
  std::mt19937 rng(seed);
  auto stub = v1::Grammard::NewStub(
      grammard::load::Connect(target, /*private_connection=*/true));
  grammard::load::DecodeStream stream(
      stub.get(), std::chrono::system_clock::now() + std::chrono::hours(2));
  struct Slot {
    uint64_t id = 0;
    int32_t pending = -1;
    int tokens = 0;
    bool ready = false;
  };
  uint64_t next_id = 1;
  std::vector<Slot> slots(static_cast<size_t>(batch));
  auto open = [&](Slot* slot) -> bool {
    *slot = Slot();
    slot->id = next_id++;
    v1::OpenSequence o;
    o.set_sequence_id(slot->id);
    o.set_tokenizer(tokenizer.name());
    const bool fresh = std::bernoulli_distribution(new_fraction)(rng);
    *o.mutable_constraint() =
        Compact(fresh ? NewSchema(new_schemas++)
                      : kCachedSchemas[rng() % std::size(kCachedSchemas)]);
    absl::Status s = stream.Open(o);
    if (!s.ok()) totals->Error("open: " + s.ToString());
    return s.ok();
  };
  for (Slot& slot : slots) {
    if (!open(&slot)) return;
  }
  const size_t words = static_cast<size_t>(tokenizer.vocab_size() + 31) / 32;
  std::vector<uint32_t> row(words);
  v1::Step step;
  v1::StepResult result;
  std::vector<Slot*> stepped;
  int64_t local_steps = 0, local_sequences = 0;
  for (uint64_t step_id = 1; !stop; ++step_id) {
    step.Clear();
    step.set_step_id(step_id);
    stepped.clear();
    for (Slot& slot : slots) {
      if (!slot.ready) {
        auto status = stream.Status(slot.id);
        if (!status.has_value()) continue;
        if (status->state() != v1::GRAMMAR_STATE_READY) {
          totals->Error("compile: " + status->error().message());
          if (!open(&slot)) return;
          continue;
        }
        slot.ready = true;
      }
      v1::SequenceStep* s = step.add_sequences();
      s->set_sequence_id(slot.id);
      if (slot.pending >= 0) s->add_accepted_tokens(slot.pending);
      stepped.push_back(&slot);
    }
    if (stepped.empty()) {  // all compiling: wait for one
      auto status = stream.WaitStatus(slots[0].id);
      if (!status.ok()) {
        totals->Error("wait: " + status.status().ToString());
        return;
      }
      continue;
    }
    const Clock::time_point start = Clock::now();
    if (absl::Status s = stream.Step(step, &result); !s.ok()) {
      totals->Error("step: " + s.ToString());
      return;
    }
    steps_out->push_back(
        {start, std::chrono::duration<double, std::micro>(Clock::now() - start)
                    .count()});
    ++local_steps;
    auto decoded = grammard::proto::DecodeStepRows(
        result, [&](size_t) { return tokenizer.vocab_size(); });
    if (!decoded.ok()) {
      totals->Error("decode: " + decoded.status().ToString());
      return;
    }
    for (size_t i = 0; i < stepped.size(); ++i) {
      Slot& slot = *stepped[i];
      const v1::SequenceResult& r = result.sequences(static_cast<int>(i));
      const bool done =
          r.terminated() || ++slot.tokens >= absl::GetFlag(FLAGS_max_tokens);
      if (r.has_error() || done) {
        if (r.has_error()) totals->Error("sequence: " + r.error().message());
        if (absl::Status s = stream.Close(slot.id); !s.ok()) {
          totals->Error("close: " + s.ToString());
          return;
        }
        ++local_sequences;
        if (!open(&slot)) return;
        continue;
      }
      const uint32_t* w = decoded->words.data() + decoded->offsets[i];
      row.assign(w, w + words);
      slot.pending = grammard::grammarctl::UniformAllowed(row, &rng);
    }
  }
  if (absl::Status s = stream.Finish(); !s.ok()) {
    totals->Error("finish: " + s.ToString());
  }
  std::lock_guard<std::mutex> lock(totals->mu);
  totals->steps += local_steps;
  totals->sequences += local_sequences;
}

absl::StatusOr<v1::Tokenizer> FindTokenizer(const std::string& target) {
  auto stub = v1::Grammard::NewStub(grammard::load::Connect(target));
  v1::ListTokenizersResponse list;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  grpc::Status s =
      stub->ListTokenizers(&context, v1::ListTokenizersRequest(), &list);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  for (const v1::Tokenizer& t : list.tokenizers()) {
    if (t.name() == absl::GetFlag(FLAGS_tokenizer)) return t;
  }
  return absl::NotFoundError("no tokenizer " + absl::GetFlag(FLAGS_tokenizer));
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "soak: %s\n", message.c_str());
  return 1;
}

int Soak() {
  grammard::testing::DaemonOptions options;
  options.tokenizers = {absl::GetFlag(FLAGS_tokenizer)};
  options.flags = {
      absl::StrCat("--cache_bytes=", absl::GetFlag(FLAGS_cache_mb) << 20)};
  auto daemon = grammard::testing::Daemon::Start(options);
  if (!daemon.ok()) return Fail(daemon.status().ToString());
  auto tokenizer = FindTokenizer((*daemon)->target());
  if (!tokenizer.ok()) return Fail(tokenizer.status().ToString());
  const int seconds = absl::GetFlag(FLAGS_seconds);
  const int streams = absl::GetFlag(FLAGS_streams);
  Totals totals;
  std::atomic<bool> stop{false};
  std::vector<std::vector<TimedStep>> step_us(static_cast<size_t>(streams));
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < streams; ++i) {
    threads.emplace_back([&, i] {
      RunStream((*daemon)->target(), *tokenizer, absl::GetFlag(FLAGS_batch),
                absl::GetFlag(FLAGS_seed) + static_cast<uint32_t>(i),
                absl::GetFlag(FLAGS_new_fraction), stop, &totals,
                &step_us[static_cast<size_t>(i)]);
    });
  }
  double rss_warm = std::nan(""), rss_max = 0;
  for (int t = 1; t <= seconds; ++t) {
    std::this_thread::sleep_until(start + std::chrono::seconds(t));
    const double rss = RssMb((*daemon)->pid());
    rss_max = std::max(rss_max, rss);
    if (t == std::max(1, seconds / 4)) rss_warm = rss;
    std::fprintf(stderr, "soak: %3d s rss %.1f MB\n", t, rss);
  }
  const double rss_end = RssMb((*daemon)->pid());
  stop = true;
  for (std::thread& t : threads) t.join();
  std::vector<double> all;
  for (const auto& v : step_us) {
    for (const TimedStep& t : v) all.push_back(t.us);
  }
  for (const std::string& e : totals.first_errors) {
    std::fprintf(stderr, "soak: error: %s\n", e.c_str());
  }
  std::printf(
      "RESULT phase=soak seconds=%d streams=%d batch=%d sequences=%lld "
      "steps=%lld errors=%lld compiles=%llu rss_warm_mb=%.1f rss_end_mb=%.1f "
      "rss_max_mb=%.1f step_p50_us=%.1f step_p99_us=%.1f\n",
      seconds, streams, absl::GetFlag(FLAGS_batch),
      static_cast<long long>(totals.sequences),
      static_cast<long long>(totals.steps),
      static_cast<long long>(totals.errors),
      static_cast<unsigned long long>(new_schemas.load()), rss_warm, rss_end,
      rss_max, Percentile(all, 0.5), Percentile(all, 0.99));
  std::fflush(stdout);
  return totals.errors == 0 ? 0 : 1;
}

int Overload() {
  grammard::testing::DaemonOptions options;
  options.tokenizers = {absl::GetFlag(FLAGS_tokenizer)};
  options.flags = {"--compile_threads=1", "--compile_queue=4"};
  auto daemon = grammard::testing::Daemon::Start(options);
  if (!daemon.ok()) return Fail(daemon.status().ToString());
  auto tokenizer = FindTokenizer((*daemon)->target());
  if (!tokenizer.ok()) return Fail(tokenizer.status().ToString());
  // The stepping stream's schemas are compiled first: only the burst queues.
  auto stub =
      v1::Grammard::NewStub(grammard::load::Connect((*daemon)->target()));
  for (const char* schema : kCachedSchemas) {
    v1::CompileRequest request;
    request.set_tokenizer(tokenizer->name());
    *request.mutable_constraint() = Compact(schema);
    request.set_wait(true);
    v1::CompileResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(60));
    grpc::Status s = stub->Compile(&context, request, &response);
    if (!s.ok() || response.state() != v1::GRAMMAR_STATE_READY) {
      return Fail("warm-up compile: " + s.error_message() +
                  response.error().message());
    }
  }
  Totals totals;
  std::atomic<bool> stop{false};
  std::vector<TimedStep> steps;  // the stepper's until it is joined
  std::thread stepper([&] {
    RunStream((*daemon)->target(), *tokenizer, 16, absl::GetFlag(FLAGS_seed),
              /*new_fraction=*/0.0, stop, &totals, &steps);
  });
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const Clock::time_point burst = Clock::now();
  const int n = absl::GetFlag(FLAGS_overload_compiles);
  std::vector<double> exhausted_ms;
  std::mutex mu;
  int other_errors = 0;
  std::vector<std::thread> senders;
  for (int i = 0; i < n; ++i) {
    senders.emplace_back([&, i] {
      v1::CompileRequest request;
      request.set_tokenizer(tokenizer->name());
      *request.mutable_constraint() = Compact(NewSchema(1000000 + i));
      v1::CompileResponse response;
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(30));
      const Clock::time_point start = Clock::now();
      grpc::Status s = stub->Compile(&context, request, &response);
      const double ms =
          std::chrono::duration<double, std::milli>(Clock::now() - start)
              .count();
      std::lock_guard<std::mutex> lock(mu);
      if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        exhausted_ms.push_back(ms);
      } else if (!s.ok()) {
        ++other_errors;
      }
    });
  }
  for (std::thread& t : senders) t.join();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  stop = true;
  stepper.join();
  std::vector<double> base, during;
  for (const TimedStep& t : steps)
    (t.at < burst ? base : during).push_back(t.us);
  std::printf(
      "RESULT phase=overload compiles=%d exhausted=%zu exhausted_p99_ms=%.1f "
      "step_p99_before_us=%.1f step_p99_during_us=%.1f errors=%lld\n",
      n, exhausted_ms.size(), Percentile(exhausted_ms, 0.99),
      Percentile(base, 0.99), Percentile(during, 0.99),
      static_cast<long long>(totals.errors + other_errors));
  return totals.errors + other_errors == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int soak = Soak();
  const int overload = Overload();
  return soak != 0 ? soak : overload;
}
