// Client: an inference node's end of grammard. It holds one Decode stream,
// opens and closes sequences with their constraints, and per decode step
// sends the tokens each sequence accepted (SubmitStep, right after sampling,
// so the server computes masks while the GPU runs the forward pass) and
// returns the next mask rows in the batch's order (WaitMasks), decoded into
// packed uint32 words (token t allowed iff bit t % 32 of word t / 32 is set)
// or applied to host logits (WaitAndApplyCpu; cuda_mask_applier.h applies
// them on the GPU).
//
//   ClientOptions options;
//   options.target = "127.0.0.1:50051";
//   options.tokenizer = "llama3";
//   auto client = Client::Connect(options);  // StatusOr<unique_ptr<Client>>
//   (*client)->Open(7, constraint);
//   (*client)->WaitReady({7});
//   for (;;) {
//     (*client)->SubmitStep({{7, 0, last_tokens}});
//     ... forward pass ...
//     (*client)->WaitMasks(buffer, &results);
//     ... mask logits, sample last_tokens ...
//   }
//
// Restart survival: the client keeps every open sequence's constraint and
// the tokens the server has acknowledged. When the stream breaks (the
// daemon restarted, the connection dropped) the next blocking call
// reconnects with exponential backoff, re-opens the sequences on a new
// stream, waits for their grammars, replays their tokens as the accepted
// tokens of one step, and re-sends the step in flight: masks continue
// exactly as if nothing happened, later. Only an outage longer than
// ClientOptions::outage_timeout is an error (UNAVAILABLE naming it).
//
// Errors: calls return absl::Status; a step's per-sequence failures (a
// refused token, a grammar that failed to compile, a grammar still
// compiling) are in SequenceMasks::status, and that sequence's rows are then
// all allowed so the rest of the batch proceeds.
//
// Cost: SubmitStep is one stream write (it does not wait for the server);
// WaitMasks waits for the reply, then decodes each row in time linear in its
// encoded size plus its words. A reader thread receives replies. Memory: the
// accepted tokens of every open sequence (4 bytes each) for replay.
//
// After a break nothing reconnects until a blocking call (WaitReady,
// WaitMasks) runs; GetReadiness keeps reporting what was known.
//
// Thread-safety: every method may be called from any thread. Open, Close,
// SubmitStep, PendingRows and the Wait* calls are serialised: while one
// waits, the others wait for it. State, GetReadiness, Metrics and the
// accessors never block on a wait. One step is in flight at a time:
// SubmitStep, then WaitMasks (or a WaitAndApply*), then the next.
#ifndef GRAMMARD_CLIENT_CLIENT_H_
#define GRAMMARD_CLIENT_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "client/client_metrics.h"
#include "gpu/token_mask.h"
#include "grpcpp/grpcpp.h"
#include "proto/grammard.grpc.pb.h"

