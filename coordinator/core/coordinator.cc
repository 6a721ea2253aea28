// Coordinator: the job side (transitions, scheduling, publication of changes) and health.
// Worker calls live in coordinator_workers.cc, rank calls in coordinator_attempts.cc, CLI calls
// in coordinator_jobs.cc, the job store side in coordinator_store.cc.
#include "coordinator/core/coordinator.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/core/job_state.h"
#include "coordinator/core/placement.h"
#include "coordinator/core/restart_policy.h"
#include "coordinator/core/scheduler.h"

namespace ringleader {
namespace {

// How many ranks an "assigned" reason lists by name before abbreviating.
constexpr int kRanksNamedInReason = 8;

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options, Clock* clock, JobStore* store,
                         EventLogger logger)
    : options_(std::move(options)),
      clock_(clock),
      store_(store),
      logger_(std::move(logger)),
      logs_(LogStoreOptions{options_.max_log_bytes_per_rank, options_.max_log_bytes_per_job,
                            options_.max_log_bytes_total}),
      report_limiter_(options_.max_reports_per_second_per_rank,
                      options_.max_reports_per_second_per_rank) {}

Coordinator::~Coordinator() { Shutdown(); }

absl::Time Coordinator::ClampDeadline(absl::Time deadline, absl::Time now) const {
  return std::min(deadline, now + options_.max_wait);
}

void Coordinator::LogLocked(std::string line, DeferredCallbacks* deferred) {
  if (!logger_) return;
  deferred->Add([this, now = clock_->Now(), line = std::move(line)] { logger_(now, line); });
}

void Coordinator::MarkChangedLocked(JobRecord* job) {
  job->status.set_version(job->status.version() + 1);
  if (!job->changed) {
    job->changed = true;
    changed_.push_back(job);
  }
}

void Coordinator::TransitionLocked(JobRecord* job, v1::JobState to, std::string reason,
                                   DeferredCallbacks* deferred) {
  const v1::JobState from = job->status.state();
  std::string line = absl::StrCat("job ", job->status.job_id(), " ", JobStateName(from), " -> ",
                                  JobStateName(to), ": ", reason);
  absl::Status recorded = RecordTransition(&job->status, to, clock_->Now(), std::move(reason));
  if (!recorded.ok()) {
    // Callers check the state first; reaching this is a bug in the coordinator.
    LogLocked(absl::StrCat("BUG: ", recorded.ToString()), deferred);
    return;
  }
  if (IsTerminal(to)) jobs_.MarkEnded(job, clock_->Now());
  MarkChangedLocked(job);
  SaveLocked(*job, deferred);
  LogLocked(std::move(line), deferred);
}

void Coordinator::EndJobLocked(JobRecord* job, v1::JobState to, std::string reason,
                               DeferredCallbacks* deferred) {
  const std::string ended = absl::StrCat("job ", job->status.job_id(), " ended (",
                                         JobStateName(to), ": ", reason, ")");
  const bool was_queued = job->status.state() == v1::JOB_STATE_QUEUED;
  TransitionLocked(job, to, std::move(reason), deferred);
  if (job->doctor) AnswerDoctorLocked(job, deferred);
  if (was_queued) {
    jobs_.Dequeue(JobId(job->status.job_id()));
    job->status.clear_queued_reason();
    schedule_needed_ = true;  // the job behind it may fit now
    return;  // no attempt, no workers
  }
  ReleaseAttemptLocked(job, /*abort_unfinished=*/to != v1::JOB_STATE_SUCCEEDED, ended,
                       deferred);
}

void Coordinator::ReleaseAttemptLocked(JobRecord* job, bool abort_unfinished,
                                       const std::string& ended, DeferredCallbacks* deferred) {
  if (job->status.attempts_size() > 0) {
    v1::AttemptSummary* summary =
        job->status.mutable_attempts(job->status.attempts_size() - 1);
    if (summary->end_time_unix_ms() == 0) {
      summary->set_end_time_unix_ms(absl::ToUnixMillis(clock_->Now()));
      summary->set_end_reason(LastReason(job->status));
    }
  }
  job->attempt_ended = clock_->Now();  // its log readers are told so after log_linger
  job->held_failure.reset();  // whatever ended the attempt, a held failure has no say now
  const AttemptId attempt{JobId(job->status.job_id()), Generation(job->status.generation())};
  for (const v1::RankStatus& rank : job->status.ranks()) {
    WorkerRecord* worker = workers_.Find(WorkerId(rank.worker_id()));
    if (worker == nullptr || worker->attempt != attempt) continue;
    // A worker that never received its assignment has nothing to abort.
    if (abort_unfinished && !rank.finished() && !worker->undelivered.has_value()) {
      v1::JobAttempt abort;
      abort.set_job_id(attempt.job.value());
      abort.set_generation(attempt.generation.value());
      worker->aborts.push_back(std::move(abort));
    }
    worker->undelivered.reset();
    worker->offered.reset();
    worker->attempt.reset();
    if (worker->state == v1::WORKER_STATE_BUSY) worker->state = v1::WORKER_STATE_IDLE;
  }
  kv_.EndAttempt(attempt, absl::FailedPreconditionError(ended), deferred);
  report_limiter_.EndAttempt(attempt);
  schedule_needed_ = true;
}

void Coordinator::FailAttemptLocked(JobRecord* job, std::string reason, bool restartable,
                                    const FailureCulprit& culprit, DeferredCallbacks* deferred,
                                    bool count_restart) {
  v1::JobStatus& status = job->status;
  const uint32_t max_restarts = status.spec().max_restarts();
  if (count_restart && status.attempts_size() > 0 &&
      status.attempts(status.attempts_size() - 1).end_time_unix_ms() == 0) {
    // The failure's culprit, durable with the attempt: the restart policy reads it back.
    v1::AttemptSummary* failed = status.mutable_attempts(status.attempts_size() - 1);
    failed->set_failed(true);
    if (culprit.rank.has_value()) failed->set_failed_rank(*culprit.rank);
    failed->set_failed_worker(culprit.worker);
  }
  if (count_restart && (!restartable || status.restarts() >= max_restarts)) {
    if (restartable && max_restarts > 0) {
      absl::StrAppend(&reason, " (no restart left: ", status.restarts(), " of ", max_restarts,
                      " used; every attempt is listed in the job's attempts)");
    }
    EndJobLocked(job, v1::JOB_STATE_FAILED, std::move(reason), deferred);
    return;
  }
  const uint32_t restart = status.restarts() + (count_restart ? 1 : 0);
  status.set_restarts(restart);
  const RestartDelay delay = count_restart ? DecideRestartDelay(status, culprit, clock_->Now(),
                                                                options_)
                                           : RestartDelay();
  job->restart_not_before = clock_->Now() + delay.backoff;
  job->restart_waiting = delay.backoff > absl::ZeroDuration();
  const uint64_t generation = status.generation();
  TransitionLocked(
      job, v1::JOB_STATE_QUEUED,
      count_restart
          ? absl::StrCat("generation ", generation, " failed: ", reason, "; restart ", restart,
                         " of ", max_restarts,
                         delay.backoff > absl::ZeroDuration()
                             ? absl::StrCat(" in ", absl::FormatDuration(delay.backoff))
                             : " at once",
                         ", from the last checkpoint (", delay.why, ")")
          : absl::StrCat("generation ", generation, " stopped: ", reason,
                         "; placed again (not counted as a restart)"),
      deferred);
  ReleaseAttemptLocked(
      job, /*abort_unfinished=*/true,
      absl::StrCat("job ", status.job_id(), " generation ", generation, " ended (", reason,
                   "); the job restarts as generation ", generation + 1),
      deferred);
  job->rendezvous_deadline = absl::InfiniteFuture();
  job->reattach_deadline = absl::InfiniteFuture();
  job->carried_alarms.clear();
  job->carried_verdict.Clear();
  jobs_.Requeue(JobId(status.job_id()));
}

void Coordinator::ScheduleLocked(DeferredCallbacks* deferred) {
  // Strict FIFO: a job waiting out its restart backoff blocks the queue behind it, as any head
  // that cannot be placed does.
  const absl::Time now = clock_->Now();
  std::vector<QueuedJob> queue;
  size_t backing_off = jobs_.queue().size();
  for (const JobId& id : jobs_.queue()) {
    const JobRecord* job = jobs_.Find(id);
    if (backing_off == jobs_.queue().size() && job->restart_not_before > now) {
      backing_off = queue.size();
    }
    // Hot spares: a first attempt waits for them; a restart runs on the ones it held.
    queue.push_back({id, &job->status.spec(), &job->pinned_workers,
                     job->status.generation() == 0 ? job->status.spec().spares() : 0});
  }
  // Running jobs keep their hot spares before anything queued is placed.
  std::vector<SpareHold> holds;
  for (JobRecord* job : jobs_.All()) {
    const v1::JobState state = job->status.state();
    const bool running = state == v1::JOB_STATE_RENDEZVOUS || state == v1::JOB_STATE_RUNNING;
    if (running && job->status.spec().spares() > 0) {
      holds.push_back({JobId(job->status.job_id()), &job->status.spec(),
                       job->status.spec().spares()});
    } else if (job->status.spare_workers_size() > 0) {
      job->status.clear_spare_workers();  // ended, or waiting to be placed again
      MarkChangedLocked(job);
    }
  }
  const std::vector<WorkerRecord*> workers = workers_.InRegistrationOrder();
  std::vector<Placement> held;
  const std::vector<Placement> plan = PlanFifo(
      std::vector<QueuedJob>(queue.begin(), queue.begin() + static_cast<long>(backing_off)),
      workers, holds, &held);
  for (const Placement& placement : plan) {
    JobRecord* job = jobs_.Find(placement.job);
    job->status.clear_queued_reason();
    AssignLocked(job, placement.ranks, deferred);
    held.push_back(placement);
  }
  for (const Placement& hold : held) {
    JobRecord* job = jobs_.Find(hold.job);
    std::vector<std::string> names;
    for (const WorkerRecord* worker : hold.spares) {
      names.push_back(absl::StrCat(worker->name, " on ", worker->host));
    }
    if (std::vector<std::string>(job->status.spare_workers().begin(),
                                 job->status.spare_workers().end()) != names) {
      *job->status.mutable_spare_workers() = {names.begin(), names.end()};
      MarkChangedLocked(job);
    }
  }
  // Every job still waiting says why, in words a user can act on.
  for (size_t i = plan.size(); i < queue.size(); ++i) {
    JobRecord* job = jobs_.Find(queue[i].id);
    std::string reason =
        i == backing_off
            ? absl::StrCat("restart ", job->status.restarts(), " of ",
                           job->status.spec().max_restarts(), ": placed again in ",
                           absl::FormatDuration(absl::Ceil(job->restart_not_before - now,
                                                           absl::Milliseconds(100))),
                           " (crash-loop backoff after generation ", job->status.generation(),
                           " failed)")
            : WhyQueued(queue, i, plan.size(), workers, held);
    if (job->status.queued_reason() != reason) {
      job->status.set_queued_reason(std::move(reason));
      MarkChangedLocked(job);
    }
  }
}

void Coordinator::AssignLocked(JobRecord* job, const std::vector<WorkerRecord*>& ranks,
                               DeferredCallbacks* deferred) {
  v1::JobStatus& status = job->status;
  const JobId id(status.job_id());
  status.set_generation(status.generation() + 1);
  status.clear_ranks();
  job->last_contact.clear();  // a new attempt: its rank processes have not been heard from
  job->traces_requested = false;
  job->traces.clear();
  job->collective_counts.clear();
  job->activity.clear();
  job->preflight_reports.clear();
  job->preflight_result.reset();
  job->reattach_deadline = absl::InfiniteFuture();
  job->carried_alarms.clear();
  job->carried_verdict.Clear();
  std::vector<std::string> named;
  std::vector<std::string> hosts;
  std::vector<int32_t> gpus;  // the worker's CUDA device, -1 for a CPU worker
  for (const WorkerRecord* worker : ranks) {
    hosts.push_back(worker->host);
    auto cuda = std::find_if(worker->devices.begin(), worker->devices.end(),
                             [](const v1::Device& device) { return device.kind() == "cuda"; });
    gpus.push_back(cuda == worker->devices.end() ? -1 : cuda->index());
  }
  const std::vector<RankPlacement> placements = PlaceRanks(hosts, gpus);
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    WorkerRecord* worker = ranks[r];
    v1::RankStatus* rank = status.add_ranks();
    rank->set_rank(r);
    rank->set_worker_id(worker->id.value());
    rank->set_worker_name(worker->name);
    rank->set_host(worker->host);
    if (r < kRanksNamedInReason) named.push_back(absl::StrCat(r, ": ", DescribeWorker(*worker)));

    worker->state = v1::WORKER_STATE_BUSY;
    worker->attempt = AttemptId{id, Generation(status.generation())};
    worker->rank = Rank(r);
    v1::Assignment assignment;
    assignment.set_job_id(id.value());
    assignment.set_generation(status.generation());
    assignment.set_rank(r);
    assignment.set_world_size(static_cast<uint32_t>(ranks.size()));
    *assignment.mutable_spec() = status.spec();
    assignment.set_spec_fingerprint(status.spec_fingerprint());
    assignment.set_local_rank(placements[r].local_rank);
    assignment.set_local_world_size(placements[r].local_world_size);
    assignment.set_group_rank(placements[r].group_rank);
    assignment.set_group_world_size(placements[r].group_world_size);
    for (int32_t gpu : placements[r].local_gpus) assignment.add_local_gpus(gpu);
    if (options_.attempt_tokens != nullptr) {
      assignment.set_attempt_token(
          options_.attempt_tokens->For(status.job_id(), status.generation()));
    }
    worker->undelivered = std::move(assignment);
    DeliverLocked(worker, deferred);
  }
  if (ranks.size() > kRanksNamedInReason) named.push_back("...");
  StartJudgingLocked(job);
  v1::AttemptSummary* summary = status.add_attempts();
  summary->set_generation(status.generation());
  summary->set_start_time_unix_ms(absl::ToUnixMillis(clock_->Now()));
  for (const WorkerRecord* worker : ranks) {
    summary->add_workers(absl::StrCat(worker->name, " on ", worker->host));
  }
  job->restart_waiting = false;
  job->rendezvous_deadline = clock_->Now() + options_.rendezvous_timeout;
  jobs_.Dequeue(id);
  TransitionLocked(job, v1::JOB_STATE_RENDEZVOUS,
                   absl::StrCat("generation ", status.generation(), " assigned to ", ranks.size(),
                                ranks.size() == 1 ? " worker" : " workers", " (rank ",
                                absl::StrJoin(named, ", rank "), ")"),
                   deferred);
}

