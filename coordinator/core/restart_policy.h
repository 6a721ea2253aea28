// The restart policy: when a job whose attempt failed is placed again, and why. The first
// fault of a rank or worker restarts at once; a repeat within CoordinatorOptions::
// crash_loop_window (an earlier failed attempt of the job attributed to the same rank or the
// same worker; for an unknown culprit, another unknown one) waits restart_backoff x
// 2^(repeats-1), at most max_restart_backoff. The history is the job's attempts list
// (AttemptSummary.failed, failed_rank, failed_worker), so it survives a coordinator restart.
// Plain functions of their arguments.
#ifndef RINGLEADER_COORDINATOR_CORE_RESTART_POLICY_H_
#define RINGLEADER_COORDINATOR_CORE_RESTART_POLICY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "coordinator/core/options.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// Whom a failed attempt is attributed to: the rank whose failure, loss or absence decided it
// and that rank's worker, by name (a worker keeps its name across registrations). Neither set:
// unknown (a rendezvous timeout naming several ranks, a coordinator restart).
struct FailureCulprit {
  std::optional<uint32_t> rank;
  std::string worker;
  bool known() const { return rank.has_value() || !worker.empty(); }
  static FailureCulprit Unknown() { return FailureCulprit(); }
  static FailureCulprit Of(const v1::RankStatus& rank) {
    return FailureCulprit{rank.rank(), rank.worker_name()};
  }
};

struct RestartDelay {
  absl::Duration backoff = absl::ZeroDuration();
  // "a first fault of rank 1 on worker b", "rank 1 failed 3 times within 5m: a crash loop"
  std::string why;
};

// The delay before the job of `status` is placed again, its current attempt having failed at
// `now` because of `culprit` (the attempt itself, not ended yet, is not counted).
RestartDelay DecideRestartDelay(const v1::JobStatus& status, const FailureCulprit& culprit,
                                absl::Time now, const CoordinatorOptions& options);

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_RESTART_POLICY_H_
