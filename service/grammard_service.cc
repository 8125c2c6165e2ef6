#include "service/grammard_service.h"

#include <grpc/grpc.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <new>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/arena.h"
#include "grpcpp/support/method_handler.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "proto/mask_rows.h"
#include "service/sequence.h"
#include "service/step_rows.h"
#include "service/wire_text.h"

namespace grammard::service {
namespace {

namespace v1 = grammard::v1;
using Clock = std::chrono::steady_clock;

// Messages sent to clients are cut here: an error may quote a request, and
// a reply must stay small whatever the request was.
constexpr size_t kMaxErrorMessageBytes = 4096;

std::string Cut(absl::string_view message) {
  if (message.size() <= kMaxErrorMessageBytes) return std::string(message);
  return absl::StrCat(message.substr(0, kMaxErrorMessageBytes), "... (",
                      message.size() - kMaxErrorMessageBytes, " more bytes)");
}

// The RPC's deadline on the steady clock; max when the client set none.
Clock::time_point SteadyDeadline(const grpc::ServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return Clock::time_point::max();
  }
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            deadline - std::chrono::system_clock::now());
}

grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      Cut(status.message()));
}

void SetError(const absl::Status& status, v1::Error* error) {
  error->set_code(static_cast<int32_t>(status.code()));
  error->set_message(Cut(status.message()));
}

// Ends a call with `status` even while a Write of it is blocked (its client
// does not read): gRPC sends the status ahead of any queued data, which
// ServerContext::TryCancel (always CANCELLED) would not say.
void CancelWith(grpc::ServerContext* context, const absl::Status& status) {
  const std::string message = Cut(status.message());
  grpc_call_cancel_with_status(context->c_call(),
                               static_cast<grpc_status_code>(status.code()),
                               message.c_str(), nullptr);
}

void DescribeTokenizer(const std::string& name, const TokenizerEntry& entry,
                       v1::Tokenizer* out) {
  out->set_name(name);
  out->set_fingerprint(entry.vocab->fingerprint());
  out->set_vocab_size(entry.vocab->size());
  for (int32_t id : entry.vocab->eos_ids()) out->add_eos_token_ids(id);
}

void DescribeEntry(const GrammarEntry& entry, v1::CompileResponse* out) {
  out->set_compile_seconds(entry.compile_seconds);
  if (!entry.status.ok()) {
    out->set_state(v1::GRAMMAR_STATE_FAILED);
    SetError(entry.status, out->mutable_error());
    return;
  }
  out->set_state(v1::GRAMMAR_STATE_READY);
  out->set_num_states(entry.grammar->num_states());
  out->set_memory_bytes(static_cast<int64_t>(entry.grammar->MemoryBytes()));
  for (const auto& d : entry.dropped) {
    v1::DroppedKeyword* k = out->add_dropped();
    k->set_keyword(d.keyword);
    k->set_pointer(d.pointer);
    k->set_reason(d.reason);
  }
}

// Responses written by a stream's notifier thread, at most `max_bytes` of
// them queued. Shared with compile listeners, which may outlive the stream:
// posting to a closed outbox is a no-op. While it is open its stream, and so
// `context`, is alive (the stream closes it before it ends).
struct Outbox {
  Outbox(grpc::ServerContext* context, int64_t max_bytes,
         ServiceMetrics* metrics)
      : context(context), max_bytes(max_bytes), metrics(metrics) {}

  grpc::ServerContext* const context;
  const int64_t max_bytes;
  ServiceMetrics* const metrics;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<v1::DecodeResponse> queue;  // guarded by mu
  int64_t queued_bytes = 0;              // guarded by mu
  bool closed = false;                   // guarded by mu
  bool overflowed = false;               // guarded by mu

  // A client that does not read its replies while it keeps sending (opens
  // refused, say) would grow the queue without end: past max_bytes the
  // stream is cut off and what was queued is dropped.
  void Post(v1::DecodeResponse response) {
    const int64_t bytes = static_cast<int64_t>(response.ByteSizeLong());
    {
      std::lock_guard<std::mutex> lock(mu);
      if (closed || overflowed) return;
      if (queued_bytes + bytes > max_bytes) {
        overflowed = true;
        queue.clear();
        queued_bytes = 0;
        metrics->CountStreamCut("unread_replies");
        CancelWith(context, absl::ResourceExhaustedError(absl::StrCat(
                                "Decode: the client left more than ", max_bytes,
                                " bytes of replies unread "
                                "(--max_outbox_bytes); stream cut off")));
        return;
      }
      queued_bytes += bytes;
      queue.push_back(std::move(response));
    }
    cv.notify_one();
  }

  void PostStatus(uint64_t id, const absl::Status& status,
                  const std::string& grammar_id) {
    v1::DecodeResponse response;
    v1::SequenceStatus* s = response.mutable_status();
    s->set_sequence_id(id);
    s->set_grammar_id(grammar_id);
    if (status.ok()) {
      s->set_state(v1::GRAMMAR_STATE_READY);
    } else {
      s->set_state(v1::GRAMMAR_STATE_FAILED);
      SetError(status, s->mutable_error());
      metrics->CountError(status.code());
    }
    Post(std::move(response));
  }
};

}  // namespace

