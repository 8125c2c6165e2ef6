// The C ABI over a FakeGrammard: codes and last errors, flat batches with
// drafts, masks into a caller buffer and onto host logits, metrics.
#include "client/grammard_client.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "client/testing/fake_grammard.h"
#include "proto/grammard.pb.h"

namespace grammard::client {
namespace {

using testing::FakeGrammard;

constexpr int32_t kWords = (FakeGrammard::kVocabSize + 31) / 32;
constexpr int32_t kOk = 0, kInvalidArgument = 3, kNotFound = 5,
                  kResourceExhausted = 8, kFailedPrecondition = 9,
                  kOutOfRange = 11, kUnimplemented = 12;

grammard_client_options Options(const std::string& target,
                                const char* tokenizer) {
  grammard_client_options o;
  std::memset(&o, 0, sizeof(o));  // zeros: the defaults
  o.target = target.c_str();
  o.tokenizer = tokenizer;
  return o;
}

// A handle destroyed at the end of the test.
struct Handle {
  grammard_client* c = nullptr;
  ~Handle() { grammard_client_destroy(c); }
};

TEST(GrammardClientTest, AFailedConnectStillExplainsItself) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  const std::string target = fake->target();
  grammard_client_options o = Options(target, "nope");
  Handle h;
  EXPECT_EQ(grammard_client_connect(&o, &h.c), kNotFound);
  ASSERT_NE(h.c, nullptr);
  EXPECT_NE(std::string(grammard_client_last_error(h.c)).find("\"nope\""),
            std::string::npos);
  EXPECT_EQ(grammard_client_close(h.c, 1), kFailedPrecondition);
  EXPECT_NE(
      std::string(grammard_client_last_error(h.c)).find("never connected"),
      std::string::npos);
  EXPECT_EQ(grammard_client_connect(nullptr, nullptr), kInvalidArgument);
}

TEST(GrammardClientTest, StepsThroughTheCAbi) {
  auto fake = FakeGrammard::Start();
  ASSERT_NE(fake, nullptr);
  const std::string target = fake->target();
  grammard_client_options o = Options(target, "fake");
  Handle h;
  ASSERT_EQ(grammard_client_connect(&o, &h.c), kOk)
      << grammard_client_last_error(h.c);
  EXPECT_STREQ(grammard_client_last_error(h.c), "");
  EXPECT_EQ(grammard_client_vocab_size(h.c), FakeGrammard::kVocabSize);
  EXPECT_EQ(grammard_client_words_per_row(h.c), kWords);

  const char choices[] = "yes\0no";
  ASSERT_EQ(
      grammard_client_open(h.c, 1, GRAMMARD_CONSTRAINT_REGEX, "x", 1, 0, -1),
      kOk);
  ASSERT_EQ(grammard_client_open(h.c, 2, GRAMMARD_CONSTRAINT_CHOICE, choices,
                                 sizeof(choices) - 1, 0, -1),
            kOk);
  ASSERT_EQ(
      grammard_client_open(h.c, 3, GRAMMARD_CONSTRAINT_REGEX, "fail", 4, 0, -1),
      kOk);
  grammard::v1::Constraint proto;
  proto.set_regex("x");
  const std::string bytes = proto.SerializeAsString();
  ASSERT_EQ(grammard_client_open_proto(h.c, 4, bytes.data(), bytes.size(), -1),
            kOk);
  EXPECT_EQ(grammard_client_open_proto(h.c, 5, "\xff\xff", 2, -1),
            kInvalidArgument);
  EXPECT_EQ(grammard_client_open(h.c, 5, 42, "", 0, 0, -1), kInvalidArgument);
  EXPECT_EQ(grammard_client_open(h.c, 5, GRAMMARD_CONSTRAINT_JSON_OBJECT,
                                 nullptr, 0, 7, -1),
            kInvalidArgument);

  const uint64_t ids[] = {1, 2, 3, 4};
  ASSERT_EQ(grammard_client_wait_ready(h.c, ids, 4, 0), kOk);
  int32_t state = -1;
  ASSERT_EQ(grammard_client_state(h.c, 3, &state), kOk);
  EXPECT_EQ(state, GRAMMARD_STATE_FAILED);
  EXPECT_NE(std::string(grammard_client_last_error(h.c)).find("bad regex"),
            std::string::npos);
  ASSERT_EQ(grammard_client_state(h.c, 1, &state), kOk);
  EXPECT_EQ(state, GRAMMARD_STATE_READY);

  // Step 1: nothing accepted; sequence 4 verifies two drafts (3 rows).
  const std::vector<uint32_t> first = FakeGrammard::Mask({});
  std::vector<int32_t> allowed;
  for (int32_t t = 0; t < FakeGrammard::kVocabSize && allowed.size() < 2; ++t) {
    if ((first[static_cast<size_t>(t / 32)] >> (t % 32)) & 1) {
      allowed.push_back(t);
    }
  }
  ASSERT_EQ(allowed.size(), 2u);
  const int64_t no_accepted[] = {0, 0, 0, 0, 0};
  const int64_t draft_offsets[] = {0, 0, 0, 0, 2};
  const int32_t drafts[] = {allowed[0], allowed[1]};
  ASSERT_EQ(grammard_client_submit_step(h.c, 4, ids, nullptr, no_accepted,
                                        nullptr, draft_offsets, drafts),
            kOk)
      << grammard_client_last_error(h.c);
  EXPECT_EQ(grammard_client_pending_rows(h.c), 6);
  std::vector<uint32_t> rows(6 * kWords);
  int32_t codes[4];
  uint8_t flags[4];
  ASSERT_EQ(
      grammard_client_wait_masks(h.c, rows.data(), kWords, 6, 0, codes, flags),
      kOk)
      << grammard_client_last_error(h.c);
  EXPECT_EQ(codes[0], kOk);
  EXPECT_EQ(codes[1], kOk);
  EXPECT_EQ(codes[2], kInvalidArgument);  // its compile's error
  EXPECT_EQ(codes[3], kOk);
  EXPECT_EQ(flags[0] & GRAMMARD_FLAG_TERMINATED, 0);
  auto row = [&](int r) {
    return std::vector<uint32_t>(rows.begin() + r * kWords,
                                 rows.begin() + (r + 1) * kWords);
  };
  EXPECT_EQ(row(0), first);
  EXPECT_EQ(row(3), first);
  EXPECT_EQ(row(4), FakeGrammard::Mask({allowed[0]}));
  EXPECT_EQ(row(5), FakeGrammard::Mask({allowed[0], allowed[1]}));

  // Step 2: sequence 1 accepts a token; masks land on host logits rows 1
  // and 0 (indices), padded to 1024 columns.
  const uint64_t one_two[] = {1, 2};
  const int64_t accepted_offsets[] = {0, 1, 1};
  const int32_t accepted[] = {allowed[0]};
  ASSERT_EQ(
      grammard_client_submit_step(h.c, 2, one_two, nullptr, accepted_offsets,
                                  accepted, nullptr, nullptr),
      kOk);
  std::vector<float> logits(2 * 1024, 0.5f);
  const int32_t indices[] = {1, 0};
  ASSERT_EQ(
      grammard_client_wait_apply_cpu(h.c, logits.data(), GRAMMARD_DTYPE_FLOAT32,
                                     2, 1024, 1024, indices, 0, codes, flags),
      kOk)
      << grammard_client_last_error(h.c);
  const std::vector<uint32_t> after = FakeGrammard::Mask({allowed[0]});
  for (int c = 0; c < 1024; ++c) {
    const bool ok1 = c < FakeGrammard::kVocabSize &&
                     ((after[static_cast<size_t>(c / 32)] >> (c % 32)) & 1);
    const bool ok2 = c < FakeGrammard::kVocabSize &&
                     ((first[static_cast<size_t>(c / 32)] >> (c % 32)) & 1);
    EXPECT_EQ(std::isinf(logits[static_cast<size_t>(1024 + c)]), !ok1) << c;
    EXPECT_EQ(std::isinf(logits[static_cast<size_t>(c)]), !ok2) << c;
  }

  // Without a usable GPU (or with host logits) the CUDA path says why and
  // leaves the step in flight.
  ASSERT_EQ(grammard_client_submit_step(h.c, 2, one_two, nullptr, no_accepted,
                                        nullptr, nullptr, nullptr),
            kOk);
  EXPECT_NE(grammard_client_wait_apply_cuda(
                h.c, logits.data(), GRAMMARD_DTYPE_FLOAT32, 2, 1024, 1024,
                nullptr, nullptr, 0, codes, flags),
            kOk);
  EXPECT_STRNE(grammard_client_last_error(h.c), "");
  ASSERT_EQ(
      grammard_client_wait_masks(h.c, rows.data(), kWords, 6, 0, codes, flags),
      kOk);

  grammard_client_metrics m;
  ASSERT_EQ(grammard_client_metrics_snapshot(h.c, &m), kOk);
  EXPECT_EQ(m.steps, 3u);
  EXPECT_EQ(m.step_latency.count, 3u);
  uint64_t bucketed = 0;
  for (uint64_t b : m.wait_time.buckets) bucketed += b;
  EXPECT_EQ(bucketed, 3u);
  EXPECT_EQ(m.reconnects, 0u);

  // The fake has no SyncGroup: the error comes through with its context.
  int32_t agreed[2];
  EXPECT_EQ(grammard_client_sync_readiness(h.c, "g", 1, 0, 2, one_two, 2, 1000,
                                           agreed),
            kUnimplemented);
  EXPECT_NE(std::string(grammard_client_last_error(h.c)).find("group g"),
            std::string::npos);
  EXPECT_EQ(grammard_client_close(h.c, 1), kOk);
  EXPECT_EQ(grammard_client_close(h.c, 1), kNotFound);
}

std::string Regex(const std::string& regex) {
  grammard::v1::Constraint proto;
  proto.set_regex(regex);
  return proto.SerializeAsString();
}

bool Allowed(const std::vector<uint32_t>& row, int32_t token) {
  return (row[static_cast<size_t>(token / 32)] >> (token % 32)) & 1;
}

// A handle connected to a FakeGrammard of its own.
class GrammardClientConnectedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ = FakeGrammard::Start();
    ASSERT_NE(fake_, nullptr);
    const std::string target = fake_->target();
    grammard_client_options o = Options(target, "fake");
    ASSERT_EQ(grammard_client_connect(&o, &h_.c), kOk);
  }

  std::unique_ptr<FakeGrammard> fake_;
  Handle h_;
};

