#include "client/client_metrics.h"

#include <algorithm>

namespace grammard::client {

double LatencyHistogram::UpperBound(int i) { return 50e-6 * (1 << i); }

void LatencyHistogram::Observe(double seconds) {
  int i = 0;
  while (i < kBuckets && seconds > UpperBound(i)) ++i;
  ++buckets[static_cast<size_t>(i)];
  ++count;
  sum_seconds += seconds;
  max_seconds = std::max(max_seconds, seconds);
}

}  // namespace grammard::client
