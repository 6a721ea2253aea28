// The judgement of a pre-flight check (`ringleader doctor`, a spec's checks.preflight): which
// workers to quarantine from the figures their ranks measured. Pure function, no state.
//
//   compute   a worker whose matmul rate is below min_fraction x the median over the workers
//             that reported is named ("cpu2 on h: matmul 0.9 GFLOP/s, 0.18 of the median 5.0").
//   links     a pair is bad when its exchange failed, or its bandwidth is below min_fraction x
//             the reference: the median over workers of each worker's best pair (one slow
//             worker then cannot drag the reference down, as it would the median over pairs
//             with 3 workers, 2 of whose 3 pairs it is in). A worker every one of whose pairs
//             is bad is named, unless that is every worker: with 2 workers (one pair) the slow
//             or broken end cannot be told, and when every pair is bad the fault is the
//             network's, not one worker's. Either way nobody is named and a finding says so:
//             never cry wolf.
//   missing   a worker whose rank sent no figures is listed (reported false), never named.
#ifndef RINGLEADER_COORDINATOR_CORE_PREFLIGHT_JUDGE_H_
#define RINGLEADER_COORDINATOR_CORE_PREFLIGHT_JUDGE_H_

#include <optional>
#include <string>
#include <vector>

#include "proto/ringleader.pb.h"

namespace ringleader {

// One rank of the check: its worker and what it reported (nullopt: nothing).
struct PreflightRank {
  std::string worker_id;
  std::string name;
  std::string host;
  std::optional<v1::PreflightReport> report;
};

// `ranks[r]` is rank r. `min_fraction` in (0, 1). The result's workers are in rank order with
// `quarantined` and `reason` set for those named; its pairs are the pairs any rank reported
// (both ends' reports merged: failed when either end says so), ordered by rank pair.
// job_id, generation and error are left for the caller.
v1::PreflightResult JudgePreflight(const std::vector<PreflightRank>& ranks, double min_fraction);

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_PREFLIGHT_JUDGE_H_