// The state of one Decode stream. Sequences are touched only by the handler
// thread (and, during a step, by fill workers, one sequence each); the
// outbox is shared with compile threads.
class GrammardService::Stream {
 public:
  using ReaderWriter =
      grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;

  Stream(GrammardService* service, grpc::ServerContext* context,
         ReaderWriter* rw)
      : service_(service),
        context_(context),
        rw_(rw),
        outbox_(std::make_shared<Outbox>(
            context, service->options_.max_outbox_bytes, service->metrics_)) {
    notifier_ = std::thread([this] { Notify(); });
  }

  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(outbox_->mu);
      outbox_->closed = true;
    }
    outbox_->cv.notify_all();
    notifier_.join();
    for (const auto& [id, slot] : sequences_) Release(slot);
    service_->metrics_->active_sequences->Add(
        -static_cast<double>(sequences_.size()));
    service_->metrics_->sequence_memory_bytes->Set(
        static_cast<double>(service_->sequence_memory_.used()));
  }

  grpc::Status Run();

  // Ends the stream at the next opportunity: at once when idle, after the
  // current step otherwise.
  void Drain() {
    absl::MutexLock lock(&step_mu_);
    draining_ = true;
    if (!in_step_) context_->TryCancel();
  }

  // Cuts the stream off if it has had no message since `cutoff`, or has
  // been writing one step's reply since then (a client that stopped
  // reading).
  void CutIfIdleSince(Clock::time_point cutoff) {
    absl::MutexLock lock(&step_mu_);
    if (last_active_ >= cutoff || cut_) return;
    cut_ = true;
    service_->metrics_->CountStreamCut(in_step_ ? "stuck_write" : "idle");
    CancelWith(context_,
               absl::DeadlineExceededError(absl::StrCat(
                   "Decode: stream ",
                   in_step_ ? "blocked writing a step's reply" : "idle",
                   " for ", service_->options_.stream_idle_timeout.count(),
                   " s (--stream_idle_timeout_s)")));
  }

 private:
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
    const v1::SequenceStep* step;
    v1::SequenceResult* result;
  };

  void Open(const v1::OpenSequence& open);
  void Close(const v1::CloseSequence& close);
  // Charges the cache for what the slot's sequence built in its grammar.
  void Release(const Slot& slot);
  void Step(const v1::Step& step, v1::StepResult* result);
  // The step as a whole is refused (no sequence of it advanced).
  void RefuseStep(const absl::Status& status, v1::StepResult* result);
  // Checks a sequence can step (and its step is within the limits); creates
  // its matcher when its grammar is ready.
  absl::Status Ready(uint64_t id, Slot* slot, const v1::SequenceStep& step);
  void RunOne(const Work& work);
  void AdvanceAndFill(const Work& work);
  // Runs fn(i) for i in [0, n) on the fill pool, or on this thread while
  // another stream's step has the pool.
  void ForEach(size_t n, const std::function<void(size_t)>& fn) {
    if (n > 1 && service_->fill_mu_.TryLock()) {
      service_->fill_pool_.ParallelFor(static_cast<int64_t>(n), [&](int64_t i) {
        fn(static_cast<size_t>(i));
      });
      service_->fill_mu_.Unlock();
    } else {
      for (size_t i = 0; i < n; ++i) fn(i);
    }
  }

  void PostStatus(uint64_t id, const absl::Status& status) {
    outbox_->PostStatus(id, status, "");
  }
  void Notify();
  bool Write(const v1::DecodeResponse& response) {
    grpc::ByteBuffer bytes;
    bool own_buffer = false;
    if (!grpc::SerializationTraits<v1::DecodeResponse>::Serialize(
             response, &bytes, &own_buffer)
             .ok()) {
      return false;
    }
    absl::MutexLock lock(&write_mu_);
    return rw_->Write(bytes);
  }

  GrammardService* const service_;
  grpc::ServerContext* const context_;
  ReaderWriter* const rw_;
  std::unordered_map<uint64_t, Slot> sequences_;
  // Step scratch, kept for its capacity.
  uint64_t step_serial_ = 0;
  std::vector<Work> work_;
  std::vector<Slot*> added_;
  // Each request and its response live here until the next request is
  // read: a step's messages (tens of KB in hundreds of pieces) cost no
  // allocation while they fit the first block (left uninitialized: a
  // stream that never steps never touches it).
  static constexpr size_t kArenaBlockBytes = size_t{256} << 10;
  static google::protobuf::ArenaOptions ArenaOptionsFor(char* block) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block;
    options.initial_block_size = kArenaBlockBytes;
    options.start_block_size = kArenaBlockBytes;
    options.max_block_size = 4 * kArenaBlockBytes;
    return options;
  }
  const std::unique_ptr<char[]> arena_block_{new char[kArenaBlockBytes]};
  google::protobuf::Arena arena_{ArenaOptionsFor(arena_block_.get())};
  StepRowEncoder row_encoder_{service_->options_.row_cache_bytes};

  absl::Mutex write_mu_;  // one Write at a time
  absl::Mutex step_mu_;
  bool in_step_ ABSL_GUARDED_BY(step_mu_) = false;
  bool draining_ ABSL_GUARDED_BY(step_mu_) = false;
  bool cut_ ABSL_GUARDED_BY(step_mu_) = false;
  // The last message read, or the start of the step being written.
  Clock::time_point last_active_ ABSL_GUARDED_BY(step_mu_) = Clock::now();

  const std::shared_ptr<Outbox> outbox_;
  std::thread notifier_;
};

