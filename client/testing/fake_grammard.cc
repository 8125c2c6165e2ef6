#include "client/testing/fake_grammard.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/grammard.grpc.pb.h"
#include "proto/mask_rows.h"

namespace grammard::client::testing {
namespace {

namespace v1 = grammard::v1;

constexpr int32_t kWords = (FakeGrammard::kVocabSize + 31) / 32;

bool Allows(const std::vector<uint32_t>& mask, int32_t token) {
  return token >= 0 && token < FakeGrammard::kVocabSize &&
         ((mask[static_cast<size_t>(token / 32)] >> (token % 32)) & 1) != 0;
}

void SetError(absl::StatusCode code, const std::string& message,
              v1::Error* error) {
  error->set_code(static_cast<int32_t>(code));
  error->set_message(message);
}

}  // namespace

class FakeGrammard::Service final : public v1::Grammard::Service {
 public:
  grpc::Status ListTokenizers(grpc::ServerContext*,
                              const v1::ListTokenizersRequest*,
                              v1::ListTokenizersResponse* response) override {
    v1::Tokenizer* t = response->add_tokenizers();
    t->set_name(kTokenizer);
    t->set_fingerprint(kFingerprint);
    t->set_vocab_size(kVocabSize);
    t->add_eos_token_ids(kEos);
    return grpc::Status::OK;
  }

  grpc::Status Compile(grpc::ServerContext*, const v1::CompileRequest* request,
                       v1::CompileResponse* response) override {
    response->set_grammar_id(
        absl::StrCat("fake:", request->constraint().regex()));
    if (request->constraint().regex() == "fail") {
      response->set_state(v1::GRAMMAR_STATE_FAILED);
      SetError(absl::StatusCode::kInvalidArgument, "bad regex",
               response->mutable_error());
    } else if (request->constraint().regex() == "hold") {
      response->set_state(v1::GRAMMAR_STATE_COMPILING);
    } else {
      response->set_state(v1::GRAMMAR_STATE_READY);
    }
    return grpc::Status::OK;
  }

  grpc::Status Decode(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::DecodeResponse, v1::DecodeRequest>* rw)
      override {
    {
      absl::MutexLock lock(&mu_);
      ++streams_;
    }
    struct Sequence {
      std::vector<int32_t> tokens;
      bool hold = false;
      bool jump_forward = false;
      absl::Status failed;
    };
    std::map<uint64_t, Sequence> sequences;
    v1::DecodeRequest request;
    while (rw->Read(&request)) {
      v1::DecodeResponse response;
      if (request.has_open()) {
        const v1::OpenSequence& open = request.open();
        const uint64_t id = open.sequence_id();
        v1::SequenceStatus* status = response.mutable_status();
        status->set_sequence_id(id);
        status->set_state(v1::GRAMMAR_STATE_FAILED);
        if (sequences.count(id) != 0) {
          SetError(absl::StatusCode::kAlreadyExists,
                   absl::StrCat("sequence ", id, " is already open"),
                   status->mutable_error());
        } else if (open.tokenizer() != kTokenizer &&
                   open.tokenizer() != kFingerprint) {
          sequences[id].failed = absl::NotFoundError("unknown tokenizer");
          SetError(absl::StatusCode::kNotFound, "unknown tokenizer",
                   status->mutable_error());
        } else if (open.constraint().regex() == "fail") {
          sequences[id].failed = absl::InvalidArgumentError("bad regex");
          SetError(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("sequence ", id, ": bad regex"),
                   status->mutable_error());
        } else if (open.constraint().regex() == "hold") {
          sequences[id].hold = true;
          continue;
        } else {
          sequences[id].jump_forward = open.jump_forward();
          status->set_state(v1::GRAMMAR_STATE_READY);
          absl::MutexLock lock(&mu_);
          if (muted_) continue;
        }
      } else if (request.has_close()) {
        sequences.erase(request.close().sequence_id());
        continue;
      } else if (request.has_step()) {
        {
          absl::MutexLock lock(&mu_);
          if (stalled_) ++held_;
          mu_.Await(absl::Condition(
              +[](Service* s) { return !s->stalled_ || s->stopping_; }, this));
        }
        Step(request.step(), &sequences, response.mutable_step());
      } else {
        continue;
      }
      if (!rw->Write(response)) break;
    }
    return grpc::Status::OK;
  }

