#include "client/client.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "proto/mask_rows.h"

namespace grammard::client {
namespace {

namespace v1 = grammard::v1;
using Clock = Client::Clock;

absl::Time ToAbslTime(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max()) return absl::InfiniteFuture();
  return absl::Now() + absl::FromChrono(deadline - Clock::now());
}

std::chrono::system_clock::time_point ToSystem(Clock::time_point deadline) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             deadline - Clock::now());
}

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

absl::Status FromWire(const v1::Error& error) {
  return absl::Status(static_cast<absl::StatusCode>(error.code()),
                      error.message());
}

absl::Status FromGrpc(const grpc::Status& status, const std::string& context) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(context, ": ", status.error_message()));
}

absl::Status CheckOptions(const ClientOptions& o) {
  if (o.target.empty()) {
    return absl::InvalidArgumentError("ClientOptions.target is empty");
  }
  if (o.tokenizer.empty()) {
    return absl::InvalidArgumentError("ClientOptions.tokenizer is empty");
  }
  for (const auto& [name, value] :
       {std::pair<const char*, std::chrono::milliseconds>{"connect_timeout",
                                                          o.connect_timeout},
        {"step_timeout", o.step_timeout},
        {"outage_timeout", o.outage_timeout},
        {"backoff_initial", o.backoff_initial},
        {"backoff_max", o.backoff_max}}) {
    if (value.count() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("ClientOptions.", name, " must be positive"));
    }
  }
  return absl::OkStatus();
}

// The contents of an option's file; InvalidArgument naming it if it cannot
// be read or is empty.
absl::StatusOr<std::string> ReadOptionFile(const char* option,
                                           const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read ClientOptions.", option, " ", path, " (or it is empty)"));
  }
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(
    const ClientOptions& o) {
  if (!o.tls) {
    if (!o.tls_ca_file.empty() || !o.tls_cert_file.empty() ||
        !o.tls_key_file.empty() || !o.auth_token_file.empty()) {
      return absl::InvalidArgumentError(
          "TLS files or an auth token without ClientOptions.tls (gRPC sends "
          "no credentials in plaintext)");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "ClientOptions.tls_cert_file and tls_key_file go together");
  }
  grpc::SslCredentialsOptions ssl;
  for (const auto& [option, path, field] :
       {std::tuple<const char*, const std::string&, std::string*>{
            "tls_ca_file", o.tls_ca_file, &ssl.pem_root_certs},
        {"tls_cert_file", o.tls_cert_file, &ssl.pem_cert_chain},
        {"tls_key_file", o.tls_key_file, &ssl.pem_private_key}}) {
    if (path.empty()) continue;
    auto text = ReadOptionFile(option, path);
    if (!text.ok()) return text.status();
    *field = *std::move(text);
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::SslCredentials(ssl);
  if (o.auth_token_file.empty()) return credentials;
  auto token = ReadOptionFile("auth_token_file", o.auth_token_file);
  if (!token.ok()) return token.status();
  // "authorization: Bearer <token>" on every call of the channel, the rank
  // exchange's included.
  return grpc::CompositeChannelCredentials(
      credentials, grpc::AccessTokenCredentials(
                       std::string(absl::StripAsciiWhitespace(*token))));
}

}  // namespace

// One Decode stream and the thread reading it. Responses go to the client
// tagged with the stream's epoch, so a stale stream's cannot be mistaken for
// the current one's.
class Client::Link {
 public:
  Link(Client* client, v1::Grammard::Stub* stub, uint64_t epoch)
      : client_(client), epoch_(epoch) {
    rw_ = stub->Decode(&context_);
    reader_ = std::thread([this] { Read(); });
  }

  // gRPC allows one writer beside the reader; the client's call_mu_ makes
  // it one.
  bool Write(const v1::DecodeRequest& request) { return rw_->Write(request); }

  // Cancels the call (the server then forgets its sequences), joins the
  // reader and returns the call's final status.
  grpc::Status Stop() {
    context_.TryCancel();
    reader_.join();
    return rw_->Finish();
  }

