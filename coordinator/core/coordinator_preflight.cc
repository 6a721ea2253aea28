// Coordinator: pre-flight checks (RunDoctor, checks.preflight) and quarantine.
#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job_spec.h"
#include "common/states.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/job_state.h"
#include "coordinator/core/preflight_judge.h"

namespace ringleader {
namespace {

// Consecutive attempts in which a worker's rank failed of its own before it is quarantined.
constexpr size_t kCrashesBeforeQuarantine = 2;

// A doctor run's collective timeout: a pair that cannot exchange in this time has failed.
constexpr uint32_t kDoctorCollectiveTimeoutMs = 10000;

// Whether a rank's failure points at its machine: it died of a signal (a segfault, the kernel's
// OOM killer), ran out of memory, or could not read or write its disk. A script that exits with
// an error (EXITED), a job error, a peer's failure, a stop the coordinator ordered and the
// trainer's own bug (INTERNAL) say nothing about the machine: quarantining for them would cry
// wolf (a user's script raising an exception twice would take workers out of the fleet).
bool IsOwnFailure(const Coordinator::RankOutcome& outcome) {
  if (outcome.ok) return false;
  switch (outcome.failure.kind()) {
    case v1::RankFailure::SIGNAL:
    case v1::RankFailure::OUT_OF_MEMORY:
    case v1::RankFailure::IO_ERROR:
      return true;
    default:
      return false;
  }
}

v1::JobSpec DoctorSpec(uint32_t world_size, double min_fraction) {
  v1::JobSpec spec;
  spec.set_name("doctor");
  spec.set_world_size(world_size);
  spec.mutable_model()->set_kind(kPreflightModelKind);
  spec.mutable_checks()->set_preflight(true);
  spec.mutable_checks()->set_preflight_min_fraction(min_fraction);
  spec.set_max_restarts(0);
  spec.set_collective_timeout_ms(kDoctorCollectiveTimeoutMs);
  ApplyJobSpecDefaults(&spec);
  return spec;
}

std::string VerdictKey(const v1::JobStatus& job) {
  return absl::StrCat(job.job_id(), "/", job.generation(), "/preflight/verdict");
}

}  // namespace

void Coordinator::RunDoctorAsync(DoctorRequest request, absl::Time deadline,
                                 DoctorCallback done) {
  Scope scope(this);
  auto answer = [&](absl::StatusOr<v1::PreflightResult> result) {
    scope.deferred()->Add([done = std::move(done), result = std::move(result)] { done(result); });
  };
  if (shut_down_) return answer(absl::UnavailableError("the coordinator is shutting down"));
  if (!std::isfinite(request.min_fraction) || request.min_fraction <= 0 ||
      request.min_fraction >= 1) {
    return answer(absl::InvalidArgumentError(
        absl::StrCat("min_fraction: must be in (0, 1), got ", request.min_fraction,
                     "; omit it for the default ", kDefaultPreflightMinFraction)));
  }
  std::vector<WorkerRecord*> chosen;
  if (request.workers.empty()) {
    for (WorkerRecord* worker : workers_.InRegistrationOrder()) {
      if (worker->state == v1::WORKER_STATE_IDLE && worker->quarantine_reason.empty()) {
        chosen.push_back(worker);
      }
    }
    if (chosen.empty()) {
      return answer(absl::FailedPreconditionError(
          "no idle worker that is not quarantined: name the workers to check, or wait for "
          "running jobs to end"));
    }
  }
  absl::flat_hash_set<std::string> seen;
  for (const std::string& name : request.workers) {
    if (!seen.insert(name).second) {
      return answer(absl::InvalidArgumentError(
          absl::StrCat("workers: ", name, " is named twice: name each worker once")));
    }
    WorkerRecord* worker = workers_.FindByName(name);
    if (worker == nullptr) {
      return answer(absl::NotFoundError(
          absl::StrCat("unknown worker ", name, ": `ringleader workers` lists the names")));
    }
    if (worker->state != v1::WORKER_STATE_IDLE) {
      return answer(absl::FailedPreconditionError(absl::StrCat(
          "worker ", name, " is ", WorkerStateName(worker->state),
          worker->attempt.has_value() ? absl::StrCat(" (", worker->attempt->job.value(), ")")
                                      : "",
          ": check it once it is idle")));
    }
    chosen.push_back(worker);
  }

  v1::JobSpec spec = DoctorSpec(static_cast<uint32_t>(chosen.size()), request.min_fraction);
  std::string fingerprint = JobSpecFingerprint(spec);
  JobRecord* job = jobs_.Add(std::move(spec), std::move(fingerprint), clock_->Now());
  const JobId id(job->status.job_id());
  jobs_.Dequeue(id);
  jobs_.Requeue(id);  // ahead of the queue: the workers are idle now
  job->doctor = true;
  for (const WorkerRecord* worker : chosen) job->pinned_workers.push_back(worker->name);
  job->doctor_waiters.push_back({ClampDeadline(deadline, clock_->Now()), std::move(done)});
  MarkChangedLocked(job);
  SaveLocked(*job, scope.deferred());
  LogLocked(absl::StrCat("job ", id.value(), " submitted: pre-flight check of ",
                         absl::StrJoin(job->pinned_workers, ", ")),
            scope.deferred());
  schedule_needed_ = true;
}

absl::Status Coordinator::ReportPreflight(const AttemptId& attempt, Rank rank,
                                          v1::PreflightReport report) {
  Scope scope(this);
  absl::StatusOr<JobRecord*> found = FindAttemptLocked(attempt);
  if (!found.ok()) return found.status();
  JobRecord* job = *found;
  v1::JobStatus& status = job->status;
  if (rank.value() >= static_cast<uint32_t>(status.ranks_size())) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank.value(),
                                                   " is out of range for job ", status.job_id(),
                                                   " (world size ", status.ranks_size(), ")"));
  }
  if (!status.spec().checks().preflight()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", status.job_id(), " runs no pre-flight check (checks.preflight is "
                     "off): do not send preflight figures"));
  }
  if (AttemptOver(status) || job->preflight_result.has_value()) return absl::OkStatus();
  job->preflight_reports[rank.value()] = std::move(report);
  if (job->preflight_reports.size() == static_cast<size_t>(status.ranks_size())) {
    JudgePreflightLocked(job, scope.deferred());
  }
  return absl::OkStatus();
}

