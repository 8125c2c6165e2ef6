// The front ends on real grammars and regexes from ../shared/data: llama.cpp's
// GBNF files, llguidance's SQL grammar, every grammar and accept/reject case
// of XGrammar's tests, and the regex corpora. Skips when the data is absent.
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "grammar/frontends/ebnf/ebnf_parser.h"
#include "grammar/frontends/regex/regex_parser.h"
#include "grammar/ir/grammar_passes.h"
#include "grammar/testing/oracle_pipeline.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/paths.h"

namespace grammard::grammar {
namespace {

using nlohmann::json;

class RealDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = grammard::testing::SharedDataDir();
    if (!dir_) {
      GTEST_SKIP() << grammard::testing::MissingDataMessage("../shared/data");
    }
  }

  std::string Read(const std::string& relative) {
    std::optional<std::string> text = ReadFile(*dir_ + "/" + relative);
    EXPECT_TRUE(text.has_value()) << relative;
    return text.value_or("");
  }

  json ReadJson(const std::string& relative) {
    json value = json::parse(Read(relative), nullptr, false);
    EXPECT_FALSE(value.is_discarded()) << relative;
    return value;
  }

  std::optional<std::string> dir_;
};

bool Complete(const EarleyOracle& oracle, const std::string& input) {
  return (oracle.Check(input) & EarleyOracle::kComplete) != 0;
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

bool Contains(const absl::Status& status, std::string_view needle) {
  return Contains(std::string(status.message()), needle);
}

// Parses, checks the ToString round trip, and builds the oracle.
std::optional<EarleyOracle> CompileEbnf(const std::string& text,
                                        const std::string& root = "root") {
  absl::StatusOr<Grammar> g = ParseEbnf(text, root);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << text;
  if (!g.ok()) return std::nullopt;
  absl::StatusOr<Grammar> again = ParseEbnf(g->ToString(), root);
  EXPECT_TRUE(again.ok() && StructurallyEqual(*g, *again)) << g->ToString();
  absl::StatusOr<EarleyOracle> oracle = OracleFor(*g);
  EXPECT_TRUE(oracle.ok()) << oracle.status() << "\n" << text;
  if (!oracle.ok()) return std::nullopt;
  return *std::move(oracle);
}

TEST_F(RealDataTest, LlamaCppGrammars) {
  struct Case {
    std::vector<std::string> accepted;
    std::vector<std::string> rejected;
  };
  const std::map<std::string, Case> cases = {
      {"arithmetic.gbnf",
       {{"1+2=3\n", "(a+b)*c = 42\nx=y\n"}, {"1+=3\n", "1=2"}}},
      {"c.gbnf",
       {{"", "int main(){return 0;}", "float f(int x){x = x*2;return x;}"},
        {"int main(){return 0}", "main(){}"}}},
      {"chess.gbnf",
       {{"1. e4 e5\n2. Nf3 Nc6\n", "1. d4 d5\n2. c4 dxc4\n3. O-O Qxd8+\n"},
        {"1. e4 e5\n", "1. e9 e5\n2. a1 a2\n"}}},
      {"english.gbnf",
       {{"Hello, world!", "It's 4 o'clock."}, {"", "Hello  world"}}},
      {"japanese.gbnf",
       {{"\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF",
         "\xE3\x82\xAB\xE3\x82\xBF\xE3\x82\xAB\xE3\x83\x8A "
         "\xE6\xBC\xA2\xE5\xAD\x97\xE3\x80\x82"},
        {"abc", ""}}},
      {"json.gbnf",
       {{"{\"a\": [1, 2.5, \"x\"], \"b\": null}", "{}",
         "{\"k\": {\"n\": -3e7, \"t\": true}}\n  "},
        {"[1]", "{\"a\": 01}", "{\"a\": 1,}"}}},
      {"json_arr.gbnf",
       {{"[\n{\"a\": 1},\n2\n]", "[\n]"}, {"[1]", "[\n1,\n]"}}},
      {"list.gbnf", {{"- item one\n- item two\n"}, {"- \n", "item\n", ""}}},
  };
  std::set<std::string> seen;
  for (const auto& entry :
       std::filesystem::directory_iterator(*dir_ + "/grammars/llama.cpp")) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".gbnf") continue;
    seen.insert(name);
    auto c = cases.find(name);
    ASSERT_NE(c, cases.end()) << "no samples for " << name;
    std::optional<EarleyOracle> oracle =
        CompileEbnf(Read("grammars/llama.cpp/" + name));
    ASSERT_TRUE(oracle.has_value()) << name;
    for (const std::string& s : c->second.accepted) {
      EXPECT_TRUE(Complete(*oracle, s)) << name << ": " << s;
    }
    for (const std::string& s : c->second.rejected) {
      EXPECT_FALSE(Complete(*oracle, s)) << name << ": " << s;
    }
  }
  EXPECT_EQ(seen.size(), cases.size());
}