 private:
  void Read() {
    v1::DecodeResponse response;
    while (rw_->Read(&response)) client_->OnResponse(epoch_, &response);
    client_->OnEnd(epoch_);
  }

  Client* const client_;
  const uint64_t epoch_;
  grpc::ClientContext context_;
  std::unique_ptr<
      grpc::ClientReaderWriter<v1::DecodeRequest, v1::DecodeResponse>>
      rw_;
  std::thread reader_;
};

Client::Client(const ClientOptions& options,
               std::shared_ptr<grpc::Channel> channel)
    : options_(options),
      channel_(std::move(channel)),
      stub_(v1::Grammard::NewStub(channel_)) {}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(
    const ClientOptions& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  auto credentials = Credentials(options);
  if (!credentials.ok()) return credentials.status();
  grpc::ChannelArguments args;
  // A step's reply for a large batch exceeds gRPC's 4 MB default.
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  // A connection of its own: ranks of one process do not share a socket.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // gRPC's own reconnection backoff (1 s to 120 s by default) would keep a
  // restarted daemon waiting; follow ours.
  const int initial = static_cast<int>(options.backoff_initial.count());
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, initial);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, initial);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(options.backoff_max.count()));
  std::unique_ptr<Client> client(new Client(
      options, grpc::CreateCustomChannel(options.target, *credentials, args)));

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       options.connect_timeout);
  context.set_wait_for_ready(true);
  v1::ListTokenizersResponse tokenizers;
  const grpc::Status listed = client->stub_->ListTokenizers(
      &context, v1::ListTokenizersRequest(), &tokenizers);
  if (listed.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::UnavailableError(
        absl::StrCat("grammard at ", options.target, " did not answer within ",
                     options.connect_timeout.count(), " ms"));
  }
  if (!listed.ok()) {
    return FromGrpc(listed, absl::StrCat("ListTokenizers at ", options.target));
  }
  std::vector<std::string> names;
  for (const v1::Tokenizer& t : tokenizers.tokenizers()) {
    if (t.name() == options.tokenizer || t.fingerprint() == options.tokenizer) {
      client->vocab_size_ = t.vocab_size();
      client->fingerprint_ = t.fingerprint();
      client->eos_token_ids_.assign(t.eos_token_ids().begin(),
                                    t.eos_token_ids().end());
    }
    names.push_back(t.name());
  }
  if (client->fingerprint_.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "grammard at ", options.target, " serves no tokenizer \"",
        options.tokenizer, "\" (it serves: ", absl::StrJoin(names, ", "), ")"));
  }
  absl::MutexLock call(&client->call_mu_);
  client->StartLink();
  return client;
}

Client::~Client() {
  absl::MutexLock call(&call_mu_);
  StopLink();
}

void Client::StartLink() {
  uint64_t epoch;
  {
    absl::MutexLock lock(&mu_);
    epoch = ++epoch_;
    broken_ = false;
    broken_why_.clear();
  }
  link_ = std::make_unique<Link>(this, stub_.get(), epoch);
}

std::string Client::StopLink() {
  if (link_ == nullptr) return "";
  const grpc::Status status = link_->Stop();
  link_.reset();
  return status.error_message();
}

absl::Status Client::Broken() {
  std::string why;
  {
    absl::MutexLock lock(&mu_);
    why = broken_ ? broken_why_
                  : "grammard did not answer in time after reconnecting";
  }
  // The stream's own final status says what went wrong underneath.
  const std::string detail = StopLink();
  return absl::UnavailableError(
      detail.empty() ? why : absl::StrCat(why, ": ", detail));
}

void Client::Send(const v1::DecodeRequest& request) {
  {
    absl::MutexLock lock(&mu_);
    if (broken_) return;  // resumed, and re-sent, by the next blocking call
  }
  if (link_->Write(request)) return;
  absl::MutexLock lock(&mu_);
  if (!broken_) {
    broken_ = true;
    broken_why_ = "a write to the Decode stream failed";
  }
}

