#include "client/grammard_client.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "client/client.h"
#include "client/cuda_mask_applier.h"
#include "client/rank_exchange.h"

namespace gc = grammard::client;

struct grammard_client {
  std::unique_ptr<gc::Client> client;
  std::unique_ptr<gc::CudaMaskApplier> cuda;  // made on first use
  std::vector<gc::SequenceMasks> results;     // reused across steps
};

namespace {

// The last error is kept per thread, naming its handle: engines call one
// handle from several threads (compile pools), and a per-handle string let
// one thread's success wipe another's error before it was read (and was a
// data race).
struct LastError {
  const grammard_client* handle = nullptr;
  std::string message;
};
thread_local LastError last_error;

void SetLastError(const grammard_client* c, absl::string_view message) {
  last_error.handle = c;
  last_error.message.assign(message.data(), message.size());
}

int32_t Report(grammard_client* c, const absl::Status& status) {
  SetLastError(c, status.message());
  return static_cast<int32_t>(status.code());
}

// Whether the handle can make calls (a failed connect leaves it unable).
absl::Status Usable(grammard_client* c) {
  if (c->client == nullptr) {
    return absl::FailedPreconditionError(
        "this handle never connected; destroy it and connect again");
  }
  return absl::OkStatus();
}

std::chrono::milliseconds Millis(int64_t ms, std::chrono::milliseconds dflt) {
  return ms > 0 ? std::chrono::milliseconds(ms) : dflt;
}

void Outcomes(const std::vector<gc::SequenceMasks>& results, int32_t* codes,
              uint8_t* flags) {
  for (size_t i = 0; i < results.size(); ++i) {
    if (codes != nullptr) {
      codes[i] = static_cast<int32_t>(results[i].status.code());
    }
    if (flags != nullptr) {
      flags[i] = static_cast<uint8_t>(
          (results[i].terminated ? GRAMMARD_FLAG_TERMINATED : 0) |
          (results[i].can_terminate ? GRAMMARD_FLAG_CAN_TERMINATE : 0));
    }
  }
}

absl::StatusOr<grammard::gpu::LogitsView> Logits(void* data, int32_t dtype,
                                                 int64_t rows, int64_t vocab,
                                                 int64_t row_stride) {
  if (dtype < GRAMMARD_DTYPE_FLOAT32 || dtype > GRAMMARD_DTYPE_BFLOAT16) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown logits dtype ", dtype));
  }
  return grammard::gpu::LogitsView{
      data, static_cast<grammard::gpu::LogitsDtype>(dtype), rows, vocab,
      row_stride};
}

absl::Status Open(grammard_client* c, uint64_t id,
                  const grammard::v1::Constraint& constraint,
                  int32_t think_end_token, bool jump_forward = false) {
  gc::SequenceOptions options;
  options.reasoning = think_end_token >= 0;
  options.think_end_token = think_end_token;
  options.jump_forward = jump_forward;
  return c->client->Open(id, constraint, options);
}

absl::StatusOr<grammard::v1::Constraint> ParseConstraint(const void* data,
                                                         size_t size) {
  grammard::v1::Constraint c;
  if (size > static_cast<size_t>(INT32_MAX) ||
      !c.ParseFromArray(data, static_cast<int>(size))) {
    return absl::InvalidArgumentError(
        "the constraint is not a serialized grammard.v1.Constraint");
  }
  return c;
}

// Copies `text` into `out` (capacity bytes, NUL-terminated, cut to fit).
void CopyText(const std::string& text, char* out, size_t capacity) {
  if (out == nullptr || capacity == 0) return;
  const size_t n = std::min(text.size(), capacity - 1);
  std::copy(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(n), out);
  out[n] = '\0';
}

