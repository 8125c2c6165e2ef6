// ClientMetrics: what a Client has measured since it connected, as a
// snapshot the engine exports to its own metrics system (a Prometheus
// histogram is the running sum of the buckets, plus sum and count).
//
// Cost: Observe is a few comparisons; a snapshot is a copy of the struct.
// Thread-safety: plain values; Client::Metrics() takes the snapshot under
// the client's lock.
#ifndef GRAMMARD_CLIENT_CLIENT_METRICS_H_
#define GRAMMARD_CLIENT_CLIENT_METRICS_H_

#include <array>
#include <cstdint>

namespace grammard::client {

// Latencies in buckets whose upper bounds double from 50 µs to 819.2 ms,
// plus one for the rest: the range from a fast mask fill to an outage.
struct LatencyHistogram {
  static constexpr int kBuckets = 15;
  // Upper bound of bucket i in seconds (i < kBuckets); bucket kBuckets
  // holds everything above the last bound.
  static double UpperBound(int i);

  void Observe(double seconds);

  std::array<uint64_t, kBuckets + 1> buckets{};  // not cumulative
  uint64_t count = 0;
  double sum_seconds = 0;
  double max_seconds = 0;
};

struct ClientMetrics {
  // Steps answered (WaitMasks returned their rows).
  uint64_t steps = 0;
  // SubmitStep until the reply arrived: the server's share of a step,
  // outages included.
  LatencyHistogram step_latency;
  // Time the engine spent blocked in WaitMasks: what was not hidden behind
  // the forward pass.
  LatencyHistogram wait_time;
  // Streams re-established after a break, and attempts made (including
  // those that failed).
  uint64_t reconnects = 0;
  uint64_t reconnect_attempts = 0;
  // Outages that outlasted outage_timeout (a call returned UNAVAILABLE).
  uint64_t outages_given_up = 0;
  // Seconds from a break being noticed to the stream working again.
  double outage_seconds = 0;
  // Sequences re-opened and tokens replayed after breaks.
  uint64_t replayed_sequences = 0;
  uint64_t replayed_tokens = 0;
};

}  // namespace grammard::client

#endif  // GRAMMARD_CLIENT_CLIENT_METRICS_H_
