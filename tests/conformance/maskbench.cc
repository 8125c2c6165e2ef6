// MaskBench runner: the published method of ../shared/data/README.md ("How a
// MaskBench case is judged") over ../shared/data/maskbench, with the llama3
// tokenizer.
//
//   bazel run -c opt //tests/conformance:maskbench -- [--data=DIR]
//       [--limit=N] [--threads=N] [--only=TEXT]
//       [--property_order=as_written|required_first|any|any_when_small|
//                         any_repeatable]
//       [--deadline_s=S]
//       [--classify_ahead_ms=MS] [--cases_out=FILE] [--cpu_time]
//       [--settle_s=S] [--settle_max_s=S]
//
// Per case: the schema goes through JsonSchemaToGrammar (strict, default
// options but the chosen property order, by default any (each declared
// member at most once, in whatever order) because instances list members in
// the order their model chose; a --deadline_s deadline) and
// GrammarCompiler::Compile; an error in either is a compile error. Every
// instance is serialized compactly (nlohmann dump(), members in the order they
// appear) and fed token by token: at each step the mask is filled and the
// longest allowed vocabulary token that is a prefix of the remaining text is
// accepted (the project has no BPE encoder). A valid instance must get through
// and then allow end-of-sequence, else a validation error; an invalid one that
// does is an invalidation error (a bug: wrong output let through). TBM times
// every FillNextTokenMask; TTFM is conversion + compile + the first mask of a
// fresh matcher (that mask is not in TBM). With
// --cpu_time each mask's thread CPU time is taken too (tbm_cpu_max_us, and
// the slowest masks by it): on a shared VM a wall-clock maximum is often a
// mask whose thread was descheduled for most of it, which the CPU time
// tells apart. Off by default: the clock is a system call, and one just
// before each mask slows the small ones (TBM p50 0.4 -> 0.6 us). Compiles
// classify no tokens ahead (--classify_ahead_ms=0), as the daemon runs them
// by default; masks then classify each state on its first visit, which the
// daemon's background classification would mostly spare them.
//
// Settling: this project's VMs (Firecracker guests) sometimes stop both
// vCPUs for 20-50 ms, which a mask running then counts in its wall and CPU
// time alike (perf had no sample of either thread for 33 ms of a 35.5 ms
// mask). A run started right after another met such a stop in its first
// seconds of masks in 12 of 22 runs (over 20 ms in 10); started 8 s after
// the last, in none of 5; with this wait, in 1 of 13. The guest reports
// freed memory to the host (`page_reporting.*` on its kernel command line),
// the likeliest cause, unproven: freeing 3 GB just before a run provoked
// no stop the wait could see. After the tokenizer loads, --settle_s waits
// until the process has slept 3 s (by default) in 1 ms steps with none
// taking 10 ms (at most --settle_max_s, 30 s), and prints how many did.
//
// Output: a table per split and a total row, the slowest compiles and masks,
// compile errors by status code, the first compile, invalidation and
// validation errors, and a last line
// `TOTAL cases= passing= compile_error= ...` (tbm_*/ttfm_* in microseconds).
// Always exits 0 once it has run (it measures; it does not gate).
//
// Cost: dominated by compiles, up to about a minute per schema at the time
// of writing (--limit=40, 596 cases, took 12 minutes on 2 cores); memory
// holds one split's decompressed lines and every mask time (4 bytes each).
// Thread-safety: cases run in parallel on a ThreadPool (--threads, default
// 2) sharing one GrammarCompiler (thread-safe); each case, and so each timed
// mask, runs on one thread.

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grammar/base/thread_pool.h"
#include "grammar/compiler.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "grammar/greedy_tokens.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"
#include "nlohmann/json.hpp"
#include "tests/support/gzip_lines.h"
#include "tests/support/paths.h"

ABSL_FLAG(std::string, data, "",
          "The maskbench folder of *.jsonl.gz (default: "
          "../shared/data/maskbench).");
