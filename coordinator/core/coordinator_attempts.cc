// Coordinator: calls of the ranks of a job attempt (join, key-value store, progress, finish).
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/job_state.h"

namespace ringleader {
namespace {

absl::Status CheckRank(const v1::JobStatus& job, Rank rank) {
  if (rank.value() >= static_cast<uint32_t>(job.ranks_size())) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank.value(),
                                                   " is out of range for job ", job.job_id(),
                                                   " (world size ", job.ranks_size(), ")"));
  }
  return absl::OkStatus();
}

// Why an attempt message arriving after the end of its attempt is refused.
absl::Status AttemptEnded(const v1::JobStatus& job) {
  if (!IsTerminal(job.state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("generation ", job.generation(), " of job ", job.job_id(), " ended (",
                     LastReason(job), "): abandon this attempt"));
  }
  return absl::FailedPreconditionError(absl::StrCat("job ", job.job_id(), " already ended (",
                                                    JobStateName(job.state()), ": ",
                                                    LastReason(job), "): abandon this attempt"));
}

bool AllRanks(const v1::JobStatus& job, bool (*predicate)(const v1::RankStatus&)) {
  for (const v1::RankStatus& rank : job.ranks()) {
    if (!predicate(rank)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<JobRecord*> Coordinator::FindAttemptLocked(const AttemptId& attempt) {
  JobRecord* job = jobs_.Find(attempt.job);
  if (job == nullptr && jobs_.Removed(attempt.job)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", attempt.job.value(), " already ended and was archived: abandon this attempt"));
  }
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown job ", attempt.job.value()));
  }
  if (job->status.generation() != attempt.generation.value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stale generation ", attempt.generation.value(), " for job ", attempt.job.value(),
        " (current ", job->status.generation(), "): abandon this attempt"));
  }
  // Generation 0 = never assigned. Its keys and waiters would live under (job, 0), which no
  // job end clears (EndJobLocked ends the current attempt only).
  if (attempt.generation.value() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", attempt.job.value(), " has no attempt yet (",
                     JobStateName(job->status.state()), "): wait for an assignment"));
  }
  return job;
}

absl::Status Coordinator::JoinJob(const AttemptId& attempt, Rank rank, const WorkerId& worker,
                                  const std::string& spec_fingerprint) {
  Scope scope(this);
  absl::StatusOr<JobRecord*> found = FindAttemptLocked(attempt);
  if (!found.ok()) return found.status();
  JobRecord* job = *found;
  if (absl::Status valid = CheckRank(job->status, rank); !valid.ok()) return valid;
  v1::RankStatus* joining = job->status.mutable_ranks(static_cast<int>(rank.value()));
  if (joining->worker_id() != worker.value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank.value(), " of job ", attempt.job.value(),
                     " is assigned to worker ", joining->worker_id(), ", not ", worker.value()));
  }
  if (AttemptOver(job->status)) return AttemptEnded(job->status);
  if (spec_fingerprint != job->status.spec_fingerprint()) {
    const std::string reason = absl::StrCat(
        DescribeRank(*joining), " joined with spec fingerprint ", spec_fingerprint,
        " but the job's spec has fingerprint ", job->status.spec_fingerprint(),
        ": ranks would run different configurations");
    EndJobLocked(job, v1::JOB_STATE_FAILED, reason, scope.deferred());
    return absl::FailedPreconditionError(reason);
  }
  if (joining->joined()) return absl::OkStatus();
  joining->set_joined(true);
  job->last_contact[rank.value()] = clock_->Now();
  MarkChangedLocked(job);
  if (job->status.state() == v1::JOB_STATE_RENDEZVOUS &&
      AllRanks(job->status, [](const v1::RankStatus& r) { return r.joined(); })) {
    TransitionLocked(job, v1::JOB_STATE_RUNNING,
                     absl::StrCat("all ", job->status.ranks_size(), " ranks joined"),
                     scope.deferred());
  }
  return absl::OkStatus();
}

