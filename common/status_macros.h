// Status propagation macros (Debian's Abseil 20220623 ships none).
//
//   RETURN_IF_ERROR(DoThing());
//   ASSIGN_OR_RETURN(auto value, ComputeValue());
#ifndef RINGLEADER_COMMON_STATUS_MACROS_H_
#define RINGLEADER_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RL_STATUS_CONCAT_INNER_(a, b) a##b
#define RL_STATUS_CONCAT_(a, b) RL_STATUS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status rl_status_ = (expr);                \
    if (!rl_status_.ok()) return rl_status_;           \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  RL_ASSIGN_OR_RETURN_IMPL_(RL_STATUS_CONCAT_(rl_statusor_, __LINE__), lhs, expr)

#define RL_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                              \
  if (!statusor.ok()) return statusor.status();        \
  lhs = std::move(statusor).value()

#endif  // RINGLEADER_COMMON_STATUS_MACROS_H_
