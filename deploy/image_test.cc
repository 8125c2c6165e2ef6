// The container image, built and run with Podman as a user would, checked
// through its published ports. The image is deploy/Dockerfile's runtime stage
// over the binaries this test depends on (tools/build_image.sh --binaries):
// the build stage's own Bazel build would take CI longer than the whole
// suite; `tools/build_image.sh` builds both stages. Checked: its size and
// contents (no compilers, build tools or package caches), the user, entrypoint
// and capabilities Podman reports; a container (uid 65532, read-only root,
// all capabilities dropped, tokenizers mounted read-only, `--listen=
// 0.0.0.0:50051` inside, ports published on 127.0.0.1) serving gRPC health,
// masks equal to the host daemon's and /metrics, and stopping on SIGTERM
// within the manifests' grace period; and two containers with the Redis
// overlay's settings and a Redis container, the second loading what the
// first compiled.
//
// Needs root, Podman, runc and debootstrap (tools/setup.sh installs them):
// without them it fails, saying what is missing. The first run on a machine
// makes the local Debian base images (about a minute).
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "deploy/testing/deploy_testing.h"
#include "deploy/testing/overlay.h"
#include "deploy/testing/podman.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/grammard.grpc.pb.h"
#include "proto/health.grpc.pb.h"
#include "proto/mask_rows.h"
#include "tests/support/daemon.h"
#include "tests/support/paths.h"

namespace grammard::deploy {
namespace {

namespace v1 = grammard::v1;
using nlohmann::json;
using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr double kMaxImageBytes = 150e6;
constexpr int kGrpcPort = 50051;
constexpr int kMetricsPort = 9464;
constexpr int kDecodeSteps = 8;
constexpr char kSchema[] =
    R"({"type":"object","properties":{"ok":{"type":"boolean"},)"
    R"("n":{"type":"integer","minimum":0,"maximum":999}},)"
    R"("required":["ok","n"],"additionalProperties":false})";

double Seconds(steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Health SERVING on 127.0.0.1:<port>, asked every 100 ms for up to 60 s.
absl::Status WaitServing(int port) {
  const auto give_up = steady_clock::now() + seconds(60);
  std::string last = "no answer";
  while (steady_clock::now() < give_up) {
    // A fresh connection each time: one channel would wait out gRPC's
    // reconnect backoff (seconds) after the refusals before the daemon
    // listens, which the start time measured here would include.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto health = grpc::health::v1::Health::NewStub(
        grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                  grpc::InsecureChannelCredentials(), args));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(1));
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status s = health->Check(&context, request, &response);
    if (s.ok() &&
        response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::OkStatus();
    }
    last =
        s.ok() ? absl::StrCat("status ", response.status()) : s.error_message();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("health not SERVING on 127.0.0.1:", port,
                   " within 60 s (last: ", last, ")"));
}

v1::CompileResponse Compile(const std::string& target) {
  auto stub = v1::Grammard::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  v1::CompileRequest request;
  request.set_tokenizer("llama3");
  request.mutable_constraint()->set_json_schema(kSchema);
  request.set_wait(true);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(60));
  v1::CompileResponse response;
  const grpc::Status s = stub->Compile(&context, request, &response);
  EXPECT_TRUE(s.ok()) << target << ": " << s.error_message();
  return response;
}