void Coordinator::StartJudgingLocked(JobRecord* job) {
  const v1::JobStatus& status = job->status;
  const auto world = static_cast<uint32_t>(status.ranks_size());
  job->judge = std::make_unique<StepJudge>(world, StepJudgeOptionsFromSpec(status.spec()));
  // The first report publishes whatever it brings (clearing the last attempt's judgement).
  job->published_judge_revision = std::numeric_limits<uint64_t>::max();
  job->metrics = std::make_unique<MetricsHistory>(
      world, static_cast<double>(status.spec().batch_size()) *
                 std::max<uint32_t>(1, status.spec().sync().gradient_accumulation_steps()));
}

void Coordinator::AwaitReattachLocked(JobRecord* job, DeferredCallbacks* deferred) {
  v1::JobStatus& status = job->status;
  // The old coordinator's worker ids mean nothing now (this one hands ids out again).
  for (v1::RankStatus& rank : *status.mutable_ranks()) rank.clear_worker_id();
  job->carried_alarms.assign(status.alarms().begin(), status.alarms().end());
  job->carried_verdict = status.verdict();
  StartJudgingLocked(job);
  job->reattach_deadline = clock_->Now() + options_.coordinator_grace;
  v1::JobEvent* event = status.add_events();
  event->set_time_unix_ms(absl::ToUnixMillis(clock_->Now()));
  event->set_message(absl::StrCat("the coordinator restarted while generation ",
                                  status.generation(), " ran; waiting up to ",
                                  absl::FormatDuration(options_.coordinator_grace),
                                  " for its ranks' workers to come back"));
  MarkChangedLocked(job);
  SaveLocked(*job, deferred);
  LogLocked(absl::StrCat("job ", status.job_id(), ": ", event->message()), deferred);
}