void Coordinator::JudgePreflightLocked(JobRecord* job, DeferredCallbacks* deferred) {
  v1::JobStatus& status = job->status;
  std::vector<PreflightRank> ranks;
  for (const v1::RankStatus& rank : status.ranks()) {
    PreflightRank input{rank.worker_id(), rank.worker_name(), rank.host(), std::nullopt};
    if (auto it = job->preflight_reports.find(rank.rank()); it != job->preflight_reports.end()) {
      input.report = it->second;
    }
    ranks.push_back(std::move(input));
  }
  v1::PreflightResult result = JudgePreflight(ranks, status.spec().checks().preflight_min_fraction());
  result.set_job_id(status.job_id());
  result.set_generation(status.generation());
  std::vector<std::string> named;
  for (const v1::PreflightWorker& checked : result.workers()) {
    if (!checked.quarantined()) continue;
    named.push_back(checked.name());
    if (WorkerRecord* worker = workers_.Find(WorkerId(checked.worker_id())); worker != nullptr) {
      QuarantineLocked(worker,
                       absl::StrCat("pre-flight check (", status.job_id(), "): ", checked.reason()),
                       deferred);
    }
  }
  v1::JobEvent* event = status.add_events();
  event->set_time_unix_ms(absl::ToUnixMillis(clock_->Now()));
  event->set_message(absl::StrCat(
      "pre-flight check of generation ", status.generation(), ": ",
      result.findings().empty() ? "every worker passed" : absl::StrJoin(result.findings(), "; ")));
  LogLocked(absl::StrCat("job ", status.job_id(), ": ", event->message()), deferred);
  MarkChangedLocked(job);
  SaveLocked(*job, deferred);
  job->preflight_result = std::move(result);
  if (job->doctor || AttemptOver(status)) return;
  if (named.empty()) {
    kv_.Set(AttemptId{JobId(status.job_id()), Generation(status.generation())},
            VerdictKey(status), "pass", deferred);
    return;
  }
  FailAttemptLocked(job,
                    absl::StrCat("the pre-flight check quarantined ", absl::StrJoin(named, ", "),
                                 " (see `ringleader workers`)"),
                    /*restartable=*/true, FailureCulprit::Unknown(), deferred,
                    /*count_restart=*/false);
}

