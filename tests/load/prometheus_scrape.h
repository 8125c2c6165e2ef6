// Reading a histogram off a Prometheus /metrics endpoint, for benchmarks
// that report server-side timings (grammard_mask_fill_duration_seconds)
// without linking the server (scrape with testing::HttpGet): the bucket
// lines of one histogram, and a quantile estimated the way PromQL's
// histogram_quantile does (linear inside the bucket holding the rank).
//
// Cost: parsing is linear in the text.
// Thread-safety: pure functions.
#ifndef GRAMMARD_TESTS_LOAD_PROMETHEUS_SCRAPE_H_
#define GRAMMARD_TESTS_LOAD_PROMETHEUS_SCRAPE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grammard::load {

// One cumulative bucket: observations <= upper_bound (+inf for the last).
struct Bucket {
  double upper_bound = 0;
  double count = 0;
};

// The buckets of an unlabelled histogram `name` in the text exposition
// format, in increasing bound order; NotFound if it has none.
absl::StatusOr<std::vector<Bucket>> HistogramBuckets(
    const std::string& exposition, const std::string& name);

// after - before, bucket by bucket (same bounds: two scrapes of one series).
std::vector<Bucket> Subtract(const std::vector<Bucket>& after,
                             const std::vector<Bucket>& before);

// The q-quantile (0 < q < 1); NaN with no observations. A rank in the +Inf
// bucket yields the largest finite bound.
double HistogramQuantile(const std::vector<Bucket>& buckets, double q);

}  // namespace grammard::load

#endif  // GRAMMARD_TESTS_LOAD_PROMETHEUS_SCRAPE_H_
