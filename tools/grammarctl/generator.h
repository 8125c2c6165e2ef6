// grammarctl's `generate`: drives one Decode stream the way an inference
// node would, with a random stand-in for the model, so that a grammar can be
// exercised end to end without a GPU. Every step sends each sequence's newly
// accepted token and receives its next mask row; the token is sampled from
// uniform random logits under that mask (SampleRandomLogits). Random tokens
// rarely choose to stop, so once the server reports can_terminate and an EOS
// token is allowed, EOS is taken with probability `eos_probability`.
//
// Cost: one Decode stream; per step and sequence one mask decode and one
// random draw per allowed token. Thread-safety: Generate is reentrant.
#ifndef GRAMMARD_TOOLS_GRAMMARCTL_GENERATOR_H_
#define GRAMMARD_TOOLS_GRAMMARCTL_GENERATOR_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/grammard.grpc.pb.h"

namespace grammard::grammarctl {

struct GenerateOptions {
  grammard::v1::Tokenizer tokenizer;  // from ListTokenizers
  grammard::v1::Constraint constraint;
  int sequences = 1;
  int max_tokens = 256;
  uint32_t seed = 1;  // sequence i samples with seed + i
  double eos_probability = 0.5;
  std::chrono::system_clock::time_point deadline;
};

struct Generation {
  uint64_t sequence_id = 0;
  std::vector<int32_t> tokens;  // without the final EOS
  bool terminated = false;      // the server accepted an EOS
  double elapsed_ms = 0;        // from the open to the last result
};

// Fails on a gRPC error, a grammar that failed to compile or a step error.
absl::StatusOr<std::vector<Generation>> Generate(
    grammard::v1::Grammard::Stub* stub, const GenerateOptions& options);

}  // namespace grammard::grammarctl

#endif  // GRAMMARD_TOOLS_GRAMMARCTL_GENERATOR_H_