TEST_F(GrammardClientConnectedTest, DescribesTheDaemonsTokenizers) {
  Handle& h = h_;
  int32_t eos[4] = {-1, -1, -1, -1};
  EXPECT_EQ(grammard_client_eos_token_ids(h.c, nullptr, 0), 1);
  EXPECT_EQ(grammard_client_eos_token_ids(h.c, eos, 4), 1);
  EXPECT_EQ(eos[0], FakeGrammard::kEos);
  EXPECT_EQ(eos[1], -1);

  size_t length = 0;
  EXPECT_EQ(grammard_client_list_tokenizers(h.c, nullptr, 0, &length),
            kResourceExhausted);
  const std::string expected =
      R"([{"name":"fake","fingerprint":"fake-fingerprint","vocab_size":1000,)"
      R"("eos_token_ids":[999]}])";
  EXPECT_EQ(length, expected.size());
  std::vector<char> json(length);  // one byte short of the NUL
  EXPECT_EQ(
      grammard_client_list_tokenizers(h.c, json.data(), json.size(), &length),
      kResourceExhausted);
  json.resize(length + 1);
  ASSERT_EQ(
      grammard_client_list_tokenizers(h.c, json.data(), json.size(), &length),
      kOk);
  EXPECT_EQ(std::string(json.data()), expected);
}

