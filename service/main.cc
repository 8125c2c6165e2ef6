// grammard: the constrained-decoding daemon. Loads the tokenizers under
// --tokenizer_dir, serves grammard.v1.Grammard, grpc.health.v1 and server
// reflection on --listen and Prometheus metrics on --metrics_listen. SIGTERM
// or SIGINT: stop accepting, cancel the compiles, let each stream finish its
// current step, and exit within --shutdown_grace_ms.
//
// The limits below are sized for a sidecar serving one node (8 GPUs, each
// rank a stream of up to a few hundred sequences): each is several times
// what such a node needs, and small enough that one client at the limit
// leaves the node's other clients served (service/README.md, "Limits").
#include <signal.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "service/compile_pool.h"
#include "service/grammar_cache.h"
#include "service/grammard_service.h"
#include "service/memory_release.h"
#include "service/metrics/metrics_server.h"
#include "service/redis/redis_tier.h"
#include "service/service_metrics.h"
#include "service/socket_guard.h"
#include "service/tokenizer_registry.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "gRPC address; port 0 picks a free port (see --port_file). "
          "Loopback by default: a sidecar's engine is in the same pod.");
ABSL_FLAG(std::string, unix_socket, "",
          "Also serve gRPC on this Unix socket path (clients use the target "
          "unix:PATH): a sidecar's engine in the same pod, through a shared "
          "volume, skips the TCP stack on every step. Empty: none.");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "HTTP address of /metrics (0.0.0.0:9464 for a Prometheus in "
          "another pod); empty to serve no metrics.");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate chain: serve gRPC over TLS (with --tls_key_file).");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file.");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA bundle: require client certificates it signed (mutual "
          "TLS).");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding a bearer token every Grammard RPC must carry "
          "(\"authorization: Bearer <token>\"); health checks stay open.");
ABSL_FLAG(std::string, port_file, "",
          "If set, write \"grpc=<port> metrics=<port>\" here once serving.");
ABSL_FLAG(std::string, tokenizer_dir, ".deps/tokenizers",
          "Folder of tokenizers: one sub-folder per tokenizer, named after it, "
          "holding tokenizer.json and tokenizer_config.json.");
ABSL_FLAG(int, compile_threads, 2, "Threads compiling grammars.");
ABSL_FLAG(int, compile_queue, 256,
          "Compiles that may wait for a thread; more are RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, compile_queue_per_client, 64,
          "Compiles one client connection may have waiting; compiles are "
          "served round robin over clients.");
ABSL_FLAG(int64_t, compile_queue_bytes, int64_t{256} << 20,
          "Bytes the constraints queued or compiling hold (for schemas and "
          "structural tags, their parsed JSON), over all clients.");
ABSL_FLAG(int64_t, max_constraint_bytes, int64_t{8} << 20,
          "The largest constraint compiled (MaskBench's largest schema is "
          "544 KB).");
ABSL_FLAG(int, compile_timeout_ms, 30000,
          "Per-compile deadline; past it the compile stops, nothing cached.");
ABSL_FLAG(int, max_grammar_states, 100000,
          "Automaton states one grammar may have (RESOURCE_EXHAUSTED past).");
ABSL_FLAG(int, classify_ahead_ms, 0,
          "Per compile, how long to classify tokens for the grammar's first "
          "states before calling it ready (0: ready once its automaton is "
          "built); the rest are classified in the background, or when a "
          "sequence first reaches them.");
ABSL_FLAG(bool, classify_in_background, true,
          "After a compile, classify the rest of the grammar's tokens on a "
          "low-priority thread, so that sequences rarely wait for it.");
ABSL_FLAG(int, fill_threads, 2, "Threads filling the mask rows of one step.");
ABSL_FLAG(int64_t, row_cache_bytes, int64_t{4} << 20,
          "Encoded mask rows each Decode stream keeps for reuse (wire bytes); "
          "0: none.");
ABSL_FLAG(int64_t, cache_bytes, int64_t{1} << 30,
          "Budget of the compiled-grammar cache, in bytes.");
ABSL_FLAG(int, max_streams, 256,
          "Decode streams the daemon holds at once, over all clients.");
ABSL_FLAG(int, max_streams_per_client, 64,
          "Decode streams one client connection (address and port) may hold "
          "at once (0: no limit).");
ABSL_FLAG(int, max_sequences_per_stream, 4096,
          "Open sequences one Decode stream may hold, and sequences one step "
          "may list.");
