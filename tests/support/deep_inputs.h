// Inputs that stress an engine by depth or size, shared by the front ends'
// unit tests and the daemon's bad-input and abuse tests, so that both build
// exactly the same text.
//
// Cost: linear in the text built. Thread-safety: pure functions.
#ifndef GRAMMARD_TESTS_SUPPORT_DEEP_INPUTS_H_
#define GRAMMARD_TESTS_SUPPORT_DEEP_INPUTS_H_

#include <string>

namespace grammard::testing {

// `depth` copies of `open`, then `leaf`, then `depth` copies of `close`.
inline std::string Nested(int depth, const std::string& open,
                          const std::string& leaf, const std::string& close) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += open;
  s += leaf;
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

// An EBNF chain root ::= r0, r0 ::= r1, ..., r<length> ::= "a".
inline std::string EbnfChain(int length) {
  std::string s = "root ::= r0\n";
  for (int i = 0; i < length; ++i) {
    s += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
  }
  return s + "r" + std::to_string(length) + " ::= \"a\"\n";
}

// {"enum":[0,1,...,count-1]}
inline std::string EnumOfNumbers(int count) {
  std::string s = "{\"enum\":[";
  for (int i = 0; i < count; ++i) s += (i ? "," : "") + std::to_string(i);
  return s + "]}";
}

// {"enum":["s0","s1",...,"s<count-1>"]}
inline std::string EnumOfStrings(int count) {
  std::string s = "{\"enum\":[";
  for (int i = 0; i < count; ++i) {
    s += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  }
  return s + "]}";
}

}  // namespace grammard::testing

#endif  // GRAMMARD_TESTS_SUPPORT_DEEP_INPUTS_H_
