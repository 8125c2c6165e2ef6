#include "tests/load/decode_stream.h"

#include "absl/strings/str_cat.h"

namespace grammard::load {

namespace v1 = grammard::v1;

std::shared_ptr<grpc::Channel> Connect(const std::string& target,
                                       bool private_connection) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  if (private_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                   args);
}

DecodeStream::DecodeStream(v1::Grammard::Stub* stub,
                           std::chrono::system_clock::time_point deadline) {
  context_.set_deadline(deadline);
  rw_ = stub->Decode(&context_);
}

DecodeStream::~DecodeStream() { Finish().IgnoreError(); }

absl::Status DecodeStream::Open(const v1::OpenSequence& open) {
  statuses_.erase(open.sequence_id());  // a reused id starts afresh
  v1::DecodeRequest request;
  *request.mutable_open() = open;
  if (!rw_->Write(request)) return Broken("open");
  return absl::OkStatus();
}

absl::Status DecodeStream::Close(uint64_t sequence_id) {
  statuses_.erase(sequence_id);
  v1::DecodeRequest request;
  request.mutable_close()->set_sequence_id(sequence_id);
  if (!rw_->Write(request)) return Broken("close");
  return absl::OkStatus();
}

std::optional<v1::SequenceStatus> DecodeStream::Status(uint64_t sequence_id) {
  auto it = statuses_.find(sequence_id);
  if (it == statuses_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<v1::SequenceStatus> DecodeStream::WaitStatus(
    uint64_t sequence_id) {
  v1::DecodeResponse response;
  for (;;) {
    if (auto status = Status(sequence_id)) return *status;
    if (!ReadOne(&response)) return Broken("waiting for a sequence status");
  }
}

absl::Status DecodeStream::Step(const v1::Step& step, v1::StepResult* result) {
  v1::DecodeRequest request;
  *request.mutable_step() = step;
  if (!rw_->Write(request)) return Broken("step");
  v1::DecodeResponse response;
  for (;;) {
    if (!ReadOne(&response)) return Broken("waiting for a step result");
    if (response.kind_case() != v1::DecodeResponse::kStep) continue;
    if (response.step().step_id() != step.step_id()) {
      return absl::InternalError(absl::StrCat("got the result of step ",
                                              response.step().step_id(),
                                              " waiting for ", step.step_id()));
    }
    result->Swap(response.mutable_step());
    return absl::OkStatus();
  }
}

absl::Status DecodeStream::Finish() {
  if (!final_.has_value()) {
    rw_->WritesDone();
    // Unread responses would hold the call open; file them away.
    v1::DecodeResponse response;
    while (ReadOne(&response)) {
    }
    final_ = rw_->Finish();
  }
  if (final_->ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(final_->error_code()),
                      final_->error_message());
}

bool DecodeStream::ReadOne(v1::DecodeResponse* response) {
  if (!rw_->Read(response)) return false;
  if (response->kind_case() == v1::DecodeResponse::kStatus) {
    statuses_[response->status().sequence_id()] = response->status();
  }
  return true;
}

absl::Status DecodeStream::Broken(const char* what) {
  // The stream is over; its final status says why.
  if (!final_.has_value()) final_ = rw_->Finish();
  const grpc::Status& status = *final_;
  return absl::Status(
      status.ok() ? absl::StatusCode::kUnavailable
                  : static_cast<absl::StatusCode>(status.error_code()),
      absl::StrCat("Decode stream ended while ", what, status.ok() ? "" : ": ",
                   status.error_message()));
}

}  // namespace grammard::load
