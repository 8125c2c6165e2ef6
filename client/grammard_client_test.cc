// The C ABI over a FakeGrammard: codes and last errors, flat batches with
// drafts, masks into a caller buffer and onto host logits, metrics.
#include "client/grammard_client.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "client/testing/fake_grammard.h"
#include "proto/grammard.pb.h"

namespace grammard::client {
namespace {

using testing::FakeGrammard;

constexpr int32_t kWords = (FakeGrammard::kVocabSize + 31) / 32;
constexpr int32_t kOk = 0, kInvalidArgument = 3, kNotFound = 5,
                  kFailedPrecondition = 9, kUnimplemented = 12;

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

}  // namespace
}  // namespace grammard::client
