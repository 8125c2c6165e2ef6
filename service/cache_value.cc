#include "service/cache_value.h"

#include <zlib.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "grammar/serialize.h"
#include "nlohmann/json.hpp"

namespace grammard::service {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kMagic = "GDC1";
constexpr size_t kPrefix = 4 + 1 + 8;  // magic, flags, body length
// A body larger than this is not ours (and would be a decompression bomb).
constexpr uint64_t kMaxBody = uint64_t{4} << 30;

absl::Status Corrupt(const char* why) {
  return absl::DataLossError(absl::StrCat("cached grammar: ", why));
}

// A string member, "" when absent; false when it has another type (Json's
// own value() would throw, and the value comes from outside the process).
bool StringMember(const Json& object, const char* key, std::string* out) {
  auto it = object.find(key);
  if (it == object.end()) {
    out->clear();
    return true;
  }
  if (!it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}

}  // namespace

std::string EncodeCacheValue(const GrammarEntry& entry) {
  Json header = {{"id", entry.id},
                 {"code", static_cast<int>(entry.status.code())},
                 {"message", std::string(entry.status.message())},
                 {"compile_seconds", entry.compile_seconds},
                 {"dropped", Json::array()}};
  for (const grammar::DroppedKeyword& d : entry.dropped) {
    header["dropped"].push_back(
        {{"keyword", d.keyword}, {"pointer", d.pointer}, {"reason", d.reason}});
  }
  const std::string head = header.dump();
  const uint32_t head_len = static_cast<uint32_t>(head.size());
  std::string body(reinterpret_cast<const char*>(&head_len), 4);
  body += head;
  if (entry.grammar.has_value())
    body += grammar::SerializeGrammar(*entry.grammar);

  std::string packed(compressBound(body.size()), '\0');
  uLongf packed_len = packed.size();
  const bool deflated =
      compress2(reinterpret_cast<Bytef*>(packed.data()), &packed_len,
                reinterpret_cast<const Bytef*>(body.data()), body.size(),
                1) == Z_OK &&
      packed_len < body.size() - body.size() / 5;
  const uint64_t body_len = body.size();
  std::string out(kMagic);
  out.push_back(deflated ? 1 : 0);
  out.append(reinterpret_cast<const char*>(&body_len), 8);
  if (deflated) {
    out.append(packed.data(), packed_len);
  } else {
    out += body;
  }
  return out;
}

absl::StatusOr<std::shared_ptr<GrammarEntry>> DecodeCacheValue(
    std::string_view value, const std::string& id,
    const grammar::GrammarCompiler& compiler) {
  if (value.size() < kPrefix || value.substr(0, 4) != kMagic) {
    return Corrupt("not a value of this format");
  }
  const uint8_t flags = static_cast<uint8_t>(value[4]);
  uint64_t body_len = 0;
  std::memcpy(&body_len, value.data() + 5, 8);
  if (flags > 1 || body_len > kMaxBody) return Corrupt("bad header");
  std::string inflated;
  std::string_view body = value.substr(kPrefix);
  if (flags == 1) {
    inflated.resize(body_len);
    uLongf len = body_len;
    if (uncompress(reinterpret_cast<Bytef*>(inflated.data()), &len,
                   reinterpret_cast<const Bytef*>(body.data()),
                   body.size()) != Z_OK ||
        len != body_len) {
      return Corrupt("does not inflate");
    }
    body = inflated;
  } else if (body.size() != body_len) {
    return Corrupt("truncated");
  }
  uint32_t head_len = 0;
  if (body.size() < 4) return Corrupt("truncated");
  std::memcpy(&head_len, body.data(), 4);
  if (head_len > body.size() - 4) return Corrupt("truncated header");
  const Json header = Json::parse(body.substr(4, head_len), nullptr,
                                  /*allow_exceptions=*/false);
  if (!header.is_object() || !header.contains("id") ||
      !header["id"].is_string() || !header.contains("code") ||
      !header["code"].is_number_integer() || !header.contains("message") ||
      !header["message"].is_string() || !header.contains("dropped") ||
      !header["dropped"].is_array()) {
    return Corrupt("bad header");
  }
  if (header["id"].get<std::string>() != id) {
    return Corrupt("filed under another grammar id");
  }
  auto entry = std::make_shared<GrammarEntry>();
  entry->id = id;
  if (auto seconds = header.find("compile_seconds"); seconds != header.end()) {
    if (!seconds->is_number()) return Corrupt("bad compile time");
    entry->compile_seconds = seconds->get<double>();
  }
  const int code = header["code"].get<int>();
  if (code < 0 || code > 16) return Corrupt("bad status code");
  for (const Json& d : header["dropped"]) {
    grammar::DroppedKeyword dropped;
    if (!d.is_object() || !StringMember(d, "keyword", &dropped.keyword) ||
        !StringMember(d, "pointer", &dropped.pointer) ||
        !StringMember(d, "reason", &dropped.reason)) {
      return Corrupt("bad dropped keyword");
    }
    entry->dropped.push_back(std::move(dropped));
  }
  const std::string_view grammar_bytes = body.substr(4 + head_len);
  if (code != 0) {
    if (!grammar_bytes.empty()) return Corrupt("a failure with a grammar");
    entry->status = absl::Status(static_cast<absl::StatusCode>(code),
                                 header["message"].get<std::string>());
    return entry;
  }
  absl::StatusOr<grammar::CompiledGrammar> g =
      compiler.Deserialize(grammar_bytes);
  if (!g.ok()) return g.status();
  entry->grammar = *std::move(g);
  return entry;
}

}  // namespace grammard::service