TEST_F(RealDataTest, LlguidanceSqlGrammar) {
  std::optional<EarleyOracle> oracle =
      CompileEbnf(Read("grammars/llguidance/vllm-sql.gbnf"));
  ASSERT_TRUE(oracle.has_value());
  EXPECT_TRUE(Complete(*oracle, "SELECTcol_1fromtable_1wherecol_2=2"));
  EXPECT_FALSE(Complete(*oracle, "SELECT col_1 from table_1 where col_2=2"));
}

// XGrammar's grammars that are not plain EBNF in our dialect, by test.
enum class Expect {
  kCompiles,
  kLeftRecursive,  // Parses; Normalize refuses it.
  kFragment,       // Rules without a root, meant to be included elsewhere.
  kUnsupported,    // XGrammar extensions: refused with a message naming them.
  kInvalid,        // Deliberately broken: must not parse.
};

Expect ExpectedOutcome(const std::string& function, const std::string& var,
                       const std::string& grammar) {
  if (Contains(grammar, "Regex(") || Contains(function, "attributes")) {
    return Expect::kUnsupported;
  }
  if (function == "test_error_consecutive_quantifiers") return Expect::kInvalid;
  if (function == "test_lexer_parser_errors") {
    // GBNF allows empty alternatives, so a trailing | is accepted here.
    return grammar == "root ::= \"a\" |" ? Expect::kCompiles : Expect::kInvalid;
  }
  if ((function == "test_nested_quantifiers" && var == "expected") ||
      function == "test_flatten" ||
      function == "test_e2e_to_string_roundtrip") {
    return Expect::kLeftRecursive;
  }
  if (Contains(var, "basic_json_rules_ebnf")) return Expect::kFragment;
  // test_end_to_end_errors puts a choice in a lookahead assertion, which
  // XGrammar refuses; we drop assertions, so it compiles.
  return Expect::kCompiles;
}

TEST_F(RealDataTest, XGrammarEbnfGrammars) {
  std::istringstream lines(Read("grammars/xgrammar/ebnf_grammars.jsonl"));
  std::map<Expect, int> counts;
  std::string line;
  while (std::getline(lines, line)) {
    const json row = json::parse(line);
    const std::string function = row["function"].get<std::string>();
    const std::string grammar = row["grammar"].get<std::string>();
    const Expect expect =
        ExpectedOutcome(function, row["var"].get<std::string>(), grammar);
    ++counts[expect];
    SCOPED_TRACE(function + ":\n" + grammar);
    absl::StatusOr<Grammar> parsed = ParseEbnf(grammar);
    switch (expect) {
      case Expect::kCompiles:
        CompileEbnf(grammar);
        break;
      case Expect::kLeftRecursive: {
        ASSERT_TRUE(parsed.ok()) << parsed.status();
        absl::StatusOr<Grammar> normal = Normalize(*parsed);
        EXPECT_TRUE(Contains(normal.status(), "left recursion: "))
            << normal.status();
        break;
      }
      case Expect::kFragment: {
        EXPECT_TRUE(Contains(parsed.status(), "root rule"));
        const std::string first = grammar.substr(0, grammar.find(' '));
        CompileEbnf(grammar, first);
        break;
      }
      case Expect::kUnsupported:
        EXPECT_TRUE(Contains(parsed.status(), "XGrammar")) << parsed.status();
        break;
      case Expect::kInvalid:
        EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_TRUE(Contains(parsed.status(), "EBNF error"));
        break;
    }
  }
  std::printf(
      "XGrammar grammars: %d compile, %d left-recursive, %d fragments, %d "
      "XGrammar extensions, %d invalid\n",
      counts[Expect::kCompiles], counts[Expect::kLeftRecursive],
      counts[Expect::kFragment], counts[Expect::kUnsupported],
      counts[Expect::kInvalid]);
  EXPECT_EQ(counts[Expect::kCompiles] + counts[Expect::kLeftRecursive] +
                counts[Expect::kFragment] + counts[Expect::kUnsupported] +
                counts[Expect::kInvalid],
            254);
}

