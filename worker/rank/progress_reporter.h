// Sends a rank's step and epoch reports to the coordinator (ReportProgress) from a background
// sender thread, so the training thread never waits on the coordinator: a slow or frozen
// coordinator must not hold one rank back while its peers wait for it in the next collective
// (with a short collective timeout they would fail, blaming the wrong thing).
//
//   training thread                        sender thread (owned by the reporter)
//   AddStep / AddEpoch --append (mu_)--> queue --take a batch--> ReportProgress (no lock held)
//          <-- latest stop / error ------------- records the answer (mu_) <--+
//
// Batching, decided with the injected Clock: a batch is due when
//   - `max_steps` step reports are queued (not while backing off, see below), or
//   - `max_interval` has passed since the last attempt and anything is queued, or
//   - an epoch report is queued (epochs go out at once; while backing off, only an epoch queued
//     since the last attempt forces one), or
//   - Flush() is waiting for queued reports (forcing one attempt even while backing off).
// A batch is the oldest part of the queue: at most `max_batch_steps` step reports, with the
// epoch reports queued among them. A backlog therefore goes out as several batches, back to
// back, each as big as allowed: a fast rank (thousands of steps a second) stays within the
// coordinator's limit of calls per second per rank.
// The sender wakes when an append makes a batch due or starts a new one, and on its own after
// the time the clock says is left of `max_interval` (so a stalled loop's last steps still go
// out). Its waits are real-time absl::CondVar timeouts; on a FakeClock it re-checks at that
// real pace and sends only once the fake clock says so.
//
// Keepalive: with `keepalive_interval` set, an idle sender sends an empty ReportProgress after
// that long without sending anything; its answer is recorded like any other (a stop, a
// refusal). It tells the coordinator this rank process is alive even while it is blocked in a
// collective.
//
// The coordinator's answer can tell the rank to stop (the attempt was cancelled or failed
// elsewhere): from then on AddStep/AddEpoch/Flush return ABORTED "stopped by the coordinator:
// <reason>", so the training loop notices it at its next step and stops cleanly.
//
// Failures (ReportProgress is never retried by the client, see grpc_coordinator_client.h):
//   UNAVAILABLE, DEADLINE_EXCEEDED  transient: the batch goes back to the head of the queue and
//                                   is retried once `max_interval` has passed (not at every
//                                   step). Repeats are harmless: the coordinator keeps the last
//                                   step and replaces an epoch's report.
//   RESOURCE_EXHAUSTED              the coordinator's limit of calls per second per rank
//                                   (--max_reports_per_second): transient the same way (kept,
//                                   retried after `max_interval`, when the bucket has refilled);
//                                   and a Flush goes on waiting for its reports (they are retried
//                                   at that pace within its timeout) instead of returning it.
//   anything else                   the attempt is over for the coordinator (FAILED_PRECONDITION
//                                   stale generation, NOT_FOUND, CANCELLED after CancelAll):
//                                   Add*/Flush return it from then on.
// The queue holds at most `max_pending_steps` step reports besides the batch in flight; beyond
// that the oldest step reports are dropped (epoch reports never are) and counted (dropped_steps).
// One log line says when dropping starts, one gives the count when the coordinator answers
// again, and the destructor names what it leaves undelivered.
//
// States of the sender:
//
//            transient error                           delivered
//   SENDING -----------------> BACKING OFF --------------------------> SENDING
//   (max_steps, interval,      (interval, a new epoch or a Flush only)
//    epoch or Flush)
//      | stop=true / other error    | stop=true / other error
//      v                            v
//   OVER: queued reports discarded; Add*/Flush return the terminal status; the thread exits.
//
// Destruction: the sender takes no new batch (call Flush first to deliver what is queued) and
// is joined. If a ReportProgress call is in flight the destructor waits for it to return, which
// the client bounds with its call deadline (GrpcCoordinatorClient: call_timeout, 10 s by
// default). The reporter never calls CancelAll(): the client is shared, and the rank still
// needs it for FinishRank after training.
//
// Thread-safety: AddStep, AddEpoch and Flush are called by one thread (the training thread);
// the accessors may be called from any thread. Add* never block on I/O (an O(1) append under
// a mutex the sender never holds across a call).
#ifndef RINGLEADER_WORKER_RANK_PROGRESS_REPORTER_H_
#define RINGLEADER_WORKER_RANK_PROGRESS_REPORTER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/ringleader.pb.h"
#include "worker/coordinator_client/coordinator_client.h"