ABSL_FLAG(int, max_draft_tokens, 64,
          "Draft tokens one sequence may ask mask rows for in one step.");
ABSL_FLAG(int, max_step_rows, 4096,
          "Mask rows (1 + drafts per sequence) one step may ask for.");
ABSL_FLAG(int64_t, max_sequence_tokens, 262144,
          "Tokens one sequence may hold (and accept in one step).");
ABSL_FLAG(int64_t, max_sequence_memory_mb, 2048,
          "Memory all open sequences may hold together (0: no limit); a step "
          "past it fails its sequence with RESOURCE_EXHAUSTED.");
ABSL_FLAG(int64_t, max_outbox_bytes, int64_t{16} << 20,
          "Replies one Decode stream may have queued for a client slow to "
          "read; past it the stream is cut off with RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, max_sync_wait_ms, 60000,
          "Longest SyncGroup wait, whatever the request asks.");
ABSL_FLAG(int, max_sync_world_size, 1024, "Largest SyncGroup world size.");
ABSL_FLAG(int, max_sync_ids, 16384,
          "Most sequence ids one SyncGroup report may list as ready, or as "
          "failed.");
ABSL_FLAG(int, max_tokenizer_names, 32,
          "Names RegisterTokenizer may add (UnregisterTokenizer frees one).");
ABSL_FLAG(int, max_uploaded_tokenizers, 8,
          "Vocabularies RegisterTokenizer may upload (each 15-60 MB).");
ABSL_FLAG(int, max_rpc_threads, 512,
          "Threads gRPC may run calls on: each Decode stream holds one, a "
          "waiting Compile or SyncGroup one while it waits; calls past it "
          "are RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, http2_max_streams, 256,
          "HTTP/2 streams one connection may have open (a client past it "
          "loses its connection).");
ABSL_FLAG(int, max_metadata_bytes, 16 << 10,
          "Largest header list (metadata) of a call.");
ABSL_FLAG(bool, http2_guard, true,
          "Cut cleartext connections that abuse HTTP/2 (rapid reset, "
          "endless header blocks, SETTINGS floods), which Debian's gRPC "
          "1.51 does not bound (service/http2_guard.h).");
ABSL_FLAG(int64_t, retain_freed_mb, 128,
          "Freed memory kept for reuse; past it, it is handed back to the "
          "system within a second (-1: never).");
ABSL_FLAG(int, stream_idle_timeout_s, 600,
          "Cancel a Decode stream after this long without a message (0: "
          "never).");
ABSL_FLAG(int, max_message_bytes, 64 << 20,
          "Largest gRPC message (tokenizer uploads are the big ones).");
ABSL_FLAG(std::string, redis, "",
          "host:port of the Redis that shares compiled grammars across "
          "replicas; empty: local cache only.");
ABSL_FLAG(std::string, redis_user, "", "Redis ACL user (with a password).");
ABSL_FLAG(std::string, redis_password_file, "",
          "File holding the Redis password (e.g. a mounted Secret).");
ABSL_FLAG(bool, redis_tls, false, "Connect to Redis over TLS.");
ABSL_FLAG(std::string, redis_tls_ca_file, "",
          "CA certificates to verify Redis with; empty: the system's.");
ABSL_FLAG(std::string, redis_prefix, "grammard:",
          "Prefix of every Redis key, to share one Redis between uses.");
ABSL_FLAG(int, redis_timeout_ms, 100,
          "Limit on each Redis connect and command.");
ABSL_FLAG(int, redis_ttl_s, 86400, "How long Redis keeps a compiled grammar.");
ABSL_FLAG(int, redis_negative_ttl_s, 60,
          "How long Redis keeps a failed compile (an invalid schema).");
ABSL_FLAG(int64_t, redis_max_value_bytes, int64_t{256} << 20,
          "Compiled grammars larger than this stay out of Redis.");
ABSL_FLAG(int, redis_lease_ms, 3000,
          "Lifetime of the fleet-wide compile lease (renewed while held); a "
          "replica that dies mid-compile blocks others this long at most.");
ABSL_FLAG(int, shutdown_grace_ms, 5000,
          "On SIGTERM, how long in-flight calls may take before cancelled; "
          "the process has exited by then.");