// A JSON string literal of `s` (names and fingerprints: UTF-8 checked by
// the daemon).
std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Masking without a client (grammard_apply_mask_*): the views, or why not.
absl::Status MaskViews(void* logits, int32_t dtype, int64_t rows, int64_t vocab,
                       int64_t row_stride, const uint32_t* mask,
                       int64_t mask_rows, int64_t words_per_row,
                       int64_t mask_row_stride, int64_t mask_vocab,
                       const int32_t* indices,
                       grammard::gpu::LogitsView* logits_view,
                       grammard::gpu::TokenMaskView* mask_view) {
  auto view = Logits(logits, dtype, rows, vocab, row_stride);
  if (!view.ok()) return view.status();
  *logits_view = *view;
  *mask_view = grammard::gpu::TokenMaskView{
      mask, mask_rows, words_per_row, mask_row_stride, mask_vocab, indices};
  return absl::OkStatus();
}

int32_t ReportTo(const absl::Status& status, char* error, size_t capacity) {
  CopyText(std::string(status.message()), error, capacity);
  return static_cast<int32_t>(status.code());
}

}  // namespace

extern "C" {

int32_t grammard_client_connect(const grammard_client_options* options,
                                grammard_client** out) {
  if (out == nullptr)
    return static_cast<int32_t>(absl::StatusCode::kInvalidArgument);
  *out = new (std::nothrow) grammard_client();
  if (*out == nullptr) {
    return static_cast<int32_t>(absl::StatusCode::kResourceExhausted);
  }
  if (options == nullptr) {
    return Report(*out, absl::InvalidArgumentError("null options"));
  }
  gc::ClientOptions o;
  const auto text = [](const char* s) { return s != nullptr ? s : ""; };
  o.target = text(options->target);
  o.tokenizer = text(options->tokenizer);
  o.tls = options->tls != 0;
  o.tls_ca_file = text(options->tls_ca_file);
  o.tls_cert_file = text(options->tls_cert_file);
  o.tls_key_file = text(options->tls_key_file);
  o.auth_token_file = text(options->auth_token_file);
  o.connect_timeout = Millis(options->connect_timeout_ms, o.connect_timeout);
  o.step_timeout = Millis(options->step_timeout_ms, o.step_timeout);
  o.outage_timeout = Millis(options->outage_timeout_ms, o.outage_timeout);
  o.backoff_initial = Millis(options->backoff_initial_ms, o.backoff_initial);
  o.backoff_max = Millis(options->backoff_max_ms, o.backoff_max);
  auto client = gc::Client::Connect(o);
  if (!client.ok()) return Report(*out, client.status());
  (*out)->client = *std::move(client);
  return Report(*out, absl::OkStatus());
}

void grammard_client_destroy(grammard_client* client) {
  if (client == nullptr) return;
  client->cuda.reset();  // it uses the client
  delete client;
}

const char* grammard_client_last_error(const grammard_client* client) {
  if (client == nullptr) return "null handle";
  return last_error.handle == client ? last_error.message.c_str() : "";
}

int32_t grammard_client_vocab_size(const grammard_client* client) {
  return client != nullptr && client->client ? client->client->vocab_size() : 0;
}

int32_t grammard_client_words_per_row(const grammard_client* client) {
  return client != nullptr && client->client ? client->client->words_per_row()
                                             : 0;
}

int64_t grammard_client_eos_token_ids(const grammard_client* client,
                                      int32_t* ids, int64_t capacity) {
  if (client == nullptr || !client->client) return 0;
  const std::vector<int32_t>& eos = client->client->eos_token_ids();
  for (int64_t i = 0; i < capacity && i < static_cast<int64_t>(eos.size());
       ++i) {
    ids[i] = eos[static_cast<size_t>(i)];
  }
  return static_cast<int64_t>(eos.size());
}

int32_t grammard_client_list_tokenizers(grammard_client* client, char* json,
                                        size_t capacity, size_t* length) {
  if (absl::Status s = Usable(client); !s.ok()) return Report(client, s);
  auto listed = client->client->ListTokenizers();
  if (!listed.ok()) return Report(client, listed.status());
  std::string text = "[";
  for (const gc::TokenizerInfo& t : *listed) {
    if (text.size() > 1) text += ",";
    absl::StrAppend(&text, "{\"name\":", JsonString(t.name),
                    ",\"fingerprint\":", JsonString(t.fingerprint),
                    ",\"vocab_size\":", t.vocab_size, ",\"eos_token_ids\":[",
                    absl::StrJoin(t.eos_token_ids, ","), "]}");
  }
  text += "]";
  if (length != nullptr) *length = text.size();
  if (json == nullptr || capacity <= text.size()) {
    return Report(client, absl::ResourceExhaustedError(absl::StrCat(
                              "list_tokenizers: ", text.size() + 1,
                              " bytes needed, ", capacity, " given")));
  }
  CopyText(text, json, capacity);
  return Report(client, absl::OkStatus());
}

int32_t grammard_client_open(grammard_client* client, uint64_t sequence_id,
                             int32_t kind, const char* text, size_t text_len,
                             int32_t json_whitespace, int32_t think_end_token) {
  if (absl::Status s = Usable(client); !s.ok()) return Report(client, s);
  const std::string body =
      text != nullptr ? std::string(text, text_len) : std::string();
  grammard::v1::Constraint c;
  switch (kind) {
    case GRAMMARD_CONSTRAINT_JSON_SCHEMA:
      c.set_json_schema(body);
      break;
    case GRAMMARD_CONSTRAINT_JSON_OBJECT:
      c.mutable_json_object();
      break;
    case GRAMMARD_CONSTRAINT_REGEX:
      c.set_regex(body);
      break;
    case GRAMMARD_CONSTRAINT_EBNF:
      c.mutable_grammar()->set_text(body);
      break;
    case GRAMMARD_CONSTRAINT_CHOICE: {
      // '\0'-separated; a trailing separator ends the last choice.
      size_t start = 0;
      while (start < body.size()) {
        size_t end = body.find('\0', start);
        if (end == std::string::npos) end = body.size();
        c.mutable_choice()->add_choices(body.substr(start, end - start));
        start = end + 1;
      }
      break;
    }
    case GRAMMARD_CONSTRAINT_STRUCTURAL_TAG:
      c.set_structural_tag(body);
      break;
    default:
      return Report(client, absl::InvalidArgumentError(absl::StrCat(
                                "unknown constraint kind ", kind)));
  }
  if (json_whitespace < 0 || json_whitespace > 2) {
    return Report(client, absl::InvalidArgumentError(absl::StrCat(
                              "unknown json_whitespace ", json_whitespace)));
  }
  c.mutable_json_options()->set_whitespace(
      static_cast<grammard::v1::JsonOptions::Whitespace>(json_whitespace));
  return Report(client, Open(client, sequence_id, c, think_end_token));
}

int32_t grammard_client_open_proto(grammard_client* client,
                                   uint64_t sequence_id, const void* constraint,
                                   size_t size, int32_t think_end_token) {
  const grammard_open_options options{think_end_token, 0};
  return grammard_client_open_with(client, sequence_id, constraint, size,
                                   &options);
}

int32_t grammard_client_open_with(grammard_client* client, uint64_t sequence_id,
                                  const void* constraint, size_t size,
                                  const grammard_open_options* options) {
  if (absl::Status s = Usable(client); !s.ok()) return Report(client, s);
  auto c = ParseConstraint(constraint, size);
  if (!c.ok()) return Report(client, c.status());
  const int32_t think_end = options != nullptr ? options->think_end_token : -1;
  const bool jump = options != nullptr && options->jump_forward != 0;
  return Report(client, Open(client, sequence_id, *c, think_end, jump));
}

int32_t grammard_client_compile(grammard_client* client, const void* constraint,
                                size_t size, int32_t wait, int64_t timeout_ms,
                                char* grammar_id, size_t grammar_id_capacity,
                                int32_t* state) {
  if (absl::Status s = Usable(client); !s.ok()) return Report(client, s);
  auto c = ParseConstraint(constraint, size);
  if (!c.ok()) return Report(client, c.status());
  auto compiled = client->client->Compile(
      *c, wait != 0,
      std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms)));
  if (!compiled.ok()) return Report(client, compiled.status());
  CopyText(compiled->grammar_id, grammar_id, grammar_id_capacity);
  if (state != nullptr) {
    *state = compiled->state == gc::GrammarState::kReady ? GRAMMARD_STATE_READY
             : compiled->state == gc::GrammarState::kFailed
                 ? GRAMMARD_STATE_FAILED
                 : GRAMMARD_STATE_COMPILING;
  }
  return Report(client, compiled->error);
}

