// RunRank: one rank's training plus its FinishRank report (see training_loop.h).
#include <algorithm>
#include <iostream>
#include <string>

#include "absl/time/clock.h"
#include "worker/collective/gloo/gloo_peers.h"
#include "worker/rank/finish_report.h"
#include "worker/rank/progress_reporter.h"
#include "worker/rank/training_loop.h"

namespace ringleader {
namespace {

// See TrainingLoopOptions::victim_report_delay.
void GiveTheCulpritAHeadStart(const v1::Assignment& assignment, CoordinatorClient* client,
                              const TrainingLoopOptions& options) {
  const absl::Duration interval = std::max(options.victim_probe_interval, absl::Milliseconds(1));
  v1::ReportProgressRequest probe;
  probe.set_job_id(assignment.job_id());
  probe.set_generation(assignment.generation());
  probe.set_rank(assignment.rank());
  for (absl::Duration waited; waited < options.victim_report_delay; waited += interval) {
    absl::StatusOr<v1::ReportProgressResponse> answer = client->ReportProgress(probe);
    // Over (someone reported first) or refused (stale): nothing left to wait for. Unreachable,
    // or over the coordinator's rate limit (RESOURCE_EXHAUSTED): probe again after the pause.
    if (!answer.ok() && !IsRetriedReportError(answer.status())) return;
    if (answer.ok() && answer->stop()) return;
    if (options.sleep) {
      options.sleep(interval);
    } else {
      absl::SleepFor(interval);
    }
  }
}

// A failure that running the job again would repeat: a spec this rank cannot run, parameters
// without a gradient, a collective desync (the reducer's FAILED_PRECONDITION). The coordinator
// does not restart it. Anything else (a peer gone, a timeout, an I/O error) may be a fault of
// a machine, worth a restart.
bool IsJobError(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument ||
         status.code() == absl::StatusCode::kFailedPrecondition;
}

bool LooksLikeAPeerFailure(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

}  // namespace

RankRunResult RunRank(const v1::Assignment& assignment, CoordinatorClient* client,
                      const TrainingLoopOptions& options) {
  RankRunResult result;
  absl::StatusOr<TrainingOutcome> outcome = RunTraining(assignment, client, options);
  result.status = outcome.status();
  if (outcome.ok()) result.outcome = *outcome;
  if (!outcome.ok() && LooksLikeAPeerFailure(outcome.status())) {
    GiveTheCulpritAHeadStart(assignment, client, options);
  }

  v1::FinishRankRequest request;
  request.set_job_id(assignment.job_id());
  request.set_generation(assignment.generation());
  request.set_rank(assignment.rank());
  request.set_ok(outcome.ok());
  if (!outcome.ok()) {
    request.set_error(std::string(outcome.status().message()));
    request.set_job_error(IsJobError(outcome.status()));
    // A transport error about one peer names it (gloo_peers.h): the coordinator weighs that
    // peer's evidence and, for a loopback address across hosts, says how to fix it.
    if (std::optional<StatusPeer> peer = PeerOfStatus(outcome.status())) {
      request.set_has_peer(true);
      request.set_peer_rank(peer->rank);
      request.set_peer_address(peer->address);
    }
  }
  if (outcome.ok()) request.set_checkpoint_path(outcome->checkpoint_path);
  // The client retried UNAVAILABLE for a few seconds already; a coordinator restarting
  // within its grace still gets the report.
  result.finish_reported = DeliverFinishRank(client, request, options.coordinator_grace,
                                             options.coordinator_retry_pause, options.sleep);
  return result;
}

}  // namespace ringleader
