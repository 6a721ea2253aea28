// The coordinator core: workers, jobs, rendezvous and health, in plain C++ (no gRPC).
//
// It owns the worker registry, the job table (state machine in job_state.h), the FIFO
// scheduler's decisions (scheduler.h), the per-attempt key-value store (kv_store.h), the latest
// progress of every rank and the ranks' output (log_store.h: bounded, in memory only, never
// saved to the job store). The gRPC service (rpc/grpc_service.h) only translates messages.
//
// Life of a job (QUEUED → RENDEZVOUS → RUNNING → SUCCEEDED / FAILED / CANCELLED, restarts as
// generation G+1 from the last checkpoint): job_state.h and docs/architecture.md.
//
// A coordinator restart (Restore) keeps a RUNNING job in RUNNING, same generation:
//
//   RUNNING ──Restore──> RUNNING, ranks away ──every rank's daemon registers with it──> RUNNING
//                              │                 (RegisterWorker running_kept)
//                              └─ a daemon back without its rank, or coordinator_grace over
//                                 ──> QUEUED (restart from the last checkpoint) or FAILED
//
// Attempt messages (JoinJob, KvSet, KvGet, KvGetMany, ReportProgress, FinishRank, AppendLogs)
// carry (job, generation); a generation other than the job's current one is refused with
// FAILED_PRECONDITION "stale generation G for job J (current G'): abandon this attempt";
// generation 0 (a job never assigned) with FAILED_PRECONDITION "job J has no attempt yet
// (STATE): wait for an assignment".
//
// Finished jobs kept: at most options.max_finished_jobs_kept stay in memory; beyond that the
// ones that ended first are archived to the job store (JobStore::Archive, after the lock is
// released) and answered from there (JobStatus.archived); see docs/architecture.md.
//
// Time: every time comes from the injected Clock. Nothing happens on its own: CheckStaleness()
// (a ticker in main, the test after advancing a FakeClock) declares workers lost, fails
// rendezvous that ran out and answers long polls whose deadline passed.
//
// Thread-safety: thread-safe; one mutex. Completion callbacks of the *Async methods (and the
// event logger) run after the mutex is released, on the thread of whichever call completed them
// (possibly the calling thread, before the method returns). They may call back into the
// Coordinator. Long-poll deadlines are clamped to now + options.max_wait.
#ifndef RINGLEADER_COORDINATOR_CORE_COORDINATOR_H_
#define RINGLEADER_COORDINATOR_CORE_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/ids.h"
#include "coordinator/core/attempt_id.h"
#include "coordinator/core/culprit.h"
#include "coordinator/core/deferred_callbacks.h"
#include "coordinator/core/job_table.h"
#include "coordinator/core/kv_store.h"
#include "coordinator/core/coordinator_metrics.h"
#include "coordinator/core/log_store.h"
#include "coordinator/core/options.h"
#include "coordinator/core/report_rate_limiter.h"
#include "coordinator/core/unsaved_jobs.h"
#include "coordinator/core/worker_registry.h"
#include "coordinator/store/job_store.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

class Coordinator {
 public:
  // Receives one human-readable line per job transition and worker registration/loss, with
  // the coordinator clock's time (and job store failures: the store's Save errors are logged,
  // the coordinator goes on in memory). Runs outside the lock.
  using EventLogger = std::function<void(absl::Time, const std::string&)>;