void Client::OnResponse(uint64_t epoch, v1::DecodeResponse* response) {
  absl::MutexLock lock(&mu_);
  if (epoch != epoch_) return;
  if (response->has_status()) {
    const v1::SequenceStatus& status = response->status();
    auto it = sequences_.find(status.sequence_id());
    // Statuses of closed sequences (and NOT_FOUND for closing one the
    // server never saw) concern nobody.
    if (it == sequences_.end()) return;
    Sequence& s = it->second;
    s.status_epoch = epoch;
    if (s.state.state == GrammarState::kFailed) return;
    if (status.state() == v1::GRAMMAR_STATE_READY) {
      s.state = {GrammarState::kReady, absl::OkStatus()};
    } else if (status.state() == v1::GRAMMAR_STATE_FAILED) {
      s.state = {GrammarState::kFailed, FromWire(status.error())};
    }
  } else if (response->has_step() &&
             response->step().step_id() == awaited_step_ && !reply_) {
    reply_ = std::move(*response->mutable_step());
    reply_at_ = Clock::now();
  }
}

void Client::OnEnd(uint64_t epoch) {
  absl::MutexLock lock(&mu_);
  if (epoch != epoch_ || broken_) return;
  broken_ = true;
  broken_why_ = "the Decode stream ended";
}

bool Client::AwaitUntil(const std::function<bool()>& done,
                        Clock::time_point deadline) {
  const auto wake = [&] { return broken_ || done(); };
  mu_.AwaitWithDeadline(absl::Condition(&wake), ToAbslTime(deadline));
  return done();
}

absl::Status Client::Open(uint64_t sequence_id,
                          const v1::Constraint& constraint,
                          const SequenceOptions& options) {
  if (options.reasoning && options.think_end_token < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sequence ", sequence_id, ": reasoning without a think-end token"));
  }
  v1::DecodeRequest request;
  v1::OpenSequence* open = request.mutable_open();
  open->set_sequence_id(sequence_id);
  open->set_tokenizer(fingerprint_);
  *open->mutable_constraint() = constraint;
  open->mutable_reasoning()->set_enabled(options.reasoning);
  open->mutable_reasoning()->set_think_end_token_id(options.think_end_token);
  open->set_jump_forward(options.jump_forward);
  absl::MutexLock call(&call_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (sequences_.count(sequence_id) != 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("sequence ", sequence_id, " is already open"));
    }
    sequences_[sequence_id].open = *open;
  }
  Send(request);
  return absl::OkStatus();
}

absl::Status Client::Close(uint64_t sequence_id) {
  absl::MutexLock call(&call_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (sequences_.erase(sequence_id) == 0) {
      return absl::NotFoundError(
          absl::StrCat("sequence ", sequence_id, " is not open"));
    }
  }
  v1::DecodeRequest request;
  request.mutable_close()->set_sequence_id(sequence_id);
  Send(request);
  return absl::OkStatus();
}

absl::StatusOr<CompileOutcome> Client::Compile(
    const v1::Constraint& constraint, bool wait,
    std::chrono::milliseconds timeout) const {
  if (timeout.count() <= 0) timeout = options_.step_timeout;
  v1::CompileRequest request;
  request.set_tokenizer(fingerprint_);
  *request.mutable_constraint() = constraint;
  request.set_wait(wait);
  v1::CompileResponse response;
  if (absl::Status s = CallRidingOutages("Compile", timeout,
                                         [&](grpc::ClientContext* context) {
                                           return stub_->Compile(
                                               context, request, &response);
                                         });
      !s.ok()) {
    return s;
  }
  CompileOutcome out;
  out.grammar_id = response.grammar_id();
  switch (response.state()) {
    case v1::GRAMMAR_STATE_READY:
      out.state = GrammarState::kReady;
      break;
    case v1::GRAMMAR_STATE_FAILED:
      out.state = GrammarState::kFailed;
      out.error = FromWire(response.error());
      break;
    default:
      out.state = GrammarState::kCompiling;
      break;
  }
  return out;
}

