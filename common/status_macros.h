// Status helpers used below main(): early-return macros for absl::Status and
// absl::StatusOr, in the style of gRPC's and abseil's internal macros.
#ifndef RINGSIDE_COMMON_STATUS_MACROS_H_
#define RINGSIDE_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define RINGSIDE_RETURN_IF_ERROR(expr)                 \
  do {                                                 \
    ::absl::Status ringside_status_ = (expr);          \
    if (!ringside_status_.ok()) return ringside_status_; \
  } while (0)

#define RINGSIDE_CONCAT_INNER_(a, b) a##b
#define RINGSIDE_CONCAT_(a, b) RINGSIDE_CONCAT_INNER_(a, b)

// `lhs = *expr` if `expr` (an absl::StatusOr<T>) is OK, else returns its status.
#define RINGSIDE_ASSIGN_OR_RETURN(lhs, expr) \
  RINGSIDE_ASSIGN_OR_RETURN_IMPL_(RINGSIDE_CONCAT_(ringside_sor_, __LINE__), lhs, expr)

#define RINGSIDE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(tmp).value()

namespace ringside {

// Prepends `context` to a non-OK status message, keeping its code.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_STATUS_MACROS_H_
