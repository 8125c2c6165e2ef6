#include "service/decode_session.h"

#include <algorithm>
#include <deque>
#include <new>
#include <tuple>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "proto/mask_rows.h"
#include "service/wire_text.h"

namespace grammard::service {

namespace v1 = grammard::v1;

// Loops shorter than these stay on the stream's thread (fill_pool.h says
// why). Advancing a sequence and naming its row takes about half a
// microsecond: 128 of them are worth a helper's wake-up. A row filled or
// encoded takes microseconds (15 us for 5,000 listed ids of llama3).
constexpr size_t kMinSharedSequences = 128;
constexpr size_t kMinSharedRows = 8;

// Responses written by a session's notifier thread, at most `max_bytes` of
// them queued. Shared with compile listeners, which may outlive the
// session: posting to a closed outbox is a no-op. While it is open its
// session, and so `writer`, is alive (the session closes it before it
// ends).
struct DecodeSession::Outbox {
  Outbox(ReplyWriter* writer, int64_t max_bytes, ServiceMetrics* metrics)
      : writer(writer), max_bytes(max_bytes), metrics(metrics) {}

  ReplyWriter* const writer;
  const int64_t max_bytes;
  ServiceMetrics* const metrics;
  absl::Mutex mu;
  std::deque<v1::DecodeResponse> queue ABSL_GUARDED_BY(mu);
  int64_t queued_bytes ABSL_GUARDED_BY(mu) = 0;
  bool closed ABSL_GUARDED_BY(mu) = false;
  bool overflowed ABSL_GUARDED_BY(mu) = false;

  // What the notifier waits for.
  bool HasWork() const ABSL_SHARED_LOCKS_REQUIRED(mu) {
    return closed || !queue.empty();
  }

  // A client that does not read its replies while it keeps sending (opens
  // refused, say) would grow the queue without end: past max_bytes the
  // stream is cut off and what was queued is dropped.
  void Post(v1::DecodeResponse response) {
    const int64_t bytes = static_cast<int64_t>(response.ByteSizeLong());
    absl::MutexLock lock(&mu);
    if (closed || overflowed) return;
    if (queued_bytes + bytes > max_bytes) {
      overflowed = true;
      queue.clear();
      queued_bytes = 0;
      metrics->CountStreamCut("unread_replies");
      writer->Abort(absl::ResourceExhaustedError(
          absl::StrCat("Decode: the client left more than ", max_bytes,
                       " bytes of replies unread "
                       "(--max_outbox_bytes); stream cut off")));
      return;
    }
    queued_bytes += bytes;
    queue.push_back(std::move(response));
  }