absl::Status Coordinator::KvSet(const AttemptId& attempt, const std::string& key,
                                std::string value) {
  Scope scope(this);
  absl::StatusOr<JobRecord*> job = FindAttemptLocked(attempt);
  if (!job.ok()) return job.status();
  if (AttemptOver((*job)->status)) return AttemptEnded((*job)->status);
  if (key.empty() || key.size() > options_.max_kv_key_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KvSet: a key must be 1 to ", options_.max_kv_key_bytes, " bytes, got ", key.size()));
  }
  if (value.size() > options_.max_kv_value_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KvSet: the value of '", key, "' is ", value.size(), " bytes, over the limit of ",
        options_.max_kv_value_bytes, " (CoordinatorOptions::max_kv_value_bytes)"));
  }
  if (!kv_.Has(attempt, key) && kv_.KeyCount(attempt) >= options_.max_kv_keys_per_attempt) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "KvSet: attempt ", attempt.generation.value(), " of ", attempt.job.value(), " holds ",
        options_.max_kv_keys_per_attempt,
        " keys already, the limit (CoordinatorOptions::max_kv_keys_per_attempt)"));
  }
  kv_.Set(attempt, key, std::move(value), scope.deferred());
  return absl::OkStatus();
}

absl::Status Coordinator::KvReadableLocked(const AttemptId& attempt) {
  if (shut_down_) return absl::UnavailableError("the coordinator is shutting down");
  absl::StatusOr<JobRecord*> job = FindAttemptLocked(attempt);
  if (!job.ok()) return job.status();
  if (AttemptOver((*job)->status)) return AttemptEnded((*job)->status);
  return absl::OkStatus();
}

void Coordinator::KvGetAsync(const AttemptId& attempt, const std::string& key,
                             absl::Time deadline, KvGetCallback done) {
  Scope scope(this);
  if (absl::Status readable = KvReadableLocked(attempt); !readable.ok()) {
    scope.deferred()->Add([done = std::move(done), readable] { done(readable); });
    return;
  }
  const absl::Time now = clock_->Now();
  kv_.Get(attempt, key, ClampDeadline(deadline, now), now, std::move(done), scope.deferred());
}

void Coordinator::KvGetManyAsync(const AttemptId& attempt, std::vector<std::string> keys,
                                 KvParts parts, absl::Time deadline, KvGetManyCallback done) {
  Scope scope(this);
  if (absl::Status readable = KvReadableLocked(attempt); !readable.ok()) {
    scope.deferred()->Add([done = std::move(done), readable] { done(readable); });
    return;
  }
  const absl::Time now = clock_->Now();
  kv_.GetMany(attempt, std::move(keys), std::move(parts), ClampDeadline(deadline, now), now,
              std::move(done), scope.deferred());
}

absl::Status Coordinator::ReportTrace(const AttemptId& attempt, Rank rank,
                                      std::vector<v1::CollectiveTraceEntry> trace) {
  Scope scope(this);
  absl::StatusOr<JobRecord*> found = FindAttemptLocked(attempt);
  if (!found.ok()) return found.status();
  JobRecord* job = *found;
  if (absl::Status valid = CheckRank(job->status, rank); !valid.ok()) return valid;
  job->traces[rank.value()] = std::move(trace);
  job->last_contact[rank.value()] = clock_->Now();
  MarkChangedLocked(job);  // wakes a DebugJob waiting on the job's version
  return absl::OkStatus();
}

