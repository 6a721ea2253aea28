// Options of the coordinator core. Plain struct; only main() turns flags into it.
#ifndef RINGLEADER_COORDINATOR_CORE_OPTIONS_H_
#define RINGLEADER_COORDINATOR_CORE_OPTIONS_H_

#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"
#include "coordinator/core/attempt_tokens.h"
#include "common/job_spec.h"

namespace ringleader {

struct CoordinatorOptions {
  // Per-attempt tokens put in every Assignment (attempt_tokens.h). Not owned; nullptr = none
  // (then the gRPC edge checks none either).
  const AttemptTokens* attempt_tokens = nullptr;
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
  // A rank's failure that is a consequence of a peer's (its kind PEER_CLOSED, PEER_TIMED_OUT
  // or ABORTED_BY_PEER, or it names a peer: culprit.h HandlingOf) does not end the attempt at
  // once while other ranks are unfinished: it is held this long for the peer's own report,
  // which then names the failure (the symptom is quoted after it). Zero = no hold.
  absl::Duration peer_failure_grace = absl::Seconds(2);
  // Limits checked by SubmitJob (ValidateJobSpec).
  JobSpecLimits limits;
  // Accept specs with model.faults (fault injection: crashes, bypassed sync, NaN losses, slow
  // ranks). For tests and demos only; a production coordinator refuses them.
  bool allow_fault_injection = false;
  // SubmitJob refuses a job when this many are already QUEUED (RESOURCE_EXHAUSTED).
  size_t max_queued_jobs = 1000;
  // Finished jobs (SUCCEEDED, FAILED, CANCELLED) kept in memory (--jobs_kept). When a job
  // ends with more than this many finished jobs in memory, the ones that ended first (ties: the
  // lower job number) are archived: dropped from the job table with everything kept per job
  // (metrics history, step judge, logs, parked watches) and moved to the job store's archive
  // with their final status (JobStore::Archive, after the lock is released), where GetJob,
  // WatchJob and ListJobs (include_archived) still read it. Queued and running jobs are never
  // archived. Also applied by Restore to the jobs a restarted coordinator loads. main refuses
  // 0 (here 0 would archive every job as it ends).
  size_t max_finished_jobs_kept = 1000;
  // Limits of an attempt's key-value store (the rendezvous: a 1024-rank gloo job sets about
  // 2 keys per rank of at most 139 KB each). KvSet beyond them is refused naming the limit.
  size_t max_kv_key_bytes = 1024;
  size_t max_kv_value_bytes = size_t{4} << 20;  // 4 MiB
  size_t max_kv_keys_per_attempt = 65536;
  // ReportProgress calls a rank of an attempt may make per second, in bursts of as many: a
  // token bucket per (job, generation, rank) on the injected clock (report_rate_limiter.h).
  // Every call counts, whatever it carries (a batch of steps, epochs, nothing: a keepalive).
  // Beyond it the call is refused with RESOURCE_EXHAUSTED naming the rank, the limit and the
  // flag (--max_reports_per_second); reporters keep their reports and retry after a backoff.
  // The rank binary batches up to 20 steps a call (200 calls carry 4000 steps a second) and
  // sends a keepalive a second while idle. 0 = no limit (the load benchmarks).
  uint32_t max_reports_per_second_per_rank = 200;
  // A failed attempt with restarts left (spec.max_restarts) is placed again at once, unless the
  // rank or the worker it is attributed to (or, for a failure of unknown cause, another failure
  // of unknown cause) already failed an attempt of the job within crash_loop_window: a crash
  // loop, placed again after restart_backoff x 2^(repeats-1), at most max_restart_backoff,
  // where repeats counts those earlier failures.
  absl::Duration restart_backoff = absl::Seconds(1);
  absl::Duration max_restart_backoff = absl::Seconds(30);
  absl::Duration crash_loop_window = absl::Minutes(5);
  // How long rank processes go on training while the coordinator cannot be reached (told to
  // the daemons at registration; past it they stop their ranks), and how long a restarted
  // coordinator waits for the daemons of a job that was RUNNING to come back with their ranks
  // before failing the attempt (the job then restarts from its last checkpoint). Zero = a
  // coordinator restart always restarts running jobs.
  absl::Duration coordinator_grace = absl::Seconds(60);

  // The ranks' output kept for GetLogs (`ringleader logs`), in memory only (log_store.h): the
  // most recent bytes of each rank of an attempt, of each job (its oldest generations go
  // first) and of all jobs together (the job least recently written to goes first).
  size_t max_log_bytes_per_rank = size_t{1} << 20;   // 1 MiB
  size_t max_log_bytes_per_job = size_t{8} << 20;    // 8 MiB
  size_t max_log_bytes_total = size_t{256} << 20;    // 256 MiB
  // Bytes of output one GetLogs answer carries at most (under gRPC's default 4 MiB message
  // limit); a reader further behind gets the rest from its next call, at once.
  size_t max_log_bytes_per_answer = size_t{2} << 20;  // 2 MiB
  // GetLogs says an attempt is over only this long after it ended: a daemon ships a rank's last
  // output right after the rank process exited, which is often just after the attempt ended (the
  // rank reported its end itself, or was stopped because the attempt ended).
  absl::Duration log_linger = absl::Seconds(2);
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_OPTIONS_H_
