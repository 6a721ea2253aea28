#include "coordinator/core/restart_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringleader {
namespace {

std::string DescribeCulprit(const FailureCulprit& culprit) {
  if (culprit.rank.has_value() && !culprit.worker.empty()) {
    return absl::StrCat("rank ", *culprit.rank, " on worker ", culprit.worker);
  }
  if (culprit.rank.has_value()) return absl::StrCat("rank ", *culprit.rank);
  return absl::StrCat("worker ", culprit.worker);
}

}  // namespace

RestartDelay DecideRestartDelay(const v1::JobStatus& status, const FailureCulprit& culprit,
                                absl::Time now, const CoordinatorOptions& options) {
  const int64_t window_start_ms = absl::ToUnixMillis(now - options.crash_loop_window);
  int repeats = 0;
  int by_rank = 0;
  int by_worker = 0;
  for (const v1::AttemptSummary& attempt : status.attempts()) {
    // The attempt failing now has not ended yet; earlier ones outside the window are forgiven.
    if (!attempt.failed() || attempt.end_time_unix_ms() == 0 ||
        attempt.end_time_unix_ms() <= window_start_ms) {
      continue;
    }
    const bool attempt_known = attempt.has_failed_rank() || !attempt.failed_worker().empty();
    const bool same_rank = culprit.rank.has_value() && attempt.has_failed_rank() &&
                           attempt.failed_rank() == *culprit.rank;
    const bool same_worker = !culprit.worker.empty() && attempt.failed_worker() == culprit.worker;
    if (!same_rank && !same_worker && (culprit.known() || attempt_known)) continue;
    ++repeats;
    by_rank += same_rank ? 1 : 0;
    by_worker += same_worker ? 1 : 0;
  }
  RestartDelay delay;
  if (repeats == 0) {
    delay.why = culprit.known() ? absl::StrCat("a first fault of ", DescribeCulprit(culprit))
                                : "a first failure of unknown cause";
    return delay;
  }
  delay.backoff = options.restart_backoff;
  for (int i = 1; i < repeats && delay.backoff < options.max_restart_backoff; ++i) {
    delay.backoff *= 2;
  }
  delay.backoff = std::min(delay.backoff, options.max_restart_backoff);
  const std::string window = absl::FormatDuration(options.crash_loop_window);
  if (!culprit.known()) {
    delay.why = absl::StrCat(repeats + 1, " failures of unknown cause within ", window,
                             ": a crash loop");
    return delay;
  }
  std::string who;
  if (culprit.rank.has_value() && by_rank == repeats) {
    who = absl::StrCat("rank ", *culprit.rank);
  } else if (!culprit.worker.empty() && by_worker == repeats) {
    who = absl::StrCat("worker ", culprit.worker);
  } else {
    who = absl::StrCat("rank ", *culprit.rank, " or worker ", culprit.worker);
  }
  delay.why = absl::StrCat(who, " failed ", repeats + 1, " times within ", window,
                           ": a crash loop");
  return delay;
}

}  // namespace ringleader