namespace grammard::client {

struct ClientOptions {
  // A gRPC target, e.g. "127.0.0.1:50051", "dns:///grammard:50051" or, for
  // a daemon serving --unix_socket in the same pod, "unix:/run/grammard/s".
  std::string target;
  // A tokenizer the daemon serves, by name or fingerprint. Sequences are
  // opened by its fingerprint, so a restarted daemon serving another
  // vocabulary under the same name fails them instead of diverging.
  std::string tokenizer;
  // TLS to the daemon; tls_ca_file (PEM) holds the roots to trust, empty
  // for the system's. tls_cert_file and tls_key_file (PEM, both or
  // neither): this node's certificate, for a daemon requiring mutual TLS.
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // A file holding the bearer token the daemon requires (its
  // --auth_token_file), sent on every RPC of the channel. Needs tls: gRPC
  // sends no credentials in plaintext.
  std::string auth_token_file;
  // How long Connect waits for the daemon to answer.
  std::chrono::milliseconds connect_timeout{10000};
  // The default timeout of WaitMasks and WaitReady while connected.
  std::chrono::milliseconds step_timeout{30000};
  // The longest outage a blocking call rides out (reconnecting, waiting
  // for recompiles, replaying) before it returns UNAVAILABLE.
  std::chrono::milliseconds outage_timeout{60000};
  // Reconnection backoff: the first delay, doubled per attempt up to max.
  std::chrono::milliseconds backoff_initial{50};
  std::chrono::milliseconds backoff_max{2000};
};

struct SequenceOptions {
  // The sequence starts in a thinking section that think_end_token ends.
  bool reasoning = false;
  int32_t think_end_token = -1;
  // Report the grammar's forced continuation every step.
  bool jump_forward = false;
};

enum class GrammarState { kCompiling, kReady, kFailed };

struct SequenceState {
  GrammarState state = GrammarState::kCompiling;
  absl::Status error;  // set when kFailed
};

// Which of some sequences are ready to step and which failed (the report of
// one rank in rank_exchange.h).
struct Readiness {
  std::vector<uint64_t> ready;
  std::vector<uint64_t> failed;
};

// One sequence of a step, in the engine's row order.
struct StepInput {
  uint64_t sequence_id = 0;
  // Undo this many tokens accepted earlier (rejected speculative tokens).
  int32_t rollback = 0;
  // Tokens accepted since the last step.
  absl::Span<const int32_t> accepted;
  // Drafts to verify: the step returns 1 + drafts.size() rows for this
  // sequence, row i for the position after drafts[0..i).
  absl::Span<const int32_t> drafts;
};

// One sequence's outcome of a step.
struct SequenceMasks {
  uint64_t sequence_id = 0;
  // Not OK: the rows are all allowed and the sequence did not advance; for
  // anything but UNAVAILABLE (still compiling) it has failed and must be
  // closed.
  absl::Status status;
  int64_t first_row = 0;  // its rows in the step's mask buffer
  int32_t num_rows = 0;   // 1 + drafts
  bool terminated = false;
  bool can_terminate = false;
  std::string jump_forward_bytes;
  std::vector<int32_t> jump_forward_tokens;
};

// Where WaitMasks writes: row r of the step (in batch order) at words +
// rows[r] * row_stride, or at words + r * row_stride when rows is null. A
// row map lets a batch land straight in an engine's own row order (vLLM's
// bitmask, say), with no copy.
struct MaskBuffer {
  uint32_t* words = nullptr;
  int64_t row_stride = 0;  // in words, >= words_per_row()
  int64_t capacity_rows = 0;
  // Null, or PendingRows() distinct entries in [0, capacity_rows).
  const int64_t* rows = nullptr;

  uint32_t* Row(int64_t r) const {
    return words + (rows != nullptr ? rows[r] : r) * row_stride;
  }
};

// A Compile call's outcome (Client::Compile).
struct CompileOutcome {
  std::string grammar_id;
  GrammarState state = GrammarState::kCompiling;
  absl::Status error;  // set when kFailed
};

// One tokenizer the daemon serves (Client::ListTokenizers).
struct TokenizerInfo {
  std::string name;
  std::string fingerprint;
  int32_t vocab_size = 0;
  std::vector<int32_t> eos_token_ids;
};

class Client {
 public:
  using Clock = std::chrono::steady_clock;

  // Reaches the daemon (waiting up to options.connect_timeout), looks the
  // tokenizer up and opens the Decode stream. UNAVAILABLE when the daemon
  // does not answer in time, NOT_FOUND for an unknown tokenizer,
  // INVALID_ARGUMENT for bad options or an unreadable TLS or token file,
  // UNAUTHENTICATED when the daemon refuses the token.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      const ClientOptions& options);
  // Ends the stream; the server forgets its sequences.
  ~Client();

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The model's vocabulary size: the columns each mask row covers.
  int32_t vocab_size() const { return vocab_size_; }
  // Words of one packed row: ceil(vocab_size / 32).
  int32_t words_per_row() const { return (vocab_size_ + 31) / 32; }
  const std::vector<int32_t>& eos_token_ids() const { return eos_token_ids_; }
  const std::string& tokenizer_fingerprint() const { return fingerprint_; }
  const ClientOptions& options() const { return options_; }
  // The channel to the daemon, for other RPCs (GrammardRankExchange).
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }

