// client_step_bench: the C++ client's time per decode step, replaying fixed
// token trajectories against a running daemon: the baseline the Python
// adapters are measured against (python -m grammard.bench runs it in the
// same run, on the same trajectories, and compares).
//
// Each line of --trajectories is one sequence's tokens. At step s sequence i
// holds p = s mod len_i of its tokens: it accepts token p - 1 (the one
// "sampled" at the last step) and asks for the next mask row; at p = 0 it
// is closed and opened afresh (a new request of the same constraint). A
// step is SubmitStep + WaitMasks into one preallocated buffer, timed end to
// end. Prints one line:
//
//   RESULT path=cpp batch=B steps=S step_p50_us=... step_mean_us=...
//
//   bazel run -c opt //client:client_step_bench -- --constraint=C.pb
//       --trajectories=T.txt --target=127.0.0.1:50051 --tokenizer=llama3
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "client/client.h"
#include "proto/grammard.pb.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "The daemon.");
ABSL_FLAG(std::string, tokenizer, "llama3", "Tokenizer name.");
ABSL_FLAG(std::string, constraint, "",
          "File holding a serialized grammard.v1.Constraint.");
ABSL_FLAG(std::string, trajectories, "",
          "File of token trajectories, one sequence a line.");
ABSL_FLAG(int, warmup, 50, "Untimed steps first.");
ABSL_FLAG(int, steps, 300, "Timed steps.");

namespace {

namespace gc = grammard::client;

int Fail(const std::string& what) {
  std::fprintf(stderr, "client_step_bench: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::ifstream constraint_file(absl::GetFlag(FLAGS_constraint),
                                std::ios::binary);
  std::stringstream bytes;
  bytes << constraint_file.rdbuf();
  grammard::v1::Constraint constraint;
  if (!constraint_file || !constraint.ParseFromString(bytes.str())) {
    return Fail("cannot read --constraint");
  }
  std::vector<std::vector<int32_t>> trajectories;
  std::ifstream lines(absl::GetFlag(FLAGS_trajectories));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    std::vector<int32_t> tokens;
    for (int32_t t; in >> t;) tokens.push_back(t);
    if (!tokens.empty()) trajectories.push_back(std::move(tokens));
  }
  if (trajectories.empty()) return Fail("no --trajectories");

  gc::ClientOptions options;
  options.target = absl::GetFlag(FLAGS_target);
  options.tokenizer = absl::GetFlag(FLAGS_tokenizer);
  auto client = gc::Client::Connect(options);
  if (!client.ok()) return Fail(std::string(client.status().message()));
  gc::Client& c = **client;

  const size_t batch = trajectories.size();
  std::vector<uint64_t> ids(batch);
  uint64_t next_id = 1;
  for (uint64_t& id : ids) {
    id = next_id++;
    if (auto s = c.Open(id, constraint); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }
  if (auto s = c.WaitReady(ids); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  std::vector<uint32_t> rows(batch * static_cast<size_t>(c.words_per_row()));
  const gc::MaskBuffer buffer{rows.data(), c.words_per_row(),
                              static_cast<int64_t>(batch)};
  std::vector<gc::SequenceMasks> results;
  std::vector<gc::StepInput> inputs(batch);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int steps = absl::GetFlag(FLAGS_steps);
  std::vector<double> micros;
  for (int s = 0; s < warmup + steps; ++s) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < batch; ++i) {
      const std::vector<int32_t>& t = trajectories[i];
      const size_t p = static_cast<size_t>(s) % t.size();
      if (s > 0 && p == 0) {
        c.Close(ids[i]).IgnoreError();
        ids[i] = next_id++;
        if (auto st = c.Open(ids[i], constraint); !st.ok()) {
          return Fail(std::string(st.message()));
        }
      }
      inputs[i] = {ids[i],
                   0,
                   p == 0 ? absl::Span<const int32_t>()
                          : absl::MakeConstSpan(&t[p - 1], 1),
                   {}};
    }
    if (auto st = c.SubmitStep(inputs); !st.ok()) {
      return Fail(std::string(st.message()));
    }
    if (auto st = c.WaitMasks(buffer, &results); !st.ok()) {
      return Fail(std::string(st.message()));
    }
    const double us = std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    for (const gc::SequenceMasks& r : results) {
      if (!r.status.ok()) return Fail(std::string(r.status.message()));
    }
    if (s >= warmup) micros.push_back(us);
  }
  const double mean =
      std::accumulate(micros.begin(), micros.end(), 0.0) / micros.size();
  std::nth_element(micros.begin(), micros.begin() + micros.size() / 2,
                   micros.end());
  std::printf(
      "RESULT path=cpp batch=%zu steps=%d step_p50_us=%.1f "
      "step_mean_us=%.1f\n",
      batch, steps, micros[micros.size() / 2], mean);
  return 0;
}
