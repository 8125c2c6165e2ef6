#include "tests/support/bystander.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "proto/grammard.grpc.pb.h"
#include "proto/mask_rows.h"

namespace grammard::testing {

namespace v1 = grammard::v1;
using Clock = std::chrono::steady_clock;

struct Bystander::Link {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Grammard::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<
      grpc::ClientReaderWriter<v1::DecodeRequest, v1::DecodeResponse>>
      rw;
  int32_t vocab_size = 0;
};

absl::StatusOr<std::unique_ptr<Bystander>> Bystander::Start(
    const std::string& target, std::chrono::milliseconds interval) {
  std::unique_ptr<Bystander> b(new Bystander());
  b->link_ = std::make_unique<Link>();
  Link& link = *b->link_;
  link.channel =
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  link.stub = v1::Grammard::NewStub(link.channel);
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    v1::ListTokenizersResponse list;
    grpc::Status s =
        link.stub->ListTokenizers(&context, v1::ListTokenizersRequest(), &list);
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    for (const v1::Tokenizer& t : list.tokenizers()) {
      if (t.name() == "llama3") link.vocab_size = t.vocab_size();
    }
    if (link.vocab_size == 0) return absl::NotFoundError("no llama3 here");
  }
  link.rw = link.stub->Decode(&link.context);
  v1::DecodeRequest open;
  open.mutable_open()->set_sequence_id(1);
  open.mutable_open()->set_tokenizer("llama3");
  open.mutable_open()->mutable_constraint()->set_regex("[a-z]+");
  if (!link.rw->Write(open)) return absl::UnavailableError("open not sent");
  v1::DecodeResponse response;
  if (!link.rw->Read(&response) || !response.has_status() ||
      response.status().state() != v1::GRAMMAR_STATE_READY) {
    return absl::UnavailableError(
        absl::StrCat("the bystander's sequence is not ready: ",
                     response.status().error().message()));
  }
  b->thread_ = std::thread([b = b.get(), interval] { b->Run(interval); });
  return b;
}

Bystander::~Bystander() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  link_->context.TryCancel();
  thread_.join();
}

void Bystander::Run(std::chrono::milliseconds interval) {
  Link& link = *link_;
  int32_t token = -1;
  for (uint64_t step_id = 1;; ++step_id) {
    const Clock::time_point next = Clock::now() + interval;
    v1::DecodeRequest request;
    request.mutable_step()->set_step_id(step_id);
    v1::SequenceStep* s = request.mutable_step()->add_sequences();
    s->set_sequence_id(1);
    if (token >= 0) s->add_accepted_tokens(token);
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      waiting_ = true;
      waiting_since_ = Clock::now();
    }
    absl::Status failure;
    v1::DecodeResponse response;
    if (!link.rw->Write(request)) {
      failure = absl::UnavailableError("the bystander's stream ended");
    } else {
      do {
        if (!link.rw->Read(&response)) {
          failure = absl::UnavailableError("the bystander's stream ended");
          break;
        }
      } while (!response.has_step());
    }
    if (failure.ok()) {
      const v1::SequenceResult& r = response.step().sequences(0);
      absl::StatusOr<int32_t> first =
          r.has_error() || r.rows_size() != 1
              ? absl::StatusOr<int32_t>(absl::InternalError(
                    absl::StrCat("step refused: ", r.error().message())))
              : proto::NthAllowed(r.rows(0), link.vocab_size, 0);
      if (first.ok()) {
        token = *first;
      } else {
        failure = first.status();
      }
    }
    absl::MutexLock lock(&mu_);
    waiting_ = false;
    if (stop_) return;
    if (!failure.ok()) {
      status_ = failure;
      return;
    }
    latencies_ms_.push_back(
        std::chrono::duration<double, std::milli>(Clock::now() - waiting_since_)
            .count());
    ++steps_;
    mu_.AwaitWithDeadline(absl::Condition(&stop_),
                          absl::Now() + absl::FromChrono(next - Clock::now()));
  }
}

void Bystander::Mark() {
  absl::MutexLock lock(&mu_);
  latencies_ms_.clear();
}

std::vector<double> Bystander::LatenciesMs() const {
  absl::MutexLock lock(&mu_);
  std::vector<double> out = latencies_ms_;
  if (waiting_) {
    out.push_back(
        std::chrono::duration<double, std::milli>(Clock::now() - waiting_since_)
            .count());
  }
  return out;
}

double Bystander::QuantileMs(double q) const {
  std::vector<double> l = LatenciesMs();
  if (l.empty()) return 0;
  std::sort(l.begin(), l.end());
  const size_t i = std::min(l.size() - 1, static_cast<size_t>(q * l.size()));
  return l[i];
}

absl::Status Bystander::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

int64_t Bystander::steps() const {
  absl::MutexLock lock(&mu_);
  return steps_;
}

}  // namespace grammard::testing