  void PostStatus(uint64_t id, const absl::Status& status,
                  const std::string& grammar_id) {
    v1::DecodeResponse response;
    v1::SequenceStatus* s = response.mutable_status();
    s->set_sequence_id(id);
    s->set_grammar_id(grammar_id);
    if (status.ok()) {
      s->set_state(v1::GRAMMAR_STATE_READY);
    } else {
      s->set_state(v1::GRAMMAR_STATE_FAILED);
      SetError(status, s->mutable_error());
      metrics->CountError(status.code());
    }
    Post(std::move(response));
  }
};

DecodeSession::DecodeSession(const DecodeOptions& options,
                             const DecodeResources& shared, std::string peer,
                             ReplyWriter* writer)
    : options_(options),
      shared_(shared),
      peer_(std::move(peer)),
      writer_(writer),
      outbox_(std::make_shared<Outbox>(writer, options.max_outbox_bytes,
                                       shared.metrics)) {
  notifier_ = std::thread([this] { Notify(); });
}

DecodeSession::~DecodeSession() {
  {
    absl::MutexLock lock(&outbox_->mu);
    outbox_->closed = true;
  }
  notifier_.join();
  for (const auto& [id, slot] : sequences_) Release(slot);
  shared_.metrics->active_sequences->Add(
      -static_cast<double>(sequences_.size()));
  shared_.metrics->sequence_memory_bytes->Set(
      static_cast<double>(shared_.sequence_memory->used()));
}

void DecodeSession::PostStatus(uint64_t id, const absl::Status& status) {
  outbox_->PostStatus(id, status, "");
}

void DecodeSession::Notify() {
  Outbox& box = *outbox_;
  for (;;) {
    v1::DecodeResponse response;
    {
      absl::MutexLock lock(&box.mu, absl::Condition(&box, &Outbox::HasWork));
      if (box.queue.empty()) return;  // closed
      response = std::move(box.queue.front());
      box.queue.pop_front();
      box.queued_bytes -= static_cast<int64_t>(response.ByteSizeLong());
    }
    if (!writer_->Write(response)) return;  // the stream is gone
  }
}

void DecodeSession::Open(const v1::OpenSequence& open) {
  const uint64_t id = open.sequence_id();
  if (sequences_.count(id) != 0) {
    PostStatus(id, absl::AlreadyExistsError(absl::StrCat(
                       "sequence ", id, " is already open on this stream")));
    return;
  }
  if (static_cast<int>(sequences_.size()) >=
      options_.max_sequences_per_stream) {
    PostStatus(id, absl::ResourceExhaustedError(absl::StrCat(
                       "sequence ", id, ": the stream already holds ",
                       sequences_.size(),
                       " open sequences (--max_sequences_per_stream)")));
    return;
  }
  Slot& slot = sequences_[id];
  shared_.metrics->active_sequences->Add(1);
  slot.reasoning.enabled = open.reasoning().enabled();
  slot.reasoning.think_end_token = open.reasoning().think_end_token_id();
  slot.jump_forward = open.jump_forward();
  slot.keeps_previous_row = open.keeps_previous_row();

  auto refuse = [&](const absl::Status& status) {
    slot.failed = status;
    PostStatus(id, status);
  };
  for (const auto& [text, field, max] :
       {std::tuple{&open.tokenizer(), "tokenizer", kMaxNameBytes},
        std::tuple{&open.grammar_id(), "grammar_id", kMaxGrammarIdBytes}}) {
    if (absl::Status s = CheckName(*text, field, max); !s.ok()) {
      return refuse(absl::InvalidArgumentError(
          absl::StrCat("sequence ", id, ": ", s.message())));
    }
  }
  std::shared_ptr<const TokenizerEntry> tokenizer;
  if (!open.tokenizer().empty() ||
      open.grammar_case() == v1::OpenSequence::kConstraint) {
    auto found = shared_.tokenizers->Find(open.tokenizer());
    if (!found.ok()) {
      return refuse(absl::NotFoundError(
          absl::StrCat("sequence ", id, ": ", found.status().message())));
    }
    tokenizer = *std::move(found);
  }
  switch (open.grammar_case()) {
    case v1::OpenSequence::kConstraint: {
      auto submitted =
          shared_.compiles->Submit(tokenizer, open.constraint(), peer_);
      if (!submitted.ok()) {
        return refuse(absl::Status(
            submitted.status().code(),
            absl::StrCat("sequence ", id, ": ", submitted.status().message())));
      }
      slot.job = std::move(submitted->job);
      break;
    }
    case v1::OpenSequence::kGrammarId:
      slot.job = shared_.compiles->Find(open.grammar_id());
      if (slot.job == nullptr) {
        return refuse(absl::NotFoundError(absl::StrCat(
            "sequence ", id, ": grammar id ", open.grammar_id(),
            " is unknown here (evicted, or compiled elsewhere); open with the "
            "constraint instead")));
      }
      break;
    case v1::OpenSequence::GRAMMAR_NOT_SET:
      return refuse(absl::InvalidArgumentError(absl::StrCat(
          "sequence ", id, ": neither a constraint nor a grammar id")));
  }
  if (slot.reasoning.enabled && slot.reasoning.think_end_token < 0) {
    return refuse(absl::InvalidArgumentError(absl::StrCat(
        "sequence ", id, ": reasoning without a think-end token")));
  }
  // The listener may outlive this session and this sequence.
  const std::string grammar_id = slot.job->id();
  const int32_t think_end = slot.reasoning.think_end_token;
  const bool reasoning = slot.reasoning.enabled;
  const std::string fingerprint =
      tokenizer ? tokenizer->vocab->fingerprint() : "";
  std::weak_ptr<char> alive = slot.alive;
  slot.job->OnDone([outbox = outbox_, alive, id, grammar_id, think_end,
                    reasoning, fingerprint](const GrammarEntry& entry) {
    if (alive.expired()) return;
    absl::Status status = entry.status;
    if (status.ok() && !fingerprint.empty() &&
        entry.grammar->vocabulary().fingerprint() != fingerprint) {
      status = absl::InvalidArgumentError(
          "the grammar id was compiled for another tokenizer");
    }
    if (status.ok() && reasoning &&
        think_end >= entry.grammar->vocabulary().size()) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "think-end token ", think_end, " outside the vocabulary"));
    }
    if (!status.ok()) {
      status = absl::Status(
          status.code(), absl::StrCat("sequence ", id, ": ", status.message()));
    }
    outbox->PostStatus(id, status, grammar_id);
  });
}