grpc::Status GrammardService::Stream::Run() {
  while (true) {
    arena_.Reset();
    grpc::ByteBuffer bytes;
    if (!rw_->Read(&bytes)) break;
    const size_t length = bytes.Length();
    auto& request =
        *google::protobuf::Arena::CreateMessage<v1::DecodeRequest>(&arena_);
    if (!grpc::SerializationTraits<v1::DecodeRequest>::Deserialize(&bytes,
                                                                   &request)
             .ok()) {
      return service_->Fail(absl::InvalidArgumentError(
          absl::StrCat("Decode: a message of ", length,
                       " bytes that is not a DecodeRequest")));
    }
    {
      absl::MutexLock lock(&step_mu_);
      last_active_ = Clock::now();
    }
    switch (request.kind_case()) {
      case v1::DecodeRequest::kOpen:
        Open(request.open());
        break;
      case v1::DecodeRequest::kClose:
        Close(request.close());
        break;
      case v1::DecodeRequest::kStep: {
        {
          absl::MutexLock lock(&step_mu_);
          if (draining_) break;
          in_step_ = true;
        }
        const auto start = Clock::now();
        auto& response =
            *google::protobuf::Arena::CreateMessage<v1::DecodeResponse>(
                &arena_);
        Step(request.step(), response.mutable_step());
        const bool written = Write(response);
        service_->metrics_->steps->Increment();
        service_->metrics_->step_seconds->Observe(
            std::chrono::duration<double>(Clock::now() - start).count());
        absl::MutexLock lock(&step_mu_);
        in_step_ = false;
        last_active_ = Clock::now();
        if (!written) return grpc::Status::CANCELLED;
        break;
      }
      case v1::DecodeRequest::KIND_NOT_SET:
        return service_->Fail(absl::InvalidArgumentError(
            "Decode: a request with none of open, step, close"));
    }
    absl::MutexLock lock(&step_mu_);
    if (draining_) break;
  }
  absl::MutexLock lock(&step_mu_);
  if (draining_) {
    return service_->Fail(
        absl::UnavailableError("Decode: the server is shutting down"));
  }
  return grpc::Status::OK;
}

void GrammardService::Stream::Notify() {
  Outbox& box = *outbox_;
  std::unique_lock<std::mutex> lock(box.mu);
  for (;;) {
    box.cv.wait(lock, [&] { return box.closed || !box.queue.empty(); });
    if (box.queue.empty()) return;  // closed
    v1::DecodeResponse response = std::move(box.queue.front());
    box.queue.pop_front();
    box.queued_bytes -= static_cast<int64_t>(response.ByteSizeLong());
    lock.unlock();
    const bool written = Write(response);
    lock.lock();
    if (!written) return;  // the stream is gone
  }
}

