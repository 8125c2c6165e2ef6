#include "tools/grammarctl/token_text.h"

#include "gtest/gtest.h"

namespace grammard::grammarctl {
namespace {

TEST(TokenTextTest, ByteLevel) {
  // "Ġ" is the space byte, "Ċ" the newline, "Ã©" the two bytes of "é".
  auto text = TokenText::Parse(R"({
    "model": {"type": "BPE",
              "vocab": {"Ġhello": 0, "Ċ": 1, "Ã©": 2, "{\"": 3}},
    "added_tokens": [{"id": 5, "content": "<|eot_id|>", "special": true}],
    "decoder": {"type": "ByteLevel"}})");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->Bytes(0), " hello");
  EXPECT_EQ(text->Bytes(1), "\n");
  EXPECT_EQ(text->Bytes(2), "\xC3\xA9");
  EXPECT_EQ(text->Bytes(3), "{\"");
  EXPECT_EQ(text->Bytes(4), "");  // not named by the file
  EXPECT_EQ(text->Bytes(5), "<|eot_id|>");
  EXPECT_EQ(text->Bytes(6), "");
  EXPECT_EQ(text->Bytes(-1), "");
}

TEST(TokenTextTest, SentencePiece) {
  auto text = TokenText::Parse(R"({
    "model": {"type": "BPE", "vocab": {"▁hi": 0, "<0x0A>": 1, "a▁b": 2}},
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"}]}})");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->Bytes(0), " hi");
  EXPECT_EQ(text->Bytes(1), "\n");
  EXPECT_EQ(text->Bytes(2), "a b");
}

TEST(TokenTextTest, RejectsUnknownDecoders) {
  EXPECT_FALSE(TokenText::Parse(R"({"model": {"vocab": {}},
                                    "decoder": {"type": "WordPiece"}})")
                   .ok());
  EXPECT_FALSE(TokenText::Parse("not json").ok());
}

}  // namespace
}  // namespace grammard::grammarctl
