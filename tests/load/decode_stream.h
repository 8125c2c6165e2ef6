// A client's end of one grammard Decode stream, driven synchronously: open
// and close sequences, wait for their READY status, and run steps one at a
// time (send a Step, block until its StepResult). Statuses that arrive while
// a step waits are kept for Status/WaitStatus, so no reader thread is needed.
//
// For the load benchmarks, which time the daemon rather than a client: they
// read each StepResult as it came off the wire (rows still encoded, repeats
// as references) and drive many streams from threads of their own.
// client::Client, what an inference node links, decodes every row, keeps
// tokens for replay and runs a reader thread per stream; grammarctl uses it.
//
// Cost: one gRPC bidi call; each call is one write or a few reads.
// Thread-safety: none; use a stream from one thread at a time.
#ifndef GRAMMARD_TESTS_LOAD_DECODE_STREAM_H_
#define GRAMMARD_TESTS_LOAD_DECODE_STREAM_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "proto/grammard.grpc.pb.h"

namespace grammard::load {

// A channel to `target` fit for Decode streams: step results of many
// sequences exceed gRPC's default 4 MB message limit. `private_connection`
// gives the channel its own TCP connection rather than sharing one with the
// process's other channels to the same target.
std::shared_ptr<grpc::Channel> Connect(const std::string& target,
                                       bool private_connection = false);

class DecodeStream {
 public:
  // The whole stream must be done by `deadline`; past it every call fails.
  DecodeStream(grammard::v1::Grammard::Stub* stub,
               std::chrono::system_clock::time_point deadline);
  // Finishes the call if that was not done.
  ~DecodeStream();

  DecodeStream(const DecodeStream&) = delete;
  DecodeStream& operator=(const DecodeStream&) = delete;

  absl::Status Open(const grammard::v1::OpenSequence& open);
  absl::Status Close(uint64_t sequence_id);

  // The status received for a sequence so far, if any (never blocks).
  std::optional<grammard::v1::SequenceStatus> Status(uint64_t sequence_id);

  // Reads until a status for the sequence arrives (or the stream ends).
  absl::StatusOr<grammard::v1::SequenceStatus> WaitStatus(uint64_t sequence_id);

  // Sends the step and reads until its result arrives.
  absl::Status Step(const grammard::v1::Step& step,
                    grammard::v1::StepResult* result);

  // Half-closes, reads what is left and returns the call's final status.
  absl::Status Finish();

 private:
  // Reads one response, filing a status away; false when the stream ended.
  bool ReadOne(grammard::v1::DecodeResponse* response);
  absl::Status Broken(const char* what);

  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<grammard::v1::DecodeRequest,
                                           grammard::v1::DecodeResponse>>
      rw_;
  std::unordered_map<uint64_t, grammard::v1::SequenceStatus> statuses_;
  std::optional<grpc::Status> final_;  // set once the call is finished
};

}  // namespace grammard::load

#endif  // GRAMMARD_TESTS_LOAD_DECODE_STREAM_H_
