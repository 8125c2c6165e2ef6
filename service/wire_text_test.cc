#include "service/wire_text.h"

#include <string>

#include "gtest/gtest.h"

namespace grammard::service {
namespace {

TEST(WireTextTest, NamesTheFieldAndTheFirstBadByte) {
  EXPECT_TRUE(CheckUtf8("h\xC3\xA9llo \xF0\x9F\x98\x80", "x").ok());
  const absl::Status s = CheckUtf8("ab\xC3(", "constraint.regex");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "constraint.regex is not valid UTF-8 (byte 2 of 4)");
  // Overlong forms, surrogates and code points past U+10FFFF are refused.
  for (const char* bad : {"\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80"}) {
    EXPECT_FALSE(CheckUtf8(bad, "x").ok()) << bad;
  }
}

TEST(WireTextTest, EveryTextFieldOfAConstraintIsChecked) {
  grammard::v1::Constraint c;
  c.mutable_choice()->add_choices("ok");
  c.mutable_choice()->add_choices("\xFF");
  EXPECT_NE(CheckConstraintUtf8(c).message().find("choices[1]"),
            std::string::npos);
  c.mutable_grammar()->set_text("root ::= \"a\"");
  EXPECT_TRUE(CheckConstraintUtf8(c).ok());
  c.mutable_json_options()->set_key_separator("\xFF");
  EXPECT_NE(CheckConstraintUtf8(c).message().find("key_separator"),
            std::string::npos);
}

// Names and ids have a length limit, said with the field, and must be UTF-8.
TEST(WireTextTest, NamesAreBoundedAndUtf8) {
  EXPECT_TRUE(CheckName("llama3", "tokenizer", 128).ok());
  const absl::Status long_name =
      CheckName(std::string(60000, 'n'), "tokenizer", 128);
  EXPECT_EQ(long_name.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(long_name.message(), "tokenizer is 60000 bytes long; at most 128");
  EXPECT_FALSE(CheckName("\xFF", "tokenizer", 128).ok());
}

// An error may quote a request: what goes back is cut, saying how much.
TEST(WireTextTest, ReplyErrorsAreCutSayingHowMuch) {
  EXPECT_EQ(CutMessage("short"), "short");
  const std::string quoted(kMaxErrorMessageBytes + 10, 'q');
  EXPECT_EQ(CutMessage(quoted),
            std::string(kMaxErrorMessageBytes, 'q') + "... (10 more bytes)");
  grammard::v1::Error error;
  SetError(absl::NotFoundError(quoted), &error);
  EXPECT_EQ(error.code(), static_cast<int32_t>(absl::StatusCode::kNotFound));
  EXPECT_EQ(error.message(), CutMessage(quoted));
}

}  // namespace
}  // namespace grammard::service