absl::StatusOr<std::vector<TokenizerInfo>> Client::ListTokenizers(
    std::chrono::milliseconds timeout) const {
  if (timeout.count() <= 0) timeout = options_.step_timeout;
  v1::ListTokenizersResponse response;
  if (absl::Status s = CallRidingOutages(
          "ListTokenizers", timeout,
          [&](grpc::ClientContext* context) {
            return stub_->ListTokenizers(context, v1::ListTokenizersRequest(),
                                         &response);
          });
      !s.ok()) {
    return s;
  }
  std::vector<TokenizerInfo> out;
  for (const v1::Tokenizer& t : response.tokenizers()) {
    out.push_back({t.name(),
                   t.fingerprint(),
                   t.vocab_size(),
                   {t.eos_token_ids().begin(), t.eos_token_ids().end()}});
  }
  return out;
}

absl::StatusOr<SequenceState> Client::State(uint64_t sequence_id) const {
  absl::MutexLock lock(&mu_);
  auto it = sequences_.find(sequence_id);
  if (it == sequences_.end()) {
    return absl::NotFoundError(
        absl::StrCat("sequence ", sequence_id, " is not open"));
  }
  return it->second.state;
}

Readiness Client::GetReadiness(absl::Span<const uint64_t> ids) const {
  Readiness out;
  absl::MutexLock lock(&mu_);
  for (uint64_t id : ids) {
    auto it = sequences_.find(id);
    if (it == sequences_.end()) continue;
    if (it->second.state.state == GrammarState::kReady) out.ready.push_back(id);
    if (it->second.state.state == GrammarState::kFailed) {
      out.failed.push_back(id);
    }
  }
  return out;
}

absl::Status Client::WaitReady(absl::Span<const uint64_t> ids,
                               std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) timeout = options_.step_timeout;
  absl::MutexLock call(&call_mu_);
  auto deadline = Clock::now() + timeout;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      std::vector<uint64_t> compiling;
      const auto settled = [&] {
        compiling.clear();
        for (uint64_t id : ids) {
          auto it = sequences_.find(id);
          if (it != sequences_.end() &&
              it->second.state.state == GrammarState::kCompiling) {
            compiling.push_back(id);
          }
        }
        return compiling.empty();
      };
      for (uint64_t id : ids) {
        if (sequences_.count(id) == 0) {
          return absl::NotFoundError(
              absl::StrCat("sequence ", id, " is not open"));
        }
      }
      if (AwaitUntil(settled, deadline)) return absl::OkStatus();
      if (!broken_) {
        return absl::DeadlineExceededError(
            absl::StrCat("sequence(s) ", absl::StrJoin(compiling, ", "),
                         " still compiling after ", timeout.count(), " ms"));
      }
    }
    if (absl::Status s = Resume(); !s.ok()) return s;
    deadline = Clock::now() + timeout;
  }
}