ABSL_FLAG(int, limit, 0, "At most this many cases per split (0: all).");
ABSL_FLAG(std::string, only, "",
          "Run only the cases whose file name contains this text (for "
          "profiling one schema); --limit applies before it.");
ABSL_FLAG(int, threads, 2, "Cases run in parallel on this many threads.");
ABSL_FLAG(std::string, property_order, "any",
          "Member order of objects: as_written, required_first, any, "
          "any_when_small or any_repeatable.");
ABSL_FLAG(double, deadline_s, 10,
          "Deadline in seconds for converting and compiling one schema.");
ABSL_FLAG(std::string, cases_out, "",
          "Also write one line per case to this file: split, file, outcome, "
          "conversion, compile and TTFM microseconds, masks and their summed "
          "microseconds, tab-separated (to find which schemas make a "
          "percentile or the mean).");
ABSL_FLAG(bool, cpu_time, false,
          "Also take each mask's thread CPU time (tbm_cpu_max_us, slowest "
          "masks by it); the clock's system calls slow small masks a little.");
ABSL_FLAG(double, settle_s, 3,
          "Before the first case, wait until the process has run this many "
          "seconds without a pause of the VM (see 'Settling' above; 0: no "
          "wait), for at most --settle_max_s.");
ABSL_FLAG(double, settle_max_s, 30, "The longest --settle_s may wait.");
ABSL_FLAG(int, show_errors, 20,
          "Errors of each kind listed (compile, invalidation, validation).");
ABSL_FLAG(double, classify_ahead_ms, 0,
          "CompileOptions::classify_ahead in milliseconds: 0 (the daemon's "
          "default) leaves every token table to the masks; -1: the engine "
          "library's default (50 ms).");

