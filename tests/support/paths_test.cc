#include "tests/support/paths.h"

#include <sys/stat.h>

#include "gtest/gtest.h"

namespace grammard::testing {
namespace {

TEST(PathsTest, SourceRootHoldsTheWorkspaceFile) {
  std::string root = SourceRoot();
  ASSERT_FALSE(root.empty());
  struct stat st;
  EXPECT_EQ(stat((root + "/WORKSPACE").c_str(), &st), 0) << root;
  EXPECT_EQ(stat((root + "/tests/support/paths.h").c_str(), &st), 0) << root;
}

TEST(PathsTest, MissingTokenizerIsNullopt) {
  EXPECT_FALSE(TokenizerDir("no-such-tokenizer").has_value());
}

}  // namespace
}  // namespace grammard::testing
