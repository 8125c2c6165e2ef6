// The engine benchmark: every workload of ../shared/bench/WORKLOADS.tsv with
// the llama3 and qwen3 tokenizers, single thread.
//
//   bazel run -c opt //grammar:engine_bench [-- --bench_dir=DIR --passes=N
//       --classify_ahead_ms=MS]
//
// A compile is timed until its grammar is ready as the daemon makes it
// ready: with no tokens classified ahead (--classify_ahead_ms=0, as
// service/main.cc) unless the flag says otherwise. The classification left,
// which the daemon runs in the background, is then timed on its own
// (classify_rest_ms), so that the masks measured are those of a sequence
// arriving after it: steady state.
//
// Each input is fed token by token: at each step the longest vocabulary token
// that is a prefix of the remaining text and is allowed by the mask. Every
// mask and accept is timed. The output ends with a tab-separated table:
//   workload tokenizer compile_ms classify_rest_ms steps mask_mean_us
//   mask_p50_us mask_p99_us mask_max_us accept_mean_us grammar_bytes
// Before it, FillMasks over a batch is timed with 1 and 2 threads.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "grammar/base/thread_pool.h"
#include "grammar/compiler.h"
#include "grammar/frontends/ebnf/json_grammar.h"
#include "grammar/frontends/json_schema/json_schema.h"
#include "grammar/greedy_tokens.h"
#include "grammar/matcher.h"
#include "tests/support/paths.h"

ABSL_FLAG(std::string, bench_dir, "",
          "Folder of WORKLOADS.tsv (default ../shared/bench).");
ABSL_FLAG(std::string, tokenizers, "llama3,qwen3",
          "Tokenizers to run, comma-separated.");
ABSL_FLAG(int, passes, 3,
          "Times each input is fed; statistics cover all passes.");
ABSL_FLAG(int, compiles, 3, "Compiles per workload; the median is reported.");
ABSL_FLAG(std::string, only, "", "Run only this workload.");
ABSL_FLAG(double, classify_ahead_ms, 0,
          "CompileOptions::classify_ahead in milliseconds: 0 (the daemon's "
          "default) times a compile until its automaton is built; negative: "
          "the library's default.");

namespace grammard::grammar {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kHeader[] =
    "workload\ttokenizer\tcompile_ms\tclassify_rest_ms\tsteps\tmask_mean_us\t"
    "mask_p50_us\tmask_p99_us\tmask_max_us\taccept_mean_us\tgrammar_bytes";
constexpr char kRowFormat[] =
    "%s\t%s\t%.2f\t%.2f\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%zu";

double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t k = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * v.size()));
  return v[k];
}

struct Workload {
  std::string name, kind, grammar_file, input_file;
};

absl::StatusOr<CompiledGrammar> CompileWorkload(const GrammarCompiler& compiler,
                                                const Workload& w,
                                                const std::string& dir) {
  CompileOptions options;
  if (const double ahead = absl::GetFlag(FLAGS_classify_ahead_ms); ahead >= 0) {
    options.classify_ahead =
        std::chrono::microseconds(static_cast<int64_t>(ahead * 1000));
  }
  if (w.kind == "builtin_json") {
    return compiler.CompileEbnf(BuiltinJsonEbnf(), "root", options);
  }
  std::string text = ReadFile(dir + "/" + w.grammar_file);
  if (w.kind == "regex") {
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
      text.pop_back();
    return compiler.CompileRegex(text, options);
  }
  if (w.kind == "ebnf") return compiler.CompileEbnf(text, "root", options);
  if (w.kind == "json_schema") {
    // Defaults: strict, any JSON whitespace, members in schema order.
    auto converted = JsonSchemaToGrammar(text);
    if (!converted.ok()) return converted.status();
    return compiler.Compile(std::move(converted->grammar), options);
  }
  return absl::UnimplementedError("unknown workload kind " + w.kind);
}

struct FeedResult {
  int steps = 0;
  std::vector<double> mask_us, accept_us;
  std::string error;
};

FeedResult Feed(const CompiledGrammar& grammar, std::string_view input,
                int passes) {
  FeedResult r;
  std::vector<uint32_t> mask(grammar.mask_words());
  for (int pass = 0; pass < passes && r.error.empty(); ++pass) {
    GrammarMatcher m(grammar);
    size_t pos = 0;
    int steps = 0;
    while (true) {
      auto t0 = Clock::now();
      m.FillNextTokenMask(mask.data());
      r.mask_us.push_back(Micros(Clock::now() - t0));
      ++steps;
      if (pos == input.size()) {
        int32_t eos = grammar.vocabulary().eos_ids().empty()
                          ? -1
                          : grammar.vocabulary().eos_ids()[0];
        if (eos < 0 || !((mask[eos >> 5] >> (eos & 31)) & 1))
          r.error = "end not allowed";
        break;
      }
      int32_t id = LongestAllowedToken(grammar, mask.data(), input.substr(pos));
      if (id < 0) {
        r.error = "no allowed token at byte " + std::to_string(pos);
        break;
      }
      auto t1 = Clock::now();
      absl::Status s = m.AcceptToken(id);
      r.accept_us.push_back(Micros(Clock::now() - t1));
      if (!s.ok()) {
        r.error = std::string(s.message());
        break;
      }
      pos += grammar.vocabulary().bytes(id).size();
    }
    r.steps = steps;
  }
  return r;
}

