// FakeGrammard: an in-process stand-in for the daemon, so the client's unit
// tests run without tokenizers or the real binary. It speaks the Decode
// contract (open, close, steps with rollback and drafts, statuses, per
// sequence errors) over a toy "grammar" whose mask depends on every token
// accepted so far, so a replay that lost or repeated a token shows up as
// different masks. A row identical to an earlier row of its step is sent
// as a same_as reference. It can be shut down and started again on the
// same port, as a restarted daemon would be.
//
// Constraints: a regex "fail" fails to compile, "hold" compiles forever
// (no status, steps answer UNAVAILABLE); anything else is ready at once.
// Compile answers the same way (grammar id "fake:<regex>"). A sequence
// opened with jump_forward reports "after <n>" and the token n, n being
// its tokens accepted so far.
//
// Cost: masks are O(vocab) per row. Thread-safety: every method may be
// called from any thread.
#ifndef GRAMMARD_CLIENT_TESTING_FAKE_GRAMMARD_H_
#define GRAMMARD_CLIENT_TESTING_FAKE_GRAMMARD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "grpcpp/grpcpp.h"

namespace grammard::client::testing {

class FakeGrammard {
 public:
  static constexpr int32_t kVocabSize = 1000;  // not a multiple of 32
  static constexpr int32_t kEos = kVocabSize - 1;
  static constexpr char kTokenizer[] = "fake";
  static constexpr char kFingerprint[] = "fake-fingerprint";
  // A step listing more sequences is refused as a whole (StepResult.error),
  // as grammard refuses one past --max_sequences_per_stream.
  static constexpr int kMaxStepSequences = 16;

  // Serves on 127.0.0.1:port (0: a port the kernel picks); null if it
  // cannot bind.
  static std::unique_ptr<FakeGrammard> Start(int port = 0);
  // Shuts down, cancelling open streams.
  ~FakeGrammard();

  int port() const { return port_; }
  std::string target() const;

  // The packed mask after `tokens`: never empty, sometimes a handful of
  // tokens (so every wire encoding occurs), EOS allowed after 3 tokens.
  static std::vector<uint32_t> Mask(absl::Span<const int32_t> tokens);

  // While stalled, steps are received but not answered.
  void SetStalled(bool stalled);
  // While muted, the READY statuses of opened sequences are never sent
  // (their steps are answered): the real daemon writes statuses from
  // another thread than step replies, so a step's reply may come first, and
  // a crash then loses the status.
  void SetStatusesMuted(bool muted);
  // Blocks until a step is held by the stall.
  void AwaitHeldStep();
  // Decode streams started, and tokens received as accepted, so far.
  int streams() const;
  int64_t accepted_tokens() const;

 private:
  class Service;
  FakeGrammard() = default;

  int port_ = 0;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace grammard::client::testing

#endif  // GRAMMARD_CLIENT_TESTING_FAKE_GRAMMARD_H_
