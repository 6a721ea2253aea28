// The rank process's pre-flight check over the coordinator (preflight_check.h measures): a
// doctor run's rank (spec.model.kind "preflight") and the check a job with checks.preflight
// runs before training.
//
//   doctor rank:  JoinJob → the check → ReportProgress(preflight) → FinishRank(ok)
//   before training (after JoinJob): the check → ReportProgress(preflight) → wait for the
//   attempt's key "<job>/<generation>/preflight/verdict": the coordinator sets it once every
//   rank reported and no worker was named; otherwise it ends the attempt, and the wait fails
//   with FAILED_PRECONDITION (the job is placed again without the worker it quarantined).
#ifndef RINGLEADER_WORKER_RANK_PREFLIGHT_RANK_H_
#define RINGLEADER_WORKER_RANK_PREFLIGHT_RANK_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/ringleader.pb.h"
#include "worker/coordinator_client/coordinator_client.h"
#include "worker/rank/preflight_check.h"

namespace ringleader {

struct PreflightRankOptions {
  // This rank's worker id (JoinJob).
  std::string worker_id;
  // The pairs' collectives (rank_main: MakePreflightPairFactory). Required.
  PairCollectiveFactory make_pair;
  PreflightCheckOptions check;
  // How long to wait for the other ranks' figures and the coordinator's verdict.
  absl::Duration verdict_timeout = absl::Seconds(120);
  // See TrainingLoopOptions: FinishRank through a coordinator outage.
  absl::Duration coordinator_grace = absl::Seconds(60);
  absl::Duration coordinator_retry_pause = absl::Seconds(1);
};

struct PreflightRankResult {
  absl::Status status;          // the check's (JoinJob's, ReportProgress's)
  bool finish_reported = false;  // as RankRunResult's (training_loop.h)
};

// A doctor run's rank, start to finish (FinishRank included; a failure typed by FailureOf).
PreflightRankResult RunPreflightRank(const v1::Assignment& assignment,
                                     CoordinatorClient* client,
                                     const PreflightRankOptions& options);

// The check before training, for a rank that has joined. OK: the workers passed, train.
// Errors: FAILED_PRECONDITION (the attempt ended: a worker was quarantined, or the job failed
// elsewhere), DEADLINE_EXCEEDED (no verdict within verdict_timeout), the ReportProgress errors,
// INVALID_ARGUMENT (no make_pair).
absl::Status PassPreflight(const v1::Assignment& assignment, CoordinatorClient* client,
                           const PreflightRankOptions& options);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_PREFLIGHT_RANK_H_
