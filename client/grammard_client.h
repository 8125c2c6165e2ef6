/* The client's C ABI, for engines in other languages (Python through ctypes
 * or cffi: load libgrammard_client.so). It wraps client.h one call for one
 * call; see there for the semantics, restart survival included.
 *
 * Errors: every call returns 0 or a canonical gRPC status code (google.rpc.
 * Code numbers: 3 INVALID_ARGUMENT, 4 DEADLINE_EXCEEDED, 5 NOT_FOUND,
 * 9 FAILED_PRECONDITION, 14 UNAVAILABLE, ...); grammard_client_last_error
 * gives the message of the calling thread's last call on that handle.
 *
 * Batches are flat arrays: sequence i of a step accepted
 * accepted[accepted_offsets[i] .. accepted_offsets[i + 1]) (offsets has
 * n + 1 entries), likewise for drafts. Mask rows come back in batch order,
 * 1 + drafts rows per sequence, each row_stride uint32 words apart; bit
 * t % 32 of word t / 32 set means token t is allowed.
 *
 * Cost: as client.h, plus copying the batch arrays.
 * Thread-safety: as client.h; the last error is per thread (like errno):
 * read it from the thread that made the failed call, before that thread's
 * next call; other threads' calls on the handle leave it alone. */
#ifndef GRAMMARD_CLIENT_GRAMMARD_CLIENT_H_
#define GRAMMARD_CLIENT_GRAMMARD_CLIENT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grammard_client grammard_client;

typedef struct grammard_client_options {
  const char* target;      /* "host:port" or any gRPC target */
  const char* tokenizer;   /* name or fingerprint served by the daemon */
  int32_t tls;             /* nonzero: TLS */
  const char* tls_ca_file; /* PEM roots; NULL or "": the system's */
  /* Milliseconds; 0 or less: the defaults of client.h's ClientOptions. */
  int64_t connect_timeout_ms;
  int64_t step_timeout_ms;
  int64_t outage_timeout_ms;
  int64_t backoff_initial_ms;
  int64_t backoff_max_ms;
  /* Mutual TLS: this node's PEM certificate and key; NULL or "": none. */
  const char* tls_cert_file;
  const char* tls_key_file;
  /* A file holding the daemon's bearer token (needs tls); NULL or "": none. */
  const char* auth_token_file;
} grammard_client_options;

/* Connects (blocking up to connect_timeout_ms). *out receives a handle even
 * when the call fails, so grammard_client_last_error can say why; only
 * OOM or a null `options`/`out` leave it NULL. Destroy it in every case. */
int32_t grammard_client_connect(const grammard_client_options* options,
                                grammard_client** out);
void grammard_client_destroy(grammard_client* client);
/* Never NULL; "" after a successful call. */
const char* grammard_client_last_error(const grammard_client* client);

int32_t grammard_client_vocab_size(const grammard_client* client);
int32_t grammard_client_words_per_row(const grammard_client* client);
/* Writes up to `capacity` end-of-sequence ids; returns how many there are. */
int64_t grammard_client_eos_token_ids(const grammard_client* client,
                                      int32_t* ids, int64_t capacity);

/* The daemon's tokenizers as a JSON array of {"name", "fingerprint",
 * "vocab_size", "eos_token_ids"}, NUL-terminated, into json (capacity
 * bytes); *length receives the text's length. RESOURCE_EXHAUSTED (8) when
 * it does not fit: call again with *length + 1 bytes. */
int32_t grammard_client_list_tokenizers(grammard_client* client, char* json,
                                        size_t capacity, size_t* length);

enum {
  GRAMMARD_CONSTRAINT_JSON_SCHEMA = 1, /* text: the schema */
  GRAMMARD_CONSTRAINT_JSON_OBJECT = 2, /* text ignored */
  GRAMMARD_CONSTRAINT_REGEX = 3,
  GRAMMARD_CONSTRAINT_EBNF = 4,   /* root rule "root" */
  GRAMMARD_CONSTRAINT_CHOICE = 5, /* choices separated by '\0' */
  GRAMMARD_CONSTRAINT_STRUCTURAL_TAG = 6
};

/* Opens a sequence. json_whitespace: 0 any, 1 compact, 2 indented (JSON
 * kinds); think_end_token >= 0 starts it in a reasoning section. */
int32_t grammard_client_open(grammard_client* client, uint64_t sequence_id,
                             int32_t kind, const char* text, size_t text_len,
                             int32_t json_whitespace, int32_t think_end_token);