namespace ringleader {

// The coordinator could not be reached or did not answer in time (UNAVAILABLE,
// DEADLINE_EXCEEDED): worth trying again later.
bool IsTransient(const absl::Status& status);

// A ReportProgress answer after which the reports are kept and sent again later: IsTransient,
// or RESOURCE_EXHAUSTED (the coordinator's per-rank limit of calls per second).
bool IsRetriedReportError(const absl::Status& status);

struct ProgressReporterOptions {
  // Send a batch at least this often while steps come in; also the retry pace while the
  // coordinator is unreachable. Values below 1 ms count as 1 ms.
  absl::Duration max_interval = absl::Milliseconds(200);
  // ... or as soon as it holds this many step reports. Values below 1 count as 1.
  int max_steps = 20;
  // The most step reports one batch carries (a backlog goes out in batches this big). Values
  // below max_steps count as max_steps. 500 reports of ~200 bytes: ~100 KB a call; at the
  // coordinator's default of 200 calls a second a rank may report 100 000 steps a second.
  int max_batch_steps = 500;
  // Step reports kept (besides the batch in flight) while the coordinator does not answer;
  // the oldest are dropped beyond that. Values below 1 count as 1.
  int max_pending_steps = 1000;
  // How long the training loop's end-of-training Flush waits (RankTrainer; the reporter itself
  // takes the timeout as Flush's argument). Covers a call in flight at the client's 10 s
  // deadline plus the flush's own call.
  absl::Duration flush_timeout = absl::Seconds(20);
  // Not owned; nullptr = Clock::Real(). Drives the batching decisions only; waits use
  // absl::Mutex/CondVar timeouts.
  Clock* clock = nullptr;
  // Dropped-report lines. Called on the sender thread (or the destructor's). Empty = stderr.
  std::function<void(const std::string&)> log;
  // While nothing is queued, send an empty ReportProgress this often (real time) so the
  // coordinator can tell a live rank blocked in a collective from a frozen rank process
  // (CoordinatorOptions::silent_rank_after). Zero = off (the default here; the rank binary
  // turns it on).
  absl::Duration keepalive_interval = absl::ZeroDuration();
  // Where the rank is now, sent with every ReportProgress (keepalives included); called on the
  // sender thread, so it must be thread-safe (RankActivityTracker::Current). Empty = not said.
  std::function<v1::RankActivity()> activity;
  // The rank's collective trace ring, oldest first (hang forensics), sent with the report that
  // follows an answer asking for it (ReportProgressResponse.send_trace): the sender sends that
  // report at once, with whatever is queued. Called on the sender thread, so it must be
  // thread-safe. Empty = never sent.
  std::function<std::vector<v1::CollectiveTraceEntry>()> trace;
  // Test hook: called on the sender thread after each ReportProgress attempt's result has been
  // recorded (a stop or an error is visible to Add* by then), with the call's status.
  // Empty = nothing.
  std::function<void(const absl::Status&)> on_attempt_done;
};

class ProgressReporter {
 public:
  // `client` is not owned and must outlive the reporter. Starts the sender thread.
  ProgressReporter(CoordinatorClient* client, std::string job_id, uint64_t generation,
                   uint32_t rank, ProgressReporterOptions options = {});
  // Stops the sender and joins it; see "Destruction" in the file comment.
  ~ProgressReporter();

  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // Queue a report; wakes the sender when a batch is due. Never waits on the coordinator.
  // Errors (the reporter is over; the report is discarded): ABORTED "stopped by the
  // coordinator: <reason>" once an answer said stop; the first non-transient error of a
  // ReportProgress call (FAILED_PRECONDITION, NOT_FOUND, CANCELLED, ...).
  absl::Status AddStep(const v1::StepReport& report);
  // Epoch reports go out at once (with the step reports queued before them). Errors as AddStep.
  absl::Status AddEpoch(const v1::EpochReport& report);
  // Sends everything queued so far and waits (at most `timeout`) until it has been delivered;
  // an empty queue sends nothing. Errors as AddStep, plus the transient error (UNAVAILABLE,
  // DEADLINE_EXCEEDED) of the first attempt started for this flush that fails (the reports
  // stay queued), and DEADLINE_EXCEEDED when `timeout` passes first (e.g. the coordinator does
  // not answer a call in flight, or keeps refusing the calls as over its rate limit:
  // RESOURCE_EXHAUSTED is never returned, the flush waits for the retry).
  absl::Status Flush(absl::Duration timeout);