void Coordinator::FailReattachLocked(absl::Time now, DeferredCallbacks* deferred) {
  for (JobRecord* job : jobs_.All()) {
    if (job->reattach_deadline > now) continue;
    job->reattach_deadline = absl::InfiniteFuture();
    if (job->status.state() != v1::JOB_STATE_RUNNING) continue;
    std::vector<std::string> away;
    FailureCulprit culprit;  // the one rank away, if only one is
    for (const v1::RankStatus& rank : job->status.ranks()) {
      if (rank.worker_id().empty() && !rank.finished()) {
        away.push_back(DescribeRank(rank));
        culprit = away.size() == 1 ? FailureCulprit::Of(rank) : FailureCulprit::Unknown();
      }
    }
    if (away.empty()) continue;
    FailAttemptLocked(job,
                      absl::StrCat(absl::StrJoin(away, ", "), " did not come back within ",
                                   absl::FormatDuration(options_.coordinator_grace),
                                   " (coordinator_grace) of the coordinator's restart"),
                      /*restartable=*/true, culprit, deferred);
  }
}

void Coordinator::PublishLocked(DeferredCallbacks* deferred) {
  // Scheduling first: it changes jobs too, and their changes are published below.
  // (Job store saves happen at each transition, not here, so every transition is saved.)
  if (schedule_needed_) {
    schedule_needed_ = false;
    ScheduleLocked(deferred);
  }
  std::vector<JobRecord*> changed;
  changed.swap(changed_);
  for (JobRecord* job : changed) {
    job->changed = false;
    // An attempt that ended, or a new one, may answer log readers.
    AnswerLogWaitersLocked(job, deferred);
    if (job->watchers.empty()) continue;
    const v1::JobStatus snapshot = RenderLocked(*job);
    std::vector<JobRecord::Watcher> still_waiting;
    for (JobRecord::Watcher& watcher : job->watchers) {
      if (snapshot.version() > watcher.after_version) {
        deferred->Add([done = std::move(watcher.done), snapshot] { done(snapshot); });
      } else {
        still_waiting.push_back(std::move(watcher));
      }
    }
    job->watchers = std::move(still_waiting);
  }
  ArchiveExcessLocked(deferred);
}

