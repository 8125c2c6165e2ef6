// GrammardService: the grammard.v1.Grammard gRPC service (proto/grammard.proto)
// over the tokenizer registry, the compile pool and per-stream sequences.
//
// Decode runs one handler thread per stream (gRPC's synchronous API): it
// reads a message and hands it to the stream's DecodeSession
// (service/decode_session.h), which applies it and, for a step, writes the
// step's result. The mask rows of a step are filled across sequences on a
// FillPool shared by all streams; readiness changes come from compile
// threads and are written by the session's notifier thread. (gRPC's
// callback API, which handles a message on the thread that polled it, was
// tried: in paired step_bench runs it took 10-20 us off the B=64 overhead,
// less than the host's run-to-run noise, and TSan cannot follow its
// hand-offs inside Debian's uninstrumented libgrpc.)
//
// Errors reach clients as canonical gRPC codes with a message naming the
// sequence and the problem; a sequence's error is reported in its own result
// and leaves the other sequences and the stream alone.
//
// Hostile clients: every size a request carries is checked against a limit
// (ServiceOptions) before anything is allocated from it, and the answer
// names the field and the flag; every wait has a server-side bound; a
// stream is refused before its state is built; a stream whose client stops
// reading is cut off with RESOURCE_EXHAUSTED once its queued replies pass
// max_outbox_bytes; an exception (out of memory) ends only its own call,
// which still unregisters. Decode reads raw bytes and parses them itself,
// so that bytes that are no DecodeRequest end the stream with
// INVALID_ARGUMENT (gRPC's own parse would read as the client's half-close).
//
// Thread-safety: gRPC calls the methods from any threads; BeginShutdown may
// be called from any thread.
#ifndef GRAMMARD_SERVICE_GRAMMARD_SERVICE_H_
#define GRAMMARD_SERVICE_GRAMMARD_SERVICE_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/grammard.grpc.pb.h"
#include "service/byte_budget.h"
#include "service/compile_pool.h"
#include "service/decode_session.h"
#include "service/listener_security.h"
#include "service/rank_sync.h"
#include "service/service_metrics.h"
#include "service/tokenizer_registry.h"

namespace grammard::service {

// Each stream's (DecodeOptions), and the daemon's.
struct ServiceOptions : DecodeOptions {
  // Threads filling the masks of a step (the stream's own thread included).
  int fill_threads = 2;
  // Bytes all sequences' matchers may hold together; 0: no limit.
  int64_t max_sequence_memory_bytes = int64_t{2} << 30;
  // Decode streams the daemon holds at once, over all clients.
  int max_streams = 256;
  // Decode streams one client connection (its peer address and port) may
  // hold at once; more is RESOURCE_EXHAUSTED. 0: no limit. Per connection,
  // not per address: a sidecar's clients all come from 127.0.0.1.
  int max_streams_per_client = 64;
  // A stream with no message for this long is cancelled, freeing its
  // sequences (an engine that died without closing its stream); 0: never.
  std::chrono::seconds stream_idle_timeout{600};
  // When set, every Grammard RPC must carry this bearer token.
  std::shared_ptr<const BearerToken> auth;
  // SyncGroup: the longest wait, whatever the request's timeout_ms; the
  // largest world size; the most ids a report may list.
  std::chrono::milliseconds max_sync_wait{60000};
  int max_sync_world_size = 1024;
  int max_sync_ids = 16384;
};

class GrammardService final : public grammard::v1::Grammard::Service {
 public:
  // Everything passed must outlive the service.
  GrammardService(const ServiceOptions& options, TokenizerRegistry* tokenizers,
                  CompilePool* compiles, ServiceMetrics* metrics);
  ~GrammardService() override;

  grpc::Status RegisterTokenizer(
      grpc::ServerContext* context,
      const grammard::v1::RegisterTokenizerRequest* request,
      grammard::v1::Tokenizer* response) override;
  grpc::Status ListTokenizers(
      grpc::ServerContext* context,
      const grammard::v1::ListTokenizersRequest* request,
      grammard::v1::ListTokenizersResponse* response) override;
  grpc::Status Compile(grpc::ServerContext* context,
                       const grammard::v1::CompileRequest* request,
                       grammard::v1::CompileResponse* response) override;
  grpc::Status UnregisterTokenizer(
      grpc::ServerContext* context,
      const grammard::v1::UnregisterTokenizerRequest* request,
      grammard::v1::UnregisterTokenizerResponse* response) override;
  // Decode, registered on raw bytes (see above).
  grpc::Status DecodeBytes(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream);
  grpc::Status SyncGroup(grpc::ServerContext* context,
                         const grammard::v1::SyncGroupRequest* request,
                         grammard::v1::SyncGroupResponse* response) override;

  // New streams are refused; open streams end (UNAVAILABLE) once their
  // current step is written. Call before grpc::Server::Shutdown.
  void BeginShutdown();
  // Waits up to `timeout` until no call's handler runs; true if none does.
  // After BeginShutdown, what a server still waits for then is clients
  // closing their connections, which grpc::Server::Shutdown may close at
  // once.
  bool AwaitNoCalls(absl::Duration timeout);

 private:
  class Stream;

  // Unauthenticated unless the call carries the configured bearer token.
  absl::Status Authorize(const grpc::ServerContext& context) const;
  grpc::Status Fail(const absl::Status& status);
  // Runs a handler's body; an exception it throws (out of memory) becomes
  // its call's status instead of ending the process.
  grpc::Status Guarded(const char* rpc,
                       const std::function<grpc::Status()>& body);
  // Admits a new Decode stream of `connection`, or says why not.
  absl::Status Admit(const std::string& connection);
  void Dismiss(const std::string& connection);
  // Cancels idle and stuck streams every second until the service is
  // destroyed.
  void Reap();

  const ServiceOptions options_;
  TokenizerRegistry* const tokenizers_;
  CompilePool* const compiles_;
  ServiceMetrics* const metrics_;
  RankSync rank_sync_;
  ByteBudget sequence_memory_;
  FillPool fill_pool_;

  absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  std::set<Stream*> streams_ ABSL_GUARDED_BY(mu_);
  int admitted_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> streams_per_client_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int calls_running_ ABSL_GUARDED_BY(mu_) = 0;  // inside Guarded
  std::thread reaper_;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_GRAMMARD_SERVICE_H_