/* Opens a sequence with a serialized grammard.v1.Constraint (every option
 * of the proto). */
int32_t grammard_client_open_proto(grammard_client* client,
                                   uint64_t sequence_id, const void* constraint,
                                   size_t size, int32_t think_end_token);
/* Options of grammard_client_open_with. */
typedef struct grammard_open_options {
  int32_t think_end_token; /* >= 0: starts in a reasoning section it ends */
  int32_t jump_forward;    /* nonzero: every step reports what the grammar
                              forces next (grammard_client_jump_forward) */
} grammard_open_options;
/* grammard_client_open_proto with every option of a sequence; options may
 * be NULL (none). */
int32_t grammard_client_open_with(grammard_client* client, uint64_t sequence_id,
                                  const void* constraint, size_t size,
                                  const grammard_open_options* options);
int32_t grammard_client_close(grammard_client* client, uint64_t sequence_id);

/* Compiles a serialized grammard.v1.Constraint for the client's tokenizer
 * with a call of its own (a step in flight goes on): to warm the daemon's
 * cache before sequences open with it. With `wait`, until it is ready or
 * failed, or timeout_ms (<= 0: step_timeout_ms). *state receives
 * GRAMMARD_STATE_*; grammar_id (NULL, or 33 bytes or more) the grammar's id,
 * NUL-terminated. A constraint that failed returns its error's code, with
 * last_error saying why. A daemon down or restarting is waited for up to
 * outage_timeout_ms (then 14, UNAVAILABLE, naming the outage). */
int32_t grammard_client_compile(grammard_client* client, const void* constraint,
                                size_t size, int32_t wait, int64_t timeout_ms,
                                char* grammar_id, size_t grammar_id_capacity,
                                int32_t* state);

enum {
  GRAMMARD_STATE_COMPILING = 0,
  GRAMMARD_STATE_READY = 1,
  GRAMMARD_STATE_FAILED = 2 /* last_error: the sequence's error */
};
int32_t grammard_client_state(grammard_client* client, uint64_t sequence_id,
                              int32_t* state);
/* timeout_ms <= 0: step_timeout_ms. */
int32_t grammard_client_wait_ready(grammard_client* client, const uint64_t* ids,
                                   int64_t n, int64_t timeout_ms);

/* rollback, draft_offsets and drafts may be NULL (none). */
int32_t grammard_client_submit_step(grammard_client* client, int64_t n,
                                    const uint64_t* ids,
                                    const int32_t* rollback,
                                    const int64_t* accepted_offsets,
                                    const int32_t* accepted,
                                    const int64_t* draft_offsets,
                                    const int32_t* drafts);
/* Rows of the step in flight; 0 when none. */
int64_t grammard_client_pending_rows(grammard_client* client);

/* Per-sequence outcome arrays (n entries, each may be NULL): codes[i] is 0
 * or the sequence's status code (its rows are then all allowed); flags[i]
 * has these bits. */
enum { GRAMMARD_FLAG_TERMINATED = 1, GRAMMARD_FLAG_CAN_TERMINATE = 2 };
int32_t grammard_client_wait_masks(grammard_client* client, uint32_t* words,
                                   int64_t row_stride, int64_t capacity_rows,
                                   int64_t timeout_ms, int32_t* codes,
                                   uint8_t* flags);

enum {
  GRAMMARD_DTYPE_FLOAT32 = 0,
  GRAMMARD_DTYPE_FLOAT16 = 1,
  GRAMMARD_DTYPE_BFLOAT16 = 2
};
/* grammard_client_wait_masks, with step row r written at buffer row
 * rows[r] (NULL: row r): a batch lands in the engine's own row order.
 * rows holds pending_rows distinct entries below capacity_rows. */
int32_t grammard_client_wait_masks_at(grammard_client* client, uint32_t* words,
                                      int64_t row_stride, int64_t capacity_rows,
                                      const int64_t* rows, int64_t timeout_ms,
                                      int32_t* codes, uint8_t* flags);

/* For sequence `index` (its place in the last waited step) opened with
 * jump_forward: the bytes the grammar forces next (into bytes, up to
 * bytes_capacity; *bytes_length receives their full length) and the tokens
 * of a tokenization of a prefix of them (into tokens, up to
 * tokens_capacity; *n_tokens receives their full count). Any out-pointer
 * may be NULL. OUT_OF_RANGE (11) for an index outside the last step. */
