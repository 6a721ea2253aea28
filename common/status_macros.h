// Status propagation macros (Debian's Abseil 20220623 ships none).
//
//   RETURN_IF_ERROR(DoThing());
//   ASSIGN_OR_RETURN(auto value, ComputeValue());
//   return WithPrefix(status, "step 3: ");   // same code and payloads, message prefixed
//   return WithMessage(status, text);         // same code and payloads, message replaced
#ifndef RINGLEADER_COMMON_STATUS_MACROS_H_
#define RINGLEADER_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ringleader {

// `status` with its message replaced by `message`, keeping its code and payloads (a payload
// such as the rank failure, common/rank_failure.h, must survive the words added on the way up).
// An OK status is returned unchanged.
inline absl::Status WithMessage(const absl::Status& status, absl::string_view message) {
  if (status.ok()) return status;
  absl::Status reworded(status.code(), message);
  status.ForEachPayload([&reworded](absl::string_view url, const absl::Cord& payload) {
    reworded.SetPayload(url, payload);
  });
  return reworded;
}

// `status` with `prefix` in front of its message, keeping its code and payloads.
inline absl::Status WithPrefix(const absl::Status& status, absl::string_view prefix) {
  return WithMessage(status, absl::StrCat(prefix, status.message()));
}

}  // namespace ringleader

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
