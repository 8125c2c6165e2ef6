// Cache values: a ready grammar and a failure round-trip; values that are
// not ours, damaged, or whose header has fields of the wrong type are
// DataLoss, never an exception or a trusted entry.
#include "service/cache_value.h"

#include <cstring>

#include "gtest/gtest.h"

namespace grammard::service {
namespace {

class CacheValueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto vocab = grammar::Vocabulary::FromTokens({"a", "b", "<eos>"}, {2}, {2},
                                                 {"tiny", {}, 0});
    ASSERT_TRUE(vocab.ok());
    compiler_ = std::make_unique<grammar::GrammarCompiler>(*vocab);
  }

  // An undeflated value around `header` (and no grammar).
  static std::string Raw(const std::string& header) {
    const uint32_t head_len = static_cast<uint32_t>(header.size());
    std::string body(reinterpret_cast<const char*>(&head_len), 4);
    body += header;
    const uint64_t body_len = body.size();
    std::string out = "GDC1";
    out.push_back(0);
    out.append(reinterpret_cast<const char*>(&body_len), 8);
    return out + body;
  }

  std::unique_ptr<grammar::GrammarCompiler> compiler_;
};

TEST_F(CacheValueTest, RoundTrips) {
  GrammarEntry ready;
  ready.id = "g1";
  ready.grammar = *compiler_->CompileRegex("(ab)+");
  ready.dropped.push_back({"format", "#/format", "not enforced"});
  ready.compile_seconds = 0.5;
  auto back = DecodeCacheValue(EncodeCacheValue(ready), "g1", *compiler_);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE((*back)->status.ok());
  EXPECT_EQ((*back)->grammar->num_states(), ready.grammar->num_states());
  ASSERT_EQ((*back)->dropped.size(), 1u);
  EXPECT_EQ((*back)->dropped[0].pointer, "#/format");
  EXPECT_EQ((*back)->compile_seconds, 0.5);

  GrammarEntry failed;
  failed.id = "g2";
  failed.status = absl::InvalidArgumentError("bad schema");
  back = DecodeCacheValue(EncodeCacheValue(failed), "g2", *compiler_);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->status, failed.status);
  // Filed under another id: refused.
  EXPECT_EQ(DecodeCacheValue(EncodeCacheValue(failed), "g3", *compiler_)
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(CacheValueTest, MalformedHeadersAreDataLoss) {
  const std::string good =
      R"({"id":"g","code":3,"message":"m","compile_seconds":1,"dropped":[]})";
  ASSERT_TRUE(DecodeCacheValue(Raw(good), "g", *compiler_).ok());
  for (const std::string& header : {
           std::string("not json"),
           std::string(R"({"id":"g","code":3,"message":"m","dropped":[]})") +
               "x",
           std::string(R"({"id":"g","code":99,"message":"m","dropped":[]})"),
           std::string(R"({"id":"g","code":3,"message":"m",)"
                       R"("compile_seconds":"slow","dropped":[]})"),
           std::string(R"({"id":"g","code":3,"message":"m",)"
                       R"("dropped":[{"keyword":1}]})"),
           std::string(R"({"id":"g","code":3,"message":"m",)"
                       R"("dropped":[{"pointer":["x"]}]})"),
           std::string(R"({"id":"g","code":0,"message":"","dropped":[]})"),
       }) {
    SCOPED_TRACE(header);
    absl::StatusOr<std::shared_ptr<GrammarEntry>> r =
        DecodeCacheValue(Raw(header), "g", *compiler_);
    EXPECT_FALSE(r.ok());
  }
  EXPECT_EQ(DecodeCacheValue("GDC1", "g", *compiler_).status().code(),
            absl::StatusCode::kDataLoss);
  std::string truncated = Raw(good);
  truncated.pop_back();
  EXPECT_EQ(DecodeCacheValue(truncated, "g", *compiler_).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace grammard::service
