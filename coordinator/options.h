// Options of the coordinator core. Plain struct; only main() turns flags into it.
#ifndef RINGLEADER_COORDINATOR_OPTIONS_H_
#define RINGLEADER_COORDINATOR_OPTIONS_H_

#include "absl/time/time.h"
#include "common/job_spec.h"

namespace ringleader {

struct CoordinatorOptions {
  // How often workers are told to send a heartbeat (returned by RegisterWorker).
  absl::Duration heartbeat_interval = absl::Seconds(2);
  // A worker whose last heartbeat is older than this is declared LOST by CheckStaleness(), and
  // the job it runs fails naming the rank.
  absl::Duration heartbeat_timeout = absl::Seconds(10);
  // Cap on every long poll (WaitAssignment, KvGet, WatchJob): a caller asking for a longer wait
  // is answered after this long.
  absl::Duration max_wait = absl::Seconds(30);
  // Every rank of an assigned job must JoinJob within this long, else the job FAILS naming the
  // ranks that never joined.
  absl::Duration rendezvous_timeout = absl::Seconds(120);
  // When a rank reports a failure, the job's reason also names the other unfinished ranks whose
  // rank process has not been heard from (step report, keepalive or join) for longer than this:
  // usually the frozen or hung rank the failure is a symptom of. Rank processes send a
  // keepalive every second while idle or blocked in a collective.
  absl::Duration silent_rank_after = absl::Seconds(5);
  // Limits checked by SubmitJob (ValidateJobSpec).
  JobSpecLimits limits;
  // Accept specs with model.faults (fault injection: crashes, bypassed sync, NaN losses, slow
  // ranks). For tests and demos only; a production coordinator refuses them.
  bool allow_fault_injection = false;
  // SubmitJob refuses a job when this many are already QUEUED (RESOURCE_EXHAUSTED).
  size_t max_queued_jobs = 1000;
  // A failed attempt with restarts left (spec.max_restarts) is placed again after a backoff:
  // restart_backoff for the first restart, doubling for each next one, at most
  // max_restart_backoff.
  absl::Duration restart_backoff = absl::Seconds(1);
  absl::Duration max_restart_backoff = absl::Seconds(30);
  // How long rank processes go on training while the coordinator cannot be reached (told to
  // the daemons at registration; past it they stop their ranks), and how long a restarted
  // coordinator waits for the daemons of a job that was RUNNING to come back with their ranks
  // before failing the attempt (the job then restarts from its last checkpoint). Zero = a
  // coordinator restart always restarts running jobs.
  absl::Duration coordinator_grace = absl::Seconds(60);
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_OPTIONS_H_