int32_t grammard_client_close(grammard_client* client, uint64_t sequence_id) {
  if (absl::Status s = Usable(client); !s.ok()) return Report(client, s);
  return Report(client, client->client->Close(sequence_id));
}

int32_t grammard_client_state(grammard_client* client, uint64_t sequence_id,
                              int32_t* state) {
  if (absl::Status s = Usable(client); !s.ok()) return Report(client, s);
  auto got = client->client->State(sequence_id);
  if (!got.ok()) return Report(client, got.status());
  switch (got->state) {
    case gc::GrammarState::kCompiling:
      *state = GRAMMARD_STATE_COMPILING;
      break;
    case gc::GrammarState::kReady:
      *state = GRAMMARD_STATE_READY;
      break;
    case gc::GrammarState::kFailed:
      *state = GRAMMARD_STATE_FAILED;
      SetLastError(client, got->error.message());
      return 0;
  }
  return Report(client, absl::OkStatus());
}

int32_t grammard_client_wait_ready(grammard_client* client, const uint64_t* ids,
                                   int64_t n, int64_t timeout_ms) {
  if (absl::Status s = Usable(client); !s.ok()) return Report(client, s);
  return Report(
      client, client->client->WaitReady(
                  absl::MakeConstSpan(ids, static_cast<size_t>(n)),
                  std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms))));
}