TEST_F(GrammardClientConnectedTest,
       CompilesAheadOfTheStreamAndSaysWhyItFailed) {
  Handle& h = h_;
  char id[40];
  int32_t state = -1;
  std::string c = Regex("x");
  ASSERT_EQ(grammard_client_compile(h.c, c.data(), c.size(), 1, 1000, id,
                                    sizeof(id), &state),
            kOk);
  EXPECT_STREQ(id, "fake:x");
  EXPECT_EQ(state, GRAMMARD_STATE_READY);
  // A short id buffer gets as much as fits, terminated.
  ASSERT_EQ(
      grammard_client_compile(h.c, c.data(), c.size(), 1, 0, id, 4, &state),
      kOk);
  EXPECT_STREQ(id, "fak");
  c = Regex("hold");
  ASSERT_EQ(grammard_client_compile(h.c, c.data(), c.size(), 0, 0, nullptr, 0,
                                    &state),
            kOk);
  EXPECT_EQ(state, GRAMMARD_STATE_COMPILING);
  c = Regex("fail");
  EXPECT_EQ(grammard_client_compile(h.c, c.data(), c.size(), 1, 0, id,
                                    sizeof(id), &state),
            kInvalidArgument);
  EXPECT_EQ(state, GRAMMARD_STATE_FAILED);
  EXPECT_STREQ(grammard_client_last_error(h.c), "bad regex");
  EXPECT_EQ(
      grammard_client_compile(h.c, "\xff\xff", 2, 1, 0, id, sizeof(id), &state),
      kInvalidArgument);
  EXPECT_NE(std::string(grammard_client_last_error(h.c)).find("Constraint"),
            std::string::npos);
}

