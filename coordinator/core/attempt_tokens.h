// Per-attempt tokens: the credential a rank's calls about its attempt carry, so that one job's
// rank cannot read or write another job's key-value store, reports, logs or ranks.
//
//   token(job, generation) = hex(HMAC-SHA256(secret, "<job>/<generation>"))
//
// Derived rather than stored, so a coordinator restarted on the same --state_dir (whose
// `attempt_secret` file holds the secret) gives the same tokens to the ranks it takes back.
// The coordinator hands the token out in the Assignment only; every WorkerService call about
// an attempt (JoinJob, KvSet, KvGet, KvGetMany, ReportProgress, FinishRank, AppendLogs) must
// carry it as "ringleader-attempt-token" metadata.
//
// Thread-safety: immutable after construction.
#ifndef RINGLEADER_COORDINATOR_CORE_ATTEMPT_TOKENS_H_
#define RINGLEADER_COORDINATOR_CORE_ATTEMPT_TOKENS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringleader {

// The metadata key of the token.
inline constexpr char kAttemptTokenMetadata[] = "ringleader-attempt-token";

class AttemptTokens {
 public:
  // `secret`: at least 16 bytes.
  explicit AttemptTokens(std::string secret);

  // The token of attempt `generation` of `job`.
  std::string For(absl::string_view job, uint64_t generation) const;

  // OK when `presented` is the attempt's token (compared in constant time). Errors:
  // UNAUTHENTICATED (none presented), PERMISSION_DENIED (another attempt's or a forged one),
  // each naming `method` and the attempt.
  absl::Status Check(absl::string_view job, uint64_t generation, absl::string_view presented,
                     absl::string_view method) const;

  // 32 random bytes from `path` (created with mode 0600 when missing), or fresh random bytes
  // when `path` is empty (tokens then end with the process, as in-memory jobs do). Errors:
  // INTERNAL (cannot read, create or write it, or it is shorter than 16 bytes).
  static absl::StatusOr<std::string> LoadOrCreateSecret(const std::string& path);

 private:
  const std::string secret_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_ATTEMPT_TOKENS_H_