int32_t grammard_client_submit_step(grammard_client* client, int64_t n,
                                    const uint64_t* ids,
                                    const int32_t* rollback,
                                    const int64_t* accepted_offsets,
                                    const int32_t* accepted,
                                    const int64_t* draft_offsets,
                                    const int32_t* drafts) {
  if (absl::Status s = Usable(client); !s.ok()) return Report(client, s);
  if (n < 0 || (n > 0 && (ids == nullptr || accepted_offsets == nullptr))) {
    return Report(client, absl::InvalidArgumentError(
                              "submit_step: negative n, or null ids or "
                              "accepted_offsets"));
  }
  std::vector<gc::StepInput> batch(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    gc::StepInput& in = batch[static_cast<size_t>(i)];
    in.sequence_id = ids[i];
    in.rollback = rollback != nullptr ? rollback[i] : 0;
    const int64_t a = accepted_offsets[i], b = accepted_offsets[i + 1];
    if (b < a || (b > a && accepted == nullptr)) {
      return Report(client, absl::InvalidArgumentError(absl::StrCat(
                                "submit_step: bad accepted offsets at ", i)));
    }
    in.accepted = absl::MakeConstSpan(accepted + a, static_cast<size_t>(b - a));
    if (draft_offsets != nullptr) {
      const int64_t c = draft_offsets[i], d = draft_offsets[i + 1];
      if (d < c || (d > c && drafts == nullptr)) {
        return Report(client, absl::InvalidArgumentError(absl::StrCat(
                                  "submit_step: bad draft offsets at ", i)));
      }
      in.drafts = absl::MakeConstSpan(drafts + c, static_cast<size_t>(d - c));
    }
  }
  return Report(client, client->client->SubmitStep(batch));
}

int64_t grammard_client_pending_rows(grammard_client* client) {
  return client != nullptr && client->client ? client->client->PendingRows()
                                             : 0;
}