absl::Status Client::SubmitStep(absl::Span<const StepInput> batch) {
  absl::MutexLock call(&call_mu_);
  if (pending_) {
    return absl::FailedPreconditionError(
        absl::StrCat("step ", pending_->request.step().step_id(),
                     " is in flight: wait for its masks first"));
  }
  Pending p;
  v1::Step* step = p.request.mutable_step();
  std::unordered_set<uint64_t> seen;
  {
    absl::MutexLock lock(&mu_);
    for (const StepInput& in : batch) {
      if (in.rollback < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sequence ", in.sequence_id, ": negative rollback ", in.rollback));
      }
      if (!seen.insert(in.sequence_id).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sequence ", in.sequence_id, " appears twice in the step"));
      }
      const int32_t rows = 1 + static_cast<int32_t>(in.drafts.size());
      p.ids.push_back(in.sequence_id);
      p.rows.push_back(rows);
      p.total_rows += rows;
      auto it = sequences_.find(in.sequence_id);
      if (it == sequences_.end() ||
          it->second.state.state == GrammarState::kFailed) {
        // The server would refuse it too; answering here keeps a sequence
        // that failed before a reconnect failed after it.
        p.wire_index.push_back(-1);
        p.local_errors.push_back(
            it == sequences_.end()
                ? absl::NotFoundError(
                      absl::StrCat("sequence ", in.sequence_id, " is not open"))
                : it->second.state.error);
        continue;
      }
      p.wire_index.push_back(step->sequences_size());
      p.local_errors.push_back(absl::OkStatus());
      v1::SequenceStep* s = step->add_sequences();
      s->set_sequence_id(in.sequence_id);
      s->set_rollback(in.rollback);
      s->mutable_accepted_tokens()->Add(in.accepted.begin(), in.accepted.end());
      s->mutable_draft_tokens()->Add(in.drafts.begin(), in.drafts.end());
      p.deltas.push_back(
          {in.sequence_id, in.rollback,
           std::vector<int32_t>(in.accepted.begin(), in.accepted.end())});
    }
    step->set_step_id(next_step_id_++);
    awaited_step_ = step->step_id();
    reply_.reset();
  }
  p.submitted = Clock::now();
  pending_ = std::move(p);
  Send(pending_->request);
  return absl::OkStatus();
}

int64_t Client::PendingRows() const {
  absl::MutexLock call(&call_mu_);
  return pending_ ? pending_->total_rows : 0;
}

absl::Status Client::WaitMasks(const MaskBuffer& out,
                               std::vector<SequenceMasks>* results,
                               std::chrono::milliseconds timeout) {
  absl::MutexLock call(&call_mu_);
  return WaitMasksLocked(out, results, timeout);
}

absl::Status Client::WaitMasksLocked(const MaskBuffer& out,
                                     std::vector<SequenceMasks>* results,
                                     std::chrono::milliseconds timeout) {
  if (!pending_) return absl::FailedPreconditionError("no step in flight");
  if (out.words == nullptr || out.row_stride < words_per_row() ||
      (out.rows == nullptr && out.capacity_rows < pending_->total_rows)) {
    return absl::InvalidArgumentError(
        absl::StrCat("mask buffer of ", out.capacity_rows, " rows of stride ",
                     out.row_stride, (out.words == nullptr ? " (null)" : ""),
                     " for a step of ", pending_->total_rows, " rows of ",
                     words_per_row(), " words"));
  }
  if (out.rows != nullptr) {
    // Distinct rows: a row repeated later in the step is copied from where
    // the first one was written, which must still hold it.
    std::vector<bool> taken(static_cast<size_t>(out.capacity_rows));
    for (int64_t r = 0; r < pending_->total_rows; ++r) {
      const int64_t to = out.rows[r];
      if (to < 0 || to >= out.capacity_rows || taken[static_cast<size_t>(to)]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "row map: step row ", r, " goes to row ", to, " of a buffer of ",
            out.capacity_rows,
            to >= 0 && to < out.capacity_rows ? " that another row takes"
                                              : ""));
      }
      taken[static_cast<size_t>(to)] = true;
    }
  }
  if (timeout.count() <= 0) timeout = options_.step_timeout;
  const auto start = Clock::now();
  auto deadline = start + timeout;
  v1::StepResult reply;
  Clock::time_point reply_at;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (AwaitUntil([&] { return reply_.has_value(); }, deadline)) {
        reply.Swap(&*reply_);
        reply_.reset();
        reply_at = reply_at_;
        break;
      }
      if (!broken_) {
        return absl::DeadlineExceededError(
            absl::StrCat("step ", pending_->request.step().step_id(),
                         ": no reply from grammard within ", timeout.count(),
                         " ms (the step is still in flight)"));
      }
    }
    if (absl::Status s = Resume(); !s.ok()) return s;
    deadline = Clock::now() + timeout;
  }
  const auto waited = Clock::now() - start;
  FinishStep(reply, out, results);
  absl::MutexLock lock(&mu_);
  ++metrics_.steps;
  metrics_.step_latency.Observe(Seconds(reply_at - pending_->submitted));
  metrics_.wait_time.Observe(Seconds(waited));
  pending_.reset();
  return absl::OkStatus();
}

