// The coordinator's table of jobs and the FIFO queue of jobs waiting for workers.
#ifndef RINGLEADER_COORDINATOR_CORE_JOB_TABLE_H_
#define RINGLEADER_COORDINATOR_CORE_JOB_TABLE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/ids.h"
#include "coordinator/core/log_store.h"
#include "coordinator/core/metrics_history.h"
#include "coordinator/core/restart_policy.h"
#include "coordinator/core/step_judge.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// Completion of WatchJob: the job's status, or an error.
using WatchCallback = std::function<void(absl::StatusOr<v1::JobStatus>)>;
// Completion of RunDoctor: the check's judgement, or an error.
using DoctorCallback = std::function<void(absl::StatusOr<v1::PreflightResult>)>;

// One job. Plain data owned by JobTable.
struct JobRecord {
  // The public record: spec, fingerprint, state, transitions, ranks (filled on assignment),
  // epochs, version. `ranks[r].heartbeat_age_ms` is filled only when the status is rendered.
  v1::JobStatus status;
  // When the current attempt must have every rank joined (RENDEZVOUS only).
  absl::Time rendezvous_deadline = absl::InfiniteFuture();
  // A job put back in the queue for a restart is not placed before this (its backoff);
  // `restart_waiting` until the coordinator noticed the backoff ended.
  absl::Time restart_not_before = absl::InfinitePast();
  bool restart_waiting = false;
  // A RUNNING job restored after a coordinator restart waits until then for its ranks' daemons
  // to register again with their ranks (ranks still away have an empty worker_id).
  absl::Time reattach_deadline = absl::InfiniteFuture();
  // Alarms and verdict of the attempt from before the coordinator restarted (its new judge
  // starts empty): the alarms are kept in front of the judge's own; the verdict keeps the
  // worse result, the first bad step and the count of steps judged.
  std::vector<v1::Alarm> carried_alarms;
  v1::Verdict carried_verdict;

  // A failure of the current attempt held for the peer's own report (see
  // CoordinatorOptions::peer_failure_grace): its reason as it would have been given, and the
  // rank's own words for quoting after a cause that arrives in time. Cleared when the attempt
  // ends.
  struct HeldFailure {
    std::string reason;
    std::string summary;  // "rank 0 (worker w0 on h) failed: <error>"
    bool restartable = true;
    FailureCulprit culprit;  // the rank that reported it
    absl::Time deadline;
  };
  std::optional<HeldFailure> held_failure;

  // When each rank's process was last heard from in the current attempt (JoinJob, any
  // ReportProgress including keepalives), by rank.
  std::map<uint32_t, absl::Time> last_contact;
  // Each rank's last reported activity and when it arrived (current attempt), by rank.
  struct ReportedActivity {
    v1::RankActivity activity;
    absl::Time received;
  };
  std::map<uint32_t, ReportedActivity> activity;
  // Hang forensics (coordinator_debug.cc): whether the current attempt's rings were asked for,
  // and each rank's ring received since then (or in its FinishRank), by rank.
  bool traces_requested = false;
  std::map<uint32_t, std::vector<v1::CollectiveTraceEntry>> traces;
  // Each rank's last reported collective counts (RankActivity.collectives_issued/completed;
  // kept apart from `activity`: a command job's launcher reports the phase, its script the
  // counts), by rank.
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> collective_counts;

  // The current attempt's step judge (created on assignment); its alarms, verdict and straggler
  // scores are copied into `status` whenever they change.
  std::unique_ptr<StepJudge> judge;
  // The judge's revision last copied into `status` (alarms, verdict, stragglers); a report
  // that changed nothing copies nothing (the copy is O(world size)).
  uint64_t published_judge_revision = 0;
  // The current attempt's per-step, per-rank figures (bounded; created on assignment).
  std::unique_ptr<MetricsHistory> metrics;

  // Parked WatchJob long polls.
  struct Watcher {
    uint64_t after_version;
    absl::Time deadline;
    WatchCallback done;
  };
  std::vector<Watcher> watchers;