namespace {

using grammard::service::BearerToken;
using grammard::service::CompilePool;
using grammard::service::GrammarCache;
using grammard::service::GrammardService;
using grammard::service::MemoryRelease;
namespace socket_guard = grammard::service::socket_guard;
using grammard::service::MakeServerCredentials;
using grammard::service::ServiceMetrics;
using grammard::service::ServiceOptions;
using grammard::service::TlsFiles;
using grammard::service::TokenizerRegistry;
using grammard::service::redis::RedisTier;

// The shared tier from the --redis* flags; null when --redis is empty.
absl::StatusOr<std::unique_ptr<RedisTier>> MakeRedisTier(
    ServiceMetrics* metrics) {
  const std::string address = absl::GetFlag(FLAGS_redis);
  if (address.empty()) return nullptr;
  RedisTier::Options o;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &o.redis.port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--redis=", address, ": expected host:port"));
  }
  o.redis.host = address.substr(0, colon);
  o.redis.user = absl::GetFlag(FLAGS_redis_user);
  if (const std::string path = absl::GetFlag(FLAGS_redis_password_file);
      !path.empty()) {
    std::ifstream in(path);
    if (!in) {
      return absl::NotFoundError(
          absl::StrCat("--redis_password_file=", path, ": cannot read"));
    }
    std::getline(in, o.redis.password);
  }
  o.redis.tls = absl::GetFlag(FLAGS_redis_tls);
  o.redis.tls_ca_file = absl::GetFlag(FLAGS_redis_tls_ca_file);
  o.redis.timeout =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_redis_timeout_ms));
  o.prefix = absl::GetFlag(FLAGS_redis_prefix);
  o.max_value_bytes =
      static_cast<size_t>(absl::GetFlag(FLAGS_redis_max_value_bytes));
  o.lease = std::chrono::milliseconds(absl::GetFlag(FLAGS_redis_lease_ms));
  return std::make_unique<RedisTier>(o, metrics);
}

// Ends the process if shutting down (from the signal to the last destructor
// of Run, where it is declared first) outlasts the grace period. A stop that
// completes disarms it, so that what runs after Run (a sanitizer's leak
// check) is not cut short.
class ShutdownWatchdog {
 public:
  void Arm(std::chrono::milliseconds grace) {
    thread_ = std::thread([this, grace] {
      absl::MutexLock lock(&mu_);
      if (!mu_.AwaitWithTimeout(absl::Condition(&done_),
                                absl::FromChrono(grace))) {
        std::fprintf(stderr,
                     "grammard: still shutting down after "
                     "--shutdown_grace_ms (%s); exiting\n",
                     phase_);
        std::_Exit(1);
      }
    });
  }
  ~ShutdownWatchdog() {
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }
  // What the shutdown is doing now, said if it overruns.
  void Phase(const char* what) {
    absl::MutexLock lock(&mu_);
    phase_ = what;
  }

 private:
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  const char* phase_ ABSL_GUARDED_BY(mu_) = "draining the streams";
  std::thread thread_;
};

