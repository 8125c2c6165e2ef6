// Text fields of requests (constraints, names, ids) travel as proto `bytes`,
// so that invalid UTF-8 reaches the daemon instead of failing protobuf's
// parse of the whole message, which gRPC answers INTERNAL with no message
// and, on a Decode stream, ends the stream for every sequence on it. This
// module checks them and names the field and the offset. Replies carry
// text back in error messages, which may quote a request: they are cut
// here.
//
// Cost: linear in the text. Thread-safety: pure functions.
#ifndef GRAMMARD_SERVICE_WIRE_TEXT_H_
#define GRAMMARD_SERVICE_WIRE_TEXT_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
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

// An error message for a reply: at most kMaxErrorMessageBytes of
// `message`, then how much was cut, so that a reply stays small whatever
// the request was.
inline constexpr size_t kMaxErrorMessageBytes = 4096;
std::string CutMessage(absl::string_view message);

// `status` as a reply's Error: its code and its cut message.
void SetError(const absl::Status& status, grammard::v1::Error* error);

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_WIRE_TEXT_H_