// The mask words of each of `steps` Decode steps of one sequence under
// kSchema, each step accepting the first token the previous mask allowed.
std::vector<std::vector<uint32_t>> DecodeMasks(const std::string& target,
                                               int steps) {
  auto stub = v1::Grammard::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  int32_t vocab_size = 0;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(30));
    v1::ListTokenizersResponse list;
    EXPECT_TRUE(
        stub->ListTokenizers(&context, v1::ListTokenizersRequest(), &list)
            .ok());
    for (const v1::Tokenizer& t : list.tokenizers()) {
      if (t.name() == "llama3") vocab_size = t.vocab_size();
    }
  }
  std::vector<std::vector<uint32_t>> masks;
  if (vocab_size <= 0) {
    ADD_FAILURE() << target << " serves no llama3";
    return masks;
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(60));
  auto stream = stub->Decode(&context);
  v1::DecodeRequest open;
  open.mutable_open()->set_sequence_id(1);
  open.mutable_open()->set_tokenizer("llama3");
  open.mutable_open()->mutable_constraint()->set_json_schema(kSchema);
  EXPECT_TRUE(stream->Write(open));
  int32_t accepted = -1;
  for (int step = 0; step < steps; ++step) {
    v1::DecodeRequest request;
    request.mutable_step()->set_step_id(step);
    v1::SequenceStep* s = request.mutable_step()->add_sequences();
    s->set_sequence_id(1);
    if (accepted >= 0) s->add_accepted_tokens(accepted);
    if (!stream->Write(request)) break;
    v1::DecodeResponse response;
    while (stream->Read(&response) && !response.has_step()) {
    }
    if (!response.has_step() || response.step().sequences_size() != 1) break;
    const v1::SequenceResult& r = response.step().sequences(0);
    EXPECT_FALSE(r.has_error()) << r.error().ShortDebugString();
    if (r.has_error() || r.rows_size() == 0) break;
    std::vector<uint32_t> words(static_cast<size_t>(vocab_size + 31) / 32);
    const absl::Status decoded =
        proto::DecodeMaskRow(r.rows(0), vocab_size, words.data());
    EXPECT_TRUE(decoded.ok()) << decoded;
    masks.push_back(words);
    accepted = -1;
    for (size_t w = 0; w < words.size() && accepted < 0; ++w) {
      if (words[w] != 0) {
        accepted = static_cast<int32_t>(w * 32 + __builtin_ctz(words[w]));
      }
    }
    if (accepted < 0 || r.terminated()) break;
  }
  stream->WritesDone();
  context.TryCancel();
  stream->Finish().IgnoreError();
  return masks;
}

class ImageTest : public ::testing::Test {
 protected:
  // Builds the image once for all cases; a failure fails every case.
  static void SetUpTestSuite() {
    absl::StatusOr<Podman> podman = Podman::Find();
    if (!podman.ok()) {
      error_ = std::string(podman.status().message());
      return;
    }
    podman_ = new Podman(*podman);
    const std::string script = testing::RunfilePath("tools/build_image.sh");
    const std::string grammard = testing::RunfilePath("service/grammard");
    if (script.empty() || grammard.empty()) {
      error_ = "tools/build_image.sh or service/grammard is not a runfile";
      return;
    }
    // The runfiles tree lays the binaries out as bazel-bin does.
    const std::string binaries = grammard.substr(
        0, grammard.size() - std::string("/service/grammard").size());
    image_ = "localhost/" + UniqueName("grammard-test") + ":test";
    const auto start = steady_clock::now();
    absl::StatusOr<CommandResult> built = RunCommand(
        {"/bin/bash", script, "--binaries=" + binaries, "--tag=" + image_},
        seconds(600));
    if (!built.ok() || built->exit_code != 0) {
      error_ = built.ok() ? absl::StrCat("tools/build_image.sh exited ",
                                         built->exit_code, ":\n", built->err)
                          : std::string(built.status().message());
      return;
    }
    std::cout << "image built in " << Seconds(steady_clock::now() - start)
              << " s (including the base images when missing)\n"
              << built->err;
  }

  static void TearDownTestSuite() {
    if (podman_ != nullptr && !image_.empty()) {
      podman_->Run({"rmi", "-f", image_}).IgnoreError();
    }
  }

  void SetUp() override {
    ASSERT_TRUE(error_.empty()) << error_;
    tokenizer_ = testing::TokenizerDir("llama3").value_or("");
    if (tokenizer_.empty()) {
      GTEST_SKIP() << testing::MissingDataMessage("the llama3 tokenizer");
    }
  }