  template <typename Sequences>
  void Step(const v1::Step& step, Sequences* sequences,
            v1::StepResult* result) {
    result->set_step_id(step.step_id());
    if (step.sequences_size() > kMaxStepSequences) {
      SetError(absl::StatusCode::kResourceExhausted,
               absl::StrCat("step lists ", step.sequences_size(),
                            " sequences; at most ", kMaxStepSequences),
               result->mutable_error());
      return;
    }
    std::vector<std::vector<uint32_t>> rows;  // every row so far, in order
    for (const v1::SequenceStep& s : step.sequences()) {
      v1::SequenceResult* r = result->add_sequences();
      r->set_sequence_id(s.sequence_id());
      auto it = sequences->find(s.sequence_id());
      if (it == sequences->end()) {
        SetError(absl::StatusCode::kNotFound, "not open", r->mutable_error());
        continue;
      }
      auto& seq = it->second;
      if (seq.hold) {
        SetError(absl::StatusCode::kUnavailable, "still compiling",
                 r->mutable_error());
        continue;
      }
      if (!seq.failed.ok()) {
        SetError(absl::StatusCode::kFailedPrecondition,
                 std::string(seq.failed.message()), r->mutable_error());
        continue;
      }
      if (s.rollback() > static_cast<int32_t>(seq.tokens.size())) {
        seq.failed = absl::InvalidArgumentError("rollback too far");
      }
      if (seq.failed.ok()) {
        seq.tokens.resize(seq.tokens.size() -
                          static_cast<size_t>(s.rollback()));
      }
      for (int32_t t : s.accepted_tokens()) {
        if (!seq.failed.ok()) break;
        if (!Allows(Mask(seq.tokens), t)) {
          seq.failed = absl::InvalidArgumentError(absl::StrCat(
              "sequence ", s.sequence_id(), ": token ", t, " is not allowed"));
          break;
        }
        seq.tokens.push_back(t);
      }
      {
        absl::MutexLock lock(&mu_);
        accepted_ += s.accepted_tokens_size();
      }
      if (!seq.failed.ok()) {
        SetError(seq.failed.code(), std::string(seq.failed.message()),
                 r->mutable_error());
        continue;
      }
      std::vector<int32_t> prefix = seq.tokens;
      for (int i = 0; i <= s.draft_tokens_size(); ++i) {
        if (i > 0) prefix.push_back(s.draft_tokens(i - 1));
        std::vector<uint32_t> mask = Mask(prefix);
        v1::MaskRow* row = r->add_rows();
        // A repeat of an earlier row of the step goes as a reference, as
        // the real service sends it.
        const auto same = std::find(rows.begin(), rows.end(), mask);
        if (same != rows.end()) {
          row->set_same_as(static_cast<uint32_t>(same - rows.begin()));
        } else {
          proto::EncodeMaskRow(mask.data(), kVocabSize, row);
        }
        rows.push_back(std::move(mask));
      }
      if (seq.jump_forward) {
        r->set_jump_forward_bytes(absl::StrCat("after ", seq.tokens.size()));
        r->add_jump_forward_tokens(static_cast<int32_t>(seq.tokens.size()));
      }
      r->set_terminated(!seq.tokens.empty() && seq.tokens.back() == kEos);
      r->set_can_terminate(Allows(Mask(seq.tokens), kEos));
    }
  }

  void SetStalled(bool stalled) {
    absl::MutexLock lock(&mu_);
    stalled_ = stalled;
  }
  void SetMuted(bool muted) {
    absl::MutexLock lock(&mu_);
    muted_ = muted;
  }
  void AwaitHeld() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* held) { return *held > 0; }, &held_));
  }
  void Stop() {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  int streams() const {
    absl::MutexLock lock(&mu_);
    return streams_;
  }
  int64_t accepted() const {
    absl::MutexLock lock(&mu_);
    return accepted_;
  }

 private:
  mutable absl::Mutex mu_;
  bool stalled_ ABSL_GUARDED_BY(mu_) = false;
  bool muted_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int streams_ ABSL_GUARDED_BY(mu_) = 0;
  int held_ ABSL_GUARDED_BY(mu_) = 0;  // steps that met the stall
  int64_t accepted_ ABSL_GUARDED_BY(mu_) = 0;
};

std::unique_ptr<FakeGrammard> FakeGrammard::Start(int port) {
  std::unique_ptr<FakeGrammard> fake(new FakeGrammard());
  fake->service_ = std::make_unique<Service>();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port),
                           grpc::InsecureServerCredentials(), &fake->port_);
  builder.RegisterService(fake->service_.get());
  fake->server_ = builder.BuildAndStart();
  if (fake->server_ == nullptr || fake->port_ == 0) return nullptr;
  return fake;
}

FakeGrammard::~FakeGrammard() {
  if (server_ == nullptr) return;
  service_->Stop();
  // Past the deadline, open streams are cancelled: what a crash looks like
  // to the client, short of the socket's reset.
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
}

std::string FakeGrammard::target() const {
  return absl::StrCat("127.0.0.1:", port_);
}

std::vector<uint32_t> FakeGrammard::Mask(absl::Span<const int32_t> tokens) {
  uint64_t h = 1469598103934665603u;  // FNV-1a over the token ids
  for (int32_t t : tokens) {
    h = (h ^ static_cast<uint32_t>(t)) * 1099511628211u;
  }
  std::vector<uint32_t> words(kWords, 0);
  const size_t phase = tokens.size() % 4;
  for (int32_t t = 0; t < kVocabSize; ++t) {
    bool allowed;
    if (phase == 1) {
      allowed = true;
    } else if (phase == 3) {
      allowed = static_cast<uint64_t>(t) % 97 == h % 97;
    } else {
      allowed = (((static_cast<uint64_t>(t) * 2654435761u) ^ h) >> 5) % 3 != 0;
    }
    if (t == kEos) allowed = tokens.size() >= 3;
    if (allowed) words[static_cast<size_t>(t / 32)] |= uint32_t{1} << (t % 32);
  }
  return words;
}

void FakeGrammard::SetStalled(bool stalled) { service_->SetStalled(stalled); }
void FakeGrammard::SetStatusesMuted(bool muted) { service_->SetMuted(muted); }
void FakeGrammard::AwaitHeldStep() { service_->AwaitHeld(); }
int FakeGrammard::streams() const { return service_->streams(); }
int64_t FakeGrammard::accepted_tokens() const { return service_->accepted(); }

}  // namespace grammard::client::testing