  // Opens a sequence; its grammar compiles in the background (State,
  // Readiness, WaitReady). ALREADY_EXISTS for an id already open.
  absl::Status Open(uint64_t sequence_id,
                    const grammard::v1::Constraint& constraint,
                    const SequenceOptions& options = {});
  // NOT_FOUND for an id not open.
  absl::Status Close(uint64_t sequence_id);

  // Compiles a constraint for this client's tokenizer with a unary call of
  // its own, so that the daemon (and its fleet's cache) has it before a
  // sequence opens with it; with `wait`, until it is ready or failed (or
  // `timeout`, 0: options.step_timeout). Never touches the stream: a step
  // in flight goes on meanwhile. Rides out an outage up to
  // options.outage_timeout (then UNAVAILABLE naming it), as ListTokenizers
  // does.
  absl::StatusOr<CompileOutcome> Compile(
      const grammard::v1::Constraint& constraint, bool wait,
      std::chrono::milliseconds timeout = {}) const;
  // The tokenizers the daemon serves.
  absl::StatusOr<std::vector<TokenizerInfo>> ListTokenizers(
      std::chrono::milliseconds timeout = {}) const;

  // Never blocks. NOT_FOUND for an id not open.
  absl::StatusOr<SequenceState> State(uint64_t sequence_id) const;
  // Sorts `ids` into ready and failed; ids still compiling or not open are
  // in neither. Never blocks.
  Readiness GetReadiness(absl::Span<const uint64_t> ids) const;
  // Blocks until every id is ready or failed (State says which).
  // DEADLINE_EXCEEDED past `timeout` (0: options.step_timeout), NOT_FOUND
  // for an id not open.
  absl::Status WaitReady(absl::Span<const uint64_t> ids,
                         std::chrono::milliseconds timeout = {});

  // Sends the step without waiting for the server. FAILED_PRECONDITION
  // while a step is in flight, INVALID_ARGUMENT for a repeated id or a
  // negative rollback.
  absl::Status SubmitStep(absl::Span<const StepInput> batch);
  // Rows of the step in flight (sum of 1 + drafts); 0 when none.
  int64_t PendingRows() const;
  // Waits for the step in flight and writes its rows; results[i] is
  // batch[i]'s outcome. DEADLINE_EXCEEDED when the server has not answered
  // within `timeout` (0: options.step_timeout) while connected: the step
  // stays in flight and may be waited for again. INVALID_ARGUMENT when the
  // buffer is too small (checked before waiting). UNAVAILABLE when an
  // outage outlasts options.outage_timeout (in any blocking call): the step
  // in flight is then dropped, unacknowledged, and the next call starts
  // reconnecting afresh.
  absl::Status WaitMasks(const MaskBuffer& out,
                         std::vector<SequenceMasks>* results,
                         std::chrono::milliseconds timeout = {});
  // WaitMasks, then gpu::ApplyTokenMaskCpu on host logits: mask row k
  // applies to logits row indices[k], or row k when indices is null.
  absl::Status WaitAndApplyCpu(const gpu::LogitsView& logits,
                               const int32_t* indices,
                               std::vector<SequenceMasks>* results,
                               std::chrono::milliseconds timeout = {});

  ClientMetrics Metrics() const;

 private:
  struct Sequence {
    grammard::v1::OpenSequence open;  // as sent
    SequenceState state;
    uint64_t status_epoch = 0;    // the stream its last status came on
    std::vector<int32_t> tokens;  // acknowledged by the server
  };
  // What a step changes once its reply says a sequence advanced.
  struct Delta {
    uint64_t sequence_id;
    int32_t rollback;
    std::vector<int32_t> accepted;
  };
  struct Pending {
    grammard::v1::DecodeRequest request;  // the sequences sent
    std::vector<uint64_t> ids;            // the batch, in order
    std::vector<int32_t> rows;            // per batch entry
    std::vector<int> wire_index;  // per batch entry; -1: answered locally
    std::vector<absl::Status> local_errors;  // per batch entry
    std::vector<Delta> deltas;               // per wire entry
    int64_t total_rows = 0;
    Clock::time_point submitted;
  };
  class Link;