absl::Status Coordinator::NotInMemoryLocked(const JobId& id, absl::string_view what) const {
  if (!jobs_.Removed(id)) return absl::NotFoundError(absl::StrCat("unknown job ", id.value()));
  return absl::NotFoundError(absl::StrCat(
      "job ", id.value(), " ended and was archived (the coordinator keeps the ",
      options_.max_finished_jobs_kept, " most recently finished jobs: --jobs_kept): ", what,
      " no longer kept; 'ringleader status ", id.value(), "' shows its final status"));
}

v1::JobStatus Coordinator::RenderLocked(const JobRecord& job) {
  v1::JobStatus status = job.status;
  const absl::Time now = clock_->Now();
  for (v1::RankStatus& rank : *status.mutable_ranks()) {
    const WorkerRecord* worker = workers_.Find(WorkerId(rank.worker_id()));
    if (worker != nullptr) {
      rank.set_heartbeat_age_ms(absl::ToInt64Milliseconds(now - worker->last_heartbeat));
    }
    if (AttemptOver(status) || IsTerminal(status.state())) continue;
    const RankEvidence evidence = EvidenceLocked(job, rank, now);
    rank.set_silent_ms(evidence.silent ? absl::ToInt64Milliseconds(*evidence.silent) : -1);
    if (evidence.activity.phase() != v1::RANK_PHASE_UNSPECIFIED) {
      *rank.mutable_activity() = evidence.activity;
      rank.mutable_activity()->set_phase_elapsed_ms(
          evidence.activity.phase_elapsed_ms() +
          std::max<int64_t>(0, absl::ToInt64Milliseconds(evidence.activity_age)));
    }
    rank.set_process_state(evidence.process_state);
  }
  return status;
}