absl::StatusOr<Coordinator::StopSignal> Coordinator::ReportProgress(
    const AttemptId& attempt, Rank rank, const std::vector<v1::StepReport>& steps,
    const std::vector<v1::EpochReport>& epochs, const v1::RankActivity& activity) {
  Scope scope(this);
  absl::StatusOr<JobRecord*> found = FindAttemptLocked(attempt);
  if (!found.ok()) return found.status();
  JobRecord* job = *found;
  if (absl::Status valid = CheckRank(job->status, rank); !valid.ok()) return valid;
  // Every answer says how far the judge got (after this call's steps).
  auto answer = [job, rank](bool stop, std::string reason) {
    return StopSignal{stop, std::move(reason), job->status.verdict().steps_judged(),
                      !stop && job->traces_requested && !job->traces.count(rank.value())};
  };
  if (AttemptOver(job->status)) {
    return answer(true, std::string(AttemptEnded(job->status).message()));
  }
  // Checked after the attempt and the rank: buckets exist only for ranks of running attempts.
  if (!report_limiter_.Allow(attempt, rank.value(), clock_->Now())) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "ReportProgress: rank ", rank.value(), " of ", attempt.job.value(), " (generation ",
        attempt.generation.value(), ") is over its limit of ", report_limiter_.per_second(),
        " calls per second (bursts of ", report_limiter_.burst(),
        "; CoordinatorOptions::max_reports_per_second_per_rank, the coordinator's "
        "--max_reports_per_second): retry later, with the steps batched into fewer calls"));
  }
  job->last_contact[rank.value()] = clock_->Now();
  if (activity.phase() != v1::RANK_PHASE_UNSPECIFIED) {
    job->activity[rank.value()] = {activity, clock_->Now()};
  }
  if (activity.collectives_issued() > 0) {
    job->collective_counts[rank.value()] = {activity.collectives_issued(),
                                            activity.collectives_completed()};
  }
  if (steps.empty() && epochs.empty()) return answer(false, "");  // a keepalive
  if (!steps.empty()) {
    v1::RankStatus* reporting = job->status.mutable_ranks(static_cast<int>(rank.value()));
    *reporting->mutable_last_step() = steps.back();
    reporting->mutable_last_step()->clear_collective_times();  // the judge's, not the status's
    // What the rank holds, measured once per attempt (its first step's report).
    for (const v1::StepReport& step : steps) {
      if (step.has_memory()) *reporting->mutable_memory() = step.memory();
    }
    if (NoteRecoveryLocked(job, steps)) SaveLocked(*job, scope.deferred());
  }
  // Every step goes through the judge, not only the last of a batch.
  std::vector<v1::Alarm> raised;
  if (job->judge != nullptr && !steps.empty()) {
    for (const v1::StepReport& step : steps) job->judge->Add(rank.value(), step, &raised);
    for (const v1::StepReport& step : steps) job->metrics->Add(rank.value(), step);
    job->judge->SetDetectedTime(absl::ToUnixMillis(clock_->Now()));
    if (job->judge->revision() != job->published_judge_revision) {
      PublishJudgementLocked(job);
      job->published_judge_revision = job->judge->revision();
    }
  }
  for (const v1::EpochReport& report : epochs) {
    auto* kept = job->status.mutable_epochs();
    // Kept sorted by epoch; a later report of the same epoch replaces the earlier one.
    int at = 0;
    while (at < kept->size() && kept->Get(at).epoch() < report.epoch()) ++at;
    if (at < kept->size() && kept->Get(at).epoch() == report.epoch()) {
      *kept->Mutable(at) = report;
      continue;
    }
    *kept->Add() = report;
    for (int i = kept->size() - 1; i > at; --i) kept->SwapElements(i, i - 1);
  }
  MarkChangedLocked(job);
  if (!raised.empty()) SaveLocked(*job, scope.deferred());  // alarms are durable job events
  for (const v1::Alarm& alarm : raised) {
    LogLocked(absl::StrCat("job ", job->status.job_id(), " alarm ",
                           v1::Alarm::Kind_Name(alarm.kind()), ": ", alarm.message()),
              scope.deferred());
    if (alarm.failed_job()) {
      // checks.on_desync "fail": a desync is a bug in the job, not a fault of a machine.
      std::string reason = absl::StrCat("check failed: ", v1::Alarm::Kind_Name(alarm.kind()),
                                        ": ", alarm.message());
      EndJobLocked(job, v1::JOB_STATE_FAILED, reason, scope.deferred());
      return answer(true, std::move(reason));
    }
  }
  return answer(false, "");
}

absl::Status Coordinator::AppendLogs(const AttemptId& attempt, Rank rank, uint64_t offset,
                                     absl::string_view data) {
  Scope scope(this);
  absl::StatusOr<JobRecord*> found = FindAttemptLocked(attempt);
  if (!found.ok()) return found.status();
  JobRecord* job = *found;
  if (absl::Status valid = CheckRank(job->status, rank); !valid.ok()) return valid;
  // Not a change of the job (no version bump, nothing saved): only log readers care.
  logs_.Append(attempt.job, attempt.generation.value(), rank.value(),
               static_cast<uint32_t>(job->status.ranks_size()), offset, data);
  AnswerLogWaitersLocked(job, scope.deferred());
  return absl::OkStatus();
}

