#include "grammar/frontends/choice/choice.h"

#include <memory>
#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"
#include "gtest/gtest.h"

namespace grammard::grammar {
namespace {

// Tokens: the printable ASCII characters one by one, a few longer pieces,
// then EOS.
std::shared_ptr<const Vocabulary> TestVocabulary() {
  std::vector<std::string> tokens;
  for (char c = ' '; c <= '~'; ++c) tokens.push_back(std::string(1, c));
  for (const char* t : {"\n", "\\", "yes", "no", "ye", "\xc3\xa9"}) {
    tokens.push_back(t);
  }
  tokens.push_back("</s>");
  const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
  return *Vocabulary::FromTokens(tokens, {eos}, {eos}, {});
}

class ChoiceTest : public testing::Test {
 protected:
  CompiledGrammar Compile(const std::vector<std::string>& choices) {
    absl::StatusOr<Grammar> g = ChoiceGrammar(choices);
    EXPECT_TRUE(g.ok()) << g.status();
    absl::StatusOr<CompiledGrammar> compiled = compiler_.Compile(*g);
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    return *compiled;
  }

  // Whether `text` is a complete string of the language, and whether it is
  // a prefix of one.
  static bool Complete(const CompiledGrammar& g, const std::string& text) {
    GrammarMatcher m(g);
    return m.AcceptString(text).ok() && m.CanTerminate();
  }
  static bool Prefix(const CompiledGrammar& g, const std::string& text) {
    GrammarMatcher m(g);
    return m.AcceptString(text).ok();
  }

  GrammarCompiler compiler_{TestVocabulary()};
};

TEST_F(ChoiceTest, ExactlyTheStrings) {
  const std::vector<std::string> choices = {
      "yes", "no", "yes", "say \"hi\"\n", "a\\b", "caf\xc3\xa9"};
  CompiledGrammar g = Compile(choices);
  for (const std::string& c : choices) EXPECT_TRUE(Complete(g, c)) << c;
  for (const char* t :
       {"", "ye", "yess", "n", "say \"hi\"", "a\\", "caf", "No", "yesno"}) {
    EXPECT_FALSE(Complete(g, t)) << t;
  }
  EXPECT_TRUE(Prefix(g, "ye"));
  EXPECT_TRUE(Prefix(g, "say \"h"));
  EXPECT_FALSE(Prefix(g, "yesno"));
  EXPECT_FALSE(Prefix(g, "x"));
}

TEST_F(ChoiceTest, EmptyStringIsAChoice) {
  CompiledGrammar g = Compile({"", "no"});
  EXPECT_TRUE(Complete(g, ""));
  EXPECT_TRUE(Complete(g, "no"));
  EXPECT_FALSE(Complete(g, "n"));
}

TEST_F(ChoiceTest, MaskAllowsOnlyTokensOfTheChoices) {
  CompiledGrammar g = Compile({"yes", "no"});
  const Vocabulary& vocab = compiler_.vocabulary();
  GrammarMatcher m(g);
  std::vector<uint32_t> row(g.mask_words());
  m.FillNextTokenMask(row.data());
  auto allowed = [&](int32_t id) { return (row[id / 32] >> (id % 32)) & 1; };
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const std::string_view b = vocab.bytes(id);
    const bool want =
        b == "y" || b == "n" || b == "ye" || b == "yes" || b == "no";
    EXPECT_EQ(allowed(id), want) << b;
  }
  ASSERT_TRUE(m.AcceptString("yes").ok());
  m.FillNextTokenMask(row.data());
  for (int32_t id = 0; id < vocab.size(); ++id) {
    EXPECT_EQ(allowed(id), vocab.is_eos(id)) << vocab.bytes(id);
  }
}

TEST_F(ChoiceTest, Errors) {
  absl::StatusOr<Grammar> empty = ChoiceGrammar({});
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.status().message(), "choice: the list is empty");
  absl::StatusOr<Grammar> bad = ChoiceGrammar({"ok", "a\xff"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("choice 1"), std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace grammard::grammar