// Engines compile from a pool of threads on one handle (SGLang's executor,
// vLLM's compile threads): a failure must not be wiped by another thread's
// call made before the failing thread reads its error.
TEST_F(GrammardClientConnectedTest, TheLastErrorIsTheCallingThreadsOwn) {
  Handle& h = h_;
  char id[65];
  int32_t state = 0;
  const std::string bad = Regex("fail");
  ASSERT_EQ(grammard_client_compile(h.c, bad.data(), bad.size(), 1, 0, id,
                                    sizeof(id), &state),
            kInvalidArgument);
  std::thread([&] {
    const std::string c = Regex("x");
    int32_t s = 0;
    ASSERT_EQ(grammard_client_compile(h.c, c.data(), c.size(), 1, 1000, nullptr,
                                      0, &s),
              kOk);
    EXPECT_STREQ(grammard_client_last_error(h.c), "");
  }).join();
  EXPECT_STREQ(grammard_client_last_error(h.c), "bad regex");
}

TEST_F(GrammardClientConnectedTest,
       WritesRowsWhereTheRowMapSaysAndReportsJumpForward) {
  Handle& h = h_;
  const std::string c = Regex("x");
  const grammard_open_options jump{-1, 1};
  ASSERT_EQ(grammard_client_open_with(h.c, 1, c.data(), c.size(), &jump), kOk);
  ASSERT_EQ(grammard_client_open_with(h.c, 2, c.data(), c.size(), nullptr),
            kOk);
  const uint64_t ids[] = {1, 2};
  ASSERT_EQ(grammard_client_wait_ready(h.c, ids, 2, 0), kOk);

  // Sequence 1 accepts an allowed token and verifies a draft: three rows,
  // scattered to rows 4, 0 and 2 of a five-row buffer.
  const std::vector<uint32_t> first = FakeGrammard::Mask({});
  int32_t t = 0;
  while (!Allowed(first, t)) ++t;
  const int64_t accepted_offsets[] = {0, 1, 1};
  const int32_t accepted[] = {t};
  const std::vector<uint32_t> after = FakeGrammard::Mask({t});
  int32_t d = 0;
  while (!Allowed(after, d)) ++d;
  const int64_t draft_offsets[] = {0, 1, 1};
  const int32_t drafts[] = {d};
  ASSERT_EQ(grammard_client_submit_step(h.c, 2, ids, nullptr, accepted_offsets,
                                        accepted, draft_offsets, drafts),
            kOk);
  std::vector<uint32_t> rows(5 * kWords, 0xdeadbeef);
  int32_t codes[2];
  uint8_t flags[2];
  const int64_t repeated[] = {4, 0, 4};
  EXPECT_EQ(grammard_client_wait_masks_at(h.c, rows.data(), kWords, 5, repeated,
                                          0, codes, flags),
            kInvalidArgument);
  EXPECT_NE(std::string(grammard_client_last_error(h.c)).find("another row"),
            std::string::npos);
  const int64_t outside[] = {4, 0, 5};
  EXPECT_EQ(grammard_client_wait_masks_at(h.c, rows.data(), kWords, 5, outside,
                                          0, codes, flags),
            kInvalidArgument);
  const int64_t map[] = {4, 0, 2};
  ASSERT_EQ(grammard_client_wait_masks_at(h.c, rows.data(), kWords, 5, map, 0,
                                          codes, flags),
            kOk)
      << grammard_client_last_error(h.c);
  auto row = [&](int r) {
    return std::vector<uint32_t>(rows.begin() + r * kWords,
                                 rows.begin() + (r + 1) * kWords);
  };
  EXPECT_EQ(row(4), after);
  EXPECT_EQ(row(0), FakeGrammard::Mask({t, d}));
  EXPECT_EQ(row(2), first);  // sequence 2, which accepted nothing
  for (int untouched : {1, 3}) {
    EXPECT_EQ(row(untouched), std::vector<uint32_t>(kWords, 0xdeadbeef));
  }

  char bytes[16];
  size_t n_bytes = 0;
  int32_t tokens[4];
  int64_t n_tokens = 0;
  ASSERT_EQ(grammard_client_jump_forward(h.c, 0, bytes, sizeof(bytes), &n_bytes,
                                         tokens, 4, &n_tokens),
            kOk);
  EXPECT_EQ(std::string(bytes, n_bytes), "after 1");
  ASSERT_EQ(n_tokens, 1);
  EXPECT_EQ(tokens[0], 1);
  ASSERT_EQ(grammard_client_jump_forward(h.c, 1, nullptr, 0, &n_bytes, nullptr,
                                         0, &n_tokens),
            kOk);
  EXPECT_EQ(n_bytes, 0u);  // not opened with jump_forward
  EXPECT_EQ(n_tokens, 0);
  EXPECT_EQ(grammard_client_jump_forward(h.c, 2, nullptr, 0, &n_bytes, nullptr,
                                         0, &n_tokens),
            kOutOfRange);
}