void GrammardService::Stream::Open(const v1::OpenSequence& open) {
  const uint64_t id = open.sequence_id();
  if (sequences_.count(id) != 0) {
    PostStatus(id, absl::AlreadyExistsError(absl::StrCat(
                       "sequence ", id, " is already open on this stream")));
    return;
  }
  if (static_cast<int>(sequences_.size()) >=
      service_->options_.max_sequences_per_stream) {
    PostStatus(id, absl::ResourceExhaustedError(absl::StrCat(
                       "sequence ", id, ": the stream already holds ",
                       sequences_.size(),
                       " open sequences (--max_sequences_per_stream)")));
    return;
  }
  Slot& slot = sequences_[id];
  service_->metrics_->active_sequences->Add(1);
  slot.reasoning.enabled = open.reasoning().enabled();
  slot.reasoning.think_end_token = open.reasoning().think_end_token_id();
  slot.jump_forward = open.jump_forward();
  slot.keeps_previous_row = open.keeps_previous_row();

  auto refuse = [&](const absl::Status& status) {
    slot.failed = status;
    PostStatus(id, status);
  };
  for (const auto& [text, field, max] :
       {std::tuple{&open.tokenizer(), "tokenizer", kMaxNameBytes},
        std::tuple{&open.grammar_id(), "grammar_id", kMaxGrammarIdBytes}}) {
    if (absl::Status s = CheckName(*text, field, max); !s.ok()) {
      return refuse(absl::InvalidArgumentError(
          absl::StrCat("sequence ", id, ": ", s.message())));
    }
  }
  std::shared_ptr<const TokenizerEntry> tokenizer;
  if (!open.tokenizer().empty() ||
      open.grammar_case() == v1::OpenSequence::kConstraint) {
    auto found = service_->tokenizers_->Find(open.tokenizer());
    if (!found.ok()) {
      return refuse(absl::NotFoundError(
          absl::StrCat("sequence ", id, ": ", found.status().message())));
    }
    tokenizer = *std::move(found);
  }
  switch (open.grammar_case()) {
    case v1::OpenSequence::kConstraint: {
      auto submitted = service_->compiles_->Submit(tokenizer, open.constraint(),
                                                   context_->peer());
      if (!submitted.ok()) {
        return refuse(absl::Status(
            submitted.status().code(),
            absl::StrCat("sequence ", id, ": ", submitted.status().message())));
      }
      slot.job = std::move(submitted->job);
      break;
    }
    case v1::OpenSequence::kGrammarId:
      slot.job = service_->compiles_->Find(open.grammar_id());
      if (slot.job == nullptr) {
        return refuse(absl::NotFoundError(absl::StrCat(
            "sequence ", id, ": grammar id ", open.grammar_id(),
            " is unknown here (evicted, or compiled elsewhere); open with the "
            "constraint instead")));
      }
      break;
    case v1::OpenSequence::GRAMMAR_NOT_SET:
      return refuse(absl::InvalidArgumentError(absl::StrCat(
          "sequence ", id, ": neither a constraint nor a grammar id")));
  }
  if (slot.reasoning.enabled && slot.reasoning.think_end_token < 0) {
    return refuse(absl::InvalidArgumentError(absl::StrCat(
        "sequence ", id, ": reasoning without a think-end token")));
  }
  // The listener may outlive this stream and this sequence.
  const std::string grammar_id = slot.job->id();
  const int32_t think_end = slot.reasoning.think_end_token;
  const bool reasoning = slot.reasoning.enabled;
  const std::string fingerprint =
      tokenizer ? tokenizer->vocab->fingerprint() : "";
  std::weak_ptr<char> alive = slot.alive;
  slot.job->OnDone([outbox = outbox_, alive, id, grammar_id, think_end,
                    reasoning, fingerprint](const GrammarEntry& entry) {
    if (alive.expired()) return;
    absl::Status status = entry.status;
    if (status.ok() && !fingerprint.empty() &&
        entry.grammar->vocabulary().fingerprint() != fingerprint) {
      status = absl::InvalidArgumentError(
          "the grammar id was compiled for another tokenizer");
    }
    if (status.ok() && reasoning &&
        think_end >= entry.grammar->vocabulary().size()) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "think-end token ", think_end, " outside the vocabulary"));
    }
    if (!status.ok()) {
      status = absl::Status(
          status.code(), absl::StrCat("sequence ", id, ": ", status.message()));
    }
    outbox->PostStatus(id, status, grammar_id);
  });
}

void GrammardService::Stream::Close(const v1::CloseSequence& close) {
  auto it = sequences_.find(close.sequence_id());
  if (it == sequences_.end()) {
    PostStatus(close.sequence_id(), absl::NotFoundError(absl::StrCat(
                                        "sequence ", close.sequence_id(),
                                        " is not open on this stream")));
    return;
  }
  Release(it->second);
  sequences_.erase(it);
  service_->metrics_->active_sequences->Add(-1);
  service_->metrics_->sequence_memory_bytes->Set(
      static_cast<double>(service_->sequence_memory_.used()));
}

void GrammardService::Stream::Release(const Slot& slot) {
  // Its masks built token tables; a grammar no other request hits again
  // would otherwise hold them uncharged in the cache.
  if (slot.sequence != nullptr) service_->compiles_->Recharge(slot.job->id());
}

absl::Status GrammardService::Stream::Ready(uint64_t id, Slot* slot,
                                            const v1::SequenceStep& step) {
  if (!slot->failed.ok()) return slot->failed;
  const ServiceOptions& o = service_->options_;
  // Sizes first, before anything is allocated from them; a sequence asked
  // for more than the limits allow has failed.
  if (step.draft_tokens_size() > o.max_draft_tokens) {
    slot->failed = absl::ResourceExhaustedError(
        absl::StrCat("sequence ", id, ": ", step.draft_tokens_size(),
                     " draft_tokens in one step; at most ", o.max_draft_tokens,
                     " (--max_draft_tokens)"));
    return slot->failed;
  }
  if (o.max_sequence_tokens > 0 &&
      step.accepted_tokens_size() > o.max_sequence_tokens) {
    slot->failed = absl::ResourceExhaustedError(
        absl::StrCat("sequence ", id, ": ", step.accepted_tokens_size(),
                     " accepted_tokens in one step; a sequence holds at most ",
                     o.max_sequence_tokens, " (--max_sequence_tokens)"));
    return slot->failed;
  }
  if (slot->sequence != nullptr) return absl::OkStatus();
  std::shared_ptr<const GrammarEntry> entry = slot->job->result();
  if (entry == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("sequence ", id,
                     ": its grammar is still compiling; wait for its "
                     "READY status"));
  }
  absl::Status status = entry->status;
  if (status.ok() && slot->reasoning.enabled &&
      slot->reasoning.think_end_token >= entry->grammar->vocabulary().size()) {
    status =
        absl::InvalidArgumentError("think-end token outside the vocabulary");
  }
  if (!status.ok()) {
    slot->failed = absl::FailedPreconditionError(absl::StrCat(
        "sequence ", id, ": its grammar failed: ", status.message()));
    return slot->failed;
  }
  SequenceLimits limits;
  limits.max_tokens = o.max_sequence_tokens;
  limits.memory = &service_->sequence_memory_;
  slot->sequence =
      std::make_unique<Sequence>(id, *entry->grammar, slot->reasoning, limits);
  return absl::OkStatus();
}