void DecodeSession::Close(const v1::CloseSequence& close) {
  auto it = sequences_.find(close.sequence_id());
  if (it == sequences_.end()) {
    PostStatus(close.sequence_id(), absl::NotFoundError(absl::StrCat(
                                        "sequence ", close.sequence_id(),
                                        " is not open on this stream")));
    return;
  }
  Release(it->second);
  sequences_.erase(it);
  shared_.metrics->active_sequences->Add(-1);
  shared_.metrics->sequence_memory_bytes->Set(
      static_cast<double>(shared_.sequence_memory->used()));
}

void DecodeSession::Release(const Slot& slot) {
  // Its masks built token tables; a grammar no other request hits again
  // would otherwise hold them uncharged in the cache.
  if (slot.sequence != nullptr) shared_.compiles->Recharge(slot.job->id());
}

absl::Status DecodeSession::Ready(uint64_t id, Slot* slot,
                                  const v1::SequenceStep& step) {
  if (!slot->failed.ok()) return slot->failed;
  const DecodeOptions& o = options_;
  // Sizes first, before anything is allocated from them; a sequence asked
  // for more than the limits allow has failed.
  if (step.draft_tokens_size() > o.max_draft_tokens) {
    slot->failed = absl::ResourceExhaustedError(
        absl::StrCat("sequence ", id, ": ", step.draft_tokens_size(),
                     " draft_tokens in one step; at most ", o.max_draft_tokens,
                     " (--max_draft_tokens)"));
    return slot->failed;
  }
  if (o.max_sequence_tokens > 0 &&
      step.accepted_tokens_size() > o.max_sequence_tokens) {
    slot->failed = absl::ResourceExhaustedError(
        absl::StrCat("sequence ", id, ": ", step.accepted_tokens_size(),
                     " accepted_tokens in one step; a sequence holds at most ",
                     o.max_sequence_tokens, " (--max_sequence_tokens)"));
    return slot->failed;
  }
  if (slot->sequence != nullptr) return absl::OkStatus();
  std::shared_ptr<const GrammarEntry> entry = slot->job->result();
  if (entry == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("sequence ", id,
                     ": its grammar is still compiling; wait for its "
                     "READY status"));
  }
  absl::Status status = entry->status;
  if (status.ok() && slot->reasoning.enabled &&
      slot->reasoning.think_end_token >= entry->grammar->vocabulary().size()) {
    status =
        absl::InvalidArgumentError("think-end token outside the vocabulary");
  }
  if (!status.ok()) {
    slot->failed = absl::FailedPreconditionError(absl::StrCat(
        "sequence ", id, ": its grammar failed: ", status.message()));
    return slot->failed;
  }
  SequenceLimits limits;
  limits.max_tokens = o.max_sequence_tokens;
  limits.memory = shared_.sequence_memory;
  slot->sequence =
      std::make_unique<Sequence>(id, *entry->grammar, slot->reasoning, limits);
  return absl::OkStatus();
}

void DecodeSession::RefuseStep(const absl::Status& status,
                               v1::StepResult* result) {
  result->clear_sequences();
  SetError(status, result->mutable_error());
  shared_.metrics->CountError(status.code());
}

