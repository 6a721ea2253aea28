// Coordinator: calls of the CLI (submit, get, watch, list, cancel).
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "coordinator/coordinator.h"
#include "coordinator/job_state.h"

namespace ringleader {

absl::StatusOr<Coordinator::Submitted> Coordinator::SubmitJob(v1::JobSpec spec) {
  // Defaults and validation need no lock: the spec is still private to this call.
  ApplyJobSpecDefaults(&spec);
  if (absl::Status valid = ValidateJobSpec(spec, options_.limits); !valid.ok()) return valid;
  if (!options_.allow_fault_injection && spec.model().has_faults() &&
      spec.model().faults().ByteSizeLong() > 0) {
    return absl::FailedPreconditionError(
        "model.faults: this coordinator does not accept fault injection (tests and demos "
        "only): drop model.faults, or start the coordinator with --allow_fault_injection");
  }
  std::string fingerprint = JobSpecFingerprint(spec);

  Scope scope(this);
  if (jobs_.queue().size() >= options_.max_queued_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the queue is full: ", jobs_.queue().size(), " jobs are QUEUED (the coordinator's "
        "--max_queued_jobs): wait for them to start, or cancel some"));
  }
  const std::string summary =
      absl::StrCat(" (name \"", spec.name(), "\", world size ", spec.world_size(), ", backend ",
                   spec.backend(), ", fingerprint ", fingerprint, ")");
  JobRecord* job = jobs_.Add(std::move(spec), fingerprint, clock_->Now());
  // The record is born QUEUED with its transition already recorded: save and publish it like
  // any other transition.
  MarkChangedLocked(job);
  SaveLocked(*job, scope.deferred());
  LogLocked(absl::StrCat("job ", job->status.job_id(), " submitted", summary), scope.deferred());
  schedule_needed_ = true;
  return Submitted{JobId(job->status.job_id()), std::move(fingerprint)};
}

absl::StatusOr<v1::GetJobMetricsResponse> Coordinator::GetJobMetrics(const JobId& id) {
  Scope scope(this);
  JobRecord* job = jobs_.Find(id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("unknown job ", id.value()));
  v1::GetJobMetricsResponse response;
  response.set_job_id(job->status.job_id());
  response.set_generation(job->status.generation());
  if (job->metrics != nullptr) job->metrics->Export(&response);
  return response;
}

absl::StatusOr<v1::JobStatus> Coordinator::GetJob(const JobId& id) {
  Scope scope(this);
  JobRecord* job = jobs_.Find(id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("unknown job ", id.value()));
  return RenderLocked(*job);
}

void Coordinator::WatchJobAsync(const JobId& id, uint64_t after_version, absl::Time deadline,
                                WatchCallback done) {
  Scope scope(this);
  auto answer = [&](absl::StatusOr<v1::JobStatus> result) {
    scope.deferred()->Add([done = std::move(done), result = std::move(result)] { done(result); });
  };
  if (shut_down_) return answer(absl::UnavailableError("the coordinator is shutting down"));
  JobRecord* job = jobs_.Find(id);
  if (job == nullptr) return answer(absl::NotFoundError(absl::StrCat("unknown job ", id.value())));
  const absl::Time now = clock_->Now();
  deadline = ClampDeadline(deadline, now);
  if (job->status.version() > after_version || deadline <= now) {
    return answer(RenderLocked(*job));
  }
  job->watchers.push_back(JobRecord::Watcher{after_version, deadline, std::move(done)});
}

std::vector<v1::JobStatus> Coordinator::ListJobs() {
  Scope scope(this);
  std::vector<v1::JobStatus> all;
  for (const JobRecord* job : jobs_.All()) all.push_back(RenderLocked(*job));
  return all;
}

std::vector<v1::JobStatus> Coordinator::ListJobsPage(const std::string& after, size_t limit,
                                                     bool* more) {
  Scope scope(this);
  std::vector<v1::JobStatus> page;
  bool started = after.empty();
  *more = false;
  for (const JobRecord* job : jobs_.All()) {
    if (!started) {
      started = job->status.job_id() == after;
      continue;
    }
    if (page.size() == limit) {
      *more = true;
      break;
    }
    page.push_back(RenderLocked(*job));
  }
  return page;
}

absl::Status Coordinator::CancelJob(const JobId& id, std::string reason) {
  Scope scope(this);
  JobRecord* job = jobs_.Find(id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("unknown job ", id.value()));
  if (IsTerminal(job->status.state())) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id.value(), " already ended (",
                                                      JobStateName(job->status.state()), ": ",
                                                      LastReason(job->status), ")"));
  }
  EndJobLocked(job, v1::JOB_STATE_CANCELLED, reason.empty() ? "cancelled" : std::move(reason),
               scope.deferred());
  return absl::OkStatus();
}

}  // namespace ringleader