void GrammardService::Stream::RefuseStep(const absl::Status& status,
                                         v1::StepResult* result) {
  result->clear_sequences();
  SetError(status, result->mutable_error());
  service_->metrics_->CountError(status.code());
}

void GrammardService::Stream::Step(const v1::Step& step,
                                   v1::StepResult* result) {
  result->set_step_id(step.step_id());
  const ServiceOptions& o = service_->options_;
  if (step.sequences_size() > o.max_sequences_per_stream) {
    return RefuseStep(
        absl::ResourceExhaustedError(absl::StrCat(
            "Decode: step ", step.step_id(), " lists ", step.sequences_size(),
            " sequences; a stream holds at most ", o.max_sequences_per_stream,
            " (--max_sequences_per_stream)")),
        result);
  }
  int64_t rows = 0;
  for (const v1::SequenceStep& s : step.sequences()) {
    rows += 1 + std::min(s.draft_tokens_size(), o.max_draft_tokens);
  }
  if (rows > o.max_step_rows) {
    return RefuseStep(absl::ResourceExhaustedError(absl::StrCat(
                          "Decode: step ", step.step_id(), " asks for ", rows,
                          " mask rows; a step has at most ", o.max_step_rows,
                          " (--max_step_rows)")),
                      result);
  }
  std::vector<Work>& work = work_;
  work.clear();
  ++step_serial_;
  for (const v1::SequenceStep& s : step.sequences()) {
    v1::SequenceResult* r = result->add_sequences();
    r->set_sequence_id(s.sequence_id());
    absl::Status status;
    auto it = sequences_.find(s.sequence_id());
    if (it == sequences_.end()) {
      status = absl::NotFoundError(absl::StrCat("sequence ", s.sequence_id(),
                                                " is not open on this stream"));
    } else if (it->second.stepped_in == step_serial_) {
      status = absl::InvalidArgumentError(
          absl::StrCat("sequence ", s.sequence_id(), " appears twice in step ",
                       step.step_id()));
    } else {
      it->second.stepped_in = step_serial_;
      status = Ready(s.sequence_id(), &it->second, s);
    }
    if (!status.ok()) {
      SetError(status, r->mutable_error());
      service_->metrics_->CountError(status.code());
      continue;
    }
    work.push_back(Work{&it->second, &s, r});
  }
  ForEach(work.size(), [&](size_t i) { RunOne(work[i]); });
  // Rows in wire order; a keyed first row is filled only if the encoder
  // cannot settle it by its key.
  std::vector<Slot*>& added = added_;
  added.clear();
  for (const Work& w : work) {
    if (w.result->rows_size() == 0) continue;  // failed
    const int32_t vocab_size = w.slot->sequence->vocab_size();
    const size_t words = static_cast<size_t>(vocab_size + 31) / 32;
    for (int i = 0; i < w.result->rows_size(); ++i) {
      row_encoder_.Add(
          w.slot->rows.data() + static_cast<size_t>(i) * words, vocab_size,
          i == 0 ? RowKey{w.slot->key, &w.slot->sequence->key_owner()}
                 : RowKey{},
          i == 0 ? &w.slot->first_row : nullptr,
          i == 0 && w.slot->keeps_previous_row, w.result->mutable_rows(i));
      added.push_back(w.slot);
    }
  }
  const std::vector<size_t>& to_fill = row_encoder_.Settle();
  ForEach(to_fill.size(), [&](size_t i) {
    Slot& slot = *added[to_fill[i]];
    const auto start = Clock::now();
    slot.sequence->FillRows({}, slot.rows.data());
    slot.fill_time += Clock::now() - start;
  });
  row_encoder_.Finish([this](size_t n, const std::function<void(size_t)>& fn) {
    ForEach(n, fn);
  });
  service_->metrics_->sequence_memory_bytes->Set(
      static_cast<double>(service_->sequence_memory_.used()));
  // Scratch of a step with many drafts goes back; the next one with as
  // many allocates it again.
  constexpr size_t kKeptScratchRows = 16;
  for (const Work& w : work) {
    if (w.slot->sequence == nullptr) continue;
    const size_t words = static_cast<size_t>(w.slot->sequence->mask_words());
    if (w.slot->rows.capacity() > kKeptScratchRows * words) {
      std::vector<uint32_t>().swap(w.slot->rows);
    }
  }
  const size_t reply_bytes = result->ByteSizeLong();
  if (static_cast<int64_t>(reply_bytes) > o.max_message_bytes) {
    // Dense rows of a large vocabulary, many of them. The sequences did
    // advance: they fail, and say so.
    const absl::Status lost = absl::ResourceExhaustedError(absl::StrCat(
        "Decode: step ", step.step_id(), "'s reply would take ", reply_bytes,
        " bytes, over the message limit of ", o.max_message_bytes,
        " (--max_message_bytes); its sequences advanced and lost their rows: "
        "close them, and step fewer sequences at once"));
    for (const Work& w : work) w.slot->failed = lost;
    return RefuseStep(lost, result);
  }
  for (const Work& w : work) {
    if (w.result->has_error()) {  // failed in RunOne: no rows
      service_->metrics_->CountError(
          static_cast<absl::StatusCode>(w.result->error().code()));
      continue;
    }
    service_->metrics_->mask_fill_seconds->Observe(
        std::chrono::duration<double>(w.slot->fill_time).count());
    for (const v1::MaskRow& row : w.result->rows()) {
      service_->metrics_->CountMaskRow(proto::EncodingOf(row),
                                       row.ByteSizeLong());
    }
  }
}

