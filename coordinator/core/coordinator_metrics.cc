// Coordinator::Metrics: the snapshot behind the /metrics endpoint. Copies figures under the
// lock; all formatting happens in the caller, after the lock is released.
#include <algorithm>

#include "coordinator/core/coordinator.h"

namespace ringleader {

Coordinator::MetricsSnapshot Coordinator::Metrics() {
  MetricsSnapshot snapshot;
  for (int s = v1::WorkerState_MIN; s <= v1::WorkerState_MAX; ++s) {
    if (v1::WorkerState_IsValid(s) && s != v1::WORKER_STATE_UNSPECIFIED) {
      snapshot.workers_by_state[static_cast<v1::WorkerState>(s)] = 0;
    }
  }
  for (int s = v1::JobState_MIN; s <= v1::JobState_MAX; ++s) {
    if (v1::JobState_IsValid(s) && s != v1::JOB_STATE_UNSPECIFIED) {
      snapshot.jobs_by_state[static_cast<v1::JobState>(s)] = 0;
    }
  }
  for (int k = v1::Alarm::Kind_MIN; k <= v1::Alarm::Kind_MAX; ++k) {
    if (v1::Alarm::Kind_IsValid(k) && k != v1::Alarm::KIND_UNSPECIFIED) {
      snapshot.alarms_by_kind[static_cast<v1::Alarm::Kind>(k)] = 0;
    }
  }

  absl::MutexLock lock(&mu_);  // reads only: nothing to publish, no callback to run
  snapshot.heartbeats_received = heartbeats_received_;
  snapshot.jobs_archived = jobs_archived_;
  snapshot.restarts = archived_restarts_;  // the jobs in memory add theirs below
  for (WorkerRecord* worker : workers_.InRegistrationOrder()) {
    ++snapshot.workers_by_state[worker->state];
  }
  for (JobRecord* job : jobs_.All()) {
    const v1::JobStatus& status = job->status;
    ++snapshot.jobs_by_state[status.state()];
    snapshot.restarts += status.restarts();
    for (const v1::Alarm& alarm : status.alarms()) ++snapshot.alarms_by_kind[alarm.kind()];
    if (status.state() != v1::JOB_STATE_RUNNING) continue;

    const double samples_per_rank_step =
        static_cast<double>(status.spec().batch_size()) *
        std::max<uint32_t>(1, status.spec().sync().gradient_accumulation_steps());
    for (const v1::RankStatus& rank : status.ranks()) {
      if (!rank.has_last_step()) continue;
      const v1::StepReport& step = rank.last_step();
      RankMetrics figures;
      figures.job = status.job_id();
      figures.rank = rank.rank();
      figures.step = step.step();
      figures.loss = step.loss();
      if (samples_per_rank_step > 0 && step.step_ms() > 0) {
        figures.samples_per_second = samples_per_rank_step / (step.step_ms() / 1000.0);
      }
      figures.local_grad_norm = step.local_grad_norm();
      figures.synced_grad_norm = step.synced_grad_norm();
      if (job->metrics != nullptr) figures.drift = job->metrics->last_drift(rank.rank());
      figures.step_seconds = step.step_ms() / 1000.0;
      figures.comm_seconds = step.comm_ms() / 1000.0;
      for (const v1::StragglerScore& score : status.stragglers()) {
        if (score.rank() != rank.rank()) continue;
        figures.straggler_score = score.score();
        figures.straggler_flagged = score.flagged();
      }
      snapshot.ranks.push_back(std::move(figures));
    }
  }
  return snapshot;
}

}  // namespace ringleader
