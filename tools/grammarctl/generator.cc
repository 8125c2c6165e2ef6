#include "tools/grammarctl/generator.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "proto/mask_rows.h"
#include "tools/grammarctl/decode_stream.h"
#include "tools/grammarctl/masked_sampler.h"

namespace grammard::grammarctl {

namespace v1 = grammard::v1;
using Clock = std::chrono::steady_clock;

namespace {

struct Active {
  Generation generation;
  std::mt19937 rng;
  int32_t pending = -1;  // picked, to be reported at the next step
  bool done = false;
};

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

// Picks the next token of a sequence from its mask row.
int32_t Pick(const v1::Tokenizer& tokenizer, const v1::SequenceResult& result,
             const std::vector<uint32_t>& words, double eos_probability,
             std::mt19937* rng) {
  if (result.can_terminate() &&
      std::bernoulli_distribution(eos_probability)(*rng)) {
    for (int32_t eos : tokenizer.eos_token_ids()) {
      if (Allowed(words, eos)) return eos;
    }
  }
  return SampleRandomLogits(words, rng);
}

}  // namespace

absl::StatusOr<std::vector<Generation>> Generate(
    v1::Grammard::Stub* stub, const GenerateOptions& options) {
  const v1::Tokenizer& tokenizer = options.tokenizer;
  const auto& eos = tokenizer.eos_token_ids();
  DecodeStream stream(stub, options.deadline);
  const Clock::time_point start = Clock::now();
  std::vector<Active> active(static_cast<size_t>(options.sequences));
  for (size_t i = 0; i < active.size(); ++i) {
    active[i].generation.sequence_id = i + 1;
    active[i].rng.seed(options.seed + static_cast<uint32_t>(i));
    v1::OpenSequence open;
    open.set_sequence_id(i + 1);
    open.set_tokenizer(tokenizer.name());
    *open.mutable_constraint() = options.constraint;
    if (absl::Status s = stream.Open(open); !s.ok()) return s;
  }
  for (const Active& a : active) {
    auto status = stream.WaitStatus(a.generation.sequence_id);
    if (!status.ok()) return status.status();
    if (status->state() != v1::GRAMMAR_STATE_READY) {
      return absl::Status(static_cast<absl::StatusCode>(status->error().code()),
                          status->error().message());
    }
  }

  std::vector<uint32_t> words(static_cast<size_t>(tokenizer.vocab_size() + 31) /
                              32);
  v1::Step step;
  v1::StepResult result;
  for (uint64_t step_id = 1;; ++step_id) {
    step.Clear();
    step.set_step_id(step_id);
    std::vector<Active*> stepped;
    for (Active& a : active) {
      if (a.done) continue;
      v1::SequenceStep* s = step.add_sequences();
      s->set_sequence_id(a.generation.sequence_id);
      if (a.pending >= 0) s->add_accepted_tokens(a.pending);
      stepped.push_back(&a);
    }
    if (stepped.empty()) break;
    if (absl::Status s = stream.Step(step, &result); !s.ok()) return s;
    if (result.sequences_size() != static_cast<int>(stepped.size())) {
      return absl::InternalError(
          absl::StrCat("step ", step_id, ": ", result.sequences_size(),
                       " results for ", stepped.size(), " sequences"));
    }
    auto decoded = proto::DecodeStepRows(
        result, [&](size_t) { return tokenizer.vocab_size(); });
    if (!decoded.ok()) return decoded.status();
    for (size_t i = 0; i < stepped.size(); ++i) {
      Active& a = *stepped[i];
      const v1::SequenceResult& r = result.sequences(static_cast<int>(i));
      if (r.has_error()) {
        return absl::Status(static_cast<absl::StatusCode>(r.error().code()),
                            r.error().message());
      }
      a.generation.elapsed_ms = MillisSince(start);
      if (r.terminated()) {
        a.generation.terminated = true;
        a.done = true;
        continue;
      }
      if (r.rows_size() == 0) {
        return absl::InternalError(absl::StrCat(
            "sequence ", a.generation.sequence_id, ": a result with no row"));
      }
      const uint32_t* row = decoded->words.data() + decoded->offsets[i];
      words.assign(row, row + words.size());
      a.pending = Pick(tokenizer, r, words, options.eos_probability, &a.rng);
      if (a.pending < 0) {
        return absl::InternalError(absl::StrCat(
            "sequence ", a.generation.sequence_id, ": no token is allowed"));
      }
      // An EOS is reported at the next step, whose result says terminated.
      if (std::find(eos.begin(), eos.end(), a.pending) != eos.end()) continue;
      a.generation.tokens.push_back(a.pending);
      if (static_cast<int>(a.generation.tokens.size()) >= options.max_tokens) {
        a.done = true;
      }
    }
  }
  for (const Active& a : active) {
    if (absl::Status s = stream.Close(a.generation.sequence_id); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = stream.Finish(); !s.ok()) return s;
  std::vector<Generation> out;
  for (Active& a : active) out.push_back(std::move(a.generation));
  return out;
}

}  // namespace grammard::grammarctl