namespace grammard::conformance {
namespace {

using grammar::CompiledGrammar;
using grammar::GrammarMatcher;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

enum class Outcome { kPassing, kCompileError, kValidationError, kFailing };

struct CaseResult {
  std::string file, split;
  Outcome outcome = Outcome::kPassing;
  bool validation_error = false, invalidation_error = false;
  double convert_us = 0, compile_us = 0;  // compile_us: conversion + compile
  double ttfm_us = 0;
  std::string compile_error;
  absl::StatusCode compile_code = absl::StatusCode::kOk;
  std::vector<float> tbm_us;
  float tbm_cpu_max_us = 0;  // the most thread CPU time any mask took
  std::vector<std::string> invalidations, validations;  // "description"
};

// This thread's CPU time.
double ThreadCpuMicros() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

// Feeds `text`; empty when it is accepted and may end there, else why not.
// With `cpu_max_us`, keeps there the most thread CPU time a mask took.
std::string Feed(const CompiledGrammar& g, std::string_view text,
                 std::vector<float>* tbm_us, float* cpu_max_us) {
  std::vector<uint32_t> mask(g.mask_words());
  GrammarMatcher m(g);
  for (size_t pos = 0;;) {
    // The CPU clock (a system call) outside the wall-clock window.
    const double c0 = cpu_max_us != nullptr ? ThreadCpuMicros() : 0;
    auto t0 = Clock::now();
    m.FillNextTokenMask(mask.data());
    tbm_us->push_back(static_cast<float>(Micros(Clock::now() - t0)));
    if (cpu_max_us != nullptr) {
      *cpu_max_us =
          std::max(*cpu_max_us, static_cast<float>(ThreadCpuMicros() - c0));
    }
    if (pos == text.size()) {
      for (int32_t eos : g.vocabulary().eos_ids())
        if ((mask[eos >> 5] >> (eos & 31)) & 1) return "";
      return "end not allowed";
    }
    int32_t id = grammar::LongestAllowedToken(g, mask.data(), text.substr(pos));
    if (id < 0) return "no allowed token at byte " + std::to_string(pos);
    absl::Status s = m.AcceptToken(id);
    if (!s.ok()) return std::string(s.message());
    pos += g.vocabulary().bytes(id).size();
  }
}

// A line's "file" member, without parsing the whole line.
std::string FileOf(const std::string& line) {
  constexpr std::string_view kKey = "\"file\": \"";
  const size_t at = line.find(kKey);
  if (at == std::string::npos) return "";
  const size_t begin = at + kKey.size();
  return line.substr(begin, line.find('"', begin) - begin);
}

CaseResult RunCase(const grammar::GrammarCompiler& compiler,
                   const std::string& line,
                   const grammar::JsonSchemaOptions& base) {
  CaseResult r;
  Json c = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (c.is_discarded() || !c.is_object()) {
    r.outcome = Outcome::kCompileError;
    r.compile_error = "unreadable case line";
    return r;
  }
  r.file = c.value("file", "?");
  r.split = c.value("split", "?");
  grammar::JsonSchemaOptions options = base;
  auto t0 = Clock::now();
  options.deadline =
      t0 + std::chrono::duration_cast<Clock::duration>(
               std::chrono::duration<double>(absl::GetFlag(FLAGS_deadline_s)));
  absl::StatusOr<CompiledGrammar> g = absl::UnknownError("not compiled");
  auto converted = grammar::JsonSchemaToGrammar(c["schema"].dump(), options);
  r.convert_us = Micros(Clock::now() - t0);
  if (converted.ok()) {
    grammar::CompileOptions compile_options;
    compile_options.deadline = options.deadline;  // one budget for both
    if (const double ahead = absl::GetFlag(FLAGS_classify_ahead_ms);
        ahead >= 0) {
      compile_options.classify_ahead =
          std::chrono::microseconds(static_cast<int64_t>(ahead * 1000));
    }
    g = compiler.Compile(std::move(converted->grammar), compile_options);
  } else {
    g = converted.status();
  }
  r.compile_us = Micros(Clock::now() - t0);
  if (!g.ok()) {
    r.outcome = Outcome::kCompileError;
    r.compile_error = g.status().ToString();
    r.compile_code = g.status().code();
    return r;
  }
  {
    std::vector<uint32_t> mask(g->mask_words());
    GrammarMatcher first(*g);
    auto t1 = Clock::now();
    first.FillNextTokenMask(mask.data());
    r.ttfm_us = r.compile_us + Micros(Clock::now() - t1);
  }
  for (const Json& test : c["tests"]) {
    bool valid = test.value("valid", false);
    std::string desc = test.value("description", "");
    std::string text, why;
    try {
      text = test.at("data").dump();
    } catch (const Json::exception& e) {
      why = std::string("cannot serialize: ") + e.what();
    }
    if (why.empty()) {
      why = Feed(*g, text, &r.tbm_us,
                 absl::GetFlag(FLAGS_cpu_time) ? &r.tbm_cpu_max_us : nullptr);
    }
    if (valid && !why.empty()) {
      r.validation_error = true;
      r.validations.push_back(desc + ": " + why);
    } else if (!valid && why.empty()) {
      r.invalidation_error = true;
      r.invalidations.push_back(desc);
    }
  }
  if (r.validation_error || r.invalidation_error) r.outcome = Outcome::kFailing;
  return r;
}

struct Settled {
  double waited_s = 0;
  int pauses = 0;
  double longest_ms = 0;
};

// Sleeps 1 ms at a time until `quiet_s` seconds pass with no sleep taking
// 10 ms or more (on an idle machine, a stop of the whole VM), or `max_s`
// seconds in all.
Settled Settle(double quiet_s, double max_s) {
  Settled out;
  const auto start = Clock::now();
  auto quiet_since = start, last = start;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const auto now = Clock::now();
    const double gap_ms = Micros(now - last) / 1000;
    last = now;
    if (gap_ms >= 10) {
      ++out.pauses;
      out.longest_ms = std::max(out.longest_ms, gap_ms);
      quiet_since = now;
    }
    out.waited_s = Micros(now - start) / 1e6;
    if (Micros(now - quiet_since) / 1e6 >= quiet_s || out.waited_s >= max_s) {
      return out;
    }
  }
}

// Percentiles over a sorted vector.
double At(const std::vector<float>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t k = std::min(sorted.size() - 1,
                      static_cast<size_t>(p / 100.0 * sorted.size()));
  return sorted[k];
}

struct Totals {
  int cases = 0, passing = 0, compile_error = 0, validation_error = 0,
      invalidation_error = 0;
  std::vector<float> tbm, ttfm;
  double tbm_sum = 0;