bool DecodeSession::Step(const v1::Step& step, v1::DecodeResponse* reply) {
  ApplyStep(step, reply->mutable_step());
  return writer_->Write(*reply);
}

void DecodeSession::ApplyStep(const v1::Step& step, v1::StepResult* result) {
  result->set_step_id(step.step_id());
  const DecodeOptions& o = options_;
  if (step.sequences_size() > o.max_sequences_per_stream) {
    return RefuseStep(
        absl::ResourceExhaustedError(absl::StrCat(
            "Decode: step ", step.step_id(), " lists ", step.sequences_size(),
            " sequences; a stream holds at most ", o.max_sequences_per_stream,
            " (--max_sequences_per_stream)")),
        result);
  }
  int64_t rows = 0;
  for (const v1::SequenceStep& s : step.sequences()) {
    rows += 1 + std::min(s.draft_tokens_size(), o.max_draft_tokens);
  }
  if (rows > o.max_step_rows) {
    return RefuseStep(absl::ResourceExhaustedError(absl::StrCat(
                          "Decode: step ", step.step_id(), " asks for ", rows,
                          " mask rows; a step has at most ", o.max_step_rows,
                          " (--max_step_rows)")),
                      result);
  }
  std::vector<Work>& work = work_;
  work.clear();
  ++step_serial_;
  for (const v1::SequenceStep& s : step.sequences()) {
    v1::SequenceResult* r = result->add_sequences();
    r->set_sequence_id(s.sequence_id());
    absl::Status status;
    auto it = sequences_.find(s.sequence_id());
    if (it == sequences_.end()) {
      status = absl::NotFoundError(absl::StrCat("sequence ", s.sequence_id(),
                                                " is not open on this stream"));
    } else if (it->second.stepped_in == step_serial_) {
      status = absl::InvalidArgumentError(
          absl::StrCat("sequence ", s.sequence_id(), " appears twice in step ",
                       step.step_id()));
    } else {
      it->second.stepped_in = step_serial_;
      status = Ready(s.sequence_id(), &it->second, s);
    }
    if (!status.ok()) {
      SetError(status, r->mutable_error());
      shared_.metrics->CountError(status.code());
      continue;
    }
    work.push_back(Work{&it->second, &s, r});
  }
  shared_.fill->ForEach(work.size(), kMinSharedSequences,
                        [&](size_t i) { RunOne(work[i]); });
  // Rows in wire order; a keyed first row is filled only if the encoder
  // cannot settle it by its key.
  std::vector<Slot*>& added = added_;
  added.clear();
  for (const Work& w : work) {
    if (w.result->rows_size() == 0) continue;  // failed
    const int32_t vocab_size = w.slot->sequence->vocab_size();
    const size_t words = static_cast<size_t>(vocab_size + 31) / 32;
    for (int i = 0; i < w.result->rows_size(); ++i) {
      row_encoder_.Add(
          w.slot->rows.data() + static_cast<size_t>(i) * words, vocab_size,
          i == 0 ? RowKey{w.slot->key, &w.slot->sequence->key_owner()}
                 : RowKey{},
          i == 0 ? &w.slot->first_row : nullptr,
          i == 0 && w.slot->keeps_previous_row, w.result->mutable_rows(i));
      added.push_back(w.slot);
    }
  }
  const std::vector<size_t>& to_fill = row_encoder_.Settle();
  shared_.fill->ForEach(to_fill.size(), kMinSharedRows, [&](size_t i) {
    Slot& slot = *added[to_fill[i]];
    const auto start = Clock::now();
    slot.sequence->FillRows({}, slot.rows.data());
    slot.fill_time += Clock::now() - start;
  });
  row_encoder_.Finish([this](size_t n, const std::function<void(size_t)>& fn) {
    shared_.fill->ForEach(n, kMinSharedRows, fn);
  });
  shared_.metrics->sequence_memory_bytes->Set(
      static_cast<double>(shared_.sequence_memory->used()));
  // Scratch of a step with many drafts goes back; the next one with as
  // many allocates it again.
  constexpr size_t kKeptScratchRows = 16;
  for (const Work& w : work) {
    if (w.slot->sequence == nullptr) continue;
    const size_t words = static_cast<size_t>(w.slot->sequence->mask_words());
    if (w.slot->rows.capacity() > kKeptScratchRows * words) {
      std::vector<uint32_t>().swap(w.slot->rows);
    }
  }
  const size_t reply_bytes = result->ByteSizeLong();
  if (static_cast<int64_t>(reply_bytes) > o.max_message_bytes) {
    // Dense rows of a large vocabulary, many of them. The sequences did
    // advance: they fail, and say so.
    const absl::Status lost = absl::ResourceExhaustedError(absl::StrCat(
        "Decode: step ", step.step_id(), "'s reply would take ", reply_bytes,
        " bytes, over the message limit of ", o.max_message_bytes,
        " (--max_message_bytes); its sequences advanced and lost their rows: "
        "close them, and step fewer sequences at once"));
    for (const Work& w : work) w.slot->failed = lost;
    return RefuseStep(lost, result);
  }
  for (const Work& w : work) {
    if (w.result->has_error()) {  // failed in RunOne: no rows
      shared_.metrics->CountError(
          static_cast<absl::StatusCode>(w.result->error().code()));
      continue;
    }
    shared_.metrics->mask_fill_seconds->Observe(
        std::chrono::duration<double>(w.slot->fill_time).count());
    for (const v1::MaskRow& row : w.result->rows()) {
      shared_.metrics->CountMaskRow(proto::EncodingOf(row), row.ByteSizeLong());
    }
  }
}