bool Coordinator::NoteRecoveryLocked(JobRecord* job, const std::vector<v1::StepReport>& steps) {
  v1::JobStatus& status = job->status;
  v1::AttemptSummary* summary =
      status.attempts_size() > 0 ? status.mutable_attempts(status.attempts_size() - 1) : nullptr;
  const int64_t now_ms = absl::ToUnixMillis(clock_->Now());
  bool events = false;
  auto event = [&](std::string message) {
    v1::JobEvent* added = status.add_events();
    added->set_time_unix_ms(now_ms);
    added->set_message(std::move(message));
    events = true;
  };
  for (const v1::StepReport& step : steps) {
    if (summary != nullptr && step.step() > summary->last_step()) {
      summary->set_last_step(step.step());
    }
    for (const std::string& skipped : step.skipped_checkpoints()) {
      event(absl::StrCat("generation ", status.generation(), " did not resume from ", skipped));
    }
    if (!step.resumed_from().empty()) {
      if (summary != nullptr) summary->set_resumed_from_step(step.resumed_from_step());
      event(absl::StrCat("generation ", status.generation(), " resumed from ",
                         step.resumed_from(), " (step ", step.resumed_from_step(), ")"));
    }
    if (!step.checkpoint_written().empty() && step.step() >= status.last_checkpoint_step()) {
      status.set_last_checkpoint(step.checkpoint_written());
      status.set_last_checkpoint_step(step.step());
    }
  }
  return events;
}

void Coordinator::PublishJudgementLocked(JobRecord* job) {
  const StepJudge& judge = *job->judge;
  v1::JobStatus& status = job->status;
  status.mutable_alarms()->Clear();
  for (const v1::Alarm& alarm : job->carried_alarms) *status.add_alarms() = alarm;
  for (const v1::Alarm& alarm : judge.alarms()) *status.add_alarms() = alarm;
  *status.mutable_verdict() = judge.verdict();
  const v1::Verdict& before = job->carried_verdict;  // from before a coordinator restart
  v1::Verdict& verdict = *status.mutable_verdict();
  verdict.set_result(std::max(verdict.result(), before.result()));
  for (const v1::Alarm& alarm : job->carried_alarms) {
    verdict.set_result(std::max(verdict.result(),
                                alarm.failed_job() ? v1::Verdict::FAIL : v1::Verdict::WARN));
  }
  verdict.set_steps_judged(std::max(verdict.steps_judged(), before.steps_judged()));
  if (before.first_bad_step() != 0) {
    verdict.set_first_bad_step(before.first_bad_step());
    *verdict.mutable_first_bad() = before.first_bad();
  }
  status.mutable_stragglers()->Clear();
  for (const v1::StragglerScore& score : judge.stragglers()) *status.add_stragglers() = score;
}

RankEvidence Coordinator::EvidenceLocked(const JobRecord& job, const v1::RankStatus& rank,
                                         absl::Time now) const {
  RankEvidence evidence;
  evidence.status = rank;
  if (auto contact = job.last_contact.find(rank.rank()); contact != job.last_contact.end()) {
    evidence.silent = now - contact->second;
  }
  if (auto seen = job.activity.find(rank.rank()); seen != job.activity.end()) {
    evidence.activity = seen->second.activity;
    evidence.activity_age = now - seen->second.received;
  }
  const WorkerRecord* worker = workers_.Find(WorkerId(rank.worker_id()));
  if (worker != nullptr && worker->state != v1::WORKER_STATE_LOST) {
    evidence.daemon_silent = now - worker->last_heartbeat;
    evidence.process_state = worker->rank_process_state;
  }
  return evidence;
}

std::string Coordinator::OtherRanksLocked(const JobRecord& job, std::optional<Rank> failed,
                                          const std::optional<PeerBlame>& peer) const {
  const absl::Time now = clock_->Now();
  std::vector<RankEvidence> ranks;
  ranks.reserve(job.status.ranks_size());
  for (const v1::RankStatus& rank : job.status.ranks()) {
    ranks.push_back(EvidenceLocked(job, rank, now));
  }
  CulpritOptions culprit;
  culprit.silent_after = options_.silent_rank_after;
  culprit.daemon_silent_after = options_.heartbeat_interval * 1.5;
  std::string failed_host;
  std::optional<uint32_t> failed_rank;
  if (failed.has_value() && failed->value() < static_cast<uint32_t>(job.status.ranks_size())) {
    failed_rank = failed->value();
    failed_host = job.status.ranks(static_cast<int>(failed->value())).host();
  }
  return DescribeOtherRanks(ranks, failed_rank, failed_host, peer, culprit);
}

