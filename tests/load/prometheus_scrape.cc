#include "tests/load/prometheus_scrape.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace grammard::load {

absl::StatusOr<std::vector<Bucket>> HistogramBuckets(
    const std::string& exposition, const std::string& name) {
  const std::string prefix = name + "_bucket{le=\"";
  std::vector<Bucket> buckets;
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t quote = line.find('"', prefix.size());
    if (quote == std::string::npos) continue;
    const std::string le = line.substr(prefix.size(), quote - prefix.size());
    Bucket b;
    b.upper_bound = le == "+Inf" ? std::numeric_limits<double>::infinity()
                                 : std::strtod(le.c_str(), nullptr);
    b.count = std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
    buckets.push_back(b);
  }
  if (buckets.empty()) {
    return absl::NotFoundError(absl::StrCat("no histogram ", name));
  }
  std::sort(buckets.begin(), buckets.end(),
            [](const Bucket& a, const Bucket& b) {
              return a.upper_bound < b.upper_bound;
            });
  return buckets;
}

std::vector<Bucket> Subtract(const std::vector<Bucket>& after,
                             const std::vector<Bucket>& before) {
  std::vector<Bucket> out = after;
  for (size_t i = 0; i < out.size() && i < before.size(); ++i) {
    out[i].count -= before[i].count;
  }
  return out;
}

double HistogramQuantile(const std::vector<Bucket>& buckets, double q) {
  if (buckets.empty() || buckets.back().count <= 0) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  const double rank = q * buckets.back().count;
  double lower = 0, below = 0;
  for (const Bucket& b : buckets) {
    if (b.count >= rank) {
      if (std::isinf(b.upper_bound)) return lower;
      const double in_bucket = b.count - below;
      return in_bucket <= 0
                 ? b.upper_bound
                 : lower + (b.upper_bound - lower) * (rank - below) / in_bucket;
    }
    lower = b.upper_bound;
    below = b.count;
  }
  return lower;
}

}  // namespace grammard::load
