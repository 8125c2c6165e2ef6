#include "grammar/frontends/json_schema/internal/numbers.h"

#include <string>

#include "gtest/gtest.h"

namespace grammard::grammar::json_schema_internal {
namespace {

Decimal D(const std::string& text) {
  absl::StatusOr<Decimal> d = ParseDecimal(text);
  EXPECT_TRUE(d.ok()) << d.status();
  return *d;
}

TEST(DecimalTest, ParseAndPrint) {
  EXPECT_EQ(D("0").ToString(), "0");
  EXPECT_EQ(D("-0.0").ToString(), "0");
  EXPECT_EQ(D("12.50").ToString(), "12.5");
  EXPECT_EQ(D("1e3").ToString(), "1000");
  EXPECT_EQ(D("-1.5E-3").ToString(), "-0.0015");
  EXPECT_EQ(D("1e+2").ToString(), "100");
  EXPECT_FALSE(ParseDecimal("01x").ok());
  EXPECT_FALSE(ParseDecimal("1.").ok());
  EXPECT_FALSE(ParseDecimal("1e999999").ok());
}

TEST(DecimalTest, CompareAndMultiples) {
  EXPECT_EQ(Compare(D("1.5"), D("1.50")), 0);
  EXPECT_EQ(Compare(D("-2"), D("1")), -1);
  EXPECT_EQ(Compare(D("-2"), D("-10")), 1);
  EXPECT_EQ(Compare(D("0.001"), D("0.01")), -1);
  EXPECT_EQ(Compare(D("100"), D("99.99")), 1);
  EXPECT_TRUE(IsMultipleOf(D("7.5"), D("2.5")));
  EXPECT_TRUE(IsMultipleOf(D("100"), D("20")));
  EXPECT_FALSE(IsMultipleOf(D("10"), D("100")));
  EXPECT_FALSE(IsMultipleOf(D("0.075"), D("0.01")));
  EXPECT_TRUE(IsMultipleOf(D("0"), D("0.3")));
}

// Checks NumberDfa against SatisfiesNumber on many texts.
void ExpectAgrees(const NumberConstraints& c) {
  absl::StatusOr<CharDfa> dfa = NumberDfa(c, DfaLimits{});
  ASSERT_TRUE(dfa.ok()) << dfa.status();
  std::vector<std::string> texts;
  for (int i = -130; i <= 130; ++i) {
    texts.push_back(std::to_string(i));
    texts.push_back(std::to_string(i) + ".0");
    for (const char* frac : {".5", ".25", ".05", ".75", ".125", ".001"}) {
      if (i == 0) {
        texts.push_back(std::string("0") + frac);
        texts.push_back(std::string("-0") + frac);
      } else {
        texts.push_back(std::to_string(i) + frac);
      }
    }
  }
  for (const char* t : {"123456789012345678901234567890",
                        "-99999999999999999999", "1000000", "-1000000"}) {
    texts.push_back(t);
  }
  for (const std::string& t : texts) {
    Decimal d = D(t);
    // Integers may be written with a zero fraction (1.0), which the
    // integer check in SatisfiesNumber accepts too.
    bool expected = SatisfiesNumber(d, c);
    EXPECT_EQ(Matches(*dfa, t), expected) << c.Key() << " on " << t;
  }
  EXPECT_FALSE(Matches(*dfa, "-0"));
  EXPECT_FALSE(Matches(*dfa, "01"));
  EXPECT_FALSE(Matches(*dfa, "1."));
  EXPECT_FALSE(Matches(*dfa, "1e2"));
}

TEST(NumberDfaTest, Ranges) {
  NumberConstraints c;
  ExpectAgrees(c);
  c.lower = Bound{D("-12.5"), false};
  ExpectAgrees(c);
  c.upper = Bound{D("100"), true};
  ExpectAgrees(c);
  c.integer = true;
  ExpectAgrees(c);
  c.lower = Bound{D("0"), true};
  ExpectAgrees(c);
  c.lower = Bound{D("0.3"), false};
  c.upper = Bound{D("0.3"), false};
  c.integer = false;
  ExpectAgrees(c);
  c.lower = Bound{D("-99999999999999999998"), false};
  c.upper.reset();
  ExpectAgrees(c);
  c.upper = Bound{D("-1.25"), false};
  ExpectAgrees(c);
}

TEST(NumberDfaTest, MultiplesAndExclusions) {
  NumberConstraints c;
  c.integer = true;
  c.multiple_of.push_back(D("7"));
  ExpectAgrees(c);
  c.integer = false;
  c.multiple_of = {D("0.25")};
  ExpectAgrees(c);
  c.multiple_of = {D("2.5"), D("0.5")};
  c.lower = Bound{D("-20"), false};
  ExpectAgrees(c);
  c.multiple_of.clear();
  c.not_multiple_of = {D("3")};
  c.excluded = {D("7.5"), D("-1")};
  ExpectAgrees(c);
  c.multiple_of = {D("20")};
  ExpectAgrees(c);
}

TEST(NumberDfaTest, EmptyAndTooBig) {
  NumberConstraints c;
  c.lower = Bound{D("5"), true};
  c.upper = Bound{D("5"), false};
  absl::StatusOr<CharDfa> d = NumberDfa(c, DfaLimits{});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->IsEmpty());
  NumberConstraints big;
  big.multiple_of = {D("1000003")};
  EXPECT_EQ(NumberDfa(big, DfaLimits{}).status().code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace grammard::grammar::json_schema_internal
