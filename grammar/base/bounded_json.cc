#include "grammar/base/bounded_json.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace grammard::grammar {
namespace {

// nlohmann's reason for a parse error, without its position (said from the
// text instead) or the token it last read, which echoes the request (a
// megabyte-long unterminated string, say): "syntax error while parsing
// value - invalid literal; expected '[', '{', or a literal".
std::string Reason(const std::string& what) {
  size_t start = what.find(", column ");
  start = start == std::string::npos ? 0 : what.find(": ", start);
  std::string rest = start == std::string::npos ? what : what.substr(start + 2);
  const size_t read = rest.find("; last read: '");
  if (read == std::string::npos) return rest;
  const size_t expected = rest.rfind("; expected ");
  return rest.substr(0, read) +
         (expected != std::string::npos && expected > read
              ? rest.substr(expected)
              : std::string());
}

// "not valid JSON at line L, column C: <reason>", the column in bytes of the
// offending byte (nlohmann's `byte` is one past it, or past the end).
absl::Status NotJson(std::string_view text, size_t byte,
                     const std::string& what) {
  const size_t at = std::min(byte > 0 ? byte - 1 : 0, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("not valid JSON at line ", line, ", column ",
                   at - line_start + 1, ": ", Reason(what)));
}

}  // namespace

absl::StatusOr<nlohmann::ordered_json> ParseBoundedJson(std::string_view text,
                                                        int max_depth) {
  // Per open container: its members so far (counted by commas), or -1 for
  // an array.
  std::vector<int> members;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (static_cast<int>(members.size()) >= max_depth) {
        return absl::InvalidArgumentError(
            absl::StrCat("JSON nested deeper than ", max_depth, " levels"));
      }
      members.push_back(c == '{' ? 1 : -1);
    } else if (c == ']' || c == '}') {
      if (!members.empty()) members.pop_back();
    } else if (c == ',' && !members.empty() && members.back() > 0 &&
               ++members.back() > kMaxJsonObjectMembers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a JSON object of more than ", kMaxJsonObjectMembers, " members"));
    }
  }
  // The exception carries the position and reason that the discarded value
  // of a non-throwing parse would lose.
  try {
    return nlohmann::ordered_json::parse(text.begin(), text.end());
  } catch (const nlohmann::ordered_json::parse_error& e) {
    return NotJson(text, e.byte, e.what());
  } catch (const nlohmann::ordered_json::out_of_range&) {
    // Only a number past a double's range gets here; nlohmann's message
    // quotes the number (any length) and not where it is.
    return absl::InvalidArgumentError(
        "not valid JSON: number overflow (a number beyond the range of a "
        "double)");
  }
}

absl::Status CheckJsonDepth(const nlohmann::ordered_json& value,
                            int max_depth) {
  std::vector<std::pair<const nlohmann::ordered_json*, int>> stack = {
      {&value, 0}};
  while (!stack.empty()) {
    const auto [v, depth] = stack.back();
    stack.pop_back();
    if (!v->is_structured()) continue;
    if (depth >= max_depth) {
      return absl::InvalidArgumentError(
          absl::StrCat("JSON nested deeper than ", max_depth, " levels"));
    }
    for (const auto& child : *v) stack.emplace_back(&child, depth + 1);
  }
  return absl::OkStatus();
}

int64_t JsonHeapBytes(const nlohmann::ordered_json& value) {
  using Json = nlohmann::ordered_json;
  const size_t inline_chars = std::string().capacity();
  auto string_bytes = [&](const std::string& s) -> int64_t {
    return s.capacity() > inline_chars ? s.capacity() + 1 : 0;
  };
  int64_t bytes = 0;
  std::vector<const Json*> stack = {&value};
  while (!stack.empty()) {
    const Json* v = stack.back();
    stack.pop_back();
    if (v->is_object()) {
      const auto& members = v->get_ref<const Json::object_t&>();
      bytes += sizeof(members) +
               members.capacity() * sizeof(Json::object_t::value_type);
      for (const auto& [key, member] : members) {
        bytes += string_bytes(key);
        stack.push_back(&member);
      }
    } else if (v->is_array()) {
      const auto& items = v->get_ref<const Json::array_t&>();
      bytes += sizeof(items) + items.capacity() * sizeof(Json);
      for (const Json& item : items) stack.push_back(&item);
    } else if (v->is_string()) {
      const auto& s = v->get_ref<const std::string&>();
      bytes += sizeof(s) + string_bytes(s);
    }
  }
  return bytes;
}

namespace {

// Counts what JsonHeapBytes would, with sizes for capacities.
class HeapCounter : public nlohmann::json_sax<nlohmann::ordered_json> {
 public:
  using Json = nlohmann::ordered_json;
  explicit HeapCounter(int max_depth) : max_depth_(max_depth) {}

  bool null() override { return Item(); }
  bool boolean(bool) override { return Item(); }
  bool number_integer(number_integer_t) override { return Item(); }
  bool number_unsigned(number_unsigned_t) override { return Item(); }
  bool number_float(number_float_t, const string_t&) override { return Item(); }
  bool string(string_t& s) override {
    bytes_ += static_cast<int64_t>(sizeof(std::string)) + Long(s.size());
    return Item();
  }
  bool binary(binary_t&) override { return Item(); }
  bool key(string_t& k) override {
    bytes_ += Long(k.size());
    return true;
  }
  bool start_object(std::size_t) override { return Open(); }
  bool end_object() override {
    return Close(sizeof(Json::object_t), sizeof(Json::object_t::value_type));
  }
  bool start_array(std::size_t) override { return Open(); }
  bool end_array() override {
    return Close(sizeof(Json::array_t), sizeof(Json));
  }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception&) override {
    return false;
  }

  int64_t bytes() const { return bytes_; }

 private:
  static int64_t Long(size_t chars) {
    return chars > std::string().capacity() ? static_cast<int64_t>(chars) + 1
                                            : 0;
  }
  bool Item() {
    if (!counts_.empty()) ++counts_.back();
    return true;
  }
  bool Open() {
    if (static_cast<int>(counts_.size()) >= max_depth_) return false;
    counts_.push_back(0);
    return true;
  }
  bool Close(size_t container, size_t per_item) {
    bytes_ += static_cast<int64_t>(container + counts_.back() * per_item);
    counts_.pop_back();
    return Item();
  }

  const int max_depth_;
  int64_t bytes_ = 0;
  std::vector<int64_t> counts_;  // items of each open container
};

}  // namespace

int64_t LeastJsonHeapBytes(std::string_view text, int max_depth) {
  HeapCounter counter(max_depth);
  nlohmann::ordered_json::sax_parse(text.begin(), text.end(), &counter);
  return counter.bytes();
}

}  // namespace grammard::grammar
