// Text fields of requests (constraints, names, ids) travel as proto `bytes`,
// so that invalid UTF-8 reaches the daemon instead of failing protobuf's
// parse of the whole message, which gRPC answers INTERNAL with no message
// and, on a Decode stream, ends the stream for every sequence on it. This
// module checks them and names the field and the offset.
//
// Cost: linear in the text. Thread-safety: pure functions.
#ifndef GRAMMARD_SERVICE_WIRE_TEXT_H_
#define GRAMMARD_SERVICE_WIRE_TEXT_H_

#include <string_view>

#include "absl/status/status.h"
#include "proto/grammard.pb.h"

namespace grammard::service {

// InvalidArgument naming `field` and the first invalid byte's offset.
absl::Status CheckUtf8(std::string_view value, std::string_view field);

// CheckUtf8, and InvalidArgument naming `field` and the limit when `value`
// is longer than `max_bytes` (names and ids, which replies may echo).
absl::Status CheckName(std::string_view value, std::string_view field,
                       size_t max_bytes);

// The longest names and ids requests may carry: tokenizer names, grammar
// ids (32 hex digits) and SyncGroup group ids.
inline constexpr size_t kMaxNameBytes = 128;
inline constexpr size_t kMaxGrammarIdBytes = 64;
inline constexpr size_t kMaxGroupIdBytes = 256;

// Every text field of the constraint: its spec, EBNF root rule, choices and
// JSON separators.
absl::Status CheckConstraintUtf8(const grammard::v1::Constraint& constraint);

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_WIRE_TEXT_H_
