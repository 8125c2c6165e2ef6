#include "service/metrics/metrics.h"

#include <charconv>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grammar/base/status_macros.h"

namespace grammard::metrics {
namespace {

using internal::MetricType;

absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }

bool IsMetricName(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (!(absl::ascii_isalpha(c) || c == '_' || c == ':' ||
          (i > 0 && absl::ascii_isdigit(c)))) {
      return false;
    }
  }
  return !s.empty();
}

bool IsLabelName(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (!(absl::ascii_isalpha(c) || c == '_' ||
          (i > 0 && absl::ascii_isdigit(c)))) {
      return false;
    }
  }
  // "__" names are reserved for Prometheus' own use.
  return !s.empty() && s.substr(0, 2) != "__";
}

// Prometheus fails a whole scrape on one label value that is not UTF-8, and
// the format is UTF-8 throughout, so label values and HELP are checked before
// they can be exposed.
bool IsUtf8(std::string_view s) {
  // The smallest code point for each number of continuation bytes; anything
  // below is an overlong encoding.
  static constexpr uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char lead = s[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    const size_t continuation = (lead & 0xE0) == 0xC0   ? 1
                                : (lead & 0xF0) == 0xE0 ? 2
                                : (lead & 0xF8) == 0xF0 ? 3
                                                        : 0;
    if (continuation == 0 || s.size() - i <= continuation) return false;
    uint32_t code_point = lead & (0x7F >> (continuation + 1));
    for (size_t k = 1; k <= continuation; ++k) {
      const unsigned char c = s[i + k];
      if ((c & 0xC0) != 0x80) return false;
      code_point = (code_point << 6) | (c & 0x3F);
    }
    if (code_point < kSmallest[continuation] || code_point > 0x10FFFF ||
        (code_point >= 0xD800 && code_point <= 0xDFFF)) {
      return false;
    }
    i += continuation + 1;
  }
  return true;
}

// The shortest digits that read back as the same double, laid out as C's %g
// does (`1e-05`, `0.0005`) except that the exponent form starts only at 1e21,
// so counts stay whole numbers (`1234567`, not `1.234567e+06`). Prometheus
// reads any of these, and these spellings of the non-finite values, with
// Go's strconv.ParseFloat.
void AppendDouble(double value, std::string* out) {
  if (std::isnan(value)) {
    out->append("NaN");
    return;
  }
  if (std::isinf(value)) {
    out->append(value > 0 ? "+Inf" : "-Inf");
    return;
  }
  const double magnitude = std::fabs(value);
  const std::chars_format format =
      magnitude == 0 || (magnitude >= 1e-4 && magnitude < 1e21)
          ? std::chars_format::fixed
          : std::chars_format::scientific;
  char buffer[32];  // the longest is 24: -2.2250738585072014e-308
  out->append(
      buffer,
      std::to_chars(buffer, buffer + sizeof(buffer), value, format).ptr);
}

void AppendEscaped(std::string_view text, bool escape_quote, std::string* out) {
  for (const char c : text) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '"' && escape_quote) {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

// Appends `name``suffix`{`labels`,`extra_label`} (braces only if a label).
void AppendSampleName(std::string_view name, std::string_view suffix,
                      std::string_view labels, std::string_view extra_label,
                      std::string* out) {
  out->append(name).append(suffix);
  if (labels.empty() && extra_label.empty()) return;
  out->push_back('{');
  out->append(labels);
  if (!labels.empty() && !extra_label.empty()) out->push_back(',');
  out->append(extra_label);
  out->push_back('}');
}

void AppendLine(std::string_view name, std::string_view labels, double value,
                std::string* out) {
  AppendSampleName(name, "", labels, "", out);
  out->push_back(' ');
  AppendDouble(value, out);
  out->push_back('\n');
}

std::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

std::vector<std::string> SampleNames(std::string_view name, MetricType type) {
  std::vector<std::string> names = {std::string(name)};
  if (type == MetricType::kHistogram) {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      names.push_back(absl::StrCat(AbslView(name), suffix));
    }
  }
  return names;
}