  void Add(const CaseResult& r) {
    ++cases;
    if (r.outcome == Outcome::kCompileError) {
      ++compile_error;
      return;
    }
    passing += r.outcome == Outcome::kPassing;
    validation_error += r.validation_error;
    invalidation_error += r.invalidation_error;
    ttfm.push_back(static_cast<float>(r.ttfm_us));
    for (float v : r.tbm_us) tbm_sum += v;
    tbm.insert(tbm.end(), r.tbm_us.begin(), r.tbm_us.end());
  }
  void Merge(const Totals& o) {
    cases += o.cases;
    passing += o.passing;
    compile_error += o.compile_error;
    validation_error += o.validation_error;
    invalidation_error += o.invalidation_error;
    tbm.insert(tbm.end(), o.tbm.begin(), o.tbm.end());
    ttfm.insert(ttfm.end(), o.ttfm.begin(), o.ttfm.end());
    tbm_sum += o.tbm_sum;
  }
  double TbmMean() const { return tbm.empty() ? 0 : tbm_sum / tbm.size(); }
  void Sort() {
    std::sort(tbm.begin(), tbm.end());
    std::sort(ttfm.begin(), ttfm.end());
  }
};

// Sorts `masks` (us, file) slowest first and prints the ten slowest.
void PrintSlowest(const char* title,
                  std::vector<std::pair<double, std::string>>* masks) {
  std::sort(masks->rbegin(), masks->rend());
  std::printf("\n%s\n", title);
  for (size_t i = 0; i < masks->size() && i < 10; ++i)
    std::printf("  %9.1f us  %s\n", (*masks)[i].first,
                (*masks)[i].second.c_str());
}

void PrintHeader() {
  std::printf(
      "%-18s %6s %6s %6s %6s %6s | TBM us: %7s %6s %6s %6s %6s %7s %7s %8s "
      "| TTFM us: %8s %8s %9s %9s\n",
      "split", "cases", "pass", "c_err", "v_err", "i_err", "mean", "p50", "p75",
      "p90", "p95", "p99", "p99.9", "max", "p50", "p75", "p99", "max");
}

void PrintRow(const std::string& name, Totals& t) {
  t.Sort();
  std::printf(
      "%-18s %6d %6d %6d %6d %6d |         %7.1f %6.1f %6.1f %6.1f %6.1f "
      "%7.1f %7.1f %8.1f |           %8.0f %8.0f %9.0f %9.0f\n",
      name.c_str(), t.cases, t.passing, t.compile_error, t.validation_error,
      t.invalidation_error, t.TbmMean(), At(t.tbm, 50), At(t.tbm, 75),
      At(t.tbm, 90), At(t.tbm, 95), At(t.tbm, 99), At(t.tbm, 99.9),
      t.tbm.empty() ? 0.0 : t.tbm.back(), At(t.ttfm, 50), At(t.ttfm, 75),
      At(t.ttfm, 99), t.ttfm.empty() ? 0.0 : t.ttfm.back());
}

int Run() {
  std::string dir = absl::GetFlag(FLAGS_data);
  if (dir.empty()) {
    std::optional<std::string> shared = testing::SharedDataDir();
    if (!shared) {
      std::printf(
          "%s\n",
          testing::MissingDataMessage("../shared/data/maskbench").c_str());
      return 0;
    }
    dir = *shared + "/maskbench";
  }
  const std::vector<std::string> files =
      testing::FilesEndingWith(dir, ".jsonl.gz");
  if (files.empty()) {
    std::printf("%s\n",
                testing::MissingDataMessage(dir + "/*.jsonl.gz").c_str());
    return 0;
  }
  std::optional<std::string> tokdir = testing::TokenizerDir("llama3");
  if (!tokdir) {
    std::printf("%s\n",
                testing::MissingDataMessage("tokenizer llama3").c_str());
    return 0;
  }
  auto vocab = grammar::Vocabulary::FromDirectory(*tokdir, {"llama3", {}, 0});
  if (!vocab.ok()) {
    std::fprintf(stderr, "%s\n", vocab.status().ToString().c_str());
    return 1;
  }
  grammar::JsonSchemaOptions options;
  const std::string order = absl::GetFlag(FLAGS_property_order);
  if (order == "any") {
    options.property_order = grammar::JsonPropertyOrder::kAny;
  } else if (order == "any_when_small") {
    options.property_order = grammar::JsonPropertyOrder::kAnyWhenSmall;
  } else if (order == "any_repeatable") {
    options.property_order = grammar::JsonPropertyOrder::kAnyRepeatable;
  } else if (order == "required_first") {
    options.property_order = grammar::JsonPropertyOrder::kRequiredFirst;
  } else if (order != "as_written") {
    std::fprintf(stderr, "unknown --property_order=%s\n", order.c_str());
    return 2;
  }
  grammar::GrammarCompiler compiler(*vocab);
  grammar::ThreadPool pool(std::max(1, absl::GetFlag(FLAGS_threads)));
  std::printf("maskbench: %s, llama3, property_order=%s, threads=%d\n",
              dir.c_str(), order.c_str(), pool.num_threads());
  if (const double settle = absl::GetFlag(FLAGS_settle_s); settle > 0) {
    const Settled st = Settle(settle, absl::GetFlag(FLAGS_settle_max_s));
    std::printf(
        "maskbench: settled in %.1f s (%d sleeps of 1 ms took 10 ms or more, "
        "the longest %.1f ms)\n",
        st.waited_s, st.pauses, st.longest_ms);
  }

  Totals total;
  std::FILE* cases_out = nullptr;
  if (const std::string path = absl::GetFlag(FLAGS_cases_out); !path.empty()) {
    cases_out = std::fopen(path.c_str(), "w");
    if (cases_out == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
    std::fprintf(cases_out,
                 "split\tfile\toutcome\tconvert_us\tcompile_us\tttfm_us\t"
                 "masks\tmasks_us\n");
  }
  std::vector<std::pair<double, std::string>> compiles;    // (ms, file)
  std::vector<std::pair<double, std::string>> slow_masks;  // (us, file)
  // With --cpu_time: (the case's most mask CPU time in us, file).
  const bool cpu_time = absl::GetFlag(FLAGS_cpu_time);
  std::vector<std::pair<double, std::string>> cpu_masks;
  std::map<absl::StatusCode, int> error_codes;
  std::vector<std::string> compile_errors;
  std::vector<std::string> invalidations, validations;
  PrintHeader();
  for (const std::string& name : files) {
    auto lines =
        testing::ReadGzipLines(dir + "/" + name, absl::GetFlag(FLAGS_limit));
    if (!lines) {
      std::fprintf(stderr, "cannot read %s/%s\n", dir.c_str(), name.c_str());
      return 1;
    }
    if (const std::string only = absl::GetFlag(FLAGS_only); !only.empty()) {
      lines->erase(std::remove_if(lines->begin(), lines->end(),
                                  [&](const std::string& line) {
                                    return FileOf(line).find(only) ==
                                           std::string::npos;
                                  }),
                   lines->end());
    }
    std::vector<CaseResult> results(lines->size());
    pool.ParallelFor(lines->size(), [&](int64_t i) {
      results[i] = RunCase(compiler, (*lines)[i], options);
    });
    Totals split;
    for (const CaseResult& r : results) {
      split.Add(r);
      if (cases_out != nullptr) {
        static constexpr const char* kOutcomes[] = {
            "passing", "compile_error", "validation_error", "failing"};
        double masks_us = 0;
        for (float v : r.tbm_us) masks_us += v;
        std::fprintf(cases_out, "%s\t%s\t%s\t%.0f\t%.0f\t%.0f\t%zu\t%.0f\n",
                     r.split.c_str(), r.file.c_str(),
                     kOutcomes[static_cast<int>(r.outcome)], r.convert_us,
                     r.compile_us, r.ttfm_us, r.tbm_us.size(), masks_us);
      }
      char conversion[64];
      std::snprintf(conversion, sizeof(conversion), " (conversion %.1f ms)",
                    r.convert_us / 1000);
      compiles.push_back({r.compile_us / 1000, r.file + conversion});
      if (!r.tbm_us.empty()) {
        slow_masks.push_back(
            {*std::max_element(r.tbm_us.begin(), r.tbm_us.end()), r.file});
        if (cpu_time) cpu_masks.push_back({r.tbm_cpu_max_us, r.file});
      }
      if (!r.compile_error.empty()) {
        ++error_codes[r.compile_code];
        compile_errors.push_back(r.file + ": " + r.compile_error);
      }
      for (const std::string& d : r.invalidations)
        invalidations.push_back(r.file + ": " + d);
      for (const std::string& d : r.validations)
        validations.push_back(r.file + ": " + d);
    }
    std::string split_name = name.substr(0, name.size() - 9);
    PrintRow(split_name, split);
    std::fflush(stdout);
    total.Merge(split);
  }
  PrintRow("TOTAL", total);
  if (cases_out != nullptr) std::fclose(cases_out);

  std::sort(compiles.rbegin(), compiles.rend());
  std::printf("\nSlowest compiles (conversion + compile):\n");
  for (size_t i = 0; i < compiles.size() && i < 10; ++i)
    std::printf("  %9.1f ms  %.300s\n", compiles[i].first,
                compiles[i].second.c_str());
  PrintSlowest("Slowest masks (the case's largest TBM):", &slow_masks);
  if (cpu_time) {
    PrintSlowest("Slowest masks by thread CPU time (the case's largest):",
                 &cpu_masks);
  }
  std::printf("\nCompile errors by code:");
  for (const auto& [code, n] : error_codes)
    std::printf(" %s=%d", absl::StatusCodeToString(code).c_str(), n);
  const size_t show =
      static_cast<size_t>(std::max(0, absl::GetFlag(FLAGS_show_errors)));
  std::printf("\nCompile errors (%zu; first %zu):\n", compile_errors.size(),
              show);
  for (size_t i = 0; i < compile_errors.size() && i < show; ++i)
    std::printf("  %.300s\n", compile_errors[i].c_str());
  std::printf("\nInvalidation errors (%zu instances; first %zu):\n",
              invalidations.size(), show);
  for (size_t i = 0; i < invalidations.size() && i < show; ++i)
    std::printf("  %.300s\n", invalidations[i].c_str());
  std::printf("\nValidation errors (%zu instances; first %zu):\n",
              validations.size(), show);
  for (size_t i = 0; i < validations.size() && i < show; ++i)
    std::printf("  %.300s\n", validations[i].c_str());

  std::printf(
      "TOTAL cases=%d passing=%d compile_error=%d validation_error=%d "
      "invalidation_error=%d tbm_mean_us=%.1f tbm_p50_us=%.1f tbm_p99_us=%.1f "
      "tbm_max_us=%.1f ttfm_p50_us=%.0f ttfm_p99_us=%.0f ttfm_max_us=%.0f",
      total.cases, total.passing, total.compile_error, total.validation_error,
      total.invalidation_error, total.TbmMean(), At(total.tbm, 50),
      At(total.tbm, 99), total.tbm.empty() ? 0.0 : total.tbm.back(),
      At(total.ttfm, 50), At(total.ttfm, 99),
      total.ttfm.empty() ? 0.0 : total.ttfm.back());
  if (cpu_time) {
    std::printf(" tbm_cpu_max_us=%.1f",
                cpu_masks.empty() ? 0.0 : cpu_masks.front().first);
  }
  std::printf("\n");
  return 0;
}

}  // namespace
}  // namespace grammard::conformance

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return grammard::conformance::Run();
}
