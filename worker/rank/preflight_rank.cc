#include "worker/rank/preflight_rank.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "common/rank_failure.h"
#include "common/status_macros.h"
#include "worker/coordinator_client/coordinator_key_value_store.h"
#include "worker/rank/finish_report.h"

namespace ringleader {
namespace {

// Measures and sends the figures.
absl::Status CheckAndReport(const v1::Assignment& assignment, CoordinatorClient* client,
                            const PreflightRankOptions& options) {
  if (!options.make_pair) {
    return absl::InvalidArgumentError("pre-flight check: no pair collective factory configured");
  }
  ASSIGN_OR_RETURN(v1::PreflightReport report,
                   RunPreflightCheck(static_cast<int>(assignment.rank()),
                                     static_cast<int>(assignment.world_size()), options.make_pair,
                                     options.check));
  std::cerr << "[ringleader-rank] rank " << assignment.rank() << ": pre-flight check: matmul "
            << report.gflops() << " GFLOP/s";
  for (const v1::PreflightPairReport& pair : report.pairs()) {
    std::cerr << "; pair " << pair.rank_a() << "-" << pair.rank_b() << ": "
              << (pair.ok() ? absl::StrCat(pair.bandwidth_mb_per_s(), " MB/s, ",
                                           pair.latency_us(), " us")
                            : absl::StrCat("failed: ", pair.error()));
  }
  std::cerr << std::endl;
  v1::ReportProgressRequest request;
  request.set_job_id(assignment.job_id());
  request.set_generation(assignment.generation());
  request.set_rank(assignment.rank());
  *request.mutable_preflight() = std::move(report);
  return client->ReportProgress(request).status();
}

}  // namespace

absl::Status PassPreflight(const v1::Assignment& assignment, CoordinatorClient* client,
                           const PreflightRankOptions& options) {
  RETURN_IF_ERROR(CheckAndReport(assignment, client, options));
  CoordinatorKeyValueStore store(client, assignment.job_id(), assignment.generation());
  const std::string key =
      absl::StrCat(assignment.job_id(), "/", assignment.generation(), "/preflight/verdict");
  return store.Get(key, options.verdict_timeout).status();
}

PreflightRankResult RunPreflightRank(const v1::Assignment& assignment,
                                     CoordinatorClient* client,
                                     const PreflightRankOptions& options) {
  PreflightRankResult result;
  v1::JoinJobRequest join;
  join.set_job_id(assignment.job_id());
  join.set_generation(assignment.generation());
  join.set_rank(assignment.rank());
  join.set_worker_id(options.worker_id);
  join.set_spec_fingerprint(JobSpecFingerprint(assignment.spec()));
  result.status = client->JoinJob(join).status();
  if (result.status.ok()) result.status = CheckAndReport(assignment, client, options);

  v1::FinishRankRequest finish;
  finish.set_job_id(assignment.job_id());
  finish.set_generation(assignment.generation());
  finish.set_rank(assignment.rank());
  finish.set_ok(result.status.ok());
  if (!result.status.ok()) {
    finish.set_error(absl::StrCat("rank ", assignment.rank(), ": pre-flight check: ",
                                  result.status.message()));
    *finish.mutable_failure() = FailureOf(result.status);
  }
  result.finish_reported = DeliverFinishRank(client, finish, options.coordinator_grace,
                                             options.coordinator_retry_pause);
  return result;
}

}  // namespace ringleader