  // `clock` and `store` are not owned and must outlive the Coordinator.
  Coordinator(CoordinatorOptions options, Clock* clock, JobStore* store,
              EventLogger logger = nullptr);
  // Shutdown(), so no parked long poll is dropped unanswered.
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Puts back the jobs a previous coordinator saved (start-up, before serving; `jobs` as the
  // store's LoadAll returns them): finished jobs as they were, QUEUED jobs back in the queue in
  // submission order. A RUNNING job keeps running: its rank processes went on training without
  // the coordinator, and its daemons register again naming the rank they run (RegisterWorker's
  // `running`), which takes each rank back; the job waits up to options.coordinator_grace for
  // them (its alarms so far are kept; its step judge starts afresh). A rank whose daemon does
  // not come back in time, or comes back without it, fails the attempt (restartable: the job
  // restarts from its last checkpoint). A job in RENDEZVOUS lost its rendezvous (the key-value
  // store lives in memory) and restarts; so does a RUNNING one when coordinator_grace is zero.
  // New job ids continue after the highest restored or archived one (the store's
  // HighestArchivedNumber, read before the lock is taken): ids never repeat. The finished jobs
  // beyond options.max_finished_jobs_kept that ended first are archived, as when a job ends.
  // Errors: INVALID_ARGUMENT (a saved id not of the form job-N), ALREADY_EXISTS (an id twice),
  // UNAVAILABLE (the store's highest archived number could not be read).
  absl::Status Restore(std::vector<v1::JobStatus> jobs);

  const CoordinatorOptions& options() const { return options_; }
  Clock* clock() const { return clock_; }

  // ---- Workers ------------------------------------------------------------------------------

  struct Registration {
    WorkerId id;
    absl::Duration heartbeat_interval;
    absl::Duration heartbeat_timeout;
    absl::Duration coordinator_grace;
    // The `running` rank was taken back into its attempt; else why not ("" when none named).
    bool running_kept = false;
    std::string running_refused;
  };
  // A rank a registering daemon still runs.
  struct RunningRank {
    AttemptId attempt;
    Rank rank;
  };
  // Registers a worker daemon (IDLE). The same name and incarnation again returns the same id
  // (a retried call; a LOST worker coming back becomes IDLE). The same name with another
  // incarnation replaces the old registration under a new id; the attempt the old one ran fails
  // with "rank R (worker NAME on HOST) restarted (incarnation changed)".
  // With `running`: when that attempt is RUNNING, and its rank is this worker's (by name) and
  // unfinished, the worker becomes BUSY with it again (running_kept); otherwise running_refused
  // says why and the daemon must stop the rank. A daemon that registers without the rank a
  // restored RUNNING job still waits for from it fails that attempt at once (restartable).
  // `topology`: "RACK/HOST" or "HOST" (common/topology.h), by which the scheduler packs a
  // job's ranks; "" = `host`.
  // Errors: INVALID_ARGUMENT (empty name, no devices, a device kind other than cpu/cuda, a
  // malformed topology).
  absl::StatusOr<Registration> RegisterWorker(std::string name, std::string host,
                                              std::vector<v1::Device> devices,
                                              uint64_t incarnation,
                                              std::optional<RunningRank> running = std::nullopt,
                                              const std::string& topology = "");

  // Renews the worker's lease; returns the attempts it must abort (each reported once).
  // Errors: NOT_FOUND (unknown id, incarnation mismatch, or declared lost: register again).
  // `rank_process_state`: the daemon's rank process as /proc shows it (evidence for failure
  // reasons, see culprit.h; "" = none).
  absl::StatusOr<std::vector<v1::JobAttempt>> Heartbeat(const WorkerId& worker,
                                                        uint64_t incarnation,
                                                        const std::string& rank_process_state = "");

  // Long poll for the worker's next assignment: completes with it as soon as there is one, with
  // nullopt at `deadline`, or with an error: NOT_FOUND (unknown or lost worker, or replaced by
  // a new registration while waiting), UNAVAILABLE (shutting down). A newer call by the same
  // worker completes the older one with nullopt.
  // Hand-off: an assignment handed out stays offered until acknowledged: a later call whose
  // `last_started` is its attempt (the daemon started it), or its rank joining. A later call
  // without that acknowledgement, while the attempt is still in RENDEZVOUS, gets the same
  // assignment again (the earlier answer was lost on the way).
  // `incarnation` (0 = not checked) must be the worker's current one, else NOT_FOUND.
  void WaitAssignmentAsync(const WorkerId& worker, absl::Time deadline, AssignmentCallback done,
                           uint64_t incarnation = 0,
                           std::optional<AttemptId> last_started = std::nullopt);

  // ---- Attempts (messages of the ranks) -----------------------------------------------------

  // Rank `rank`, run by `worker`, joins the attempt; when every rank has joined the job is
  // RUNNING. Joining twice is harmless. Errors: NOT_FOUND (unknown job), FAILED_PRECONDITION
  // (stale generation; the rank belongs to another worker; the job already ended; fingerprint
  // mismatch, which also FAILS the job with a reason naming the rank, worker and both
  // fingerprints), INVALID_ARGUMENT (rank out of range).
  absl::Status JoinJob(const AttemptId& attempt, Rank rank, const WorkerId& worker,
                       const std::string& spec_fingerprint);

  // Sets a key of the attempt's store, waking KvGets (and KvGetManys) waiting for it.
  // Errors: NOT_FOUND (unknown job), FAILED_PRECONDITION (stale generation; job ended).
  absl::Status KvSet(const AttemptId& attempt, const std::string& key, std::string value);

  // Completes with the key's value once it exists; DEADLINE_EXCEEDED naming the key at
  // `deadline`. Errors: NOT_FOUND (unknown job), FAILED_PRECONDITION (stale generation; job
  // ended, before or while waiting), UNAVAILABLE (shutting down).
  void KvGetAsync(const AttemptId& attempt, const std::string& key, absl::Time deadline,
                  KvGetCallback done);

  // Several keys at once (a rank's whole rendezvous address book in one call): completes with
  // every value, in `keys` order and cut by `parts` (kv_store.h), once ALL keys exist;
  // DEADLINE_EXCEEDED naming the first key still missing at `deadline`. No keys completes at
  // once with none. Errors: as KvGetAsync, and INVALID_ARGUMENT (`parts` without one index per
  // key, or an index out of range).
  void KvGetManyAsync(const AttemptId& attempt, std::vector<std::string> keys, KvParts parts,
                      absl::Time deadline, KvGetManyCallback done);

  struct StopSignal {
    bool stop = false;   // the attempt is over: stop training
    std::string reason;  // why (the job's final transition), when stop
    // Steps of the attempt the step judge has judged (its verdict's steps_judged).
    uint64_t steps_judged = 0;
    // Send the collective trace ring with the next report (RequestTraces).
    bool send_trace = false;
  };
  // Records the rank's latest step report (the last of `steps`) and the epoch reports (kept by
  // epoch; a later report of an epoch replaces the earlier), and feeds every step to the
  // attempt's StepJudge (step_judge.h): its alarms, verdict and straggler scores appear in the
  // job's status. An alarm that fails the job (checks.on_desync "fail") ends it FAILED with
  // "check failed: KIND: <the alarm's message>" and answers stop. Errors: NOT_FOUND (unknown
  // job), FAILED_PRECONDITION (stale generation), INVALID_ARGUMENT (rank out of range),
  // RESOURCE_EXHAUSTED when the rank is over options.max_reports_per_second_per_rank (a token
  // bucket per job, generation and rank, bursts of as many, every call counting, keepalives
  // included: report_rate_limiter.h); the message names the rank, the limit and
  // --max_reports_per_second; the call changed nothing: retry it later. A call about an
  // attempt that is over is never refused so (it answers stop).
  // `activity` (phase UNSPECIFIED = not said) is where the rank is now: kept for the job's
  // status and for failure reasons, without waking watchers.
  absl::StatusOr<StopSignal> ReportProgress(const AttemptId& attempt, Rank rank,
                                            const std::vector<v1::StepReport>& steps,
                                            const std::vector<v1::EpochReport>& epochs,
                                            const v1::RankActivity& activity = {});

  struct RankOutcome {
    bool ok = false;
    std::string error;            // why it failed (when !ok)
    std::string checkpoint_path;  // checkpoint the rank wrote, if any
    // Why it failed, typed (when !ok): its kind decides (culprit.h HandlingOf); its peer is
    // the one it could not reach or lost.
    v1::RankFailure failure;
  };
  // The rank finished. The first report of a rank counts; later ones are ignored. A failed
  // rank restarts the job when it has restarts left and the failure is restartable (not a
  // JOB_ERROR), else FAILS it ("rank R (worker NAME on HOST) failed: <error>"); when every rank
  // succeeded the job SUCCEEDED. A failure that is a peer's consequence (HandlingOf's
  // hold_for_cause)
  // while other ranks are unfinished is held for options.peer_failure_grace: a failure of
  // another rank that is not itself a symptom, arriving in that time, names the attempt's
  // failure, with the held one quoted after it; otherwise the held failure ends the attempt
  // when the grace runs out (CheckStaleness), another rank's symptom arrives, or every rank
  // has finished. A report after the job ended is recorded and changes nothing.
  // Errors: NOT_FOUND (unknown job), FAILED_PRECONDITION (stale generation), INVALID_ARGUMENT
  // (rank out of range).
  absl::Status FinishRank(const AttemptId& attempt, Rank rank, const RankOutcome& outcome);

  // Bytes [offset, offset + data.size()) of the rank's output (stdout and stderr), as its
  // daemon ships them: kept in memory, bounded (log_store.h: a retry is ignored, a gap is
  // recorded), and answering GetLogs polls waiting for them. Accepted for the job's current
  // generation also after the attempt ended: a daemon ships a rank's last output once the rank
  // process exited. Errors: NOT_FOUND (unknown job), FAILED_PRECONDITION (stale generation; a
  // job with no attempt yet), INVALID_ARGUMENT (rank out of range).
  absl::Status AppendLogs(const AttemptId& attempt, Rank rank, uint64_t offset,
                          absl::string_view data);

  // ---- Hang forensics (coordinator_debug.cc, hang_report.h) ---------------------------------

  // Rank `rank`'s collective trace ring, oldest first (ReportProgressRequest.trace, or its
  // FinishRankRequest.trace): kept for the current attempt's hang report until the next
  // RequestTraces. Errors as ReportProgress's (NOT_FOUND, FAILED_PRECONDITION, INVALID_ARGUMENT).
  absl::Status ReportTrace(const AttemptId& attempt, Rank rank,
                           std::vector<v1::CollectiveTraceEntry> trace);
  // Asks every rank of the job's running attempt for its ring: each one's next ReportProgress
  // answer says send_trace (StopSignal::send_trace) until it sent one. Rings received before
  // are dropped. Returns the job's version. Errors: NOT_FOUND (unknown job),
  // FAILED_PRECONDITION (no running attempt; GetJob's `hang` holds the last report).
  absl::StatusOr<uint64_t> RequestTraces(const JobId& job);
  struct HangProgress {
    v1::HangReport report;
    bool complete = false;  // every unfinished rank of the attempt sent its ring
  };
  // The report of what is held now: the rings received since RequestTraces (and in FinishRank),
  // for the other ranks the counts of their last report and how long they have been silent.
  // With `keep`, its summary, the first divergent collective and each rank's entry for it
  // become the job's `hang`. Errors: NOT_FOUND; FAILED_PRECONDITION (no attempt yet).
  absl::StatusOr<HangProgress> CollectHangReport(const JobId& job, bool keep);

  // ---- Jobs (the CLI's calls) ---------------------------------------------------------------

  struct Submitted {
    JobId id;
    std::string spec_fingerprint;
  };
  // Applies the spec defaults, validates against options.limits and queues the job. A job
  // larger than the workers available stays QUEUED until enough register (or it is cancelled).
  // Errors: INVALID_ARGUMENT naming the field and the fix; FAILED_PRECONDITION for a spec with
  // model.faults unless options.allow_fault_injection; RESOURCE_EXHAUSTED when
  // options.max_queued_jobs jobs are already queued. A job left QUEUED by scheduling carries
  // JobStatus.queued_reason (scheduler.h: WhyQueued), kept up to date on every change.
  absl::StatusOr<Submitted> SubmitJob(v1::JobSpec spec);

  // The job's status; an archived job's final status, read from the job store after the lock is
  // released, with `archived` set. Errors: NOT_FOUND; UNAVAILABLE or DATA_LOSS (the store could
  // not read the archived job's record).
  absl::StatusOr<v1::JobStatus> GetJob(const JobId& job);

  // The current attempt's per-step, per-rank metrics (metrics_history.h). Errors: NOT_FOUND
  // (unknown job; an archived job, whose history is no longer kept: the message says so).
  absl::StatusOr<v1::GetJobMetricsResponse> GetJobMetrics(const JobId& job);

  // Long poll: completes with the job's status once its version exceeds `after_version`, or at
  // `deadline` with the current status; an archived job at once, with its final status (as
  // GetJob; a job archived while the poll waits completes it with its final status too).
  // Errors: NOT_FOUND, UNAVAILABLE (shutting down), GetJob's store errors.
  void WatchJobAsync(const JobId& job, uint64_t after_version, absl::Time deadline,
                     WatchCallback done);

  // What GetLogs reads.
  struct LogsQuery {
    std::optional<Rank> rank;            // one rank; nullopt = every rank
    Generation generation;               // the attempt; 0 = the latest
    std::map<uint32_t, uint64_t> after;  // per rank, the first byte wanted (unlisted: the oldest
                                         // byte kept)
  };
  // Long poll over the ranks' output of one attempt (GetLogsResponse, one chunk per rank with
  // bytes past its cursor, at most options.max_log_bytes_per_answer bytes in all). Completes at
  // once when some rank asked for has bytes past its cursor, or the attempt is over; otherwise
  // when such bytes arrive, when the attempt is over, or at `deadline` (without chunks).
  // attempt_over: the attempt ended at least options.log_linger ago (or a later one started)
  // and the answer holds every byte kept past the cursors; job_over: the job ended. A job that
  // has not run yet completes at once with generation 0. A poll parked when the job is archived
  // completes with what is kept, attempt_over and job_over set. Errors: NOT_FOUND (unknown job;
  // an archived job, whose output is no longer kept: the message says so), INVALID_ARGUMENT (a rank, also one in `after`, out of range; a generation the job never
  // had), UNAVAILABLE (shutting down).
  void GetLogsAsync(const JobId& job, LogsQuery query, absl::Time deadline, LogsCallback done);

  // Every job in memory (archived ones not included), oldest first; every registered worker,
  // oldest registration first.
  std::vector<v1::JobStatus> ListJobs();
  std::vector<v1::WorkerStatus> ListWorkers();

  struct JobsPage {
    std::vector<v1::JobStatus> jobs;
    bool more = false;  // jobs follow the page
  };
  // One page of jobs in job-number order: at most `limit` numbered above the job id `after`
  // ("" = from the first). Only the page is rendered. With `include_archived` the archived jobs
  // are among them (`archived` set; their final statuses read from the job store after the
  // lock is released; a job archived meanwhile is listed once). Errors: INVALID_ARGUMENT
  // (`after` is not a job id this coordinator handed out), the store's ListArchived errors.
  absl::StatusOr<JobsPage> ListJobsPage(const std::string& after, size_t limit,
                                        bool include_archived);
  // One page of workers: at most `limit`, after the worker id `after` ("" = from the first);
  // `*more` says whether any follow.
  std::vector<v1::WorkerStatus> ListWorkersPage(const std::string& after, size_t limit,
                                                bool* more);

  // QUEUED, RENDEZVOUS or RUNNING → CANCELLED with `reason` (default "cancelled"); the
  // workers are told to abort. Errors: NOT_FOUND; FAILED_PRECONDITION (job already ended,
  // archived ones included).
  absl::Status CancelJob(const JobId& job, std::string reason);

  // ---- Pre-flight checks and quarantine (coordinator_preflight.cc) ---------------------------

  struct DoctorRequest {
    // Worker names; empty = every IDLE worker that is not quarantined.
    std::vector<std::string> workers;
    // In (0, 1): a worker or pair below this fraction of the median is named.
    double min_fraction = 0.5;
  };
  // Runs a pre-flight check (preflight_judge.h) on the workers as a job of its own (name
  // "doctor", model.kind "preflight", no restart) placed ahead of the queue on exactly those
  // workers (a named quarantined worker included), and completes `done` with the judgement when
  // that job ends; every worker it names is quarantined. At `deadline` (clamped to max_wait)
  // `done` gets DEADLINE_EXCEEDED naming the job, whose judgement still applies when it comes.
  // Errors (at once): INVALID_ARGUMENT (min_fraction outside (0, 1), a name twice), NOT_FOUND
  // (an unknown name), FAILED_PRECONDITION (a named worker not IDLE; no worker to check),
  // UNAVAILABLE (shutting down).
  void RunDoctorAsync(DoctorRequest request, absl::Time deadline, DoctorCallback done);

  // Rank `rank`'s pre-flight figures for the attempt (ReportProgressRequest.preflight); the
  // last report of a rank counts. Once every rank has reported, the check is judged: the
  // workers it names are quarantined; a doctor job then ends as its ranks finish, and a job
  // with checks.preflight either goes on (the key "<job>/<generation>/preflight/verdict" is
  // set to "pass" in the attempt's key-value store) or, when a worker was named, is placed
  // again without it, the attempt not counted as a restart. A report about an attempt that is
  // over changes nothing. Errors: NOT_FOUND (unknown job), FAILED_PRECONDITION (stale
  // generation; the job runs no pre-flight check), INVALID_ARGUMENT (rank out of range).
  absl::Status ReportPreflight(const AttemptId& attempt, Rank rank, v1::PreflightReport report);

  // Releases a quarantined worker (by name or id): it is placed again, its crash streak
  // forgotten. Errors: NOT_FOUND (unknown worker), FAILED_PRECONDITION (not quarantined).
  absl::StatusOr<v1::WorkerStatus> UncordonWorker(const std::string& worker);

  // ---- Health and lifetime -----------------------------------------------------------------

  // Declares LOST every worker whose last heartbeat is older than heartbeat_timeout (failing
  // its job: "rank R (worker NAME on HOST) lost: no heartbeat for 10s"), fails RENDEZVOUS jobs
  // past their rendezvous deadline naming the ranks that never joined, and answers long polls
  // whose deadline passed (and GetLogs polls whose attempt ended log_linger ago). Walks every
  // worker and job (O(workers + jobs)): cheap at the 100 ms tick main uses, for thousands of
  // jobs.
  void CheckStaleness();
  // Saves again every job whose last save failed (UnsavedJobs), with its current status, off
  // the ticker's thread (the store may take its whole timeout). Returns how many it saved.
  size_t RetryUnsavedSaves();

  // Answers every parked long poll with UNAVAILABLE and refuses new ones. Idempotent.
  void Shutdown();

  // ---- Monitoring (coordinator_metrics.cc) --------------------------------------------------

  // What the /metrics endpoint shows (coordinator_metrics.h).
  using RankMetrics = CoordinatorRankMetrics;
  using MetricsSnapshot = CoordinatorMetricsSnapshot;
  // A consistent snapshot, copied under the lock (O(workers + jobs + running ranks)).
  MetricsSnapshot Metrics();

 private:
  // The lock of one public call: holds mu_, publishes the call's changes (scheduling, job
  // store, watchers) at the end, and runs the collected callbacks after releasing mu_.
  class ABSL_SCOPED_LOCKABLE Scope {
   public:
    explicit Scope(Coordinator* coordinator) ABSL_EXCLUSIVE_LOCK_FUNCTION(coordinator->mu_)
        : coordinator_(coordinator), lock_(&coordinator->mu_) {}
    ~Scope() ABSL_UNLOCK_FUNCTION() { coordinator_->PublishLocked(&deferred_); }
    DeferredCallbacks* deferred() { return &deferred_; }

   private:
    Coordinator* coordinator_;
    DeferredCallbacks deferred_;  // destroyed after lock_: callbacks run unlocked
    absl::MutexLock lock_;
  };

  // Job side (coordinator.cc).
  void MarkChangedLocked(JobRecord* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TransitionLocked(JobRecord* job, v1::JobState to, std::string reason,
                        DeferredCallbacks* deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // CancelJob's change, saved as its scope closes.
  absl::Status CancelJobInMemory(const JobId& id, std::string reason);
  void SaveLocked(const JobRecord& job, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndJobLocked(JobRecord* job, v1::JobState to, std::string reason,
                    DeferredCallbacks* deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The current attempt failed for `reason`, attributed to `culprit` (recorded in the
  // attempt's summary). With `restartable` and restarts left (spec.max_restarts) the job goes
  // back to the head of the queue as the next generation, when restart_policy.h says;
  // otherwise it ends FAILED. With `count_restart` false (a pre-flight check quarantined a
  // worker) it is placed again at once, whatever its restarts, counted as no one's fault.
  void FailAttemptLocked(JobRecord* job, std::string reason, bool restartable,
                         const FailureCulprit& culprit, DeferredCallbacks* deferred,
                         bool count_restart = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the current attempt (not the job): closes its AttemptSummary, frees its workers
  // (telling those still running it to abort when `abort_unfinished`) and fails its key-value
  // waiters with FAILED_PRECONDITION `ended`.
  void ReleaseAttemptLocked(JobRecord* job, bool abort_unfinished, const std::string& ended,
                            DeferredCallbacks* deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleLocked(DeferredCallbacks* deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AssignLocked(JobRecord* job, const std::vector<WorkerRecord*>& ranks,
                    DeferredCallbacks* deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishLocked(DeferredCallbacks* deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::JobStatus RenderLocked(const JobRecord& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The hang report of the job's current attempt from what is held (CollectHangReport).
  v1::HangReport HangReportLocked(const JobRecord& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes `report` the job's `hang`, with only each rank's entry at the first divergent one.
  void KeepHangReportLocked(JobRecord* job, v1::HangReport report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // For a rank failed by a collective timeout (PEER_TIMED_OUT) that sent its ring: "; in the
  // collectives: <the hang report's summary>" (the report kept as the job's `hang`); else "".
  std::string HangSummaryLocked(JobRecord* job, const v1::RankFailure& failure)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LogLocked(std::string line, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireWatchersLocked(absl::Time now, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailRendezvousLocked(absl::Time now, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Archives the finished jobs beyond options.max_finished_jobs_kept that ended first
  // (PublishLocked, once the call's changes are published).
  void ArchiveExcessLocked(DeferredCallbacks* deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the finished `job` from memory (its record dangles afterwards) and has the store
  // archive its final status after the lock is released (kept in archiving_ until then).
  void ArchiveLocked(JobRecord* job, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The store archived job number `number` (`archived` OK): its status leaves archiving_.
  // Otherwise the failure is logged and the status stays there (served from memory).
  void FinishArchive(uint64_t number, const std::string& job_id, const absl::Status& archived,
                     absl::Time when) ABSL_LOCKS_EXCLUDED(mu_);
  // A job not in the table: NOT_FOUND when `id` was never handed out; its final status
  // (`archived` set) while its archiving has not reached the store; nullopt when the store's
  // archive holds it (LoadArchivedJob, after the lock is released).
  absl::StatusOr<std::optional<v1::JobStatus>> ArchivedLocked(const JobId& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The archived job's final status from the store (`archived` set). Disk I/O: never under
  // the lock. Errors: NOT_FOUND, the store's UNAVAILABLE / DATA_LOSS.
  absl::StatusOr<v1::JobStatus> LoadArchivedJob(const JobId& id) ABSL_LOCKS_EXCLUDED(mu_);
  // NOT_FOUND for a job not in the table: "unknown job J", or for an archived one why `what`
  // (e.g. "its logs") is no longer kept.
  absl::Status NotInMemoryLocked(const JobId& id, absl::string_view what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A fresh step judge and metrics history for the job's current attempt.
  void StartJudgingLocked(JobRecord* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Restore of a RUNNING job: its ranks are unbound from the old coordinator's worker ids and
  // wait for their daemons until now + coordinator_grace.
  void AwaitReattachLocked(JobRecord* job, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails restored RUNNING jobs whose grace ran out with ranks still away.
  void FailReattachLocked(absl::Time now, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the attempts whose held failure (JobRecord::held_failure) waited its grace out.
  void FailHeldLocked(absl::Time now, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time ClampDeadline(absl::Time deadline, absl::Time now) const;

  // Worker side (coordinator_workers.cc).
  void DeliverLocked(WorkerRecord* worker, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AnswerWaiterLocked(WorkerRecord* worker,
                          absl::StatusOr<std::optional<v1::Assignment>> result,
                          DeferredCallbacks* deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LoseWorkerLocked(WorkerRecord* worker, absl::Time now, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails the attempt `worker` runs a rank of: "<rank> <what>", plus (`with_last_heard`)
  // when and in which phase its rank process was last heard from.
  void FailWorkerAttemptLocked(WorkerRecord* worker, const std::string& what,
                               DeferredCallbacks* deferred, bool with_last_heard = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `running` back into its attempt for `worker` (a registration after a lost lease or a
  // coordinator restart). Returns "" when kept, else why not.
  std::string ReattachLocked(WorkerRecord* worker, const RunningRank& running,
                             DeferredCallbacks* deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `worker` registered without the rank a restored RUNNING job waits for from it: that
  // attempt fails.
  void FailAbandonedReattachLocked(WorkerRecord* worker, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the assignment `worker` was handed out may be handed out again (its attempt is
  // still in RENDEZVOUS, the rank is this worker's and has not joined).
  bool StillOfferedLocked(const WorkerRecord& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Attempt side (coordinator_attempts.cc).
  // The evidence about the attempt's other ranks for a failure reason (culprit.h): suspects
  // with their evidence, then where every other rank was. `failed` is the failing rank
  // (nullopt: none). "" when there is nothing to say.
  std::string OtherRanksLocked(const JobRecord& job, std::optional<Rank> failed,
                               const std::optional<PeerBlame>& peer = std::nullopt) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the coordinator knows about rank `rank` of the job's current attempt.
  RankEvidence EvidenceLocked(const JobRecord& job, const v1::RankStatus& rank,
                              absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<JobRecord*> FindAttemptLocked(const AttemptId& attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why a key-value read of `attempt` cannot be parked (shutting down, FindAttemptLocked's
  // errors, the attempt is over); OK when it can.
  absl::Status KvReadableLocked(const AttemptId& attempt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records what the step reports say about recovery: the attempt's last step, the checkpoint
  // it resumed from and the ones it skipped (as job events), the newest periodic checkpoint.
  // True when it added events (durable: the caller saves the job).
  bool NoteRecoveryLocked(JobRecord* job, const std::vector<v1::StepReport>& steps)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies the attempt's judge's alarms, verdict and straggler scores into the job's status.
  void PublishJudgementLocked(JobRecord* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Pre-flight checks and quarantine (coordinator_preflight.cc).
  // Judges the current attempt's pre-flight figures (those that arrived), quarantines the
  // workers named, records the judgement (a job event) and, for a checks.preflight job, lets
  // it train or places it again.
  void JudgePreflightLocked(JobRecord* job, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QuarantineLocked(WorkerRecord* worker, std::string reason, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A rank of `job` finished: a failure of its own extends its worker's crash streak (two in a
  // row quarantine the worker), a success ends it.
  void NoteRankHealthLocked(const JobRecord& job, const v1::RankStatus& rank,
                            const RankOutcome& outcome, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A doctor job ended: its waiters get the judgement (made now from what arrived if it was
  // not made yet).
  void AnswerDoctorLocked(JobRecord* job, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireDoctorWaitersLocked(absl::Time now, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Logs (coordinator_logs.cc).
  // Whether no more output of `generation` is expected (see GetLogsAsync's attempt_over).
  bool LogsOverLocked(const JobRecord& job, uint64_t generation, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a GetLogs poll for `waiter` can be answered now (bytes, over, deadline).
  bool LogsReadyLocked(const JobRecord& job, const JobRecord::LogWaiter& waiter,
                       absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::GetLogsResponse RenderLogsLocked(const JobRecord& job, const JobRecord::LogWaiter& waiter,
                                       absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers the job's parked GetLogs polls that can be answered now.
  void AnswerLogWaitersLocked(JobRecord* job, DeferredCallbacks* deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CoordinatorOptions options_;
  Clock* const clock_;
  JobStore* const store_;
  const EventLogger logger_;
  UnsavedJobs unsaved_;  // its own lock

  absl::Mutex mu_;
  WorkerRegistry workers_ ABSL_GUARDED_BY(mu_);
  JobTable jobs_ ABSL_GUARDED_BY(mu_);
  AttemptKvStore kv_ ABSL_GUARDED_BY(mu_);
  LogStore logs_ ABSL_GUARDED_BY(mu_);
  // ReportProgress buckets of running attempts (dropped by ReleaseAttemptLocked).
  ReportRateLimiter report_limiter_ ABSL_GUARDED_BY(mu_);
  // Jobs changed during the current call (published by PublishLocked).
  std::vector<JobRecord*> changed_ ABSL_GUARDED_BY(mu_);
  // Final statuses of jobs archived in memory whose JobStore::Archive has not returned yet (or
  // failed), by job number.
  std::map<uint64_t, v1::JobStatus> archiving_ ABSL_GUARDED_BY(mu_);
  uint64_t jobs_archived_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t archived_restarts_ ABSL_GUARDED_BY(mu_) = 0;  // JobStatus.restarts of those
  // Set when workers became IDLE or jobs were queued during the current call.
  bool schedule_needed_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t heartbeats_received_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_COORDINATOR_H_
