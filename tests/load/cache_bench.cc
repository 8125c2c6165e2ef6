// Cache benchmark: time to first mask (TTFM) for a constraint that is
//   cold    - compiled on replica A (nothing cached anywhere),
//   redis   - on replica B, in Redis only (B loads what A stored),
//   local   - on replica B again, in its local tier,
// over the MaskBench schemas (../shared/data/maskbench, --limit per file)
// and the ../shared/bench workloads, with the llama3 tokenizer, a real
// redis-server and two real daemons on loopback. TTFM is measured from
// opening a sequence on a Decode stream to receiving its first mask row.
//
//   bazel run -c opt //tests/load:cache_bench -- [--limit=N]
//
// Ends with one line per tier:
//   RESULT tier=T constraints=N ttfm_p50_ms=... ttfm_p99_ms=... ttfm_max_ms=...
// Constraints that fail to compile (or pass the compile deadline) are
// counted and left out.
//
// Cost: every constraint is compiled once (cold); the rest are loads.
// Single-threaded.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "proto/grammard.grpc.pb.h"
#include "tests/load/bench_constraints.h"
#include "tests/load/decode_stream.h"
#include "tests/support/daemon.h"
#include "tests/support/paths.h"
#include "tests/support/redis_server.h"

ABSL_FLAG(int, limit, 20, "Schemas per MaskBench file (0: all).");
ABSL_FLAG(int, compile_timeout_ms, 30000, "The daemons' compile deadline.");

namespace {

namespace v1 = grammard::v1;
using Clock = std::chrono::steady_clock;

// MaskBench schemas, then the bench workloads' constraints.
std::vector<v1::Constraint> Constraints(const std::string& shared) {
  std::vector<v1::Constraint> out =
      grammard::load::MaskBenchSchemas(shared, absl::GetFlag(FLAGS_limit));
  for (grammard::load::Workload& w : grammard::load::BenchWorkloads(shared)) {
    out.push_back(std::move(w.constraint));
  }
  return out;
}

class Replica {
 public:
  explicit Replica(const std::string& target)
      : stub_(v1::Grammard::NewStub(grammard::load::Connect(target))) {}

  // Milliseconds from open to the first mask row; negative if the
  // constraint failed.
  double TimeToFirstMask(const v1::Constraint& constraint) {
    grammard::load::DecodeStream stream(
        stub_.get(),
        std::chrono::system_clock::now() + std::chrono::minutes(5));
    const Clock::time_point start = Clock::now();
    v1::OpenSequence open;
    open.set_sequence_id(1);
    open.set_tokenizer("llama3");
    *open.mutable_constraint() = constraint;
    if (!stream.Open(open).ok()) return -1;
    auto status = stream.WaitStatus(1);
    if (!status.ok() || status->state() != v1::GRAMMAR_STATE_READY) return -1;
    v1::Step step;
    step.set_step_id(1);
    step.add_sequences()->set_sequence_id(1);
    v1::StepResult result;
    if (!stream.Step(step, &result).ok() || result.sequences_size() != 1 ||
        result.sequences(0).has_error()) {
      return -1;
    }
    return std::chrono::duration<double, std::milli>(Clock::now() - start)
        .count();
  }

 private:
  std::unique_ptr<v1::Grammard::Stub> stub_;
};

double At(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q / 100 * v.size()))];
}

int Run() {
  auto shared = grammard::testing::SharedDataDir();
  if (!shared) {
    std::printf(
        "%s\n",
        grammard::testing::MissingDataMessage("../shared/data").c_str());
    return 0;
  }
  auto redis = grammard::testing::RedisServer::Start();
  if (!redis.ok()) {
    std::printf("cache_bench: %s\n", redis.status().ToString().c_str());
    return 1;
  }
  std::vector<std::unique_ptr<grammard::testing::Daemon>> daemons;
  for (int i = 0; i < 2; ++i) {
    grammard::testing::DaemonOptions o;
    o.flags = {absl::StrCat("--redis=127.0.0.1:", (*redis)->port()),
               "--redis_timeout_ms=1000",
               absl::StrCat("--compile_timeout_ms=",
                            absl::GetFlag(FLAGS_compile_timeout_ms))};
    auto d = grammard::testing::Daemon::Start(o);
    if (!d.ok()) {
      std::printf("cache_bench: %s\n", d.status().ToString().c_str());
      return 1;
    }
    daemons.push_back(*std::move(d));
  }
  Replica a(daemons[0]->target()), b(daemons[1]->target());
  const std::vector<v1::Constraint> constraints = Constraints(*shared);
  std::vector<double> cold, l2, local;
  int failed = 0;
  for (const v1::Constraint& c : constraints) {
    const double t_cold = a.TimeToFirstMask(c);
    if (t_cold < 0) {
      ++failed;
      continue;
    }
    const double t_l2 = b.TimeToFirstMask(c);
    const double t_local = b.TimeToFirstMask(c);
    if (t_l2 < 0 || t_local < 0) {
      ++failed;
      continue;
    }
    cold.push_back(t_cold);
    l2.push_back(t_l2);
    local.push_back(t_local);
  }
  std::printf(
      "cache_bench: %zu constraints (MaskBench --limit=%d per file + "
      "bench workloads), %d failed or timed out, llama3\n",
      constraints.size(), absl::GetFlag(FLAGS_limit), failed);
  for (const auto& [tier, v] :
       {std::pair<const char*, std::vector<double>*>{"cold", &cold},
        {"redis", &l2},
        {"local", &local}}) {
    std::printf(
        "RESULT tier=%s constraints=%zu ttfm_p50_ms=%.2f ttfm_p99_ms=%.2f "
        "ttfm_max_ms=%.2f\n",
        tier, v->size(), At(*v, 50), At(*v, 99), At(*v, 100));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return Run();
}