void Coordinator::CheckStaleness() {
  Scope scope(this);
  const absl::Time now = clock_->Now();
  for (WorkerRecord* worker : workers_.InRegistrationOrder()) {
    if (worker->state != v1::WORKER_STATE_LOST &&
        now - worker->last_heartbeat > options_.heartbeat_timeout) {
      LoseWorkerLocked(worker, now, scope.deferred());
    }
  }
  FailRendezvousLocked(now, scope.deferred());
  FailReattachLocked(now, scope.deferred());
  FailHeldLocked(now, scope.deferred());
  ExpireDoctorWaitersLocked(now, scope.deferred());
  for (const JobId& id : jobs_.queue()) {
    JobRecord* job = jobs_.Find(id);
    if (job->restart_waiting && job->restart_not_before <= now) {
      job->restart_waiting = false;
      schedule_needed_ = true;  // its backoff is over: place it
    }
  }
  for (WorkerRecord* worker : workers_.InRegistrationOrder()) {
    if (worker->waiter && worker->waiter_deadline <= now) {
      AnswerWaiterLocked(worker, std::nullopt, scope.deferred());
    }
  }
  kv_.ExpireWaiters(now, scope.deferred());
  ExpireWatchersLocked(now, scope.deferred());
  for (JobRecord* job : jobs_.All()) {
    if (!job->log_waiters.empty()) AnswerLogWaitersLocked(job, scope.deferred());
  }
}

