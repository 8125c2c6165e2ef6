#include "tools/grammarctl/generator.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "grammar/base/status_macros.h"
#include "tools/grammarctl/masked_sampler.h"

namespace grammard::grammarctl {

using Clock = std::chrono::steady_clock;

namespace {

struct Active {
  Generation generation;
  std::mt19937 rng;
  std::vector<int32_t> accepted;  // picked, to be reported at the next step
  bool done = false;
};

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

// The timeout of a client call that must end by `deadline` (a timeout of 0
// would mean the client's default).
absl::StatusOr<std::chrono::milliseconds> Remaining(
    Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - Clock::now());
  if (left.count() <= 0) {
    return absl::DeadlineExceededError(
        "generate ran past its deadline (raise --timeout_s)");
  }
  return left;
}

// Picks the next token of a sequence from its mask row.
int32_t Pick(const std::vector<int32_t>& eos, bool can_terminate,
             const std::vector<uint32_t>& row, double eos_probability,
             std::mt19937* rng) {
  if (can_terminate && std::bernoulli_distribution(eos_probability)(*rng)) {
    for (int32_t id : eos) {
      if (Allowed(row, id)) return id;
    }
  }
  return SampleRandomLogits(row, rng);
}

}  // namespace

absl::StatusOr<std::vector<Generation>> Generate(
    client::Client* client, const GenerateOptions& options) {
  const std::vector<int32_t>& eos = client->eos_token_ids();
  const Clock::time_point start = Clock::now();
  std::vector<Active> active(static_cast<size_t>(options.sequences));
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < active.size(); ++i) {
    active[i].generation.sequence_id = i + 1;
    active[i].rng.seed(options.seed + static_cast<uint32_t>(i));
    ids.push_back(i + 1);
    GRAMMARD_RETURN_IF_ERROR(client->Open(i + 1, options.constraint));
  }
  auto timeout = Remaining(options.deadline);
  if (!timeout.ok()) return timeout.status();
  GRAMMARD_RETURN_IF_ERROR(client->WaitReady(ids, *timeout));
  for (uint64_t id : ids) {
    auto state = client->State(id);
    if (!state.ok()) return state.status();
    if (state->state == client::GrammarState::kFailed) return state->error;
  }

  const int64_t words = client->words_per_row();
  std::vector<uint32_t> masks(active.size() * static_cast<size_t>(words));
  std::vector<uint32_t> row(static_cast<size_t>(words));
  std::vector<client::StepInput> batch;
  std::vector<Active*> stepped;
  std::vector<client::SequenceMasks> results;
  for (;;) {
    batch.clear();
    stepped.clear();
    for (Active& a : active) {
      if (a.done) continue;
      batch.push_back({a.generation.sequence_id, 0, a.accepted, {}});
      stepped.push_back(&a);
    }
    if (stepped.empty()) break;
    GRAMMARD_RETURN_IF_ERROR(client->SubmitStep(batch));
    timeout = Remaining(options.deadline);
    if (!timeout.ok()) return timeout.status();
    const client::MaskBuffer buffer{masks.data(), words,
                                    static_cast<int64_t>(stepped.size())};
    GRAMMARD_RETURN_IF_ERROR(client->WaitMasks(buffer, &results, *timeout));
    for (size_t i = 0; i < stepped.size(); ++i) {
      Active& a = *stepped[i];
      const client::SequenceMasks& r = results[i];
      // The client leaves a failed sequence's rows all allowed; a stand-in
      // model must not sample from them.
      if (!r.status.ok()) return r.status;
      a.generation.elapsed_ms = MillisSince(start);
      if (r.terminated) {
        a.generation.terminated = true;
        a.done = true;
        continue;
      }
      const uint32_t* first = buffer.Row(r.first_row);
      row.assign(first, first + words);
      const int32_t picked =
          Pick(eos, r.can_terminate, row, options.eos_probability, &a.rng);
      if (picked < 0) {
        return absl::InternalError(absl::StrCat(
            "sequence ", a.generation.sequence_id, ": no token is allowed"));
      }
      a.accepted.assign(1, picked);
      // An EOS is reported at the next step, whose result says terminated.
      if (std::find(eos.begin(), eos.end(), picked) != eos.end()) continue;
      a.generation.tokens.push_back(picked);
      if (static_cast<int>(a.generation.tokens.size()) >= options.max_tokens) {
        a.done = true;
      }
    }
  }
  for (uint64_t id : ids) {
    GRAMMARD_RETURN_IF_ERROR(client->Close(id));
  }
  std::vector<Generation> out;
  for (Active& a : active) out.push_back(std::move(a.generation));
  return out;
}

}  // namespace grammard::grammarctl