void Coordinator::QuarantineLocked(WorkerRecord* worker, std::string reason,
                                   DeferredCallbacks* deferred) {
  LogLocked(absl::StrCat("worker ", worker->id.value(), " (", worker->name, " on ", worker->host,
                         ") quarantined: ", reason),
            deferred);
  worker->quarantine_reason = std::move(reason);
  worker->quarantined_at = clock_->Now();
  schedule_needed_ = true;  // queued jobs' reasons now mention it
}

void Coordinator::NoteRankHealthLocked(const JobRecord& job, const v1::RankStatus& rank,
                                       const RankOutcome& outcome, DeferredCallbacks* deferred) {
  WorkerRecord* worker = workers_.Find(WorkerId(rank.worker_id()));
  if (worker == nullptr) return;
  if (outcome.ok) {
    worker->crash_streak.clear();
    return;
  }
  if (!IsOwnFailure(outcome)) return;  // neither its fault nor evidence of health
  worker->crash_streak.push_back(absl::StrCat(job.status.job_id(), " generation ",
                                              job.status.generation(), " rank ", rank.rank(),
                                              ": ", outcome.error));
  if (worker->crash_streak.size() < kCrashesBeforeQuarantine ||
      !worker->quarantine_reason.empty()) {
    return;
  }
  QuarantineLocked(worker,
                   absl::StrCat("its ranks failed ", worker->crash_streak.size(),
                                " attempts in a row: ",
                                absl::StrJoin(worker->crash_streak, "; ")),
                   deferred);
}

absl::StatusOr<v1::WorkerStatus> Coordinator::UncordonWorker(const std::string& name) {
  Scope scope(this);
  WorkerRecord* worker = workers_.FindByName(name);
  if (worker == nullptr) worker = workers_.Find(WorkerId(name));
  if (worker == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("unknown worker ", name, ": `ringleader workers` lists the names"));
  }
  if (worker->quarantine_reason.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker->name, " is not quarantined"));
  }
  LogLocked(absl::StrCat("worker ", worker->id.value(), " (", worker->name, " on ", worker->host,
                         ") uncordoned; it was quarantined: ", worker->quarantine_reason),
            scope.deferred());
  worker->quarantine_reason.clear();
  worker->quarantined_at = absl::Time();
  worker->crash_streak.clear();
  schedule_needed_ = true;
  return ToWorkerStatus(*worker, clock_->Now());
}

void Coordinator::AnswerDoctorLocked(JobRecord* job, DeferredCallbacks* deferred) {
  if (!job->preflight_result.has_value()) {
    // The check did not run to its end: judge what arrived, and say why.
    if (job->status.ranks_size() > 0) {
      JudgePreflightLocked(job, deferred);
    } else {
      job->preflight_result = v1::PreflightResult();
      job->preflight_result->set_job_id(job->status.job_id());
    }
  }
  if (job->status.state() != v1::JOB_STATE_SUCCEEDED) {
    job->preflight_result->set_error(LastReason(job->status));
    job->preflight_result->set_clean(false);
  }
  for (JobRecord::DoctorWaiter& waiter : job->doctor_waiters) {
    deferred->Add([done = std::move(waiter.done), result = *job->preflight_result] {
      done(result);
    });
  }
  job->doctor_waiters.clear();
}

void Coordinator::ExpireDoctorWaitersLocked(absl::Time now, DeferredCallbacks* deferred) {
  for (JobRecord* job : jobs_.All()) {
    auto& waiters = job->doctor_waiters;
    for (auto it = waiters.begin(); it != waiters.end();) {
      if (it->deadline > now) {
        ++it;
        continue;
      }
      deferred->Add([done = std::move(it->done), id = job->status.job_id()] {
        done(absl::DeadlineExceededError(absl::StrCat(
            "the pre-flight check ", id, " has not finished: `ringleader status ", id,
            "` follows it; its judgement still quarantines")));
      });
      it = waiters.erase(it);
    }
  }
}

}  // namespace ringleader