void Client::FillAllAllowed(uint32_t* row) const {
  const int32_t words = words_per_row();
  std::fill(row, row + words, ~uint32_t{0});
  if (vocab_size_ % 32 != 0) {
    row[words - 1] = (uint32_t{1} << (vocab_size_ % 32)) - 1;
  }
}

void Client::FinishStep(const v1::StepResult& reply, const MaskBuffer& out,
                        std::vector<SequenceMasks>* results) {
  const Pending& p = *pending_;
  const int wire_size = p.request.step().sequences_size();
  const bool shaped = reply.sequences_size() == wire_size;
  results->assign(p.ids.size(), SequenceMasks());
  // Rows may repeat earlier rows of the step (same_as), counted over every
  // row of the reply in order: the decoder sees each of them, in order,
  // before any row is overwritten below.
  proto::StepRowDecoder decoder;
  std::vector<std::vector<uint32_t>> misshapen;  // rows with nowhere to go
  int64_t row = 0;
  for (size_t i = 0; i < p.ids.size(); ++i) {
    SequenceMasks& r = (*results)[i];
    r.sequence_id = p.ids[i];
    r.first_row = row;
    r.num_rows = p.rows[i];
    row += p.rows[i];
    const int w = p.wire_index[i];
    if (w < 0) {
      r.status = p.local_errors[i];
      continue;
    }
    if (reply.has_error()) {  // the step as a whole was refused
      r.status = FromWire(reply.error());
      continue;
    }
    if (!shaped) {
      r.status = absl::InternalError(absl::StrCat(
          "the reply to step ", reply.step_id(), " has ",
          reply.sequences_size(), " results for ", wire_size, " sequences"));
      continue;
    }
    const v1::SequenceResult& sr = reply.sequences(w);
    if (sr.has_error()) {
      r.status = FromWire(sr.error());
      continue;
    }
    // Where row k of the sequence goes: its place in the buffer, or, for a
    // reply of the wrong shape, scratch (its rows may still be referred to).
    uint32_t* scratch = nullptr;
    if (sr.sequence_id() != r.sequence_id || sr.rows_size() != r.num_rows) {
      r.status = absl::InternalError(absl::StrCat(
          "sequence ", r.sequence_id, ": the reply has ", sr.rows_size(),
          " rows of sequence ", sr.sequence_id(), " for ", r.num_rows));
      scratch = misshapen
                    .emplace_back(
                        static_cast<size_t>(sr.rows_size() * words_per_row()))
                    .data();
    }
    for (int k = 0; k < sr.rows_size(); ++k) {
      uint32_t* row = scratch != nullptr ? scratch + k * words_per_row()
                                         : out.Row(r.first_row + k);
      absl::Status decoded = decoder.Next(sr.rows(k), vocab_size_, row);
      if (r.status.ok()) r.status = decoded;
    }
    if (r.status.ok()) {
      r.terminated = sr.terminated();
      r.can_terminate = sr.can_terminate();
      r.jump_forward_bytes = sr.jump_forward_bytes();
      r.jump_forward_tokens.assign(sr.jump_forward_tokens().begin(),
                                   sr.jump_forward_tokens().end());
    }
  }
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < p.ids.size(); ++i) {
    const SequenceMasks& r = (*results)[i];
    if (!r.status.ok()) {
      for (int k = 0; k < r.num_rows; ++k)
        FillAllAllowed(out.Row(r.first_row + k));
    }
    const int w = p.wire_index[i];
    auto it = sequences_.find(r.sequence_id);
    if (w < 0 || it == sequences_.end()) continue;
    if (r.status.ok()) {
      // An answered step proves the grammar ready even where its READY
      // status, written by another of the server's threads, has not come
      // yet; a reconnect must then replay the tokens it accepted.
      if (it->second.state.state == GrammarState::kCompiling) {
        it->second.state = {GrammarState::kReady, absl::OkStatus()};
      }
      // The server advanced: this is what a replay must repeat.
      const Delta& d = p.deltas[static_cast<size_t>(w)];
      std::vector<int32_t>& tokens = it->second.tokens;
      tokens.resize(tokens.size() -
                    std::min(tokens.size(), static_cast<size_t>(d.rollback)));
      tokens.insert(tokens.end(), d.accepted.begin(), d.accepted.end());
    } else if (r.status.code() != absl::StatusCode::kUnavailable) {
      // UNAVAILABLE: still compiling, nothing happened. Anything else fails
      // the sequence on the server.
      it->second.state = {GrammarState::kFailed, r.status};
    }
  }
}

