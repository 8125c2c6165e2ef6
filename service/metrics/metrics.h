// Prometheus metrics for grammard: counters, gauges and histograms, each
// optionally a family of series told apart by a fixed set of label names,
// kept in a Registry that renders them in the Prometheus text exposition
// format 0.0.4 (metrics_server.h serves that over HTTP).
//
// Cost: Counter::Increment, Gauge::Set/Add and Histogram::Observe are inline,
// take no lock and allocate nothing: one or two relaxed atomic operations (a
// compare-and-swap loop for a double; Observe adds a binary search over the
// bucket bounds), about 13 ns for Increment and 15 ns for Observe
// single-threaded at -O2 (metrics_bench), so they may sit on the per-step
// decode path. The first WithLabels() of a label set allocates under the
// family's lock; later ones take a shared lock and a map lookup (about
// 80 ns), so hot paths keep the pointer it returns. Render() is linear in
// the number of series (about 22 us for 50 metrics) and allocates its output.
//
// Thread-safety: every method may be called from any thread. Returned
// pointers stay valid, and always name the same series, for the Registry's
// lifetime. A Render() concurrent with updates reads each value atomically but
// not all of them at one instant; a histogram's _count always equals its +Inf
// bucket.
#ifndef GRAMMARD_SERVICE_METRICS_METRICS_H_
#define GRAMMARD_SERVICE_METRICS_METRICS_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace grammard::metrics {

namespace internal {

static_assert(std::atomic<double>::is_always_lock_free,
              "metric updates rely on lock-free atomic doubles");

// std::atomic<double> has no fetch_add before C++20.
inline void AtomicAdd(std::atomic<double>& target, double amount) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + amount,
                                       std::memory_order_relaxed)) {
  }
}

enum class MetricType { kCounter, kGauge, kHistogram };

// One labelled series of a family, as Render() sees it.
class Series {
 public:
  virtual ~Series() = default;

  // Appends this series' sample lines for metric `name`. `labels` is the
  // series' rendered label pairs (`a="x",b="y"`), empty when it has none.
  virtual void AppendSamples(std::string_view name, std::string_view labels,
                             std::string* out) const = 0;
};

// A metric name with its HELP, TYPE, label names and the series created so
// far, keyed by label values.
class FamilyBase {
 public:
  using NewSeries = std::function<std::unique_ptr<Series>()>;

  FamilyBase(std::string name, std::string_view help, MetricType type,
             std::vector<std::string> label_names, NewSeries new_series);
  virtual ~FamilyBase();
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  // Appends HELP, TYPE and every series' samples; nothing while the family
  // has no series yet (as the official clients do).
  void Render(std::string* out) const;

 protected:
  absl::StatusOr<Series*> GetOrCreate(
      absl::Span<const std::string_view> label_values);

 private:
  // Orders stored label values and lets a lookup compare a caller's views
  // against them without building a key.
  struct LabelValuesLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return std::lexicographical_compare(
          a.begin(), a.end(), b.begin(), b.end(),
          [](std::string_view x, std::string_view y) { return x < y; });
    }
  };
  struct Entry {
    std::string labels;  // rendered once, at creation
    std::unique_ptr<Series> series;
  };

  const std::string name_;
  const std::string escaped_help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
  const NewSeries new_series_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, Entry, LabelValuesLess> series_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace internal

class Registry;

// A monotonic total (Prometheus TYPE counter). Like Gauge and Histogram it is
// aligned to a cache line: metrics bumped by different decode threads must
// not share one, or every update would bounce it between cores.
class alignas(64) Counter final : public internal::Series {
 public:
  // Adds `amount`. A negative or NaN amount would break monotonicity, which
  // Prometheus' rate() depends on, so it is ignored.
  void Increment(double amount = 1) {
    if (!(amount >= 0)) return;
    internal::AtomicAdd(value_, amount);
  }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  friend class Registry;
  Counter() = default;
  void AppendSamples(std::string_view name, std::string_view labels,
                     std::string* out) const override;

  std::atomic<double> value_{0};
};

// A value that goes up and down (Prometheus TYPE gauge).
class alignas(64) Gauge final : public internal::Series {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double amount) { internal::AtomicAdd(value_, amount); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  friend class Registry;
  Gauge() = default;
  void AppendSamples(std::string_view name, std::string_view labels,
                     std::string* out) const override;