void DecodeSession::RunOne(const Work& work) {
  // On a fill thread: an allocation that fails (the sizes were checked
  // first, so the machine is out of memory) fails this sequence only.
  try {
    AdvanceAndFill(work);
  } catch (const std::bad_alloc&) {
    const absl::Status lost = absl::ResourceExhaustedError(
        absl::StrCat("sequence ", work.step->sequence_id(),
                     ": out of memory in this step; close it"));
    work.slot->failed = lost;
    work.slot->sequence.reset();
    work.result->clear_rows();
    SetError(lost, work.result->mutable_error());
  }
}

void DecodeSession::AdvanceAndFill(const Work& work) {
  const auto start = Clock::now();
  Slot& slot = *work.slot;
  Sequence& seq = *slot.sequence;
  const v1::SequenceStep& step = *work.step;
  v1::SequenceResult* result = work.result;
  absl::Status advanced = seq.Advance(
      step.rollback(),
      absl::MakeConstSpan(step.accepted_tokens().data(),
                          static_cast<size_t>(step.accepted_tokens_size())));
  if (!advanced.ok()) {
    slot.failed =
        absl::Status(advanced.code() == absl::StatusCode::kResourceExhausted
                         ? advanced.code()
                         : absl::StatusCode::kFailedPrecondition,
                     absl::StrCat(advanced.message(),
                                  "; the sequence has failed, close it"));
    // Its matcher goes at once: a sequence over a memory limit must not
    // keep holding it until its client closes it.
    slot.sequence.reset();
    SetError(advanced, result->mutable_error());
    return;
  }
  const int32_t words = seq.mask_words();
  const size_t num_rows = 1 + static_cast<size_t>(step.draft_tokens_size());
  slot.rows.resize(num_rows * static_cast<size_t>(words));
  // Without drafts a key may spare the fill (see ApplyStep).
  if (num_rows > 1 || !seq.NextRowKey(&slot.key)) {
    slot.key.clear();
    seq.FillRows(
        absl::MakeConstSpan(step.draft_tokens().data(),
                            static_cast<size_t>(step.draft_tokens_size())),
        slot.rows.data());
  }
  slot.fill_time = Clock::now() - start;
  for (size_t i = 0; i < num_rows; ++i) {
    result->add_rows();  // encoded by row_encoder_ once the step is filled
  }
  result->set_terminated(seq.IsTerminated());
  result->set_can_terminate(seq.CanTerminate());
  if (slot.jump_forward) {
    grammar::ForcedContinuation forced = seq.JumpForward();
    result->set_jump_forward_bytes(std::move(forced.bytes));
    for (int32_t id : forced.token_ids) result->add_jump_forward_tokens(id);
  }
}

}  // namespace grammard::service