absl::Status CheckFamily(std::string_view name, std::string_view help,
                         MetricType type,
                         absl::Span<const std::string_view> label_names) {
  if (!IsMetricName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric name '", AbslView(name),
                     "' does not match [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  if (help.empty() || !IsUtf8(help)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metric ", AbslView(name), ": HELP must be non-empty UTF-8"));
  }
  for (size_t i = 0; i < label_names.size(); ++i) {
    const std::string_view label = label_names[i];
    if (!IsLabelName(label)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metric ", AbslView(name), ": label name '", AbslView(label),
          "' does not match [a-zA-Z_][a-zA-Z0-9_]* or starts with __"));
    }
    if (type == MetricType::kHistogram && label == "le") {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram ", AbslView(name),
                       ": label name 'le' is reserved for its buckets"));
    }
    if (std::find(label_names.begin(), label_names.begin() + i, label) !=
        label_names.begin() + i) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", AbslView(name), ": label name '",
                       AbslView(label), "' appears twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckBounds(std::string_view name,
                         absl::Span<const double> bounds) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram ", AbslView(name), ": bucket bound ", i,
                       " is not finite (the +Inf bucket is always there)"));
    }
    if (i > 0 && !(bounds[i - 1] < bounds[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram ", AbslView(name),
                       ": bucket bounds must be strictly increasing, got ",
                       bounds[i - 1], " then ", bounds[i]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

FamilyBase::FamilyBase(std::string name, std::string_view help, MetricType type,
                       std::vector<std::string> label_names,
                       NewSeries new_series)
    : name_(std::move(name)),
      escaped_help_([help] {
        std::string escaped;
        AppendEscaped(help, /*escape_quote=*/false, &escaped);
        return escaped;
      }()),
      type_(type),
      label_names_(std::move(label_names)),
      new_series_(std::move(new_series)) {}

FamilyBase::~FamilyBase() = default;

absl::StatusOr<Series*> FamilyBase::GetOrCreate(
    absl::Span<const std::string_view> label_values) {
  if (label_values.size() != label_names_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metric ", name_, " takes ", label_names_.size(), " label values (",
        absl::StrJoin(label_names_, ", "), "), got ", label_values.size()));
  }
  {
    absl::ReaderMutexLock lock(&mu_);
    const auto it = series_.find(label_values);
    if (it != series_.end()) return it->second.series.get();
  }
  std::string labels;
  for (size_t i = 0; i < label_values.size(); ++i) {
    if (!IsUtf8(label_values[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", name_, ": value of label ", label_names_[i],
                       " is not valid UTF-8"));
    }
    if (i > 0) labels.push_back(',');
    labels.append(label_names_[i]).append("=\"");
    AppendEscaped(label_values[i], /*escape_quote=*/true, &labels);
    labels.push_back('"');
  }
  std::vector<std::string> key(label_values.begin(), label_values.end());
  Entry entry{std::move(labels), new_series_()};
  absl::MutexLock lock(&mu_);
  // Another thread may have created the series since the lookup above; its
  // pointer may already be in use, so it wins and `entry` is dropped.
  return series_.try_emplace(std::move(key), std::move(entry))
      .first->second.series.get();
}

void FamilyBase::Render(std::string* out) const {
  absl::ReaderMutexLock lock(&mu_);
  if (series_.empty()) return;
  out->append("# HELP ").append(name_).append(" ");
  out->append(escaped_help_).append("\n# TYPE ").append(name_).append(" ");
  out->append(TypeName(type_)).append("\n");
  for (const auto& [values, entry] : series_) {
    entry.series->AppendSamples(name_, entry.labels, out);
  }
}

}  // namespace internal

void Counter::AppendSamples(std::string_view name, std::string_view labels,
                            std::string* out) const {
  AppendLine(name, labels, Value(), out);
}

void Gauge::AppendSamples(std::string_view name, std::string_view labels,
                          std::string* out) const {
  AppendLine(name, labels, Value(), out);
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      counts_(new std::atomic<uint64_t>[bounds_.size() + 1]()) {}

uint64_t Histogram::Count() const {
  uint64_t count = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    count += counts_[i].load(std::memory_order_relaxed);
  }
  return count;
}

void Histogram::AppendSamples(std::string_view name, std::string_view labels,
                              std::string* out) const {
  uint64_t cumulative = 0;
  std::string le;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    le.assign("le=\"");
    if (i < bounds_.size()) {
      AppendDouble(bounds_[i], &le);
    } else {
      le.append("+Inf");
    }
    le.push_back('"');
    AppendSampleName(name, "_bucket", labels, le, out);
    absl::StrAppend(out, " ", cumulative, "\n");
  }
  AppendSampleName(name, "_sum", labels, "", out);
  out->push_back(' ');
  AppendDouble(Sum(), out);
  out->push_back('\n');
  // The +Inf bucket's total, not a separate counter: the two then always
  // agree, even while observations race with this render.
  AppendSampleName(name, "_count", labels, "", out);
  absl::StrAppend(out, " ", cumulative, "\n");
}