  std::atomic<double> value_{0};
};

// Observations counted into buckets fixed at registration (Prometheus TYPE
// histogram): exposes cumulative `_bucket{le="..."}` lines, `_sum`, `_count`.
class alignas(64) Histogram final : public internal::Series {
 public:
  // Counts `value` in the first bucket whose upper bound is >= value. NaN is
  // ignored: it would turn _sum into NaN for the rest of the process.
  void Observe(double value) {
    if (std::isnan(value)) return;
    const size_t bucket =
        std::lower_bound(bounds_.begin(), bounds_.end(), value) -
        bounds_.begin();
    counts_[bucket].fetch_add(1, std::memory_order_relaxed);
    internal::AtomicAdd(sum_, value);
  }
  uint64_t Count() const;  // observations so far, NaN ones excepted
  double Sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  friend class Registry;
  explicit Histogram(std::vector<double> bounds);
  void AppendSamples(std::string_view name, std::string_view labels,
                     std::string* out) const override;

  const std::vector<double> bounds_;
  // counts_[i] holds observations in (bounds_[i-1], bounds_[i]]; the last
  // holds those above every bound (the +Inf bucket). Not cumulative, so an
  // observation touches one counter; Render() accumulates.
  const std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0};
};

// The series of one metric name, one per combination of label values.
template <typename M>
class Family final : public internal::FamilyBase {
 public:
  // The series for `label_values`, given in the order of the family's label
  // names (`{"Decode", "INVALID_ARGUMENT"}` for names {"method", "code"}).
  // Created on first use; every later call returns the same pointer.
  // InvalidArgument if the number of values differs from the number of label
  // names or a value is not valid UTF-8.
  absl::StatusOr<M*> WithLabels(
      absl::Span<const std::string_view> label_values) {
    absl::StatusOr<internal::Series*> series = GetOrCreate(label_values);
    if (!series.ok()) return series.status();
    return static_cast<M*>(*series);
  }

 private:
  friend class Registry;
  Family(std::string name, std::string_view help, internal::MetricType type,
         std::vector<std::string> label_names, NewSeries new_series)
      : FamilyBase(std::move(name), help, type, std::move(label_names),
                   std::move(new_series)) {}
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

// Owns every metric of a process (or of a test) and renders them.
//
// Registration checks the Prometheus rules: metric names match
// [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]* without a
// leading "__", no label name twice, histograms have no "le" label, HELP is
// non-empty UTF-8, and histogram bucket bounds are finite and strictly
// increasing (the +Inf bucket is implicit). A name whose samples would clash
// with another metric's (including a histogram's _bucket, _sum and _count) is
// AlreadyExists. Failed registrations change nothing.
//
// Naming follows Prometheus practice, which `promtool check metrics` lints:
// counters end in `_total`, values are in base units (`_seconds`, `_bytes`).
class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  absl::StatusOr<Counter*> AddCounter(std::string_view name,
                                      std::string_view help);
  absl::StatusOr<Gauge*> AddGauge(std::string_view name, std::string_view help);
  absl::StatusOr<Histogram*> AddHistogram(std::string_view name,
                                          std::string_view help,
                                          absl::Span<const double> bounds);

  absl::StatusOr<CounterFamily*> AddCounterFamily(
      std::string_view name, std::string_view help,
      absl::Span<const std::string_view> label_names);
  absl::StatusOr<GaugeFamily*> AddGaugeFamily(
      std::string_view name, std::string_view help,
      absl::Span<const std::string_view> label_names);
  absl::StatusOr<HistogramFamily*> AddHistogramFamily(
      std::string_view name, std::string_view help,
      absl::Span<const std::string_view> label_names,
      absl::Span<const double> bounds);

  // Every metric in the text exposition format 0.0.4, families sorted by
  // name, series by label values.
  std::string Render() const;

 private:
  template <typename M>
  absl::StatusOr<Family<M>*> AddFamily(
      std::string_view name, std::string_view help, internal::MetricType type,
      absl::Span<const std::string_view> label_names,
      internal::FamilyBase::NewSeries new_series);

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<internal::FamilyBase>, std::less<>>
      families_ ABSL_GUARDED_BY(mu_);
  // Every sample name a registered family exposes -> that family's name.
  std::map<std::string, std::string, std::less<>> sample_names_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace grammard::metrics

#endif  // GRAMMARD_SERVICE_METRICS_METRICS_H_