TEST(GrammardClientTest, MasksWithoutAClient) {
  // Two host logits rows of 40 tokens; one mask row (two words) allowing
  // tokens 3 and 33 applies to logits row 1.
  std::vector<float> logits(2 * 40, 1.0f);
  const uint32_t mask[2] = {1u << 3, 1u << 1};
  const int32_t indices[] = {1};
  char error[128] = "untouched";
  ASSERT_EQ(
      grammard_apply_mask_cpu(logits.data(), GRAMMARD_DTYPE_FLOAT32, 2, 40, 40,
                              mask, 1, 2, 2, 40, indices, error, sizeof(error)),
      kOk);
  EXPECT_STREQ(error, "");
  for (int c = 0; c < 40; ++c) {
    EXPECT_EQ(logits[static_cast<size_t>(c)], 1.0f) << c;
    EXPECT_EQ(std::isinf(logits[static_cast<size_t>(40 + c)]),
              c != 3 && c != 33)
        << c;
  }
  EXPECT_EQ(grammard_apply_mask_cpu(logits.data(), 7, 2, 40, 40, mask, 1, 2, 2,
                                    40, indices, error, sizeof(error)),
            kInvalidArgument);
  EXPECT_NE(std::string(error).find("dtype"), std::string::npos) << error;
  const int32_t outside[] = {2};
  EXPECT_EQ(
      grammard_apply_mask_cpu(logits.data(), GRAMMARD_DTYPE_FLOAT32, 2, 40, 40,
                              mask, 1, 2, 2, 40, outside, nullptr, 0),
      kInvalidArgument);
  // Host logits are not device memory: refused, with the reason.
  EXPECT_NE(grammard_apply_mask_cuda(logits.data(), GRAMMARD_DTYPE_FLOAT32, 2,
                                     40, 40, mask, 1, 2, 2, 40, indices,
                                     nullptr, error, sizeof(error)),
            kOk);
  EXPECT_STRNE(error, "");
}

}  // namespace
}  // namespace grammard::client
