// Coordinator: calls of the CLI (submit, get, watch, list, cancel).
#include <algorithm>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/job_state.h"

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

  const std::string summary =
      absl::StrCat(" (name \"", spec.name(), "\", world size ", spec.world_size(), ", backend ",
                   spec.backend(), ", fingerprint ", fingerprint, ")");
  // The record is committed to the store before the job joins the queue: a submit that answers
  // OK is never lost, and one the store refused leaves nothing behind to run.
  v1::JobStatus record;
  {
    Scope scope(this);
    if (jobs_.queue().size() >= options_.max_queued_jobs) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the queue is full: ", jobs_.queue().size(), " jobs are QUEUED (the coordinator's "
          "--max_queued_jobs): wait for them to start, or cancel some"));
    }
    JobRecord* added = jobs_.Add(std::move(spec), fingerprint, clock_->Now(), /*enqueue=*/false);
    // Born QUEUED with its transition already recorded: published like any other transition.
    MarkChangedLocked(added);
    record = added->status;
  }
  const JobId id(record.job_id());
  const absl::Status saved = store_->Save(record);
  Scope scope(this);
  if (!saved.ok()) {
    jobs_.Remove(id);
    LogLocked(absl::StrCat("job ", id.value(), " refused: the job store did not commit it: ",
                           saved.ToString()),
              scope.deferred());
    return absl::UnavailableError(absl::StrCat(
        "the job was not submitted: the job store did not commit it (", saved.message(),
        "); nothing was queued: submit it again once the store answers"));
  }
  JobRecord* job = jobs_.Find(id);
  if (job == nullptr || job->status.state() != v1::JOB_STATE_QUEUED) {
    // Cancelled (listed, then cancelled) between the two halves: it stays as it is.
    return Submitted{id, std::move(fingerprint)};
  }
  jobs_.Enqueue(id);
  LogLocked(absl::StrCat("job ", id.value(), " submitted", summary), scope.deferred());
  schedule_needed_ = true;
  return Submitted{id, std::move(fingerprint)};
}

absl::StatusOr<v1::GetJobMetricsResponse> Coordinator::GetJobMetrics(const JobId& id) {
  Scope scope(this);
  JobRecord* job = jobs_.Find(id);
  if (job == nullptr) return NotInMemoryLocked(id, "its metrics history is");
  v1::GetJobMetricsResponse response;
  response.set_job_id(job->status.job_id());
  response.set_generation(job->status.generation());
  if (job->metrics != nullptr) job->metrics->Export(&response);
  return response;
}

absl::StatusOr<v1::JobStatus> Coordinator::GetJob(const JobId& id) {
  {
    Scope scope(this);
    if (const JobRecord* job = jobs_.Find(id); job != nullptr) return RenderLocked(*job);
    absl::StatusOr<std::optional<v1::JobStatus>> archived = ArchivedLocked(id);
    if (!archived.ok()) return archived.status();
    if (archived->has_value()) return std::move(**archived);
  }
  return LoadArchivedJob(id);  // disk I/O: after the lock is released
}

void Coordinator::WatchJobAsync(const JobId& id, uint64_t after_version, absl::Time deadline,
                                WatchCallback done) {
  Scope scope(this);
  auto answer = [&](absl::StatusOr<v1::JobStatus> result) {
    scope.deferred()->Add([done = std::move(done), result = std::move(result)] { done(result); });
  };
  if (shut_down_) return answer(absl::UnavailableError("the coordinator is shutting down"));
  JobRecord* job = jobs_.Find(id);
  if (job == nullptr) {
    absl::StatusOr<std::optional<v1::JobStatus>> archived = ArchivedLocked(id);
    if (!archived.ok()) return answer(archived.status());
    if (archived->has_value()) return answer(std::move(**archived));
    // Archived: its final status, read from the store once the lock is released.
    scope.deferred()->Add([this, id, done = std::move(done)] { done(LoadArchivedJob(id)); });
    return;
  }
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

absl::StatusOr<Coordinator::JobsPage> Coordinator::ListJobsPage(const std::string& after,
                                                                size_t limit,
                                                                bool include_archived) {
  // One more than the page from each source tells whether more follow.
  const size_t wanted = limit == std::numeric_limits<size_t>::max() ? limit : limit + 1;
  uint64_t after_number = 0;
  std::vector<std::pair<uint64_t, v1::JobStatus>> merged;  // by job number
  {
    Scope scope(this);
    if (!after.empty()) {
      const std::optional<uint64_t> number = JobNumber(after);
      if (!number.has_value() ||
          (jobs_.Find(JobId(after)) == nullptr && !jobs_.Removed(JobId(after)))) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", after, "' is not a job id of this coordinator"));
      }
      after_number = *number;
    }
    for (const JobRecord* job : jobs_.After(after_number, wanted)) {
      merged.emplace_back(JobNumber(job->status.job_id()).value_or(0), RenderLocked(*job));
    }
    if (include_archived) {
      size_t taken = 0;
      for (auto it = archiving_.upper_bound(after_number);
           it != archiving_.end() && taken < wanted; ++it, ++taken) {
        merged.emplace_back(it->first, it->second);
        merged.back().second.set_archived(true);
      }
    }
  }
  if (include_archived) {
    // Disk I/O: after the lock is released. A job archived since the snapshot above is in both
    // (listed once below); one archived before it is in the store already.
    absl::StatusOr<std::vector<v1::JobStatus>> stored = store_->ListArchived(after_number, wanted);
    if (!stored.ok()) return stored.status();
    for (v1::JobStatus& job : *stored) {
      const uint64_t number = JobNumber(job.job_id()).value_or(0);
      job.set_archived(true);
      merged.emplace_back(number, std::move(job));
    }
  }
  std::stable_sort(merged.begin(), merged.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  merged.erase(std::unique(merged.begin(), merged.end(),
                           [](const auto& a, const auto& b) { return a.first == b.first; }),
               merged.end());
  JobsPage page;
  page.more = merged.size() > limit;
  if (page.more) merged.resize(limit);
  page.jobs.reserve(merged.size());
  for (auto& [number, job] : merged) page.jobs.push_back(std::move(job));
  return page;
}

absl::Status Coordinator::CancelJob(const JobId& id, std::string reason) {
  if (absl::Status cancelled = CancelJobInMemory(id, std::move(reason)); !cancelled.ok()) {
    return cancelled;
  }
  // The CANCELLED record was saved as the scope closed: answer OK only once it is committed.
  if (std::optional<absl::Status> unsaved = unsaved_.ErrorOf(id.value()); unsaved.has_value()) {
    return absl::UnavailableError(absl::StrCat(
        "job ", id.value(), " was cancelled but the job store did not commit it yet (",
        unsaved->message(), "): the coordinator saves it again, and a coordinator that takes "
        "over may not know of it: cancel again to be sure"));
  }
  return absl::OkStatus();
}

absl::Status Coordinator::CancelJobInMemory(const JobId& id, std::string reason) {
  Scope scope(this);
  JobRecord* job = jobs_.Find(id);
  if (job == nullptr && jobs_.Removed(id)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id.value(), " already ended (it was archived: 'ringleader status ", id.value(),
        "' shows how)"));
  }
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