absl::Status Client::WaitAndApplyCpu(const gpu::LogitsView& logits,
                                     const int32_t* indices,
                                     std::vector<SequenceMasks>* results,
                                     std::chrono::milliseconds timeout) {
  absl::MutexLock call(&call_mu_);
  const int64_t rows = pending_ ? pending_->total_rows : 0;
  const int64_t words = words_per_row();
  scratch_.resize(static_cast<size_t>(std::max<int64_t>(1, rows * words)));
  if (absl::Status s =
          WaitMasksLocked({scratch_.data(), words, rows}, results, timeout);
      !s.ok()) {
    return s;
  }
  gpu::TokenMaskView mask;
  mask.words = scratch_.data();
  mask.rows = rows;
  mask.words_per_row = words;
  mask.row_stride = words;
  mask.vocab = vocab_size_;
  mask.indices = indices;
  return gpu::ApplyTokenMaskCpu(logits, mask);
}

ClientMetrics Client::Metrics() const {
  absl::MutexLock lock(&mu_);
  return metrics_;
}

absl::Status Client::OutageError(absl::string_view prefix,
                                 Clock::time_point start,
                                 absl::string_view attempts,
                                 absl::string_view last_error) const {
  return absl::UnavailableError(absl::StrCat(
      prefix, "grammard at ", options_.target, " unreachable: an outage of ",
      absl::FormatDuration(absl::FromChrono(Clock::now() - start)),
      " outlasted outage_timeout (", options_.outage_timeout.count(),
      " ms) after ", attempts, "; last error: ", last_error));
}

void Client::WaitToRetry(Clock::time_point give_up,
                         std::chrono::milliseconds* delay) const {
  const auto next = std::min(Clock::now() + *delay, give_up);
  // Return as soon as the channel connects rather than sleeping the whole
  // delay; a channel already connected (the daemon answers but refused the
  // call) waits it out.
  if (channel_->GetState(/*try_to_connect=*/true) != GRPC_CHANNEL_READY) {
    channel_->WaitForConnected(ToSystem(next));
  } else {
    std::this_thread::sleep_until(next);
  }
  *delay = std::min(*delay * 2, options_.backoff_max);
}

absl::Status Client::CallRidingOutages(
    const char* what, std::chrono::milliseconds timeout,
    const std::function<grpc::Status(grpc::ClientContext*)>& call) const {
  const auto start = Clock::now();
  const auto give_up = start + options_.outage_timeout;
  auto delay = options_.backoff_initial;
  for (int attempts = 1;; ++attempts) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    const grpc::Status s = call(&context);
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) {
      return s.ok() ? absl::OkStatus() : FromGrpc(s, what);
    }
    if (Clock::now() >= give_up) {
      return OutageError(absl::StrCat(what, ": "), start,
                         absl::StrCat(attempts, " attempts"),
                         s.error_message());
    }
    WaitToRetry(give_up, &delay);
  }
}