void GrammardService::Stream::RunOne(const Work& work) {
  // On a fill thread: an allocation that fails (the sizes were checked
  // first, so the machine is out of memory) fails this sequence only.
  try {
    AdvanceAndFill(work);
  } catch (const std::bad_alloc&) {
    const absl::Status lost = absl::ResourceExhaustedError(
        absl::StrCat("sequence ", work.step->sequence_id(),
                     ": out of memory in this step; close it"));
    work.slot->failed = lost;
    work.slot->sequence.reset();
    work.result->clear_rows();
    SetError(lost, work.result->mutable_error());
  }
}

void GrammardService::Stream::AdvanceAndFill(const Work& work) {
  const auto start = Clock::now();
  Slot& slot = *work.slot;
  Sequence& seq = *slot.sequence;
  const v1::SequenceStep& step = *work.step;
  v1::SequenceResult* result = work.result;
  absl::Status advanced = seq.Advance(
      step.rollback(),
      absl::MakeConstSpan(step.accepted_tokens().data(),
                          static_cast<size_t>(step.accepted_tokens_size())));
  if (!advanced.ok()) {
    slot.failed =
        absl::Status(advanced.code() == absl::StatusCode::kResourceExhausted
                         ? advanced.code()
                         : absl::StatusCode::kFailedPrecondition,
                     absl::StrCat(advanced.message(),
                                  "; the sequence has failed, close it"));
    // Its matcher goes at once: a sequence over a memory limit must not
    // keep holding it until its client closes it.
    slot.sequence.reset();
    SetError(advanced, result->mutable_error());
    return;
  }
  const int32_t words = seq.mask_words();
  const size_t num_rows = 1 + static_cast<size_t>(step.draft_tokens_size());
  slot.rows.resize(num_rows * static_cast<size_t>(words));
  // Without drafts a key may spare the fill (see Step).
  if (num_rows > 1 || !seq.NextRowKey(&slot.key)) {
    slot.key.clear();
    seq.FillRows(
        absl::MakeConstSpan(step.draft_tokens().data(),
                            static_cast<size_t>(step.draft_tokens_size())),
        slot.rows.data());
  }
  slot.fill_time = Clock::now() - start;
  for (size_t i = 0; i < num_rows; ++i) {
    result->add_rows();  // encoded by row_encoder_ once the step is filled
  }
  result->set_terminated(seq.IsTerminated());
  result->set_can_terminate(seq.CanTerminate());
  if (slot.jump_forward) {
    grammar::ForcedContinuation forced = seq.JumpForward();
    result->set_jump_forward_bytes(std::move(forced.bytes));
    for (int32_t id : forced.token_ids) result->add_jump_forward_tokens(id);
  }
}

GrammardService::GrammardService(const ServiceOptions& options,
                                 TokenizerRegistry* tokenizers,
                                 CompilePool* compiles, ServiceMetrics* metrics)
    : options_(options),
      tokenizers_(tokenizers),
      compiles_(compiles),
      metrics_(metrics),
      sequence_memory_(options.max_sequence_memory_bytes),
      fill_pool_(std::max(1, options.fill_threads)) {
  // Decode reads and writes raw bytes (see the header); its generated,
  // typed handler is never called.
  const int decode = v1::DecodeRequest::descriptor()
                         ->file()
                         ->FindServiceByName("Grammard")
                         ->FindMethodByName("Decode")
                         ->index();
  MarkMethodStreamed(
      decode,
      new grpc::internal::BidiStreamingHandler<
          GrammardService, grpc::ByteBuffer, grpc::ByteBuffer>(
          [](GrammardService* service, grpc::ServerContext* context,
             grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>*
                 stream) { return service->DecodeBytes(context, stream); },
          this));
  if (options_.stream_idle_timeout.count() > 0) {
    reaper_ = std::thread([this] { Reap(); });
  }
}