int32_t grammard_client_wait_masks(grammard_client* client, uint32_t* words,
                                   int64_t row_stride, int64_t capacity_rows,
                                   int64_t timeout_ms, int32_t* codes,
                                   uint8_t* flags) {
  return grammard_client_wait_masks_at(client, words, row_stride, capacity_rows,
                                       nullptr, timeout_ms, codes, flags);
}

int32_t grammard_client_wait_masks_at(grammard_client* client, uint32_t* words,
                                      int64_t row_stride, int64_t capacity_rows,
                                      const int64_t* rows, int64_t timeout_ms,
                                      int32_t* codes, uint8_t* flags) {
  if (absl::Status s = Usable(client); !s.ok()) return Report(client, s);
  absl::Status s = client->client->WaitMasks(
      {words, row_stride, capacity_rows, rows}, &client->results,
      std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms)));
  if (s.ok()) Outcomes(client->results, codes, flags);
  return Report(client, s);
}

int32_t grammard_client_jump_forward(grammard_client* client, int64_t index,
                                     char* bytes, size_t bytes_capacity,
                                     size_t* bytes_length, int32_t* tokens,
                                     int64_t tokens_capacity,
                                     int64_t* n_tokens) {
  if (absl::Status s = Usable(client); !s.ok()) return Report(client, s);
  if (index < 0 || index >= static_cast<int64_t>(client->results.size())) {
    return Report(client, absl::OutOfRangeError(absl::StrCat(
                              "jump_forward: index ", index, " of a step of ",
                              client->results.size(), " sequences")));
  }
  const gc::SequenceMasks& r = client->results[static_cast<size_t>(index)];
  if (bytes_length != nullptr) *bytes_length = r.jump_forward_bytes.size();
  if (bytes != nullptr) {
    std::copy_n(r.jump_forward_bytes.data(),
                std::min(bytes_capacity, r.jump_forward_bytes.size()), bytes);
  }
  const int64_t n = static_cast<int64_t>(r.jump_forward_tokens.size());
  if (n_tokens != nullptr) *n_tokens = n;
  if (tokens != nullptr) {
    std::copy_n(r.jump_forward_tokens.data(), std::min(tokens_capacity, n),
                tokens);
  }
  return Report(client, absl::OkStatus());
}

int32_t grammard_client_wait_apply_cpu(grammard_client* client, void* logits,
                                       int32_t dtype, int64_t rows,
                                       int64_t vocab, int64_t row_stride,
                                       const int32_t* indices,
                                       int64_t timeout_ms, int32_t* codes,
                                       uint8_t* flags) {
  if (absl::Status s = Usable(client); !s.ok()) return Report(client, s);
  auto view = Logits(logits, dtype, rows, vocab, row_stride);
  if (!view.ok()) return Report(client, view.status());
  client->results.clear();
  absl::Status s = client->client->WaitAndApplyCpu(
      *view, indices, &client->results,
      std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms)));
  Outcomes(client->results, codes, flags);
  return Report(client, s);
}

int32_t grammard_client_wait_apply_cuda(grammard_client* client, void* logits,
                                        int32_t dtype, int64_t rows,
                                        int64_t vocab, int64_t row_stride,
                                        const int32_t* indices,
                                        void* cuda_stream, int64_t timeout_ms,
                                        int32_t* codes, uint8_t* flags) {
  if (absl::Status s = Usable(client); !s.ok()) return Report(client, s);
  auto view = Logits(logits, dtype, rows, vocab, row_stride);
  if (!view.ok()) return Report(client, view.status());
  if (client->cuda == nullptr) {
    client->cuda = std::make_unique<gc::CudaMaskApplier>(client->client.get());
  }
  client->results.clear();
  absl::Status s = client->cuda->WaitAndApply(
      *view, indices, static_cast<cudaStream_t>(cuda_stream), &client->results,
      std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms)));
  Outcomes(client->results, codes, flags);
  return Report(client, s);
}