int Run() {
  ShutdownWatchdog watchdog;
  // Checked before the tokenizers load (seconds), as gRPC would refuse it
  // only at listening.
  const std::string unix_socket = absl::GetFlag(FLAGS_unix_socket);
  if (unix_socket.size() >= sizeof(sockaddr_un::sun_path)) {
    std::fprintf(stderr,
                 "grammard: --unix_socket is %zu bytes long; a Unix socket "
                 "path has at most %zu\n",
                 unix_socket.size(), sizeof(sockaddr_un::sun_path) - 1);
    return 2;
  }
  TokenizerRegistry::Limits registry_limits;
  registry_limits.max_names = absl::GetFlag(FLAGS_max_tokenizer_names);
  registry_limits.max_uploads = absl::GetFlag(FLAGS_max_uploaded_tokenizers);
  TokenizerRegistry tokenizers(registry_limits);
  const std::string dir = absl::GetFlag(FLAGS_tokenizer_dir);
  if (absl::Status s = tokenizers.LoadDirectory(dir); !s.ok()) {
    std::fprintf(stderr, "grammard: %s (run tools/setup.sh)\n",
                 s.ToString().c_str());
    return 1;
  }
  for (const auto& [name, entry] : tokenizers.List()) {
    std::printf("grammard: tokenizer %s\n", entry->vocab->Summary().c_str());
  }

  grammard::metrics::Registry registry;
  ServiceMetrics metrics(&registry);
  GrammarCache cache(static_cast<size_t>(absl::GetFlag(FLAGS_cache_bytes)),
                     &metrics);
  CompilePool::Options pool_options;
  pool_options.threads = absl::GetFlag(FLAGS_compile_threads);
  pool_options.max_queue = absl::GetFlag(FLAGS_compile_queue);
  pool_options.max_queue_per_client =
      absl::GetFlag(FLAGS_compile_queue_per_client);
  pool_options.max_queue_bytes = absl::GetFlag(FLAGS_compile_queue_bytes);
  pool_options.max_constraint_bytes = absl::GetFlag(FLAGS_max_constraint_bytes);
  pool_options.timeout =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_compile_timeout_ms));
  pool_options.max_states = absl::GetFlag(FLAGS_max_grammar_states);
  pool_options.classify_ahead =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_classify_ahead_ms));
  pool_options.classify_in_background =
      absl::GetFlag(FLAGS_classify_in_background);
  pool_options.shared_ttl =
      std::chrono::seconds(absl::GetFlag(FLAGS_redis_ttl_s));
  pool_options.negative_ttl =
      std::chrono::seconds(absl::GetFlag(FLAGS_redis_negative_ttl_s));
  absl::StatusOr<std::unique_ptr<RedisTier>> redis = MakeRedisTier(&metrics);
  if (!redis.ok()) {
    std::fprintf(stderr, "grammard: %s\n", redis.status().ToString().c_str());
    return 2;
  }
  if (*redis != nullptr) {
    std::printf("grammard: sharing compiled grammars through redis %s\n",
                absl::GetFlag(FLAGS_redis).c_str());
  }
  CompilePool compiles(pool_options, &cache, &metrics, redis->get());
  ServiceOptions service_options;
  service_options.fill_threads = absl::GetFlag(FLAGS_fill_threads);
  service_options.row_cache_bytes = static_cast<size_t>(
      std::max<int64_t>(0, absl::GetFlag(FLAGS_row_cache_bytes)));
  service_options.max_sequences_per_stream =
      absl::GetFlag(FLAGS_max_sequences_per_stream);
  service_options.max_streams_per_client =
      absl::GetFlag(FLAGS_max_streams_per_client);
  service_options.max_streams = absl::GetFlag(FLAGS_max_streams);
  service_options.max_draft_tokens = absl::GetFlag(FLAGS_max_draft_tokens);
  service_options.max_step_rows = absl::GetFlag(FLAGS_max_step_rows);
  service_options.max_sequence_tokens =
      absl::GetFlag(FLAGS_max_sequence_tokens);
  service_options.max_sequence_memory_bytes =
      absl::GetFlag(FLAGS_max_sequence_memory_mb) << 20;
  service_options.max_outbox_bytes = absl::GetFlag(FLAGS_max_outbox_bytes);
  service_options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  service_options.max_sync_wait =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_max_sync_wait_ms));
  service_options.max_sync_world_size =
      absl::GetFlag(FLAGS_max_sync_world_size);
  service_options.max_sync_ids = absl::GetFlag(FLAGS_max_sync_ids);
  service_options.stream_idle_timeout =
      std::chrono::seconds(absl::GetFlag(FLAGS_stream_idle_timeout_s));
  if (const std::string path = absl::GetFlag(FLAGS_auth_token_file);
      !path.empty()) {
    auto token = BearerToken::FromFile(path);
    if (!token.ok()) {
      std::fprintf(stderr, "grammard: %s\n", token.status().ToString().c_str());
      return 2;
    }
    service_options.auth = std::make_shared<const BearerToken>(*token);
  }
  auto credentials = MakeServerCredentials(TlsFiles{
      absl::GetFlag(FLAGS_tls_cert_file), absl::GetFlag(FLAGS_tls_key_file),
      absl::GetFlag(FLAGS_tls_client_ca_file)});
  if (!credentials.ok()) {
    std::fprintf(stderr, "grammard: %s\n",
                 credentials.status().ToString().c_str());
    return 2;
  }
  GrammardService service(service_options, &tokenizers, &compiles, &metrics);

  grammard::metrics::MetricsServer metrics_server(&registry);
  const std::string metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  if (!metrics_listen.empty()) {
    if (absl::Status s = metrics_server.Start(metrics_listen); !s.ok()) {
      std::fprintf(stderr, "grammard: metrics on %s: %s\n",
                   metrics_listen.c_str(), s.ToString().c_str());
      return 1;
    }
  }

  MemoryRelease memory_release(absl::GetFlag(FLAGS_retain_freed_mb) < 0
                                   ? -1
                                   : absl::GetFlag(FLAGS_retain_freed_mb) << 20,
                               metrics.memory_released_bytes);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  const std::string listen = absl::GetFlag(FLAGS_listen);
  const bool guard = absl::GetFlag(FLAGS_http2_guard) && socket_guard::Active();
  if (guard) {
    socket_guard::CountCutsIn(metrics.connections_cut);
    // A fixed port is guarded from the first connection; port 0 once known
    // (below), before the port file tells anyone.
    int port = 0;
    if (absl::SimpleAtoi(listen.substr(listen.rfind(':') + 1), &port) &&
        port > 0) {
      socket_guard::GuardPort(port);
    }
  }
  builder.AddListeningPort(listen, *credentials, &grpc_port);
  if (!unix_socket.empty()) {
    // The same guard as the TCP port's: the socket's clients are the pod's
    // engine, but the constraints they forward are end users'.
    if (guard) socket_guard::GuardUnixSockets();
    builder.AddListeningPort("unix:" + unix_socket, *credentials);
  }
  builder.SetMaxReceiveMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  builder.SetMaxSendMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  // Threads, whatever the clients do: a call past them is refused
  // ("Server Threadpool Exhausted"), not given a new thread.
  grpc::ResourceQuota quota("grammard");
  quota.SetMaxThreads(absl::GetFlag(FLAGS_max_rpc_threads));
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             absl::GetFlag(FLAGS_http2_max_streams));
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE,
                             absl::GetFlag(FLAGS_max_metadata_bytes));
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || grpc_port == 0) {
    std::fprintf(stderr, "grammard: cannot listen on %s%s%s\n", listen.c_str(),
                 unix_socket.empty() ? "" : " and unix:", unix_socket.c_str());
    return 1;
  }
  if (guard) socket_guard::GuardPort(grpc_port);
  // Owner and group: an engine container of the pod's fsGroup may connect,
  // whatever the daemon's umask made of it.
  if (!unix_socket.empty() && chmod(unix_socket.c_str(), 0660) != 0) {
    std::fprintf(stderr, "grammard: chmod 0660 %s: %s\n", unix_socket.c_str(),
                 std::strerror(errno));
  }
  server->GetHealthCheckService()->SetServingStatus(true);
  const std::string ports =
      absl::StrCat("grpc=", grpc_port, " metrics=", metrics_server.port());
  if (const std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    // Written whole under a temporary name, so a reader never sees half.
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp) << ports << "\n";
    std::rename(tmp.c_str(), path.c_str());
  }
  std::printf("grammard: serving %s\n", ports.c_str());
  std::fflush(stdout);

  // The signals were blocked in main, so every thread inherits the mask and
  // only sigwait sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  int signal = 0;
  sigwait(&signals, &signal);
  std::printf("grammard: signal %d, shutting down\n", signal);
  std::fflush(stdout);
  const auto grace =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_shutdown_grace_ms));
  watchdog.Arm(grace);
  server->GetHealthCheckService()->SetServingStatus(false);
  service.BeginShutdown();
  compiles.CancelAll();
  // civetweb notices a stop only between its 2-second polls: in parallel.
  std::thread stop_metrics([&] { metrics_server.Stop(); });
  watchdog.Phase("ending the RPCs");
  // gRPC's Shutdown waits until its deadline for clients to close their
  // connections, and a client between calls reads the GOAWAY only at its
  // next poll, seconds later (one that never reads it, never): once the
  // calls have ended (half the grace at most), the connections are closed.
  service.AwaitNoCalls(absl::FromChrono(grace / 2));
  server->Shutdown(std::chrono::system_clock::now());
  watchdog.Phase("waiting for the RPC handlers");
  server->Wait();
  watchdog.Phase("stopping the metrics server");
  stop_metrics.join();
  watchdog.Phase("releasing the service, compile pool and caches");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // Debian's Abseil checks lock order on every Mutex acquisition (a graph
  // update each time, about 1% of a busy Decode stream's CPU); the tests,
  // TSan among them, keep checking.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A peer that hangs up (Redis over TLS, whose writes cannot say
  // MSG_NOSIGNAL) must give an error, not end the process.
  signal(SIGPIPE, SIG_IGN);
  return Run();
}