int32_t grammard_client_jump_forward(grammard_client* client, int64_t index,
                                     char* bytes, size_t bytes_capacity,
                                     size_t* bytes_length, int32_t* tokens,
                                     int64_t tokens_capacity,
                                     int64_t* n_tokens);

/* Waits, then masks host logits (rows x vocab, row_stride elements apart):
 * mask row k applies to logits row indices[k], or row k if indices is
 * NULL. */
int32_t grammard_client_wait_apply_cpu(grammard_client* client, void* logits,
                                       int32_t dtype, int64_t rows,
                                       int64_t vocab, int64_t row_stride,
                                       const int32_t* indices,
                                       int64_t timeout_ms, int32_t* codes,
                                       uint8_t* flags);
/* The same on device logits, on `cuda_stream` (a cudaStream_t; NULL: the
 * default stream); indices in host memory. Nothing waits for the GPU. */
int32_t grammard_client_wait_apply_cuda(grammard_client* client, void* logits,
                                        int32_t dtype, int64_t rows,
                                        int64_t vocab, int64_t row_stride,
                                        const int32_t* indices,
                                        void* cuda_stream, int64_t timeout_ms,
                                        int32_t* codes, uint8_t* flags);

/* Masking without a client, for engines that keep their own packed mask
 * rows (mask_rows rows of words_per_row words, mask_row_stride words apart,
 * covering mask_vocab tokens: -1 for words_per_row * 32): mask row k
 * applies to logits row indices[k], or row k when indices is NULL. On
 * failure the status code is returned and a message written to error (up
 * to error_capacity bytes, NUL-terminated; error may be NULL).
 * grammard_apply_mask_cpu: host logits and mask. grammard_apply_mask_cuda:
 * logits, mask and indices in device memory, masked on cuda_stream (a
 * cudaStream_t; NULL: the default stream); nothing waits for the GPU. */
int32_t grammard_apply_mask_cpu(void* logits, int32_t dtype, int64_t rows,
                                int64_t vocab, int64_t row_stride,
                                const uint32_t* mask, int64_t mask_rows,
                                int64_t words_per_row, int64_t mask_row_stride,
                                int64_t mask_vocab, const int32_t* indices,
                                char* error, size_t error_capacity);
int32_t grammard_apply_mask_cuda(void* logits, int32_t dtype, int64_t rows,
                                 int64_t vocab, int64_t row_stride,
                                 const uint32_t* mask, int64_t mask_rows,
                                 int64_t words_per_row, int64_t mask_row_stride,
                                 int64_t mask_vocab, const int32_t* indices,
                                 void* cuda_stream, char* error,
                                 size_t error_capacity);

/* Rank sync through grammard: this rank's readiness of `ids` is exchanged
 * in round `round` of `group`; agreed[i] becomes GRAMMARD_STATE_READY,
 * GRAMMARD_STATE_FAILED, or GRAMMARD_STATE_COMPILING (neither: not yet
 * ready on every rank). */
int32_t grammard_client_sync_readiness(grammard_client* client,
                                       const char* group, uint64_t round,
                                       int32_t rank, int32_t world_size,
                                       const uint64_t* ids, int64_t n,
                                       int64_t timeout_ms, int32_t* agreed);

#define GRAMMARD_LATENCY_BUCKETS 16
typedef struct grammard_latency {
  /* buckets[i] counts observations <= 50 us * 2^i (i < 15); buckets[15]
   * the rest. Not cumulative. */
  uint64_t buckets[GRAMMARD_LATENCY_BUCKETS];
  uint64_t count;
  double sum_seconds;
  double max_seconds;
} grammard_latency;

typedef struct grammard_client_metrics {
  uint64_t steps;
  grammard_latency step_latency; /* submit to reply */
  grammard_latency wait_time;    /* blocked in a wait call */
  uint64_t reconnects;
  uint64_t reconnect_attempts;
  uint64_t outages_given_up;
  double outage_seconds;
  uint64_t replayed_sequences;
  uint64_t replayed_tokens;
} grammard_client_metrics;

int32_t grammard_client_metrics_snapshot(grammard_client* client,
                                         grammard_client_metrics* out);

#ifdef __cplusplus
}
#endif

#endif /* GRAMMARD_CLIENT_GRAMMARD_CLIENT_H_ */