  // OK while reporting goes on; else what Add*/Flush return.
  absl::Status status() const;
  // True once an answer said stop (status() is then ABORTED "stopped by the coordinator: ...",
  // with a RankFailure STOPPED payload: common/rank_failure.h).
  bool stopped_by_coordinator() const;
  // Batches the coordinator accepted so far (for tests and logs).
  int batches_sent() const;
  // Step reports dropped because the queue was full.
  int64_t dropped_steps() const;

 private:
  struct QueuedStep {
    uint64_t seq;
    v1::StepReport report;
  };
  struct QueuedEpoch {
    uint64_t seq;
    v1::EpochReport report;
  };
  struct Batch {
    std::vector<QueuedStep> steps;
    std::vector<QueuedEpoch> epochs;
  };

  static constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();

  void SenderLoop();
  bool BatchDueLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long the sender may sleep before the interval makes a batch due.
  absl::Duration TimeUntilIntervalLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Batch TakeBatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records an attempt's answer; appends log lines to `logs` (written after the unlock).
  void RecordLocked(const absl::StatusOr<v1::ReportProgressResponse>& answer, int64_t attempt,
                    Batch batch, std::vector<std::string>* logs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndLocked(absl::Status terminal) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropOverflowLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sequence number of the oldest report not yet delivered (queued or in flight).
  uint64_t OldestUndeliveredLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Log(const std::string& line) const;

  CoordinatorClient* const client_;
  const std::string job_id_;
  const uint64_t generation_;
  const uint32_t rank_;
  const ProgressReporterOptions options_;
  const absl::Duration max_interval_;
  const size_t max_steps_;
  const size_t max_batch_steps_;
  const size_t max_pending_steps_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  absl::CondVar wake_;                          // the sender waits here for a due batch
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;  // reports are numbered in append order
  std::deque<QueuedStep> steps_ ABSL_GUARDED_BY(mu_);
  std::deque<QueuedEpoch> epochs_ ABSL_GUARDED_BY(mu_);
  // Sequence number of the oldest report in the batch being sent; kNone when none is.
  uint64_t in_flight_oldest_ ABSL_GUARDED_BY(mu_) = kNone;
  bool epoch_untried_ ABSL_GUARDED_BY(mu_) = false;  // an epoch was queued since the last attempt
  absl::Time last_attempt_ ABSL_GUARDED_BY(mu_);
  bool backing_off_ ABSL_GUARDED_BY(mu_) = false;  // the last attempt failed transiently
  int64_t attempts_started_ ABSL_GUARDED_BY(mu_) = 0;
  // Flush: while `flushing_`, reports numbered below `flush_target_` are due at once; attempts
  // numbered from `flush_first_attempt_` on report a transient failure in `flush_error_`.
  bool flushing_ ABSL_GUARDED_BY(mu_) = false;
  bool trace_wanted_ ABSL_GUARDED_BY(mu_) = false;  // the last answer asked for the trace
  uint64_t flush_target_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t flush_first_attempt_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status flush_error_ ABSL_GUARDED_BY(mu_);
  absl::Status terminal_ ABSL_GUARDED_BY(mu_);  // OK while reporting goes on
  bool stopped_by_coordinator_ ABSL_GUARDED_BY(mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  int batches_sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_steps_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_logged_ ABSL_GUARDED_BY(mu_) = 0;  // drops already named in a log line
  bool drop_streak_logged_ ABSL_GUARDED_BY(mu_) = false;
  // A RESOURCE_EXHAUSTED refusal was logged since the coordinator last accepted a report.
  bool rate_limit_logged_ ABSL_GUARDED_BY(mu_) = false;

  std::thread sender_;  // last: starts once everything above is initialised
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_PROGRESS_REPORTER_H_
