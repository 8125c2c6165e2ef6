// grammarctl's `generate`: decodes with client::Client, the library an
// inference node links (one Decode stream, masks decoded into packed rows,
// reconnection and replay after a daemon restart), with a random stand-in
// for the model, so that a grammar can be exercised end to end without a
// GPU. Every step sends each sequence's newly accepted token and receives
// its next mask row; the token is sampled from uniform random logits under
// that mask (SampleRandomLogits). Random tokens rarely choose to stop, so
// once the server reports can_terminate and an EOS token is allowed, EOS is
// taken with probability `eos_probability`.
//
// Cost: per step one client step; per sequence one row copy and one random
// draw per allowed token. Thread-safety: Generate is reentrant; it uses the
// client alone while it runs.
#ifndef GRAMMARD_TOOLS_GRAMMARCTL_GENERATOR_H_
#define GRAMMARD_TOOLS_GRAMMARCTL_GENERATOR_H_

#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "proto/grammard.pb.h"

namespace grammard::grammarctl {

struct GenerateOptions {
  grammard::v1::Constraint constraint;
  int sequences = 1;  // opened as ids 1..sequences
  int max_tokens = 256;
  uint32_t seed = 1;  // sequence i samples with seed + i
  double eos_probability = 0.5;
  // Every blocking call of the client is bounded by it.
  std::chrono::steady_clock::time_point deadline;
};

struct Generation {
  uint64_t sequence_id = 0;
  std::vector<int32_t> tokens;  // without the final EOS
  bool terminated = false;      // the server accepted an EOS
  double elapsed_ms = 0;        // from the open to the last result
};

// Fails on a client error, a grammar that failed to compile, a step error
// or the deadline. Closes the sequences it opened when it succeeds.
absl::StatusOr<std::vector<Generation>> Generate(
    client::Client* client, const GenerateOptions& options);

}  // namespace grammard::grammarctl

#endif  // GRAMMARD_TOOLS_GRAMMARCTL_GENERATOR_H_
