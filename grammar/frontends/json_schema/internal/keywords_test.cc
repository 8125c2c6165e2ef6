#include "grammar/frontends/json_schema/internal/keywords.h"

#include <set>
#include <string_view>

#include "gtest/gtest.h"

namespace grammard::grammar::json_schema_internal {
namespace {

// Each name once, and each group named after a keyword that heads it: a
// keyword grouped under a name no entry heads would never be negated.
TEST(KeywordsTest, GroupsAreHeadedByTheirKeyword) {
  std::set<std::string_view> names, heads;
  for (const Keyword& k : ConverterKeywords()) {
    EXPECT_TRUE(names.insert(k.name).second) << k.name;
    if (k.group == k.name) heads.insert(k.name);
  }
  for (const Keyword& k : ConverterKeywords()) {
    if (!k.group.empty()) {
      EXPECT_EQ(heads.count(k.group), 1u) << k.name;
    }
  }
  EXPECT_TRUE(IsKnownKeyword("patternProperties"));
  EXPECT_TRUE(IsKnownKeyword("$ref"));
  EXPECT_FALSE(IsKnownKeyword("title"));
}

}  // namespace
}  // namespace grammard::grammar::json_schema_internal