  // `podman run` options of a container as the pod runs it: uid 65532, a
  // read-only root, every capability dropped, no privilege escalation, a
  // small writable /tmp, the tokenizer mounted read-only and both ports
  // published on 127.0.0.1 (the host picks the ports).
  std::vector<std::string> UserOptions() const {
    return {"--user=65532:65532",
            "--read-only",
            "--cap-drop=ALL",
            "--security-opt=no-new-privileges",
            "--tmpfs=/tmp:size=64m",
            "--volume=" + tokenizer_ + ":/tokenizers/llama3:ro",
            absl::StrCat("--publish=127.0.0.1::", kGrpcPort),
            absl::StrCat("--publish=127.0.0.1::", kMetricsPort)};
  }

  // A grammard container started with UserOptions() plus `options`, its
  // published ports, and how long it took to serve.
  struct Running {
    std::unique_ptr<Container> container;
    int grpc_port = 0;
    int metrics_port = 0;
    double seconds_to_serving = 0;
    std::string target() const { return absl::StrCat("127.0.0.1:", grpc_port); }
  };
  absl::StatusOr<Running> StartGrammard(
      const std::vector<std::string>& options = {},
      const std::vector<std::string>& args = {}) const {
    std::vector<std::string> all = UserOptions();
    all.insert(all.end(), options.begin(), options.end());
    Running r;
    const auto start = steady_clock::now();
    absl::StatusOr<std::unique_ptr<Container>> c = Container::Start(
        *podman_, UniqueName("grammard-test"), all, image_, args);
    if (!c.ok()) return c.status();
    r.container = *std::move(c);
    absl::StatusOr<int> grpc_port = r.container->HostPort(kGrpcPort);
    absl::StatusOr<int> metrics_port = r.container->HostPort(kMetricsPort);
    if (!grpc_port.ok()) return grpc_port.status();
    if (!metrics_port.ok()) return metrics_port.status();
    r.grpc_port = *grpc_port;
    r.metrics_port = *metrics_port;
    if (absl::Status s = WaitServing(r.grpc_port); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat(s.message(), "\n", r.container->Logs()));
    }
    r.seconds_to_serving = Seconds(steady_clock::now() - start);
    return r;
  }

  static inline Podman* podman_ = nullptr;
  static inline std::string image_;
  static inline std::string error_;
  std::string tokenizer_;
};

TEST_F(ImageTest, IsSmallAndHoldsNoBuildToolsOrPackageCaches) {
  absl::StatusOr<std::string> size =
      podman_->Run({"image", "inspect", "--format", "{{.Size}}", image_});
  ASSERT_TRUE(size.ok()) << size.status();
  double bytes = 0;
  ASSERT_TRUE(absl::SimpleAtod(absl::StripAsciiWhitespace(*size), &bytes));
  std::cout << "image size: " << bytes / 1e6 << " MB\n";
  EXPECT_LT(bytes, kMaxImageBytes);
  absl::StatusOr<std::string> config = podman_->Run(
      {"image", "inspect", "--format", "{{json .Config}}", image_});
  ASSERT_TRUE(config.ok()) << config.status();
  json c = json::parse(*config, nullptr, false);
  EXPECT_EQ(c.value("User", ""), "65532:65532");
  EXPECT_EQ(c["Entrypoint"], json({"/usr/local/bin/grammard"}));

  // Packages: no compiler, build tool or development headers.
  absl::StatusOr<std::string> packages =
      podman_->Run({"run", "--rm", "--entrypoint=/usr/bin/dpkg-query", image_,
                    "-W", "-f=${Package}\\n"});
  ASSERT_TRUE(packages.ok()) << packages.status();
  // Compilers, build tools, interpreters (gcc-12-base, libgcc's
  // documentation, is not one), and development packages.
  static const std::regex forbidden(
      R"(^(gcc|g\+\+|cpp|clang|llvm|binutils|make|cmake|bazel|bazel-bootstrap|)"
      R"(protobuf-compiler|python3|nodejs|npm)(-[0-9.]+)?$|-dev$)");
  int count = 0;
  for (absl::string_view p :
       absl::StrSplit(*packages, '\n', absl::SkipEmpty())) {
    ++count;
    EXPECT_FALSE(std::regex_search(std::string(p), forbidden))
        << "the image holds package " << p;
  }
  EXPECT_GT(count, 20) << *packages;
  // Nor any such command from elsewhere, nor apt's lists and downloads.
  absl::StatusOr<std::string> found = podman_->Run(
      {"run", "--rm", "--user=0", "--entrypoint=/bin/sh", image_, "-c",
       "for t in cc c++ gcc g++ clang ld as make cmake bazel protoc; do "
       "command -v $t; done; "
       "find /var/lib/apt/lists /var/cache/apt -type f ! -name lock"});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, "") << "build tools or package caches in the image";
}

