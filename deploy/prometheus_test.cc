// A real Prometheus (Debian's prometheus, on 127.0.0.1 with a temporary data
// folder) scrapes a real grammard every second and evaluates the alerting
// rules of deploy/prometheus/grammard_rules.yml. The test compiles a JSON
// schema and decodes a few steps over gRPC, then asks Prometheus' HTTP API
// until it reports the compile and the steps with plausible values, and
// until every rule has evaluated without error.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "deploy/testing/deploy_testing.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/grammard.grpc.pb.h"
#include "proto/mask_rows.h"
#include "tests/support/daemon.h"
#include "tests/support/paths.h"

namespace grammard::deploy {
namespace {

namespace v1 = grammard::v1;
using grammard::proto::DecodeMaskRow;
using nlohmann::json;
// The JSON read here is deliberately not const: operator[] on a const json
// with a missing key is undefined behaviour, on a mutable one it yields null,
// so a malformed document fails a check instead of crashing the test.

constexpr auto kDeadline = std::chrono::seconds(60);

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// Prometheus as a child process in its own folder; killed (and the folder
// removed) by the destructor, and by the kernel if this test dies first.
class Prometheus {
 public:
  static absl::StatusOr<std::unique_ptr<Prometheus>> Start(
      const std::string& binary, const std::string& rules_file,
      int scrape_port) {
    std::string log;
    for (int attempt = 0; attempt < 3; ++attempt) {
      std::unique_ptr<Prometheus> p(new Prometheus());
      p->dir_ = MakeTempDir();
      if (p->dir_.empty()) return absl::InternalError("mkdtemp failed");
      p->port_ = grammard::testing::FreeLoopbackPort();
      const std::string config = p->dir_ + "/prometheus.yml";
      std::ofstream(config)
          << "global:\n"
          << "  scrape_interval: 1s\n"
          << "  scrape_timeout: 1s\n"
          << "  evaluation_interval: 1s\n"
          << "rule_files:\n"
          << "  - " << rules_file << "\n"
          << "scrape_configs:\n"
          << "  - job_name: grammard\n"
          << "    static_configs:\n"
          << "      - targets: ['127.0.0.1:" << scrape_port << "']\n"
          << "        labels: {namespace: test, pod: "
             "inference-0}\n";
      p->log_ = p->dir_ + "/prometheus.log";
      std::vector<std::string> args = {
          binary, "--config.file=" + config,
          "--storage.tsdb.path=" + p->dir_ + "/data",
          absl::StrCat("--web.listen-address=127.0.0.1:", p->port_),
          "--log.level=info"};
      p->pid_ = fork();
      if (p->pid_ < 0) return absl::InternalError("fork failed");
      if (p->pid_ == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        const int fd =
            open(p->log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv(argv[0], argv.data());
        _exit(127);
      }
      // Ready once /-/ready answers 200; an early exit (the port was taken
      // meanwhile) tries another port.
      const auto give_up = std::chrono::steady_clock::now() + kDeadline;
      while (std::chrono::steady_clock::now() < give_up) {
        int status = 0;
        if (waitpid(p->pid_, &status, WNOHANG) == p->pid_) {
          p->pid_ = -1;
          log = p->Log();
          break;
        }
        if (testing::HttpGet(p->port_, "/-/ready").ok()) return p;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (p->pid_ > 0) {
        return absl::InternalError(
            absl::StrCat("Prometheus not ready within 60 s:\n", p->Log()));
      }
    }
    return absl::InternalError("Prometheus exited at start:\n" + log);
  }

  ~Prometheus() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      const auto give_up =
          std::chrono::steady_clock::now() + std::chrono::seconds(10);
      int status = 0;
      while (waitpid(pid_, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > give_up) {
          kill(pid_, SIGKILL);
          waitpid(pid_, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // GET /api/v1/<path>: the "data" of a successful answer.
  absl::StatusOr<json> Api(const std::string& path) const {
    absl::StatusOr<std::string> body =
        testing::HttpGet(port_, "/api/v1/" + path);
    if (!body.ok()) return body.status();
    json answer = json::parse(*body, nullptr, false);
    if (answer.is_discarded() || answer.value("status", "") != "success") {
      return absl::InternalError("Prometheus answered " + *body);
    }
    return answer["data"];
  }

  // The value of an instant query returning one sample; NaN when it
  // returns none (not scraped yet).
  absl::StatusOr<double> Scalar(const std::string& promql) const {
    absl::StatusOr<json> data = Api("query?query=" + UrlEncode(promql));
    if (!data.ok()) return data.status();
    json& result = (*data)["result"];
    if (!result.is_array() || result.empty()) return std::nan("");
    if (result.size() != 1) {
      return absl::InternalError(
          absl::StrCat(promql, " returned ", result.dump()));
    }
    return std::stod(result[0]["value"][1].get<std::string>());
  }

  std::string Log() const { return ReadFile(log_).value_or("(no log)"); }

 private:
  Prometheus() = default;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string dir_;
  std::string log_;
};

// The vocabulary size the server reports for a tokenizer (0 if unknown).
int32_t VocabSize(v1::Grammard::Stub* stub, const std::string& name) {
  v1::ListTokenizersResponse list;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
  EXPECT_TRUE(
      stub->ListTokenizers(&context, v1::ListTokenizersRequest(), &list).ok());
  for (const v1::Tokenizer& t : list.tokenizers()) {
    if (t.name() == name) return t.vocab_size();
  }
  ADD_FAILURE() << "the server has no tokenizer " << name;
  return 0;
}

// Compiles a schema, then decodes `steps` steps of one sequence under it,
// each accepting the first allowed token. Returns the steps served.
int DriveTraffic(const std::string& target, int steps) {
  auto stub = v1::Grammard::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  v1::Constraint constraint;
  constraint.set_json_schema(
      R"({"type": "object", "properties": {"ok": {"type": "boolean"}},
          "required": ["ok"], "additionalProperties": false})");
  {
    v1::CompileRequest request;
    request.set_tokenizer("llama3");
    *request.mutable_constraint() = constraint;
    request.set_wait(true);
    v1::CompileResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(60));
    const grpc::Status s = stub->Compile(&context, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.state(), v1::GRAMMAR_STATE_READY);
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
  auto stream = stub->Decode(&context);
  v1::DecodeRequest open;
  open.mutable_open()->set_sequence_id(1);
  open.mutable_open()->set_tokenizer("llama3");
  *open.mutable_open()->mutable_constraint() = constraint;
  EXPECT_TRUE(stream->Write(open));
  int served = 0;
  std::vector<int32_t> accepted;
  const int32_t vocab_size = VocabSize(stub.get(), "llama3");
  std::vector<uint32_t> words(static_cast<size_t>(vocab_size + 31) / 32);
  for (int step = 0; step < steps; ++step) {
    v1::DecodeRequest request;
    request.mutable_step()->set_step_id(step);
    v1::SequenceStep* s = request.mutable_step()->add_sequences();
    s->set_sequence_id(1);
    for (int32_t t : accepted) s->add_accepted_tokens(t);
    if (!stream->Write(request)) break;
    v1::DecodeResponse response;
    while (stream->Read(&response) && !response.has_step()) {
    }
    if (!response.has_step()) break;
    ++served;
    const v1::SequenceResult& r = response.step().sequences(0);
    EXPECT_FALSE(r.has_error()) << r.error().ShortDebugString();
    if (r.has_error() || r.rows_size() == 0 || r.terminated()) break;
    // The first allowed token of the row.
    if (!DecodeMaskRow(r.rows(0), vocab_size, words.data()).ok()) break;
    accepted.clear();
    for (size_t w = 0; w < words.size() && accepted.empty(); ++w) {
      if (words[w] != 0) {
        accepted.push_back(static_cast<int32_t>(w) * 32 +
                           __builtin_ctz(words[w]));
      }
    }
  }
  stream->WritesDone();
  v1::DecodeResponse rest;
  while (stream->Read(&rest)) {
  }
  const grpc::Status s = stream->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
  return served;
}

TEST(PrometheusTest, ScrapesCompileAndStepMetricsAndEvaluatesTheRules) {
  const std::string binary = FindExecutable("prometheus");
  if (binary.empty()) {
    GTEST_SKIP() << MissingToolMessage("prometheus",
                                       "scrapes the daemon in this test");
  }
  if (!testing::TokenizerDir("llama3")) {
    GTEST_SKIP() << testing::MissingDataMessage("the llama3 tokenizer");
  }
  const std::string rules = DeployFile("prometheus/grammard_rules.yml");
  ASSERT_FALSE(rules.empty());
  auto daemon = testing::Daemon::Start({});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto prometheus = Prometheus::Start(binary, rules, (*daemon)->metrics_port());
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();
  const Prometheus& p = **prometheus;
  const auto give_up = std::chrono::steady_clock::now() + kDeadline;

  // One scrape before the traffic, so that rates and increases see it.
  for (absl::StatusOr<double> up = p.Scalar(R"(up{job="grammard"})");
       !up.ok() || *up != 1; up = p.Scalar(R"(up{job="grammard"})")) {
    ASSERT_LT(std::chrono::steady_clock::now(), give_up)
        << "Prometheus did not scrape grammard within 60 s: "
        << (up.ok() ? absl::StrCat("up = ", *up) : up.status().ToString())
        << "\nPrometheus log:\n"
        << p.Log();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }

  const int steps = DriveTraffic((*daemon)->target(), 5);
  ASSERT_GE(steps, 2) << "the Decode stream served almost no steps";

  // Wait until a scrape after the traffic has been stored.
  double compiles = 0, steps_total = 0;
  std::string last;
  for (;;) {
    absl::StatusOr<double> c =
        p.Scalar("sum(grammard_compile_duration_seconds_count)");
    absl::StatusOr<double> s = p.Scalar("sum(grammard_steps_total)");
    if (c.ok() && s.ok()) {
      compiles = *c;
      steps_total = *s;
      if (compiles >= 1 && steps_total >= steps) break;
      last = absl::StrCat("compiles ", compiles, ", steps ", steps_total);
    } else {
      last = (c.ok() ? s.status() : c.status()).ToString();
    }
    if (std::chrono::steady_clock::now() > give_up) {
      const absl::StatusOr<json> targets = p.Api("targets");
      FAIL() << "Prometheus did not report grammard's compile (>= 1) and "
                "steps (>= "
             << steps << ") within 60 s; last: " << last << "\ntargets: "
             << (targets.ok() ? targets->dump() : targets.status().ToString())
             << "\nPrometheus log:\n"
             << p.Log();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }

  // An instant query's value; a failed query fails the test (NaN).
  auto value = [&p](const std::string& promql) {
    absl::StatusOr<double> v = p.Scalar(promql);
    EXPECT_TRUE(v.ok()) << promql << ": " << v.status();
    return v.ok() ? *v : std::nan("");
  };
  // Plausible values: one compile of a JSON schema (the Decode open hit the
  // cache), exactly the steps served, durations positive and below the
  // daemon's bounds.
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(steps_total, steps);
  EXPECT_EQ(
      value(
          R"(sum(grammard_compile_duration_seconds_count{kind="json_schema"}))"),
      1);
  const double compile_sum =
      value("sum(grammard_compile_duration_seconds_sum)");
  EXPECT_GT(compile_sum, 0);
  EXPECT_LT(compile_sum, 30);  // --compile_timeout_ms
  EXPECT_EQ(value("sum(grammard_step_duration_seconds_count)"), steps);
  const double step_sum = value("sum(grammard_step_duration_seconds_sum)");
  EXPECT_GT(step_sum, 0);
  EXPECT_LT(step_sum, steps * 1.0);
  EXPECT_GE(value("sum(grammard_cache_hits_total)"), 1);
  EXPECT_EQ(value("sum(grammard_cache_misses_total)"), 1);
  EXPECT_EQ(value(R"(up{job="grammard"})"), 1);
  EXPECT_EQ(value("sum(grammard_redis_breaker_open)"), 0);
  // The p99 the step alert computes: within the histogram's bounds.
  const double p99 = value(
      "histogram_quantile(0.99, sum by (le) "
      "(increase(grammard_step_duration_seconds_bucket[1m])))");
  EXPECT_GT(p99, 0);
  EXPECT_LE(p99, 1);

  // Every alerting rule evaluates on real series without error (health
  // "unknown" until its first evaluation).
  std::string health;
  for (;;) {
    absl::StatusOr<json> data = p.Api("rules");
    ASSERT_TRUE(data.ok()) << data.status();
    int ok = 0, total = 0;
    health.clear();
    for (json& group : (*data)["groups"]) {
      for (json& rule : group["rules"]) {
        ++total;
        const std::string h = rule.value("health", "");
        absl::StrAppend(&health, rule.value("name", ""), "=", h, " ");
        EXPECT_NE(h, "err")
            << rule.value("name", "") << ": " << rule.value("lastError", "");
        if (h == "err") return;
        if (h == "ok") ++ok;
      }
    }
    ASSERT_GE(total, 4) << "Prometheus loaded too few rules:\n" << p.Log();
    if (ok == total) break;
    ASSERT_LT(std::chrono::steady_clock::now(), give_up)
        << "rules not all evaluated within 60 s: " << health;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  absl::StatusOr<json> alerts = p.Api("alerts");
  ASSERT_TRUE(alerts.ok()) << alerts.status();
  EXPECT_TRUE((*alerts)["alerts"].empty())
      << "a healthy daemon raised alerts: " << alerts->dump();
}

}  // namespace
}  // namespace grammard::deploy
