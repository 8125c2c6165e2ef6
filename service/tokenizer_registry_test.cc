#include "service/tokenizer_registry.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace grammard::service {
namespace {

// A small byte-level BPE tokenizer.json; `salt` makes a vocabulary of its
// own.
std::string Tokenizer(int salt) {
  std::string vocab;
  for (int i = 0; i < 16; ++i) {
    absl::StrAppend(&vocab, i ? "," : "", "\"t", salt, "_", i, "\":", i);
  }
  return absl::StrCat(R"({"model": {"type": "BPE", "vocab": {)", vocab,
                      R"(}, "merges": []}, "decoder": {"type": "ByteLevel"},
                         "added_tokens": []})");
}

absl::Status Register(TokenizerRegistry* r, const std::string& name, int salt) {
  grammar::VocabularyOptions options;
  options.name = name;
  return r->Register(Tokenizer(salt), "", options).status();
}

// Uploads are bounded in names and in vocabularies; unregistering frees
// both, and a vocabulary goes with its last name.
TEST(TokenizerRegistryTest, UploadsAreBoundedAndRemovable) {
  TokenizerRegistry registry(TokenizerRegistry::Limits{3, 2});
  ASSERT_TRUE(Register(&registry, "a", 1).ok());
  ASSERT_TRUE(Register(&registry, "a2", 1).ok());  // an alias of a
  ASSERT_TRUE(Register(&registry, "b", 2).ok());
  const absl::Status names = Register(&registry, "c", 3);
  EXPECT_EQ(names.code(), absl::StatusCode::kResourceExhausted) << names;
  EXPECT_NE(names.message().find("--max_tokenizer_names"), std::string::npos);
  ASSERT_TRUE(registry.Unregister("a2").ok());
  const absl::Status uploads = Register(&registry, "c", 3);
  EXPECT_EQ(uploads.code(), absl::StatusCode::kResourceExhausted) << uploads;
  EXPECT_NE(uploads.message().find("--max_uploaded_tokenizers"),
            std::string::npos);
  // The same vocabulary under its old name again costs no upload.
  EXPECT_TRUE(Register(&registry, "a2", 1).ok());
  ASSERT_TRUE(registry.Unregister("b").ok());
  EXPECT_FALSE(registry.Find("b").ok());
  EXPECT_TRUE(Register(&registry, "c", 3).ok());
  EXPECT_EQ(registry.Unregister("nosuch").code(), absl::StatusCode::kNotFound);
}

// What was loaded from the folder stays.
TEST(TokenizerRegistryTest, FolderTokenizersCannotBeRemoved) {
  TokenizerRegistry registry;
  const std::string dir = ::testing::TempDir() + "/tokenizers_rm";
  ASSERT_EQ(system(("mkdir -p " + dir + "/local").c_str()), 0);
  FILE* f = fopen((dir + "/local/tokenizer.json").c_str(), "w");
  ASSERT_NE(f, nullptr);
  const std::string json = Tokenizer(9);
  fwrite(json.data(), 1, json.size(), f);
  fclose(f);
  ASSERT_TRUE(registry.LoadDirectory(dir).ok());
  const absl::Status s = registry.Unregister("local");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(registry.Find("local").ok());
}

// An unknown name's error lists a few of the known ones, however many.
TEST(TokenizerRegistryTest, UnknownNamesAreAnsweredBriefly) {
  TokenizerRegistry registry(TokenizerRegistry::Limits{100, 1});
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(Register(&registry, absl::StrCat("name", i), 1).ok());
  }
  const absl::Status s = registry.Find("nosuch").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("and 24 more"), std::string::npos) << s;
}

}  // namespace
}  // namespace grammard::service
