// DecodeSession: one Decode stream's sequences and the step logic over them
// (proto/grammard.proto: OpenSequence, CloseSequence, Step → StepResult),
// apart from gRPC. Replies go through a ReplyWriter: GrammardService's
// writes them to the call, a test records them. GrammardService reads the
// stream's messages, admits, drains and reaps streams, and hands each
// message to its session.
//
// A step advances its sequences and fills their rows across sequences on
// a FillPool (service/fill_pool.h) shared by all sessions; a
// StepRowEncoder (service/step_rows.h) spares the fills it can by row key
// and encodes the rows.
//
// Errors reach clients as canonical codes with a message naming the
// sequence and the problem; a sequence's error is reported in its own
// result (or status) and leaves the other sequences alone, and a sequence
// that failed reports its error at every later step until it is closed.
// Past a limit (DecodeOptions) a step is refused as a whole
// (StepResult.error), or a sequence fails, naming the flag.
//
// Statuses (a sequence's grammar READY or FAILED) come from compile
// threads: they are queued in an outbox that the session's notifier thread
// writes, so a client that stops reading never blocks a compile; past
// max_outbox_bytes queued the writer is aborted.
//
// Cost: a notifier thread per session; per step, each sequence's Advance
// and a mask fill per row not spared, plus the rows' encoding.
// Thread-safety: Open, Close and Step are called by one thread at a time
// (the stream's handler); compile threads post statuses at any time.
#ifndef GRAMMARD_SERVICE_DECODE_SESSION_H_
#define GRAMMARD_SERVICE_DECODE_SESSION_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "proto/grammard.pb.h"
#include "service/byte_budget.h"
#include "service/compile_pool.h"
#include "service/fill_pool.h"
#include "service/sequence.h"
#include "service/service_metrics.h"
#include "service/step_rows.h"
#include "service/tokenizer_registry.h"

namespace grammard::service {

// One stream's limits and row cache; each is the flag of its name
// (service/README.md), and a request past a limit is refused naming it.
struct DecodeOptions {
  // Open sequences one stream may hold, and sequences one step may list;
  // more is RESOURCE_EXHAUSTED.
  int max_sequences_per_stream = 4096;
  // Draft tokens one sequence may ask rows for in one step.
  int max_draft_tokens = 64;
  // Mask rows one step may ask for (each sequence's 1 + drafts).
  int max_step_rows = 4096;
  // Tokens one sequence may hold (see SequenceLimits).
  int64_t max_sequence_tokens = 262144;
  // Replies one stream may have queued (statuses waiting for a client that
  // is slow to read), in bytes; past it the stream is cut off.
  int64_t max_outbox_bytes = int64_t{16} << 20;
  // The largest message the server sends: a step whose reply would be
  // larger is refused as a whole.
  int64_t max_message_bytes = int64_t{64} << 20;
  // Encoded mask rows one stream keeps for reuse, by their grammar
  // position, counted in wire bytes (see service/step_rows.h); 0: none.
  size_t row_cache_bytes = size_t{4} << 20;
};

// Where a session's replies go.
class ReplyWriter {
 public:
  virtual ~ReplyWriter() = default;
  // Sends one reply; false once the stream is gone. Called by the session's
  // caller (step results) and its notifier thread (statuses), possibly at
  // the same time.
  virtual bool Write(const grammard::v1::DecodeResponse& reply) = 0;
  // Ends the stream with `status` at once, even while a Write is blocked on
  // a client that does not read.
  virtual void Abort(const absl::Status& status) = 0;
};

// What the sessions of a daemon share; all of it must outlive them.
struct DecodeResources {
  TokenizerRegistry* tokenizers;
  CompilePool* compiles;
  ServiceMetrics* metrics;
  ByteBudget* sequence_memory;  // what all sequences' matchers hold
  FillPool* fill;
};

class DecodeSession {
 public:
  // `peer` is the client's connection, for the compile queue's fairness
  // (CompilePool::Submit). `writer` must outlive the session.
  DecodeSession(const DecodeOptions& options, const DecodeResources& shared,
                std::string peer, ReplyWriter* writer);
  // Stops the notifier (statuses not yet written are dropped) and closes
  // every sequence.
  ~DecodeSession();
  DecodeSession(const DecodeSession&) = delete;
  DecodeSession& operator=(const DecodeSession&) = delete;

  // Opens a sequence; its status follows through the writer once its
  // grammar is compiled, or once the open is refused.
  void Open(const grammard::v1::OpenSequence& open);
  // Closes a sequence; NotFound (a status) for one not open.
  void Close(const grammard::v1::CloseSequence& close);
  // Applies `step` and writes its result. `reply` is the caller's scratch
  // (an arena's: a step's hundreds of messages then cost no allocation)
  // and holds the reply afterwards. False when the writer failed.
  bool Step(const grammard::v1::Step& step,
            grammard::v1::DecodeResponse* reply);

 private:
  using Clock = std::chrono::steady_clock;
  struct Outbox;

  struct Slot {
    std::shared_ptr<CompileJob> job;
    ReasoningOptions reasoning;
    bool jump_forward = false;
    bool keeps_previous_row = false;     // the client's, see OpenSequence
    std::unique_ptr<Sequence> sequence;  // once the grammar is ready
    absl::Status failed;                 // set: every step reports it
    std::vector<uint32_t> rows;          // scratch for FillRows
    std::vector<uintptr_t> key;          // row 0's, when it has one
    RowMemory first_row;                 // its row 0 as last sent
    Clock::duration fill_time;           // this step's, for the metric
    uint64_t stepped_in = 0;             // the step_serial_ it was last in
    // Compile listeners hold a weak reference: a closed sequence gets no
    // status, even if its id is reused.
    std::shared_ptr<char> alive = std::make_shared<char>();
  };

  struct Work {
    Slot* slot;
    const grammard::v1::SequenceStep* step;
    grammard::v1::SequenceResult* result;
  };

  // Charges the cache for what the slot's sequence built in its grammar.
  void Release(const Slot& slot);
  void ApplyStep(const grammard::v1::Step& step,
                 grammard::v1::StepResult* result);
  // The step as a whole is refused (no sequence of it advanced).
  void RefuseStep(const absl::Status& status, grammard::v1::StepResult* result);
  // Checks a sequence can step (and its step is within the limits); creates
  // its matcher when its grammar is ready.
  absl::Status Ready(uint64_t id, Slot* slot,
                     const grammard::v1::SequenceStep& step);
  void RunOne(const Work& work);
  void AdvanceAndFill(const Work& work);
  void PostStatus(uint64_t id, const absl::Status& status);
  void Notify();

  const DecodeOptions options_;
  const DecodeResources shared_;
  const std::string peer_;
  ReplyWriter* const writer_;
  std::unordered_map<uint64_t, Slot> sequences_;
  // Step scratch, kept for its capacity.
  uint64_t step_serial_ = 0;
  std::vector<Work> work_;
  std::vector<Slot*> added_;
  StepRowEncoder row_encoder_{options_.row_cache_bytes};

  const std::shared_ptr<Outbox> outbox_;
  std::thread notifier_;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_DECODE_SESSION_H_