  // When the current attempt ended (InfinitePast when not known: ended before a coordinator
  // restart); GetLogs says it is over log_linger later. Meaningful only while AttemptOver.
  absl::Time attempt_ended = absl::InfinitePast();
  // Parked GetLogs long polls (their generation resolved: never 0).
  struct LogWaiter {
    uint64_t generation;
    std::optional<uint32_t> rank;        // nullopt = every rank
    std::map<uint32_t, uint64_t> after;  // per rank, the first byte wanted
    absl::Time deadline;
    LogsCallback done;
  };
  std::vector<LogWaiter> log_waiters;

  // Pre-flight checks (coordinator_preflight.cc). A doctor run's job (RunDoctor) is `doctor`,
  // placed only on `pinned_workers` (names).
  bool doctor = false;
  std::vector<std::string> pinned_workers;
  // The current attempt's pre-flight figures, by rank, and its judgement once made.
  std::map<uint32_t, v1::PreflightReport> preflight_reports;
  std::optional<v1::PreflightResult> preflight_result;
  // Parked RunDoctor calls, answered when the doctor job ends or at their deadline.
  struct DoctorWaiter {
    absl::Time deadline;
    DoctorCallback done;
  };
  std::vector<DoctorWaiter> doctor_waiters;

  // Whether the job changed during the current coordinator call (its watchers are answered
  // when the call publishes its changes).
  bool changed = false;

  // When the job reached its terminal state (a restored job: the time of its last transition);
  // InfiniteFuture while it has not. The table archives the jobs that ended first.
  absl::Time ended = absl::InfiniteFuture();
};

// Not thread-safe: owned by the Coordinator and used under its lock. Record pointers stay valid
// until the job is removed (Remove: an archived job).
class JobTable {
 public:
  // Creates a job with the next id "job-000001", "job-000002", ..., state QUEUED (transition
  // reason "submitted"), generation 0 (no attempt yet), version 1, and appends it to the queue.
  // `enqueue` false: the caller queues it later (Enqueue), once its record is committed.
  JobRecord* Add(v1::JobSpec spec, std::string fingerprint, absl::Time now, bool enqueue = true);
  // Puts back a job a previous coordinator saved (its id keeps its number; later Adds continue
  // after the highest number seen). QUEUED jobs rejoin the queue in the order restored.
  // Errors: INVALID_ARGUMENT for an id not of the form "job-N", ALREADY_EXISTS for a repeat.
  absl::StatusOr<JobRecord*> Restore(v1::JobStatus status);
  // nullptr when unknown.
  JobRecord* Find(const JobId& id);
  // Every job, oldest submission first.
  std::vector<JobRecord*> All();
  // At most `limit` jobs numbered above `after_number` (0 = from the first), oldest submission
  // first.
  std::vector<JobRecord*> After(uint64_t after_number, size_t limit);

  // Records that `job` (in this table) reached a terminal state at `when`; a job already
  // recorded keeps its first time.
  void MarkEnded(JobRecord* job, absl::Time when);
  // How many jobs in the table are in a terminal state (marked ended or restored so).
  size_t ended_count() const { return ended_.size(); }
  // The job that ended first (ties: the lower job number); nullptr when none ended.
  JobRecord* FirstEnded();
  // Forgets the job (its record pointer dangles from now on; no-op when unknown). Its number is
  // never handed out again.
  void Remove(const JobId& id);
  // Whether `id` is a job id this table handed out, restored or reserved once (job-N with N
  // below the next number) whose job is no longer in the table: removed, so archived.
  bool Removed(const JobId& id) const;
  // Later Adds hand out numbers above `number` (the highest archived job after a restart).
  void ReserveThrough(uint64_t number);
  // Queued job ids, oldest first.
  const std::deque<JobId>& queue() const { return queue_; }
  // Appends `id` to the queue.
  void Enqueue(const JobId& id) { queue_.push_back(id); }
  // Removes `id` from the queue (no-op when absent).
  void Dequeue(const JobId& id);
  // Puts `id` at the head of the queue (a restart keeps its place ahead of later jobs).
  void Requeue(const JobId& id);

 private:
  uint64_t next_sequence_ = 1;
  std::map<uint64_t, JobRecord> by_sequence_;
  absl::flat_hash_map<JobId, uint64_t> sequence_by_id_;
  std::deque<JobId> queue_;
  // The jobs in a terminal state, by (ended, sequence): the first one ended first.
  std::set<std::pair<absl::Time, uint64_t>> ended_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_JOB_TABLE_H_
