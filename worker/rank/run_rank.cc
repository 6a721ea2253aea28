// RunRank: one rank's training plus its FinishRank report (see training_loop.h).
#include <algorithm>
#include <iostream>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rank_failure.h"
#include "worker/rank/finish_report.h"
#include "worker/rank/progress_reporter.h"
#include "worker/rank/trace_report.h"
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

// RunTraining, with an allocation that failed anywhere in it as OUT_OF_MEMORY.
absl::StatusOr<TrainingOutcome> TrainCatchingOutOfMemory(const v1::Assignment& assignment,
                                                         CoordinatorClient* client,
                                                         const TrainingLoopOptions& options) {
  try {
    return RunTraining(assignment, client, options);
  } catch (const std::bad_alloc& e) {
    return WithFailureKind(
        absl::ResourceExhaustedError(absl::StrCat(
            "rank ", assignment.rank(), ": out of memory (", e.what(),
            "): lower batch_size or the model's layers, or run it on a worker with more memory")),
        v1::RankFailure::OUT_OF_MEMORY);
  }
}

}  // namespace

RankRunResult RunRank(const v1::Assignment& assignment, CoordinatorClient* client,
                      const TrainingLoopOptions& options) {
  RankRunResult result;
  // The rank's collective ring, sent with a failure (hang forensics: the coordinator says
  // where every rank was when a collective timed out).
  CollectiveTrace trace(options.clock);
  TrainingLoopOptions traced = options;
  if (traced.trace == nullptr) traced.trace = &trace;
  absl::StatusOr<TrainingOutcome> outcome = TrainCatchingOutOfMemory(assignment, client, traced);
  result.status = outcome.status();
  if (outcome.ok()) result.outcome = *outcome;
  // A consequence of a peer's failure (rank_failure.h): the peer gets to report first.
  const v1::RankFailure failure = FailureOf(outcome.status());
  if (!outcome.ok() && IsPeerSymptom(failure)) {
    GiveTheCulpritAHeadStart(assignment, client, options);
  }

  v1::FinishRankRequest request;
  request.set_job_id(assignment.job_id());
  request.set_generation(assignment.generation());
  request.set_rank(assignment.rank());
  request.set_ok(outcome.ok());
  if (!outcome.ok()) {
    request.set_error(std::string(outcome.status().message()));
    // Its kind as the code that detected it said, with the peer, step and collective where
    // known: a JOB_ERROR is not restarted; a peer's failure waits for the peer's own report.
    *request.mutable_failure() = failure;
    for (v1::CollectiveTraceEntry& e : TraceToProto(traced.trace->Snapshot())) {
      *request.add_trace() = std::move(e);
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