TEST_F(ImageTest, ServesWhatTheHostDaemonServesThroughPublishedPorts) {
  absl::StatusOr<Running> r = StartGrammard();
  ASSERT_TRUE(r.ok()) << r.status();
  std::cout << "container start to SERVING: " << r->seconds_to_serving
            << " s\n";
  RecordProperty("seconds_to_serving", absl::StrCat(r->seconds_to_serving));

  // What Podman and the kernel say the daemon runs as.
  absl::StatusOr<std::string> inspected = r->container->Inspect(
      "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} "
      "{{len .HostConfig.CapAdd}} {{len .EffectiveCaps}}");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  EXPECT_EQ(*inspected, "65532:65532 true 0 0");
  absl::StatusOr<std::string> top =
      podman_->Run({"top", r->container->name(), "huser", "capeff", "args"});
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_TRUE(absl::StrContains(*top, "65532")) << *top;
  EXPECT_TRUE(absl::StrContains(*top, "none")) << *top;
  EXPECT_TRUE(absl::StrContains(*top, "--listen=0.0.0.0:50051")) << *top;

  // The same grammar and masks as the daemon built alongside, on the host.
  absl::StatusOr<std::unique_ptr<testing::Daemon>> host =
      testing::Daemon::Start({});
  ASSERT_TRUE(host.ok()) << host.status();
  const v1::CompileResponse in_container = Compile(r->target());
  const v1::CompileResponse on_host = Compile((*host)->target());
  ASSERT_EQ(in_container.state(), v1::GRAMMAR_STATE_READY)
      << in_container.error().message();
  EXPECT_EQ(in_container.grammar_id(), on_host.grammar_id());
  EXPECT_EQ(in_container.num_states(), on_host.num_states());
  const auto masks = DecodeMasks(r->target(), kDecodeSteps);
  EXPECT_EQ(masks.size(), static_cast<size_t>(kDecodeSteps));
  EXPECT_TRUE(masks == DecodeMasks((*host)->target(), kDecodeSteps))
      << "the container's masks differ from the host daemon's";

  // Prometheus' view, through the published metrics port.
  EXPECT_EQ(testing::Metric(r->metrics_port, "grammard_steps_total"),
            kDecodeSteps);
  EXPECT_EQ(testing::Metric(r->metrics_port,
                            "grammard_compile_duration_seconds_count"),
            1);
  EXPECT_EQ(testing::Metric(r->metrics_port, "grammard_build_info"), 1);
}

// The grace period the pods get: terminationGracePeriodSeconds of the
// inference Deployment (30, Kubernetes' default, when absent).
absl::StatusOr<int> GracePeriodSeconds() {
  absl::StatusOr<std::vector<json>> docs =
      YamlDocuments(DeployFile("k8s/base/inference-deployment.yaml"));
  if (!docs.ok()) return docs.status();
  json* deployment = Find(*docs, "Deployment", "inference");
  if (deployment == nullptr) {
    return absl::NotFoundError("no Deployment inference in the base");
  }
  return (*deployment)["spec"]["template"]["spec"].value(
      "terminationGracePeriodSeconds", 30);
}