GrammardService::~GrammardService() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (reaper_.joinable()) reaper_.join();
}

void GrammardService::Reap() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(
        absl::Condition(
            +[](bool* stopping) { return *stopping; }, &stopping_),
        absl::Seconds(1));
    const auto cutoff = Clock::now() - options_.stream_idle_timeout;
    for (Stream* stream : streams_) stream->CutIfIdleSince(cutoff);
  }
}

absl::Status GrammardService::Authorize(
    const grpc::ServerContext& context) const {
  if (options_.auth == nullptr) return absl::OkStatus();
  return options_.auth->Check(context.client_metadata());
}

grpc::Status GrammardService::Fail(const absl::Status& status) {
  metrics_->CountError(status.code());
  return ToGrpc(status);
}

grpc::Status GrammardService::Guarded(
    const char* rpc, const std::function<grpc::Status()>& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(absl::ResourceExhaustedError(
        absl::StrCat(rpc, ": the daemon ran out of memory for this call")));
  } catch (const std::exception& e) {
    return Fail(absl::InternalError(absl::StrCat(rpc, ": ", e.what())));
  }
}

void GrammardService::BeginShutdown() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  for (Stream* stream : streams_) stream->Drain();
}

grpc::Status GrammardService::RegisterTokenizer(
    grpc::ServerContext* context, const v1::RegisterTokenizerRequest* request,
    v1::Tokenizer* response) {
  return Guarded("RegisterTokenizer", [&] {
    if (absl::Status s = Authorize(*context); !s.ok()) return Fail(s);
    if (absl::Status s = CheckName(request->name(), "name", kMaxNameBytes);
        !s.ok()) {
      return Fail(s);
    }
    grammar::VocabularyOptions options;
    options.name = request->name();
    options.eos_ids.assign(request->eos_token_ids().begin(),
                           request->eos_token_ids().end());
    options.model_vocab_size = request->model_vocab_size();
    auto entry = tokenizers_->Register(
        request->tokenizer_json(), request->tokenizer_config_json(), options);
    if (!entry.ok()) return Fail(entry.status());
    DescribeTokenizer(request->name(), **entry, response);
    return grpc::Status::OK;
  });
}

grpc::Status GrammardService::ListTokenizers(
    grpc::ServerContext* context, const v1::ListTokenizersRequest*,
    v1::ListTokenizersResponse* response) {
  return Guarded("ListTokenizers", [&] {
    if (absl::Status s = Authorize(*context); !s.ok()) return Fail(s);
    for (const auto& [name, entry] : tokenizers_->List()) {
      DescribeTokenizer(name, *entry, response->add_tokenizers());
    }
    return grpc::Status::OK;
  });
}

grpc::Status GrammardService::UnregisterTokenizer(
    grpc::ServerContext* context, const v1::UnregisterTokenizerRequest* request,
    v1::UnregisterTokenizerResponse*) {
  return Guarded("UnregisterTokenizer", [&] {
    if (absl::Status s = Authorize(*context); !s.ok()) return Fail(s);
    if (absl::Status s = CheckName(request->name(), "name", kMaxNameBytes);
        !s.ok()) {
      return Fail(s);
    }
    if (absl::Status s = tokenizers_->Unregister(request->name()); !s.ok()) {
      return Fail(s);
    }
    return grpc::Status::OK;
  });
}

grpc::Status GrammardService::Compile(grpc::ServerContext* context,
                                      const v1::CompileRequest* request,
                                      v1::CompileResponse* response) {
  return Guarded("Compile", [&] {
    if (absl::Status s = Authorize(*context); !s.ok()) return Fail(s);
    if (absl::Status s =
            CheckName(request->tokenizer(), "tokenizer", kMaxNameBytes);
        !s.ok()) {
      return Fail(s);
    }
    auto tokenizer = tokenizers_->Find(request->tokenizer());
    if (!tokenizer.ok()) return Fail(tokenizer.status());
    auto submitted =
        compiles_->Submit(*tokenizer, request->constraint(), context->peer());
    if (!submitted.ok()) return Fail(submitted.status());
    response->set_grammar_id(submitted->job->id());
    response->set_cache_hit(submitted->cache_hit);
    std::shared_ptr<const GrammarEntry> entry = submitted->job->result();
    if (entry == nullptr && request->wait()) {
      // However long the client would wait: a compile queued behind others
      // answers COMPILING after twice the compile deadline, and the client
      // asks again. The second beyond it is for a compile that notices its
      // deadline only at its next check: with a deadline of milliseconds,
      // waiting for exactly twice that answered COMPILING instead of its
      // DEADLINE_EXCEEDED.
      const auto longest =
          Clock::now() + 2 * compiles_->timeout() + std::chrono::seconds(1);
      entry = submitted->job->WaitUntil(
          std::min(longest, SteadyDeadline(*context)),
          [context] { return context->IsCancelled(); });
    }
    if (entry == nullptr) {
      response->set_state(v1::GRAMMAR_STATE_COMPILING);
      return grpc::Status::OK;
    }
    DescribeEntry(*entry, response);
    if (!entry->status.ok()) metrics_->CountError(entry->status.code());
    return grpc::Status::OK;
  });
}