Registry::Registry() = default;
Registry::~Registry() = default;

template <typename M>
absl::StatusOr<Family<M>*> Registry::AddFamily(
    std::string_view name, std::string_view help, MetricType type,
    absl::Span<const std::string_view> label_names,
    internal::FamilyBase::NewSeries new_series) {
  GRAMMARD_RETURN_IF_ERROR(CheckFamily(name, help, type, label_names));
  const std::vector<std::string> sample_names = SampleNames(name, type);
  std::unique_ptr<Family<M>> family(new Family<M>(
      std::string(name), help, type,
      std::vector<std::string>(label_names.begin(), label_names.end()),
      std::move(new_series)));
  Family<M>* const result = family.get();

  absl::MutexLock lock(&mu_);
  for (const std::string& sample_name : sample_names) {
    const auto it = sample_names_.find(sample_name);
    if (it != sample_names_.end()) {
      return absl::AlreadyExistsError(absl::StrCat(
          "metric ", AbslView(name), ": sample name '", sample_name,
          "' is already used by metric ", it->second));
    }
  }
  for (const std::string& sample_name : sample_names) {
    sample_names_.emplace(sample_name, std::string(name));
  }
  families_.emplace(std::string(name), std::move(family));
  return result;
}

absl::StatusOr<CounterFamily*> Registry::AddCounterFamily(
    std::string_view name, std::string_view help,
    absl::Span<const std::string_view> label_names) {
  return AddFamily<Counter>(name, help, MetricType::kCounter, label_names, [] {
    return std::unique_ptr<internal::Series>(new Counter());
  });
}

absl::StatusOr<GaugeFamily*> Registry::AddGaugeFamily(
    std::string_view name, std::string_view help,
    absl::Span<const std::string_view> label_names) {
  return AddFamily<Gauge>(name, help, MetricType::kGauge, label_names, [] {
    return std::unique_ptr<internal::Series>(new Gauge());
  });
}

absl::StatusOr<HistogramFamily*> Registry::AddHistogramFamily(
    std::string_view name, std::string_view help,
    absl::Span<const std::string_view> label_names,
    absl::Span<const double> bounds) {
  GRAMMARD_RETURN_IF_ERROR(CheckBounds(name, bounds));
  return AddFamily<Histogram>(
      name, help, MetricType::kHistogram, label_names,
      [bounds = std::vector<double>(bounds.begin(), bounds.end())] {
        return std::unique_ptr<internal::Series>(new Histogram(bounds));
      });
}

absl::StatusOr<Counter*> Registry::AddCounter(std::string_view name,
                                              std::string_view help) {
  absl::StatusOr<CounterFamily*> family = AddCounterFamily(name, help, {});
  if (!family.ok()) return family.status();
  return (*family)->WithLabels({});
}

absl::StatusOr<Gauge*> Registry::AddGauge(std::string_view name,
                                          std::string_view help) {
  absl::StatusOr<GaugeFamily*> family = AddGaugeFamily(name, help, {});
  if (!family.ok()) return family.status();
  return (*family)->WithLabels({});
}

absl::StatusOr<Histogram*> Registry::AddHistogram(
    std::string_view name, std::string_view help,
    absl::Span<const double> bounds) {
  absl::StatusOr<HistogramFamily*> family =
      AddHistogramFamily(name, help, {}, bounds);
  if (!family.ok()) return family.status();
  return (*family)->WithLabels({});
}

std::string Registry::Render() const {
  std::string out;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, family] : families_) family->Render(&out);
  return out;
}

}  // namespace grammard::metrics