TEST_F(ImageTest, SigtermStopsItWithinTheManifestsGracePeriod) {
  absl::StatusOr<int> grace = GracePeriodSeconds();
  ASSERT_TRUE(grace.ok()) << grace.status();
  absl::StatusOr<Running> r = StartGrammard();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(Compile(r->target()).state(), v1::GRAMMAR_STATE_READY);
  // `podman stop` sends SIGTERM, then SIGKILL after the grace period: an
  // exit status of 0 means the daemon stopped on its own before that.
  const auto start = steady_clock::now();
  absl::StatusOr<std::string> stopped = podman_->Run(
      {"stop", "--time", absl::StrCat(*grace), r->container->name()},
      seconds(*grace + 30));
  const double took = Seconds(steady_clock::now() - start);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  std::cout << "stopped " << took << " s after SIGTERM\n";
  EXPECT_LT(took, *grace);
  absl::StatusOr<std::string> status =
      r->container->Inspect("{{.State.ExitCode}}");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, "0") << r->container->Logs();
}

// Two grammard containers configured as the Redis overlay configures the
// sidecar (its args, with the ConfigMap's values; the Secret's password as
// a read-only file readable by group 65532) on one network with a Redis
// container run with the overlay's Redis args, reachable as the overlay's
// Service name.
TEST_F(ImageTest, WithTheRedisOverlayASecondReplicaLoadsWhatTheFirstCompiled) {
  absl::StatusOr<std::vector<json>> objects = RenderOverlay("redis");
  if (absl::IsFailedPrecondition(objects.status())) {
    GTEST_SKIP() << objects.status().message();
  }
  ASSERT_TRUE(objects.ok()) << objects.status();
  json* inference = Find(*objects, "Deployment", "inference");
  json* redis_deployment = Find(*objects, "Deployment", "redis");
  ASSERT_TRUE(inference != nullptr && redis_deployment != nullptr);
  json* sidecar =
      PodContainer((*inference)["spec"]["template"]["spec"], "grammard");
  json* redis_container =
      PodContainer((*redis_deployment)["spec"]["template"]["spec"], "redis");
  ASSERT_TRUE(sidecar != nullptr && redis_container != nullptr);
  absl::StatusOr<std::vector<std::string>> args =
      ExpandedArgs(*objects, *sidecar);
  ASSERT_TRUE(args.ok()) << args.status();
  absl::StatusOr<std::vector<std::string>> redis_args =
      ExpandedArgs(*objects, *redis_container);
  ASSERT_TRUE(redis_args.ok()) << redis_args.status();
  std::string address, password_file, prefix;
  for (const std::string& a : *args) {
    if (absl::StartsWith(a, "--redis=")) address = a.substr(8);
    if (absl::StartsWith(a, "--redis_password_file="))
      password_file = a.substr(22);
    if (absl::StartsWith(a, "--redis_prefix=")) prefix = a.substr(15);
  }
  ASSERT_FALSE(address.empty() || password_file.empty() || prefix.empty())
      << "the overlay sets no --redis, --redis_password_file or "
         "--redis_prefix";
  const std::string service = address.substr(0, address.find(':'));
  int mode = 0;
  absl::StatusOr<std::string> password =
      MountedSecretFile(*objects, (*inference)["spec"]["template"]["spec"],
                        *sidecar, password_file, &mode);
  ASSERT_TRUE(password.ok()) << password.status();

  // Redis from Debian's package, in an image made from the same base.
  const std::string redis_image =
      "localhost/" + UniqueName("grammard-test-redis") + ":test";
  const std::string context = MakeTempDir();
  std::ofstream(context + "/Dockerfile")
      << "FROM debian:bookworm-slim\n"
      << "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get "
         "install -y --no-install-recommends redis-server && "
         "rm -rf /var/lib/apt/lists/*\n"
      << "USER redis\n"
      << "ENTRYPOINT [\"/usr/bin/redis-server\"]\n";
  absl::StatusOr<std::string> built = podman_->Run(
      {"build", "--layers=false", "-t", redis_image, context}, seconds(600));
  ASSERT_TRUE(built.ok()) << built.status();
  struct Cleanup {
    const Podman* podman;
    std::string image, network;
    ~Cleanup() {
      if (!network.empty())
        podman->Run({"network", "rm", "-f", network}).IgnoreError();
      podman->Run({"rmi", "-f", image}).IgnoreError();
    }
  } cleanup{podman_, redis_image, ""};
  const std::string network = UniqueName("grammard-test-net");
  ASSERT_TRUE(podman_->Run({"network", "create", network}).ok());
  cleanup.network = network;
  // Declared after `cleanup`: the containers go before their network.
  std::unique_ptr<Container> redis;
  {
    absl::StatusOr<std::unique_ptr<Container>> c = Container::Start(
        *podman_, UniqueName("grammard-test-redis"),
        {"--network=" + network, "--network-alias=" + service, "--read-only"},
        redis_image, *redis_args);
    ASSERT_TRUE(c.ok()) << c.status();
    redis = *std::move(c);
  }
  const auto give_up = steady_clock::now() + seconds(30);
  while (!absl::StrContains(redis->Logs(), "Ready to accept connections")) {
    ASSERT_LT(steady_clock::now(), give_up) << "Redis not ready within 30 s:\n"
                                            << redis->Logs();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  // The Secret as Kubernetes mounts it: its mode, group 65532 (fsGroup).
  const std::string secret_dir = MakeTempDir();
  const std::string secret_file =
      secret_dir + "/" + password_file.substr(password_file.rfind('/') + 1);
  std::ofstream(secret_file) << *password;
  ASSERT_EQ(chown(secret_file.c_str(), 0, 65532), 0) << "chown needs root";
  ASSERT_EQ(chmod(secret_file.c_str(), static_cast<mode_t>(mode)), 0);
  chmod(secret_dir.c_str(), 0755);
  const std::vector<std::string> options = {
      "--network=" + network,
      "--volume=" + secret_dir + ":" +
          password_file.substr(0, password_file.rfind('/')) + ":ro"};

  absl::StatusOr<Running> first = StartGrammard(options, *args);
  ASSERT_TRUE(first.ok()) << first.status();
  const v1::CompileResponse compiled = Compile(first->target());
  ASSERT_EQ(compiled.state(), v1::GRAMMAR_STATE_READY)
      << compiled.error().message() << "\n"
      << first->container->Logs();
  EXPECT_EQ(testing::Metric(first->metrics_port,
                            "grammard_compile_duration_seconds_count"),
            1);
  EXPECT_EQ(testing::Metric(first->metrics_port, "grammard_redis_errors_total"),
            0)
      << first->container->Logs();

  absl::StatusOr<Running> second = StartGrammard(options, *args);
  ASSERT_TRUE(second.ok()) << second.status();
  const v1::CompileResponse loaded = Compile(second->target());
  ASSERT_EQ(loaded.state(), v1::GRAMMAR_STATE_READY)
      << loaded.error().message();
  EXPECT_EQ(loaded.grammar_id(), compiled.grammar_id());
  EXPECT_EQ(testing::Metric(second->metrics_port,
                            "grammard_compile_duration_seconds_count"),
            0)
      << "the second replica compiled instead of loading from Redis";
  EXPECT_EQ(testing::Metric(second->metrics_port, "grammard_redis_hits_total"),
            1);
  // Stored under the overlay's prefix.
  absl::StatusOr<std::string> keys =
      podman_->Run({"exec", redis->name(), "redis-cli", "--no-auth-warning",
                    "-a", *password, "--scan", "--pattern", prefix + "*"});
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_TRUE(absl::StrContains(*keys, compiled.grammar_id())) << *keys;
}

}  // namespace
}  // namespace grammard::deploy