absl::Status GrammardService::Admit(const std::string& connection) {
  absl::MutexLock lock(&mu_);
  if (draining_) {
    return absl::UnavailableError("Decode: the server is shutting down");
  }
  if (options_.max_streams > 0 && admitted_ >= options_.max_streams) {
    return absl::ResourceExhaustedError(
        absl::StrCat("Decode: the daemon already holds ", admitted_,
                     " streams (--max_streams)"));
  }
  int& held = streams_per_client_[connection];
  if (options_.max_streams_per_client > 0 &&
      held >= options_.max_streams_per_client) {
    return absl::ResourceExhaustedError(
        absl::StrCat("Decode: connection ", connection, " already holds ", held,
                     " streams (--max_streams_per_client)"));
  }
  ++held;
  ++admitted_;
  return absl::OkStatus();
}

void GrammardService::Dismiss(const std::string& connection) {
  absl::MutexLock lock(&mu_);
  --admitted_;
  if (--streams_per_client_[connection] == 0) {
    streams_per_client_.erase(connection);
  }
}

grpc::Status GrammardService::DecodeBytes(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* rw) {
  return Guarded("Decode", [&] {
    if (absl::Status s = Authorize(*context); !s.ok()) return Fail(s);
    // A reset stream's call may arrive already cancelled: nothing is built
    // for it.
    if (context->IsCancelled()) return grpc::Status::CANCELLED;
    // A connection is one client: a sidecar's clients all share 127.0.0.1,
    // and one that misbehaves must not lock the others out.
    const std::string connection = context->peer();
    // Limits before the stream's state (a thread, an arena) is built.
    if (absl::Status s = Admit(connection); !s.ok()) return Fail(s);
    absl::Cleanup dismiss = [&] { Dismiss(connection); };
    Stream stream(this, context, rw);
    {
      absl::MutexLock lock(&mu_);
      streams_.insert(&stream);
    }
    // Out before the stream goes, whatever ends it.
    absl::Cleanup unlist = [&] {
      absl::MutexLock lock(&mu_);
      streams_.erase(&stream);
    };
    metrics_->active_streams->Add(1);
    absl::Cleanup uncount = [&] { metrics_->active_streams->Add(-1); };
    return stream.Run();
  });
}

}  // namespace grammard::service

namespace grammard::service {

grpc::Status GrammardService::SyncGroup(grpc::ServerContext* context,
                                        const v1::SyncGroupRequest* request,
                                        v1::SyncGroupResponse* response) {
  return Guarded("SyncGroup", [&] {
    if (absl::Status s = Authorize(*context); !s.ok()) return Fail(s);
    if (absl::Status s =
            CheckName(request->group_id(), "group_id", kMaxGroupIdBytes);
        !s.ok()) {
      return Fail(s);
    }
    if (request->world_size() > options_.max_sync_world_size) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "SyncGroup: world_size ", request->world_size(), "; at most ",
          options_.max_sync_world_size, " (--max_sync_world_size)")));
    }
    for (const auto& [ids, field] : {std::pair{&request->ready(), "ready"},
                                     std::pair{&request->failed(), "failed"}}) {
      if (ids->size() > options_.max_sync_ids) {
        return Fail(absl::InvalidArgumentError(absl::StrCat(
            "SyncGroup: ", ids->size(), " ids in ", field, "; at most ",
            options_.max_sync_ids, " (--max_sync_ids)")));
      }
    }
    RankSync::Report report;
    report.group = request->group_id();
    report.round = request->round();
    report.rank = request->rank();
    report.world_size = request->world_size();
    report.ready.assign(request->ready().begin(), request->ready().end());
    report.failed.assign(request->failed().begin(), request->failed().end());
    const auto asked = std::chrono::milliseconds(
        request->timeout_ms() == 0 ? 10000 : request->timeout_ms());
    const auto wait =
        std::min<std::chrono::milliseconds>(asked, options_.max_sync_wait);
    auto agreed = rank_sync_.Join(
        report, std::min(Clock::now() + wait, SteadyDeadline(*context)),
        [context] { return context->IsCancelled(); });
    if (!agreed.ok()) return Fail(agreed.status());
    for (uint64_t id : agreed->ready) response->add_ready(id);
    for (uint64_t id : agreed->failed) response->add_failed(id);
    return grpc::Status::OK;
  });
}

}  // namespace grammard::service