absl::Status Coordinator::FinishRank(const AttemptId& attempt, Rank rank,
                                     const RankOutcome& outcome) {
  Scope scope(this);
  absl::StatusOr<JobRecord*> found = FindAttemptLocked(attempt);
  if (!found.ok()) return found.status();
  JobRecord* job = *found;
  if (absl::Status valid = CheckRank(job->status, rank); !valid.ok()) return valid;
  v1::RankStatus* finished = job->status.mutable_ranks(static_cast<int>(rank.value()));
  if (finished->finished()) return absl::OkStatus();  // the first report counts
  finished->set_finished(true);
  finished->set_ok(outcome.ok);
  finished->set_error(outcome.error);
  if (!outcome.checkpoint_path.empty()) job->status.set_checkpoint_path(outcome.checkpoint_path);
  MarkChangedLocked(job);
  // Durable: a coordinator restarted before the job ends must not wait for this rank again.
  SaveLocked(*job, scope.deferred());
  if (AttemptOver(job->status)) return absl::OkStatus();
  NoteRankHealthLocked(*job, *finished, outcome, scope.deferred());

  if (!outcome.ok) {
    // A fault of the job itself (the rank says so) fails it; anything else may be the
    // machine's, and the job restarts if it has restarts left.
    // A collective timeout says where every rank was (the rings: hang_report.h).
    const std::string summary =
        absl::StrCat(DescribeRank(*finished), " failed: ",
                     outcome.error.empty() ? "(no error message)" : outcome.error,
                     HangSummaryLocked(job, outcome.failure));
    std::string reason =
        absl::StrCat(summary, OtherRanksLocked(*job, rank, PeerOf(outcome.failure)));
    const FailureHandling handling = HandlingOf(outcome.failure);
    const bool symptom = handling.hold_for_cause;
    if (job->held_failure.has_value()) {
      // A cause arrived for the held symptom (or a second symptom: the first keeps its place).
      JobRecord::HeldFailure held = *std::move(job->held_failure);
      job->held_failure.reset();
      if (symptom) {
        FailAttemptLocked(job, absl::StrCat(held.reason, "; then ", summary), held.restartable,
                          held.culprit, scope.deferred());
      } else {
        FailAttemptLocked(job, absl::StrCat(reason, "; before it, as a consequence: ", held.summary),
                          handling.restartable, FailureCulprit::Of(*finished), scope.deferred());
      }
      return absl::OkStatus();
    }
    const bool others_running = !AllRanks(job->status, [](const v1::RankStatus& r) {
      return r.finished();
    });
    if (symptom && others_running && options_.peer_failure_grace > absl::ZeroDuration()) {
      job->held_failure =
          JobRecord::HeldFailure{std::move(reason), summary, handling.restartable,
                                 FailureCulprit::Of(*finished),
                                 clock_->Now() + options_.peer_failure_grace};
      return absl::OkStatus();
    }
    FailAttemptLocked(job, std::move(reason), handling.restartable, FailureCulprit::Of(*finished),
                      scope.deferred());
  } else if (job->held_failure.has_value() &&
             AllRanks(job->status, [](const v1::RankStatus& r) { return r.finished(); })) {
    // Every other rank finished without naming a cause: the held failure is the attempt's.
    JobRecord::HeldFailure held = *std::move(job->held_failure);
    job->held_failure.reset();
    FailAttemptLocked(job, std::move(held.reason), held.restartable, held.culprit,
                      scope.deferred());
  } else if (job->held_failure.has_value()) {
    // Still waiting for the held failure's cause.
  } else if (!finished->joined()) {
    FailAttemptLocked(job,
                      absl::StrCat(DescribeRank(*finished), " failed: finished without joining"),
                      /*restartable=*/true, FailureCulprit::Of(*finished), scope.deferred());
  } else if (job->status.state() == v1::JOB_STATE_RUNNING &&
             AllRanks(job->status, [](const v1::RankStatus& r) { return r.ok(); })) {
    EndJobLocked(job, v1::JOB_STATE_SUCCEEDED,
                 absl::StrCat("all ", job->status.ranks_size(), " ranks finished"),
                 scope.deferred());
  }
  return absl::OkStatus();
}

void Coordinator::FailHeldLocked(absl::Time now, DeferredCallbacks* deferred) {
  for (JobRecord* job : jobs_.All()) {
    if (!job->held_failure.has_value() || job->held_failure->deadline > now) continue;
    JobRecord::HeldFailure held = *std::move(job->held_failure);
    job->held_failure.reset();
    if (AttemptOver(job->status)) continue;
    FailAttemptLocked(job, std::move(held.reason), held.restartable, held.culprit, deferred);
  }
}

}  // namespace ringleader