// An input of the extracted tests: a string, or {"__bytes_hex__": "..."}.
std::string Input(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  const std::string hex = value["__bytes_hex__"].get<std::string>();
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(
        static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

// Accept/reject cases found in one test function, grouped by grammar.
struct Cases {
  std::vector<std::pair<std::string, bool>>& For(const std::string& grammar) {
    return by_grammar[grammar];
  }
  std::map<std::string, std::vector<std::pair<std::string, bool>>> by_grammar;
};

bool IsEbnf(const json& v) {
  return v.is_string() && Contains(v.get<std::string>(), "::=");
}

// The shapes XGrammar's parametrised tests take: [grammar, input, accepted],
// [grammar, [accepted...], [rejected...]] and [[grammars], [inputs],
// [accepted]].
void CollectParametrized(const json& fn, bool regex, Cases* cases) {
  if (!fn.contains("parametrize")) return;
  for (const json& param : fn["parametrize"]) {
    for (const json& v : param["values"]) {
      if (!v.is_array() || v.size() != 3) continue;
      const bool grammar_first =
          regex ? v[0].is_string() && !v[1].is_array() : IsEbnf(v[0]);
      if (grammar_first && v[2].is_boolean() &&
          (v[1].is_string() || v[1].is_object())) {
        cases->For(v[0].get<std::string>())
            .push_back({Input(v[1]), v[2].get<bool>()});
      } else if (IsEbnf(v[0]) && v[1].is_array() && v[2].is_array()) {
        auto& list = cases->For(v[0].get<std::string>());
        for (const json& in : v[1]) list.push_back({Input(in), true});
        for (const json& in : v[2]) list.push_back({Input(in), false});
      } else if (v[0].is_array() && v[1].is_array() && v[2].is_array()) {
        for (size_t i = 0; i < v[0].size(); ++i) {
          if (!v[1][i].is_string() && !v[1][i].is_object()) continue;
          cases->For(v[0][i].get<std::string>())
              .push_back({Input(v[1][i]), v[2][i].get<bool>()});
        }
      }
    }
  }
}

// Tests with their grammar in a local variable and [input, accepted] pairs or
// accept_asserts. `grammar_var` names what the test compiled; the extraction
// kept the source strings, so map one to the other.
void CollectLocal(const json& fn, const std::string& grammar_key,
                  const std::string& root, Cases* cases,
                  std::map<std::string, std::string>* roots) {
  if (!fn.contains("local_strings")) return;
  const json& locals = fn["local_strings"];
  auto source_of =
      [&](const std::string& grammar_var) -> std::optional<std::string> {
    std::vector<std::string> names;
    if (grammar_var == "grammar" || grammar_var == "grammar_str") {
      names = {grammar_key,   "ebnf_grammar_str",
               "grammar_str", "regex_str",
               "regex",       "json_grammar_simple_ebnf"};
    } else if (grammar_var.rfind("grammar_", 0) == 0) {
      const std::string suffix = grammar_var.substr(8);
      names = {"ebnf_grammar_" + suffix, "ebnf_" + suffix};
    }
    for (const std::string& name : names) {
      if (locals.contains(name)) return locals[name].get<std::string>();
    }
    return std::nullopt;
  };
  if (fn.contains("accept_asserts")) {
    for (const json& a : fn["accept_asserts"]) {
      std::optional<std::string> source =
          source_of(a["grammar_var"].get<std::string>());
      if (!source) continue;
      cases->For(*source).push_back(
          {Input(a["input"]), a["accepted"].get<bool>()});
      if (!root.empty()) (*roots)[*source] = root;
    }
  }
  std::optional<std::string> source = source_of("grammar");
  if (!source || !fn.contains("module_values")) return;
  for (const auto& [name, values] : fn["module_values"].items()) {
    if (!values.is_array()) continue;
    for (const json& v : values) {
      if (v.is_array() && v.size() == 2 && v[0].is_string() &&
          v[1].is_boolean()) {
        cases->For(*source).push_back(
            {v[0].get<std::string>(), v[1].get<bool>()});
      }
    }
  }
}

int CheckCases(const Cases& cases, bool regex,
               const std::map<std::string, std::string>& roots) {
  int checked = 0;
  for (const auto& [grammar, inputs] : cases.by_grammar) {
    SCOPED_TRACE(grammar);
    absl::StatusOr<EarleyOracle> oracle = absl::UnknownError("unset");
    if (regex) {
      oracle = OracleForRegex(grammar);
    } else {
      auto root = roots.find(grammar);
      oracle =
          OracleForEbnf(grammar, root == roots.end() ? "root" : root->second);
    }
    EXPECT_TRUE(oracle.ok()) << oracle.status();
    if (!oracle.ok()) continue;
    for (const auto& [input, accepted] : inputs) {
      EXPECT_EQ(Complete(*oracle, input), accepted)
          << "input: \"" << input << "\"";
      ++checked;
    }
  }
  return checked;
}

TEST_F(RealDataTest, XGrammarAcceptRejectCases) {
  const json tests =
      ReadJson("grammars/xgrammar/xgrammar_tests_extracted.json");
  Cases ebnf;
  std::map<std::string, std::string> roots;
  for (const char* file :
       {"test_grammar_matcher_basic.py", "test_grammar_matcher_ebnf.py"}) {
    for (const json& fn : tests[file]) {
      CollectParametrized(fn, /*regex=*/false, &ebnf);
      // test_custom_root_rule matches its grammar from another root.
      const std::string root =
          fn["function"].get<std::string>() == "test_custom_root_rule"
              ? "basic_string"
              : "";
      CollectLocal(fn, "grammar_str", root, &ebnf, &roots);
    }
  }
  Cases regex;
  for (const json& fn : tests["test_grammar_matcher_regex.py"]) {
    CollectParametrized(fn, /*regex=*/true, &regex);
    CollectLocal(fn, "regex_str", "", &regex, &roots);
  }
  for (const json& fn : tests["test_regex_converter.py"]) {
    const std::string name = fn["function"].get<std::string>();
    const json locals = fn.value("local_strings", json::object());
    if (locals.contains("regex")) {
      for (const char* key : {"instance", "instance1"}) {
        if (locals.contains(key)) {
          regex.For(locals["regex"].get<std::string>())
              .push_back({locals[key].get<std::string>(), true});
        }
      }
    }
    if (name == "test_escape") {
      for (const json& v : fn["parametrize"][0]["values"]) {
        const std::string pattern = v[0].get<std::string>();
        const absl::StatusOr<Grammar> g = ParseRegex(pattern);
        if (!g.ok()) {
          // XGrammar reads \a and \e as bell and escape; ECMAScript has no
          // such escapes, and we refuse them.
          EXPECT_TRUE(Contains(g.status(), "unknown escape \\a")) << g.status();
          continue;
        }
        regex.For(pattern).push_back({v[2].get<std::string>(), true});
      }
      continue;
    }
    // Other accept_asserts of this file mix several patterns of a loop that
    // the extraction flattened; keep the tests that compile one pattern.
    if (name == "test_basic" || name == "test_ipv4" ||
        name == "test_group_modifiers" || name == "test_date_time" ||
        name == "test_date" || name == "test_time" || name == "test_email") {
      CollectLocal(fn, "regex", "", &regex, &roots);
    }
  }
  const int ebnf_checked = CheckCases(ebnf, /*regex=*/false, roots);
  const int regex_checked = CheckCases(regex, /*regex=*/true, roots);
  std::printf(
      "XGrammar cases: %d EBNF inputs on %zu grammars, %d regex inputs "
      "on %zu patterns\n",
      ebnf_checked, ebnf.by_grammar.size(), regex_checked,
      regex.by_grammar.size());
  EXPECT_GE(ebnf_checked, 100);
  EXPECT_GE(regex_checked, 80);

  // The regexes XGrammar's matcher must accept or refuse to compile.
  for (const json& fn : tests["test_grammar_matcher_regex.py"]) {
    const json& values = fn.value("module_values", json::object());
    for (const auto& [name, list] : values.items()) {
      if (Contains(name, "regex_input_accepted")) {
        for (const json& p : list)
          EXPECT_TRUE(ParseRegex(p.get<std::string>()).ok()) << p;
      }
      if (Contains(name, "regex_input_refused")) {
        for (const json& p : list)
          EXPECT_FALSE(ParseRegex(p.get<std::string>()).ok()) << p;
      }
    }
  }
}

TEST_F(RealDataTest, XGrammarRegexMacroCasesThroughParseRegex) {
  // Regex("...") macros are an XGrammar extension; their patterns still test
  // ParseRegex. Cases using flags, json_string or constructs we refuse are
  // skipped, and so are inputs with a newline: XGrammar's `.` matches it.
  const json tests =
      ReadJson("grammars/xgrammar/xgrammar_tests_extracted.json");
  Cases cases;
  for (const json& fn : tests["test_grammar_regex_macro.py"]) {
    Cases raw;
    CollectParametrized(fn, /*regex=*/false, &raw);
    for (const auto& [ebnf, inputs] : raw.by_grammar) {
      const std::string prefix = "root ::= Regex(\"";
      if (ebnf.rfind(prefix, 0) != 0 || ebnf.back() != ')' ||
          ebnf[ebnf.size() - 2] != '"') {
        continue;
      }
      // The pattern is an EBNF string literal.
      absl::StatusOr<Grammar> literal =
          ParseEbnf("root ::= " + ebnf.substr(prefix.size() - 1,
                                              ebnf.size() - prefix.size()));
      if (!literal.ok()) continue;  // More than one argument.
      const Expr& body = literal->exprs[literal->rules[0].body];
      if (body.kind != ExprKind::kBytes) continue;
      const std::string pattern = body.bytes;
      if (!ParseRegex(pattern).ok()) continue;
      for (const auto& [input, accepted] : inputs) {
        if (!Contains(input, "\n"))
          cases.For(pattern).push_back({input, accepted});
      }
    }
  }
  const int checked = CheckCases(cases, /*regex=*/true, {});
  std::printf("XGrammar Regex() cases: %d inputs on %zu patterns\n", checked,
              cases.by_grammar.size());
  EXPECT_GE(checked, 60);
}

TEST_F(RealDataTest, DottxtRegexBenchmarks) {
  const json cases = ReadJson("regex/dottxt-benchmarks/cases.json");
  // Full matches among the stored samples, as regex/README.md counts them
  // with Python (the 7 URLs that timed out there hold '?', '#' or '=', which
  // the pattern cannot match).
  const std::map<std::string, int> expected = {{"Phone Number", 100},
                                               {"URL", 93},
                                               {"GSM8K", 0},
                                               {"Complex string", 83},
                                               {"Long integer", 100}};
  for (const json& c : cases["regex_cases"]) {
    const std::string name = c["name"].get<std::string>();
    absl::StatusOr<EarleyOracle> oracle =
        OracleForRegex(c["regex"].get<std::string>());
    ASSERT_TRUE(oracle.ok()) << name << ": " << oracle.status();
    const json samples = ReadJson("regex/dottxt-benchmarks/" +
                                  c["samples_file"].get<std::string>());
    int matched = 0;
    for (const json& s : samples)
      matched += Complete(*oracle, s.get<std::string>());
    EXPECT_EQ(matched, expected.at(name)) << name;
  }
  const json outlines = ReadJson("regex/outlines-core/benchmark_samples.json");
  for (const auto& [name, pattern] : outlines["regex_samples"].items()) {
    EXPECT_TRUE(OracleForRegex(pattern.get<std::string>()).ok()) << name;
  }
}

TEST_F(RealDataTest, JsonSchemaBenchPatterns) {
  std::istringstream lines(Read("regex/jsonschemabench_patterns.jsonl"));
  int total = 0;
  int parsed = 0;
  std::map<std::string, int> refusals;
  std::string line;
  while (std::getline(lines, line)) {
    const std::string pattern = json::parse(line)["pattern"].get<std::string>();
    ++total;
    absl::StatusOr<Grammar> g = ParseRegex(pattern);
    if (g.ok()) {
      ++parsed;
      continue;
    }
    // Every refusal must be one of the documented ones.
    const std::string message(g.status().message());
    const char* known[] = {"lookahead",        "lookbehind",
                           "backreference",    "word boundary",
                           "Unicode property", "^ is only",
                           "$ is only",        "anchors (^, $) inside"};
    std::string reason;
    for (const char* k : known) {
      if (Contains(message, k)) reason = k;
    }
    EXPECT_FALSE(reason.empty()) << pattern << ": " << message;
    ++refusals[reason];
  }
  std::printf("JSONSchemaBench patterns: %d of %d parse; refused:", parsed,
              total);
  for (const auto& [reason, count] : refusals) {
    std::printf(" %s %d;", reason.c_str(), count);
  }
  std::printf("\n");
  EXPECT_EQ(total, 2537);
  EXPECT_GE(parsed, 2500);
}

}  // namespace
}  // namespace grammard::grammar
