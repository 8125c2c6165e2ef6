// GRAMMARD_RETURN_IF_ERROR(expr): evaluates `expr`, an absl::Status, and
// returns it from the enclosing function unless it is OK. The function may
// return absl::Status or any absl::StatusOr<T>. (The system Abseil has no
// public macro for this.)
//
//   GRAMMARD_RETURN_IF_ERROR(Validate(grammar));
//
// Cost: none beyond `expr`. Thread-safety: not applicable.
#ifndef GRAMMARD_GRAMMAR_BASE_STATUS_MACROS_H_
#define GRAMMARD_GRAMMAR_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"

#define GRAMMARD_RETURN_IF_ERROR(expr)                                      \
  do {                                                                      \
    if (::absl::Status grammard_status_ = (expr); !grammard_status_.ok()) { \
      return grammard_status_;                                              \
    }                                                                       \
  } while (false)

#endif  // GRAMMARD_GRAMMAR_BASE_STATUS_MACROS_H_
