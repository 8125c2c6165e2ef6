#include "service/grammard_service.h"

#include <grpc/grpc.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <new>
#include <thread>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/arena.h"
#include "grpcpp/support/method_handler.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "service/wire_text.h"

namespace grammard::service {
namespace {

namespace v1 = grammard::v1;
using Clock = std::chrono::steady_clock;

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
                      CutMessage(status.message()));
}

// Ends a call with `status` even while a Write of it is blocked (its client
// does not read): gRPC sends the status ahead of any queued data, which
// ServerContext::TryCancel (always CANCELLED) would not say.
void CancelWith(grpc::ServerContext* context, const absl::Status& status) {
  const std::string message = CutMessage(status.message());
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

}  // namespace

// A Decode call: reads its messages and hands them to its session; the
// service drains it on shutdown and cuts it off when idle or stuck.
class GrammardService::Stream {
 public:
  using ReaderWriter =
      grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;

  Stream(GrammardService* service, grpc::ServerContext* context,
         ReaderWriter* rw, const std::string& connection)
      : service_(service),
        context_(context),
        rw_(rw),
        writer_(context, rw),
        session_(service->options_,
                 DecodeResources{service->tokenizers_, service->compiles_,
                                 service->metrics_, &service->sequence_memory_,
                                 &service->fill_pool_},
                 connection, &writer_) {}

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
  // The session's replies, serialized onto the call.
  class CallWriter final : public ReplyWriter {
   public:
    CallWriter(grpc::ServerContext* context, ReaderWriter* rw)
        : context_(context), rw_(rw) {}

    bool Write(const v1::DecodeResponse& response) override {
      grpc::ByteBuffer bytes;
      bool own_buffer = false;
      if (!grpc::SerializationTraits<v1::DecodeResponse>::Serialize(
               response, &bytes, &own_buffer)
               .ok()) {
        return false;
      }
      absl::MutexLock lock(&mu_);
      return rw_->Write(bytes);
    }
    void Abort(const absl::Status& status) override {
      CancelWith(context_, status);
    }

   private:
    grpc::ServerContext* const context_;
    ReaderWriter* const rw_;
    absl::Mutex mu_;  // one Write at a time
  };

  GrammardService* const service_;
  grpc::ServerContext* const context_;
  ReaderWriter* const rw_;
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

  absl::Mutex step_mu_;
  bool in_step_ ABSL_GUARDED_BY(step_mu_) = false;
  bool draining_ ABSL_GUARDED_BY(step_mu_) = false;
  bool cut_ ABSL_GUARDED_BY(step_mu_) = false;
  // The last message read, or the start of the step being written.
  Clock::time_point last_active_ ABSL_GUARDED_BY(step_mu_) = Clock::now();

  CallWriter writer_;
  // Last: it stops writing (its notifier) before the writer goes.
  DecodeSession session_;
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
        session_.Open(request.open());
        break;
      case v1::DecodeRequest::kClose:
        session_.Close(request.close());
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
        const bool written = session_.Step(request.step(), &response);
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
  {
    absl::MutexLock lock(&mu_);
    ++calls_running_;
  }
  absl::Cleanup done = [&] {
    absl::MutexLock lock(&mu_);
    --calls_running_;
  };
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

bool GrammardService::AwaitNoCalls(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](int* running) { return *running == 0; }, &calls_running_),
      timeout);
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
    Stream stream(this, context, rw, connection);
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
