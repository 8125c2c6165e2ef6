// ServiceMetrics: every metric the daemon exports, registered once in a
// metrics::Registry (served at /metrics). Names follow Prometheus practice:
// `grammard_` prefix, base units, counters ending in `_total`; labels are
// low-cardinality (constraint kind, status code, mask encoding), never a
// schema.
//
// Cost: updates are relaxed atomics (metrics.h). Thread-safety: the pointers
// are fixed after construction; update from any thread.
#ifndef GRAMMARD_SERVICE_SERVICE_METRICS_H_
#define GRAMMARD_SERVICE_SERVICE_METRICS_H_

#include <array>
#include <string_view>

#include "absl/status/status.h"
#include "proto/mask_rows.h"
#include "service/metrics/metrics.h"

namespace grammard::service {

struct ServiceMetrics {
  // Registers everything in `registry`, which must outlive this.
  explicit ServiceMetrics(metrics::Registry* registry);

  // grammard_errors_total{code}: statuses returned to clients, per RPC or
  // per sequence.
  void CountError(absl::StatusCode code);
  // grammard_streams_cut_total{reason}: Decode streams the daemon ended
  // ("unread_replies": its client stopped reading; "idle": no message for
  // --stream_idle_timeout_s; "stuck_write": a reply unread for as long).
  void CountStreamCut(std::string_view reason);
  // The compile histogram for a constraint kind ("json_schema", ...).
  metrics::Histogram* CompileSeconds(std::string_view kind);
  // Counts a row sent in `encoding` taking `bytes` on the wire.
  void CountMaskRow(proto::MaskEncoding encoding, size_t bytes) {
    mask_rows_[static_cast<int>(encoding)]->Increment();
    mask_bytes_[static_cast<int>(encoding)]->Increment(
        static_cast<double>(bytes));
  }

  metrics::Gauge* compile_queue_depth;
  metrics::Gauge* compiles_running;
  metrics::Counter* cache_hits;
  metrics::Counter* cache_misses;
  metrics::Counter* cache_evictions;
  metrics::Gauge* cache_bytes;
  metrics::Gauge* cache_entries;
  // The shared tier (Redis); all stay zero when it is not configured.
  metrics::Counter* redis_hits;
  metrics::Counter* redis_misses;
  metrics::Counter* redis_errors;
  metrics::Counter* redis_rejected;
  metrics::Counter* redis_remote_waits;
  metrics::Gauge* redis_breaker_open;
  metrics::Gauge* active_streams;
  metrics::Gauge* active_sequences;
  metrics::Counter* steps;
  metrics::Histogram* step_seconds;
  metrics::Histogram* mask_fill_seconds;
  // Bytes held against the daemon's budgets (service/byte_budget.h).
  metrics::Gauge* sequence_memory_bytes;
  metrics::Gauge* compile_queue_bytes;
  // Freed memory handed back to the system (service/memory_release.h).
  metrics::Counter* memory_released_bytes;
  // grammard_connections_cut_total{reason}: client connections the HTTP/2
  // guard cut (service/socket_guard.h).
  metrics::CounterFamily* connections_cut;

 private:
  metrics::HistogramFamily* compile_seconds_;
  metrics::CounterFamily* errors_;
  metrics::CounterFamily* streams_cut_;
  // By proto::MaskEncoding.
  std::array<metrics::Counter*, proto::kNumMaskEncodings> mask_rows_;
  std::array<metrics::Counter*, proto::kNumMaskEncodings> mask_bytes_;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_SERVICE_METRICS_H_
