#include "tests/load/prometheus_scrape.h"

#include <cmath>

#include "gtest/gtest.h"

namespace grammard::load {
namespace {

constexpr char kText[] = R"(# TYPE fill_seconds histogram
fill_seconds_bucket{le="0.001"} 10
fill_seconds_bucket{le="0.002"} 30
fill_seconds_bucket{le="+Inf"} 40
fill_seconds_sum 0.05
fill_seconds_count 40
other_bucket{le="1"} 7
)";

TEST(PrometheusScrapeTest, ParsesAndInterpolates) {
  auto buckets = HistogramBuckets(kText, "fill_seconds");
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  ASSERT_EQ(buckets->size(), 3u);
  EXPECT_TRUE(std::isinf(buckets->back().upper_bound));
  // Rank 20 of 40 lies halfway through (0.001, 0.002].
  EXPECT_DOUBLE_EQ(HistogramQuantile(*buckets, 0.5), 0.0015);
  // Rank 4 lies 40% into [0, 0.001].
  EXPECT_DOUBLE_EQ(HistogramQuantile(*buckets, 0.1), 0.0004);
  // Rank 39 is past every finite bound.
  EXPECT_DOUBLE_EQ(HistogramQuantile(*buckets, 0.975), 0.002);
}

TEST(PrometheusScrapeTest, SubtractsScrapes) {
  auto after = HistogramBuckets(kText, "fill_seconds");
  ASSERT_TRUE(after.ok());
  std::vector<Bucket> before = *after;
  for (Bucket& b : before) b.count = 10;  // the first 10 were all fast
  const std::vector<Bucket> delta = Subtract(*after, before);
  EXPECT_DOUBLE_EQ(delta[0].count, 0);
  // Rank 15 of the remaining 30 lies 75% through (0.001, 0.002].
  EXPECT_DOUBLE_EQ(HistogramQuantile(delta, 0.5), 0.00175);
  EXPECT_TRUE(std::isnan(HistogramQuantile(Subtract(*after, *after), 0.5)));
}

TEST(PrometheusScrapeTest, MissingHistogram) {
  EXPECT_FALSE(HistogramBuckets(kText, "nope").ok());
}

}  // namespace
}  // namespace grammard::load
