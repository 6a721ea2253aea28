// What the coordinator's /metrics endpoint shows (Coordinator::Metrics() copies it under the
// lock; http/prometheus_text.h formats it). Plain data.
#ifndef RINGLEADER_COORDINATOR_CORE_COORDINATOR_METRICS_H_
#define RINGLEADER_COORDINATOR_CORE_COORDINATOR_METRICS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "proto/ringleader.pb.h"

namespace ringleader {

// One rank of a RUNNING job, from its latest step report (ranks that have not reported a
// step yet are left out).
struct CoordinatorRankMetrics {
  std::string job;
  uint32_t rank = 0;
  uint64_t step = 0;
  double loss = 0;
  // batch_size x gradient_accumulation_steps / step time; unknown (nullopt) when the spec
  // has no batch size (command jobs) or the step time is 0.
  std::optional<double> samples_per_second;
  double local_grad_norm = 0;
  double synced_grad_norm = 0;
  // The last drift the rank measured in this attempt (nullopt: none yet).
  std::optional<double> drift;
  double step_seconds = 0;
  double comm_seconds = 0;
  // The step judge's straggler score (StragglerScore: the share of the waiting it caused) and
  // whether it is flagged; nullopt before the judge has a full window.
  std::optional<double> straggler_score;
  bool straggler_flagged = false;
};
// What the /metrics endpoint shows (http/prometheus_text.h formats it).
struct CoordinatorMetricsSnapshot {
  // Every state but UNSPECIFIED is present (0 when none).
  std::map<v1::WorkerState, int64_t> workers_by_state;
  std::map<v1::JobState, int64_t> jobs_by_state;
  // Alarms in every job's status, by kind (every kind but KIND_UNSPECIFIED present). One
  // alarm per kind and rank set per attempt (later occurrences are its `repeats`).
  std::map<v1::Alarm::Kind, int64_t> alarms_by_kind;
  // Heartbeat calls received since this coordinator started (refused ones included).
  uint64_t heartbeats_received = 0;
  // Restarts of every job, in all (JobStatus.restarts summed; restored jobs' included, and
  // those of the jobs archived since this coordinator started).
  uint64_t restarts = 0;
  // Finished jobs archived since this coordinator started (options.max_finished_jobs_kept).
  uint64_t jobs_archived = 0;
  // RUNNING jobs' ranks, by job then rank.
  std::vector<CoordinatorRankMetrics> ranks;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_COORDINATOR_METRICS_H_
