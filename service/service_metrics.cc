#include "service/service_metrics.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "grammar/compiled_grammar.h"

namespace grammard::service {
namespace {

// Registration only fails for a malformed name or labels, which is a bug
// here, not an input error.
template <typename T>
T* Must(absl::StatusOr<T*> metric) {
  if (!metric.ok()) {
    std::fprintf(stderr, "grammard: metrics: %s\n",
                 metric.status().ToString().c_str());
    std::abort();
  }
  return *metric;
}

}  // namespace

ServiceMetrics::ServiceMetrics(metrics::Registry* r) {
  // Compiles span a millisecond to a minute; steps and fills microseconds to
  // a second.
  const std::vector<double> compile_bounds = {0.001, 0.0025, 0.005, 0.01, 0.025,
                                              0.05,  0.1,    0.25,  0.5,  1,
                                              2.5,   5,      10,    30,   60};
  // A sequence's share of a step is often a microsecond or two.
  const std::vector<double> fill_bounds = {
      0.000001, 0.0000025, 0.000005, 0.00001, 0.000025, 0.00005, 0.0001,
      0.00025,  0.0005,    0.001,    0.0025,  0.01,     0.1,     1};
  const std::vector<double> step_bounds = {
      0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
      0.0025,  0.005,    0.01,    0.025,  0.05,    0.1,    1};
  Must(Must(r->AddGaugeFamily("grammard_build_info",
                              "Build of the running daemon (always 1).",
                              {"engine_version"}))
           ->WithLabels({grammar::kEngineVersion}))
      ->Set(1);
  compile_seconds_ = Must(r->AddHistogramFamily(
      "grammard_compile_duration_seconds",
      "Time to compile one constraint, by constraint kind.", {"kind"},
      compile_bounds));
  compile_queue_depth =
      Must(r->AddGauge("grammard_compile_queue_depth",
                       "Compiles waiting for a compile thread."));
  compiles_running =
      Must(r->AddGauge("grammard_compiles_running", "Compiles in progress."));
  cache_hits = Must(r->AddCounter("grammard_cache_hits_total",
                                  "Compiled-grammar cache lookups that hit."));
  cache_misses =
      Must(r->AddCounter("grammard_cache_misses_total",
                         "Compiled-grammar cache lookups that missed."));
  cache_evictions = Must(
      r->AddCounter("grammard_cache_evictions_total",
                    "Compiled grammars evicted to stay within the budget."));
  cache_bytes = Must(r->AddGauge("grammard_cache_bytes",
                                 "Bytes held by the compiled-grammar cache."));
  cache_entries = Must(r->AddGauge("grammard_cache_entries",
                                   "Compiled grammars held by the cache."));
  redis_hits = Must(r->AddCounter(
      "grammard_redis_hits_total",
      "Local-cache misses served by a compiled grammar from Redis."));
  redis_misses = Must(
      r->AddCounter("grammard_redis_misses_total",
                    "Local-cache misses that Redis could not serve either."));
  redis_errors = Must(r->AddCounter(
      "grammard_redis_errors_total",
      "Redis calls that failed, timed out or were skipped by the breaker."));
  redis_rejected = Must(r->AddCounter(
      "grammard_redis_rejected_total",
      "Values read from Redis that were corrupt or of another version."));
  redis_remote_waits = Must(r->AddCounter(
      "grammard_redis_remote_waits_total",
      "Compiles awaited from another replica holding the compile lease."));
  redis_breaker_open = Must(r->AddGauge(
      "grammard_redis_breaker_open",
      "1 while the Redis circuit breaker is open (Redis is being skipped)."));
  active_streams =
      Must(r->AddGauge("grammard_active_streams", "Open Decode streams."));
  active_sequences = Must(r->AddGauge("grammard_active_sequences",
                                      "Open sequences over all streams."));
  steps = Must(r->AddCounter("grammard_steps_total", "Decode steps served."));
  step_seconds = Must(r->AddHistogram(
      "grammard_step_duration_seconds",
      "Time from receiving a step to sending its masks.", step_bounds));
  mask_fill_seconds = Must(r->AddHistogram(
      "grammard_mask_fill_duration_seconds",
      "Time to advance one sequence and fill its mask rows (those its key "
      "does not settle) in one step.",
      fill_bounds));
  sequence_memory_bytes = Must(r->AddGauge(
      "grammard_sequence_memory_bytes",
      "Bytes the open sequences' matchers hold (--max_sequence_memory_mb)."));
  compile_queue_bytes = Must(r->AddGauge(
      "grammard_compile_queue_bytes",
      "Bytes of constraints queued or compiling (--compile_queue_bytes)."));
  memory_released_bytes = Must(r->AddCounter(
      "grammard_memory_released_bytes_total",
      "Freed memory handed back to the system (--retain_freed_mb)."));
  connections_cut = Must(r->AddCounterFamily(
      "grammard_connections_cut_total",
      "Client connections cut for abusing HTTP/2, by reason (rapid_reset, "
      "endless_headers, settings_flood, connection_flood).",
      {"reason"}));
  streams_cut_ = Must(r->AddCounterFamily(
      "grammard_streams_cut_total",
      "Decode streams the daemon ended, by reason (unread_replies, idle, "
      "stuck_write).",
      {"reason"}));
  // Present from the start (at 0), so that their rates read 0, not nothing.
  for (const char* reason : {"unread_replies", "idle", "stuck_write"}) {
    Must(streams_cut_->WithLabels({reason}));
  }
  errors_ = Must(r->AddCounterFamily(
      "grammard_errors_total",
      "Errors returned to clients, per RPC or per sequence, by gRPC code.",
      {"code"}));
  metrics::CounterFamily* rows = Must(
      r->AddCounterFamily("grammard_mask_rows_total",
                          "Mask rows sent, by wire encoding.", {"encoding"}));
  metrics::CounterFamily* bytes = Must(r->AddCounterFamily(
      "grammard_mask_bytes_total", "Bytes of mask rows sent, by wire encoding.",
      {"encoding"}));
  for (int e = 0; e < proto::kNumMaskEncodings; ++e) {
    const char* name =
        proto::MaskEncodingName(static_cast<proto::MaskEncoding>(e));
    mask_rows_[e] = Must(rows->WithLabels({name}));
    mask_bytes_[e] = Must(bytes->WithLabels({name}));
  }
}

void ServiceMetrics::CountError(absl::StatusCode code) {
  Must(errors_->WithLabels({absl::StatusCodeToString(code)}))->Increment();
}

void ServiceMetrics::CountStreamCut(std::string_view reason) {
  Must(streams_cut_->WithLabels({reason}))->Increment();
}

metrics::Histogram* ServiceMetrics::CompileSeconds(std::string_view kind) {
  return Must(compile_seconds_->WithLabels({kind}));
}

}  // namespace grammard::service