  Client(const ClientOptions& options, std::shared_ptr<grpc::Channel> channel);

  // Starts a stream (and its reader thread) as the current one.
  void StartLink() ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);
  // Ends the current stream; its final status's message, if any.
  std::string StopLink() ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);
  // UNAVAILABLE saying why the current stream broke, which it ends.
  absl::Status Broken() ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);
  // Writes on the current stream; a failed write marks it broken (the next
  // blocking call resumes).
  void Send(const grammard::v1::DecodeRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);
  // Called by the reader thread of stream `epoch`.
  void OnResponse(uint64_t epoch, grammard::v1::DecodeResponse* response);
  void OnEnd(uint64_t epoch);

  // Runs a unary call (`call` sets up nothing but the request), again
  // while it fails UNAVAILABLE, up to options.outage_timeout: a call made
  // while the daemon restarts rides it out as a step does. Each attempt
  // has `timeout`. The daemon's answers are idempotent (compiles are keyed
  // by content), so a repeated attempt is harmless.
  absl::Status CallRidingOutages(
      const char* what, std::chrono::milliseconds timeout,
      const std::function<grpc::Status(grpc::ClientContext*)>& call) const;
  // UNAVAILABLE for an outage that began at `start` and outlasted
  // options.outage_timeout: `prefix`, then how long, `attempts` ("3
  // attempts") and the last error.
  absl::Status OutageError(absl::string_view prefix, Clock::time_point start,
                           absl::string_view attempts,
                           absl::string_view last_error) const;
  // The backoff before another attempt: `*delay` (then doubled, up to
  // options.backoff_max), cut short when the channel connects or
  // `give_up` comes.
  void WaitToRetry(Clock::time_point give_up,
                   std::chrono::milliseconds* delay) const;
  // Reconnects and replays until it succeeds or outage_timeout passes.
  absl::Status Resume() ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);
  absl::Status TryResume(Clock::time_point give_up)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);
  // Waits on mu_ until `done`, the stream breaks or `deadline`; true when
  // `done` holds.
  bool AwaitUntil(const std::function<bool()>& done, Clock::time_point deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WaitMasksLocked(const MaskBuffer& out,
                               std::vector<SequenceMasks>* results,
                               std::chrono::milliseconds timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);
  void FinishStep(const grammard::v1::StepResult& result, const MaskBuffer& out,
                  std::vector<SequenceMasks>* results)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);
  void FillAllAllowed(uint32_t* row) const;

  const ClientOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<grammard::v1::Grammard::Stub> stub_;
  int32_t vocab_size_ = 0;
  std::string fingerprint_;
  std::vector<int32_t> eos_token_ids_;

  // Serialises the calls that write to the stream or wait; never taken by
  // the reader thread.
  mutable absl::Mutex call_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::unique_ptr<Link> link_ ABSL_GUARDED_BY(call_mu_);
  std::optional<Pending> pending_ ABSL_GUARDED_BY(call_mu_);
  uint64_t next_step_id_ ABSL_GUARDED_BY(call_mu_) = 1;
  std::vector<uint32_t> scratch_ ABSL_GUARDED_BY(call_mu_);

  // State shared with the reader thread.
  mutable absl::Mutex mu_;
  std::map<uint64_t, Sequence> sequences_ ABSL_GUARDED_BY(mu_);
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;  // the current stream
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  std::string broken_why_ ABSL_GUARDED_BY(mu_);
  uint64_t awaited_step_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<grammard::v1::StepResult> reply_ ABSL_GUARDED_BY(mu_);
  Clock::time_point reply_at_ ABSL_GUARDED_BY(mu_);
  ClientMetrics metrics_ ABSL_GUARDED_BY(mu_);
};

}  // namespace grammard::client

#endif  // GRAMMARD_CLIENT_CLIENT_H_