void Coordinator::FailRendezvousLocked(absl::Time now, DeferredCallbacks* deferred) {
  for (JobRecord* job : jobs_.All()) {
    if (job->status.state() != v1::JOB_STATE_RENDEZVOUS || job->rendezvous_deadline > now) {
      continue;
    }
    std::vector<std::string> missing;
    FailureCulprit culprit;  // the one rank missing, if only one is
    for (const v1::RankStatus& rank : job->status.ranks()) {
      if (rank.joined()) continue;
      culprit = missing.empty() ? FailureCulprit::Of(rank) : FailureCulprit::Unknown();
      // Whether its daemon is there, and what state its rank process is in.
      const RankEvidence evidence = EvidenceLocked(*job, rank, now);
      std::string daemon = "its worker is no longer registered";
      if (evidence.daemon_silent.has_value()) {
        daemon = absl::StrCat("its daemon's last heartbeat ",
                              absl::FormatDuration(absl::Trunc(*evidence.daemon_silent,
                                                               absl::Milliseconds(100))),
                              " ago",
                              evidence.process_state.empty()
                                  ? ""
                                  : absl::StrCat(", rank process ", evidence.process_state));
      }
      missing.push_back(absl::StrCat(DescribeRank(rank), ": ", daemon));
    }
    FailAttemptLocked(job,
                      absl::StrCat("rendezvous timeout: ", missing.size(),
                                   missing.size() == 1 ? " rank" : " ranks",
                                   " did not join within ",
                                   absl::FormatDuration(options_.rendezvous_timeout), ": ",
                                   absl::StrJoin(missing, "; "),
                                   OtherRanksLocked(*job, std::nullopt)),
                      /*restartable=*/true, culprit, deferred);
  }
}

void Coordinator::ExpireWatchersLocked(absl::Time now, DeferredCallbacks* deferred) {
  for (JobRecord* job : jobs_.All()) {
    if (job->watchers.empty()) continue;
    std::vector<JobRecord::Watcher> still_waiting;
    for (JobRecord::Watcher& watcher : job->watchers) {
      if (watcher.deadline <= now) {
        deferred->Add(
            [done = std::move(watcher.done), snapshot = RenderLocked(*job)] { done(snapshot); });
      } else {
        still_waiting.push_back(std::move(watcher));
      }
    }
    job->watchers = std::move(still_waiting);
  }
}

void Coordinator::Shutdown() {
  Scope scope(this);
  if (shut_down_) return;
  shut_down_ = true;
  const absl::Status why = absl::UnavailableError("the coordinator is shutting down");
  for (WorkerRecord* worker : workers_.InRegistrationOrder()) {
    if (worker->waiter) AnswerWaiterLocked(worker, why, scope.deferred());
  }
  kv_.FailAllWaiters(why, scope.deferred());
  for (JobRecord* job : jobs_.All()) {
    for (JobRecord::Watcher& watcher : job->watchers) {
      scope.deferred()->Add([done = std::move(watcher.done), why] { done(why); });
    }
    job->watchers.clear();
    for (JobRecord::LogWaiter& waiter : job->log_waiters) {
      scope.deferred()->Add([done = std::move(waiter.done), why] { done(why); });
    }
    job->log_waiters.clear();
    for (JobRecord::DoctorWaiter& waiter : job->doctor_waiters) {
      scope.deferred()->Add([done = std::move(waiter.done), why] { done(why); });
    }
    job->doctor_waiters.clear();
  }
}

}  // namespace ringleader