// FillMasks over a batch of matchers at different positions of the input.
void BatchScaling(const CompiledGrammar& grammar, std::string_view input,
                  const std::string& label) {
  const int kBatch = 64;
  std::vector<GrammarMatcher> matchers;
  std::vector<uint32_t> scratch(grammar.mask_words());
  for (int b = 0; b < kBatch; ++b) {
    matchers.emplace_back(grammar);
    size_t pos = 0;
    for (int k = 0; k < b % 24 && pos < input.size(); ++k) {
      matchers.back().FillNextTokenMask(scratch.data());
      int32_t id =
          LongestAllowedToken(grammar, scratch.data(), input.substr(pos));
      if (id < 0 || !matchers.back().AcceptToken(id).ok()) break;
      pos += grammar.vocabulary().bytes(id).size();
    }
  }
  std::vector<GrammarMatcher*> ptrs;
  for (auto& m : matchers) ptrs.push_back(&m);
  std::vector<uint32_t> masks(static_cast<size_t>(kBatch) *
                              grammar.mask_words());
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::vector<double> us;
    for (int rep = 0; rep < 30; ++rep) {
      auto t0 = Clock::now();
      FillMasks(ptrs, masks.data(), grammar.mask_words(), &pool);
      us.push_back(Micros(Clock::now() - t0));
    }
    std::printf("batch %s batch=%d threads=%d fill_p50_us=%.1f\n",
                label.c_str(), kBatch, threads, Percentile(us, 50));
  }
}

int Run() {
  if (absl::GetFlag(FLAGS_passes) < 1 || absl::GetFlag(FLAGS_compiles) < 1) {
    std::fprintf(stderr, "--passes and --compiles must be at least 1\n");
    return 2;
  }
  std::string dir = absl::GetFlag(FLAGS_bench_dir);
  if (dir.empty()) {
    auto shared = testing::SharedDataDir();
    if (!shared) {
      std::fprintf(stderr, "%s\n",
                   testing::MissingDataMessage("../shared/data").c_str());
      return 0;
    }
    dir = *shared + "/../bench";
  }
  std::vector<Workload> workloads;
  std::istringstream tsv(ReadFile(dir + "/WORKLOADS.tsv"));
  for (std::string line; std::getline(tsv, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (f.size() < 4) continue;
    if (!absl::GetFlag(FLAGS_only).empty() && f[0] != absl::GetFlag(FLAGS_only))
      continue;
    workloads.push_back({f[0], f[1], f[2], f[3]});
  }
  if (workloads.empty()) {
    std::fprintf(stderr, "no workloads in %s/WORKLOADS.tsv\n", dir.c_str());
    return 1;
  }
  std::vector<std::string> rows;
  const std::vector<std::string> tokenizers =
      absl::StrSplit(absl::GetFlag(FLAGS_tokenizers), ',');
  for (const std::string& tok : tokenizers) {
    auto tdir = testing::TokenizerDir(tok);
    if (!tdir) {
      std::fprintf(stderr, "%s\n",
                   testing::MissingDataMessage("tokenizer " + tok).c_str());
      continue;
    }
    auto vocab = Vocabulary::FromDirectory(*tdir, {tok, {}, 0});
    if (!vocab.ok()) {
      std::fprintf(stderr, "%s\n", vocab.status().ToString().c_str());
      return 1;
    }
    GrammarCompiler compiler(*vocab);
    for (const Workload& w : workloads) {
      std::vector<double> compile_ms;
      absl::StatusOr<CompiledGrammar> grammar =
          absl::UnknownError("not compiled");
      for (int c = 0; c < absl::GetFlag(FLAGS_compiles); ++c) {
        auto t0 = Clock::now();
        grammar = CompileWorkload(compiler, w, dir);
        compile_ms.push_back(Micros(Clock::now() - t0) / 1000);
        if (!grammar.ok()) break;
      }
      if (!grammar.ok()) {
        std::fprintf(stderr, "skip %s/%s: %s\n", w.name.c_str(), tok.c_str(),
                     grammar.status().ToString().c_str());
        continue;
      }
      const auto classify_start = Clock::now();
      grammar->ClassifyAhead(Clock::time_point::max());
      const double classify_rest_ms =
          Micros(Clock::now() - classify_start) / 1000;
      std::string input = ReadFile(dir + "/" + w.input_file);
      FeedResult r = Feed(*grammar, input, absl::GetFlag(FLAGS_passes));
      if (!r.error.empty()) {
        std::fprintf(stderr, "FAIL %s/%s: %s\n", w.name.c_str(), tok.c_str(),
                     r.error.c_str());
        continue;
      }
      double mean = 0, accept = 0;
      for (double v : r.mask_us) mean += v;
      for (double v : r.accept_us) accept += v;
      mean /= r.mask_us.size();
      accept /= std::max<size_t>(1, r.accept_us.size());
      char row[512];
      std::snprintf(row, sizeof(row), kRowFormat, w.name.c_str(), tok.c_str(),
                    Percentile(compile_ms, 50), classify_rest_ms, r.steps, mean,
                    Percentile(r.mask_us, 50), Percentile(r.mask_us, 99),
                    *std::max_element(r.mask_us.begin(), r.mask_us.end()),
                    accept, grammar->MemoryBytes());
      rows.push_back(row);
      BatchScaling(*grammar, input, w.name + "/" + tok);
    }
  }
  std::printf("%s\n", kHeader);
  for (const std::string& row : rows) std::printf("%s\n", row.c_str());
  return 0;
}

}  // namespace
}  // namespace grammard::grammar

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return grammard::grammar::Run();
}