absl::Status Client::Resume() {
  const auto start = Clock::now();
  const auto give_up = start + options_.outage_timeout;
  auto delay = options_.backoff_initial;
  std::string last_error;
  int attempts = 0;
  for (;;) {
    ++attempts;
    {
      absl::MutexLock lock(&mu_);
      ++metrics_.reconnect_attempts;
      if (last_error.empty()) last_error = broken_why_;
    }
    absl::Status s = TryResume(give_up);
    if (s.ok()) {
      absl::MutexLock lock(&mu_);
      ++metrics_.reconnects;
      metrics_.outage_seconds += Seconds(Clock::now() - start);
      return absl::OkStatus();
    }
    last_error = std::string(s.message());
    if (Clock::now() >= give_up) break;
    WaitToRetry(give_up, &delay);
  }
  {
    absl::MutexLock lock(&mu_);
    ++metrics_.outages_given_up;
    metrics_.outage_seconds += Seconds(Clock::now() - start);
    reply_.reset();
  }
  // The step in flight is abandoned (its tokens were never acknowledged);
  // the engine may submit again, which reconnects afresh.
  pending_.reset();
  return OutageError(
      "", start, absl::StrCat(attempts, " reconnection attempts"), last_error);
}

absl::Status Client::TryResume(Clock::time_point give_up) {
  StopLink();
  StartLink();
  // Re-open every sequence that has not failed; those that were ready must
  // be ready again before their tokens can be replayed.
  std::vector<v1::DecodeRequest> opens;
  std::vector<uint64_t> were_ready;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, s] : sequences_) {
      if (s.state.state == GrammarState::kFailed) continue;
      *opens.emplace_back().mutable_open() = s.open;
      if (s.state.state == GrammarState::kReady) were_ready.push_back(id);
    }
  }
  for (const v1::DecodeRequest& open : opens) Send(open);
  v1::DecodeRequest replay;
  int64_t replayed_tokens = 0;
  {
    absl::ReleasableMutexLock lock(&mu_);
    const auto statused = [&] {
      for (uint64_t id : were_ready) {
        auto it = sequences_.find(id);
        if (it != sequences_.end() && it->second.status_epoch != epoch_) {
          return false;
        }
      }
      return true;
    };
    if (!AwaitUntil(statused, give_up)) {
      lock.Release();
      return Broken();
    }
    v1::Step* step = replay.mutable_step();
    for (uint64_t id : were_ready) {
      const Sequence& s = sequences_.at(id);
      if (s.state.state != GrammarState::kReady || s.tokens.empty()) continue;
      v1::SequenceStep* entry = step->add_sequences();
      entry->set_sequence_id(id);
      entry->mutable_accepted_tokens()->Add(s.tokens.begin(), s.tokens.end());
      replayed_tokens += static_cast<int64_t>(s.tokens.size());
    }
    step->set_step_id(next_step_id_++);
    awaited_step_ = step->step_id();
    reply_.reset();
  }
  if (replay.step().sequences_size() > 0) {
    Send(replay);
    absl::ReleasableMutexLock lock(&mu_);
    if (!AwaitUntil([&] { return reply_.has_value(); }, give_up)) {
      lock.Release();
      return Broken();
    }
    for (const v1::SequenceResult& r : reply_->sequences()) {
      if (!r.has_error()) continue;
      auto it = sequences_.find(r.sequence_id());
      if (it == sequences_.end()) continue;
      it->second.state = {
          GrammarState::kFailed,
          absl::Status(static_cast<absl::StatusCode>(r.error().code()),
                       absl::StrCat("replaying its tokens after a reconnect: ",
                                    r.error().message()))};
    }
    reply_.reset();
  }
  {
    absl::MutexLock lock(&mu_);
    metrics_.replayed_sequences += opens.size();
    metrics_.replayed_tokens += static_cast<uint64_t>(replayed_tokens);
    if (pending_) awaited_step_ = pending_->request.step().step_id();
  }
  if (pending_) Send(pending_->request);
  {
    absl::MutexLock lock(&mu_);
    if (!broken_) return absl::OkStatus();
  }
  return Broken();
}

}  // namespace grammard::client
