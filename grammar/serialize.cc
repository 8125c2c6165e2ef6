#include "grammar/serialize.h"

#include <zlib.h>

#include <memory>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "grammar/base/byte_io.h"
#include "grammar/base/status_macros.h"
#include "grammar/compiler.h"
#include "grammar/engine/grammar_data.h"

namespace grammard::grammar {
namespace {

constexpr std::string_view kMagic = "GRMDGRAM";

uint32_t Crc32(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes lengths as uInt: feed large payloads in pieces.
  while (!bytes.empty()) {
    const size_t n = std::min<size_t>(bytes.size(), 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()),
                static_cast<uInt>(n));
    bytes.remove_prefix(n);
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace

std::string SerializeGrammar(const CompiledGrammar& grammar) {
  internal::ByteWriter payload;
  grammar.data().pda.Save(&payload);
  grammar.data().table.Save(&payload);
  internal::ByteWriter out;
  out.bytes().append(kMagic);
  out.Put<uint32_t>(kSerializeFormatVersion);
  out.PutString(kEngineVersion);
  out.PutString(grammar.vocabulary().fingerprint());
  out.Put<uint32_t>(Crc32(payload.bytes()));
  out.PutString(payload.bytes());
  return std::move(out.bytes());
}

absl::StatusOr<CompiledGrammar> GrammarCompiler::Deserialize(
    std::string_view bytes) const {
  if (bytes.substr(0, kMagic.size()) != kMagic) {
    return absl::DataLossError("compiled grammar: not a serialized grammar");
  }
  internal::ByteReader in(bytes.substr(kMagic.size()));
  uint32_t format = 0, crc = 0;
  std::string engine, fingerprint, payload;
  if (!in.Get(&format)) return in.status();
  if (format != kSerializeFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("compiled grammar: format version ", format,
                     ", this engine reads ", kSerializeFormatVersion));
  }
  if (!in.GetString(&engine) || !in.GetString(&fingerprint)) {
    return in.status();
  }
  if (engine != kEngineVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("compiled grammar: made by engine \"", engine,
                     "\", this is \"", kEngineVersion, "\""));
  }
  if (fingerprint != vocabulary().fingerprint()) {
    return absl::FailedPreconditionError(
        "compiled grammar: made for another tokenizer (fingerprint differs)");
  }
  if (!in.Get(&crc) || !in.GetString(&payload) || !in.done()) {
    return in.Malformed();
  }
  if (Crc32(payload) != crc) {
    return absl::DataLossError("compiled grammar: checksum mismatch");
  }
  internal::ByteReader body(payload);
  absl::StatusOr<internal::Pda> pda = internal::Pda::Load(&body);
  if (!pda.ok()) return pda.status();
  auto data = std::make_shared<internal::GrammarData>(index_, *std::move(pda));
  GRAMMARD_RETURN_IF_ERROR(data->table.Load(&body));
  if (!body.done()) return body.Malformed();
  return CompiledGrammar(std::move(data));
}

}  // namespace grammard::grammar