int32_t grammard_apply_mask_cpu(void* logits, int32_t dtype, int64_t rows,
                                int64_t vocab, int64_t row_stride,
                                const uint32_t* mask, int64_t mask_rows,
                                int64_t words_per_row, int64_t mask_row_stride,
                                int64_t mask_vocab, const int32_t* indices,
                                char* error, size_t error_capacity) {
  grammard::gpu::LogitsView l;
  grammard::gpu::TokenMaskView m;
  absl::Status s =
      MaskViews(logits, dtype, rows, vocab, row_stride, mask, mask_rows,
                words_per_row, mask_row_stride, mask_vocab, indices, &l, &m);
  if (s.ok()) s = grammard::gpu::ApplyTokenMaskCpu(l, m);
  return ReportTo(s, error, error_capacity);
}

int32_t grammard_apply_mask_cuda(void* logits, int32_t dtype, int64_t rows,
                                 int64_t vocab, int64_t row_stride,
                                 const uint32_t* mask, int64_t mask_rows,
                                 int64_t words_per_row, int64_t mask_row_stride,
                                 int64_t mask_vocab, const int32_t* indices,
                                 void* cuda_stream, char* error,
                                 size_t error_capacity) {
  grammard::gpu::LogitsView l;
  grammard::gpu::TokenMaskView m;
  absl::Status s =
      MaskViews(logits, dtype, rows, vocab, row_stride, mask, mask_rows,
                words_per_row, mask_row_stride, mask_vocab, indices, &l, &m);
  if (s.ok()) {
    s = grammard::gpu::ApplyTokenMaskInplace(
        l, m, static_cast<cudaStream_t>(cuda_stream));
  }
  return ReportTo(s, error, error_capacity);
}

int32_t grammard_client_sync_readiness(grammard_client* client,
                                       const char* group, uint64_t round,
                                       int32_t rank, int32_t world_size,
                                       const uint64_t* ids, int64_t n,
                                       int64_t timeout_ms, int32_t* agreed) {
  if (absl::Status s = Usable(client); !s.ok()) return Report(client, s);
  gc::GrammardRankExchange exchange(client->client->channel(),
                                    group != nullptr ? group : "", rank,
                                    world_size);
  const auto span = absl::MakeConstSpan(ids, static_cast<size_t>(n));
  auto outcome = gc::SyncReadiness(
      *client->client, exchange, round, span,
      Millis(timeout_ms, client->client->options().step_timeout));
  if (!outcome.ok()) return Report(client, outcome.status());
  for (int64_t i = 0; i < n; ++i) {
    const auto& r = outcome->ready;
    const auto& f = outcome->failed;
    agreed[i] = std::binary_search(f.begin(), f.end(), ids[i])
                    ? GRAMMARD_STATE_FAILED
                : std::binary_search(r.begin(), r.end(), ids[i])
                    ? GRAMMARD_STATE_READY
                    : GRAMMARD_STATE_COMPILING;
  }
  return Report(client, absl::OkStatus());
}

int32_t grammard_client_metrics_snapshot(grammard_client* client,
                                         grammard_client_metrics* out) {
  if (absl::Status s = Usable(client); !s.ok()) return Report(client, s);
  const gc::ClientMetrics m = client->client->Metrics();
  const auto copy = [](const gc::LatencyHistogram& h, grammard_latency* o) {
    static_assert(gc::LatencyHistogram::kBuckets + 1 ==
                  GRAMMARD_LATENCY_BUCKETS);
    std::copy(h.buckets.begin(), h.buckets.end(), o->buckets);
    o->count = h.count;
    o->sum_seconds = h.sum_seconds;
    o->max_seconds = h.max_seconds;
  };
  out->steps = m.steps;
  copy(m.step_latency, &out->step_latency);
  copy(m.wait_time, &out->wait_time);
  out->reconnects = m.reconnects;
  out->reconnect_attempts = m.reconnect_attempts;
  out->outages_given_up = m.outages_given_up;
  out->outage_seconds = m.outage_seconds;
  out->replayed_sequences = m.replayed_sequences;
  out->replayed_tokens = m.replayed_tokens;
  return Report(client, absl::OkStatus());
}

}  // extern "C"
