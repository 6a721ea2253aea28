// Coordinator: the job store side (saves after the lock is released, retries of failed saves,
// restore at start-up, the archive of finished jobs).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/job_state.h"

namespace ringleader {

void Coordinator::SaveLocked(const JobRecord& job, DeferredCallbacks* deferred) {
  // Written after the lock is released (a durable store fsyncs), before the call returns: the
  // RPC that changed the job answers only once the change is on disk. Saves of one job may land
  // out of order; the store keeps the highest version.
  // A failed save is kept in unsaved_: saved again by RetryUnsavedSaves, and the call that made
  // a client-visible change (cancel) answers UNAVAILABLE instead of OK.
  deferred->Add([this, status = job.status, now = clock_->Now()] {
    absl::Status saved = store_->Save(status);
    if (saved.ok()) {
      unsaved_.Saved(status.job_id());
      return;
    }
    if (logger_) {
      logger_(now, absl::StrCat("job store: could not save job ", status.job_id(), ": ",
                                saved.ToString(), " (kept in memory, saved again later)"));
    }
    unsaved_.Failed(status.job_id(), std::move(saved));
  });
}

size_t Coordinator::RetryUnsavedSaves() {
  const std::vector<std::string> ids = unsaved_.Take();
  if (ids.empty()) return 0;
  std::vector<v1::JobStatus> current;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& id : ids) {
      // An archived job left the table: its Archive carried the final status.
      if (const JobRecord* job = jobs_.Find(JobId(id)); job != nullptr) {
        current.push_back(job->status);
      }
    }
  }
  size_t saved_now = 0;
  absl::Status last_error;
  for (const v1::JobStatus& status : current) {
    absl::Status saved = store_->Save(status);
    if (saved.ok()) {
      ++saved_now;
    } else {
      last_error = saved;
      unsaved_.Failed(status.job_id(), std::move(saved));
    }
  }
  if (logger_ && saved_now > 0) {
    logger_(clock_->Now(),
            absl::StrCat("job store: saved ", saved_now, " job(s) whose earlier save had failed",
                         unsaved_.size() > 0 ? absl::StrCat("; ", unsaved_.size(),
                                                            " still unsaved: ",
                                                            last_error.ToString())
                                             : std::string()));
  }
  return saved_now;
}

absl::Status Coordinator::Restore(std::vector<v1::JobStatus> jobs) {
  // Read before the lock is taken (disk I/O): ids continue after archived jobs too.
  const absl::StatusOr<uint64_t> highest_archived = store_->HighestArchivedNumber();
  if (!highest_archived.ok()) return highest_archived.status();
  Scope scope(this);
  jobs_.ReserveThrough(*highest_archived);
  for (v1::JobStatus& saved : jobs) {
    const v1::JobState state = saved.state();
    absl::StatusOr<JobRecord*> restored = jobs_.Restore(std::move(saved));
    if (!restored.ok()) return restored.status();
    JobRecord* job = *restored;
    if (state == v1::JOB_STATE_RUNNING && options_.coordinator_grace > absl::ZeroDuration()) {
      AwaitReattachLocked(job, scope.deferred());
    } else if (state == v1::JOB_STATE_RENDEZVOUS || state == v1::JOB_STATE_RUNNING) {
      // The rendezvous lived in the old coordinator's memory: the job restarts from its last
      // checkpoint if it has restarts left (the daemons stop their ranks when they learn).
      FailAttemptLocked(job,
                        absl::StrCat("the coordinator restarted while generation ",
                                     job->status.generation(), " was in ",
                                     JobStateName(state), "; the attempt was lost"),
                        /*restartable=*/true, FailureCulprit::Unknown(), scope.deferred());
    }
  }
  LogLocked(absl::StrCat("restored ", jobs.size(), " job(s) from the job store"),
            scope.deferred());
  schedule_needed_ = true;
  return absl::OkStatus();
}

void Coordinator::ArchiveExcessLocked(DeferredCallbacks* deferred) {
  if (jobs_.ended_count() <= options_.max_finished_jobs_kept) return;
  std::vector<std::string> archived;
  while (jobs_.ended_count() > options_.max_finished_jobs_kept) {
    JobRecord* job = jobs_.FirstEnded();
    archived.push_back(job->status.job_id());
    ArchiveLocked(job, deferred);
  }
  // One line per call (a restarted coordinator may archive thousands at once).
  constexpr size_t kNamed = 5;
  std::string named = absl::StrJoin(archived.begin(),
                                    archived.begin() + std::min(archived.size(), kNamed), ", ");
  if (archived.size() > kNamed) absl::StrAppend(&named, " and ", archived.size() - kNamed, " more");
  LogLocked(absl::StrCat("archived ", archived.size() == 1 ? "job " : "jobs ", named,
                         " (the ", options_.max_finished_jobs_kept,
                         " most recently finished jobs stay in memory: --jobs_kept)"),
            deferred);
}

void Coordinator::ArchiveLocked(JobRecord* job, DeferredCallbacks* deferred) {
  const JobId id(job->status.job_id());
  const uint64_t number = JobNumber(id.value()).value_or(0);  // the table's ids all have one
  const absl::Time now = clock_->Now();
  v1::JobStatus final_status = job->status;  // as saved: `archived` is set in answers only
  v1::JobStatus answer = final_status;
  answer.set_archived(true);
  // Parked long polls are answered now: nothing of the job stays to wake them.
  for (JobRecord::Watcher& watcher : job->watchers) {
    deferred->Add([done = std::move(watcher.done), answer] { done(answer); });
  }
  for (JobRecord::LogWaiter& waiter : job->log_waiters) {
    v1::GetLogsResponse response = RenderLogsLocked(*job, waiter, now);
    response.set_attempt_over(true);  // no more output of the job is kept
    response.set_job_over(true);
    deferred->Add([done = std::move(waiter.done), response = std::move(response)] {
      done(response);
    });
  }
  // Everything else kept per job: its attempt's keys (ended with the attempt already), its
  // output, and the record itself (metrics history, step judge, activity).
  kv_.EndAttempt(AttemptId{id, Generation(final_status.generation())},
                 absl::FailedPreconditionError(absl::StrCat("job ", id.value(), " was archived")),
                 deferred);
  logs_.RemoveJob(id);
  changed_.erase(std::remove(changed_.begin(), changed_.end(), job), changed_.end());
  jobs_.Remove(id);  // `job` dangles from here
  ++jobs_archived_;
  archived_restarts_ += final_status.restarts();
  archiving_[number] = final_status;
  deferred->Add([this, number, now, final_status = std::move(final_status)] {
    FinishArchive(number, final_status.job_id(), store_->Archive(final_status), now);
  });
}

void Coordinator::FinishArchive(uint64_t number, const std::string& job_id,
                                const absl::Status& archived, absl::Time when) {
  if (!archived.ok()) {
    if (logger_) {
      logger_(when, absl::StrCat("job store: could not archive job ", job_id, ": ",
                                 archived.ToString(), " (its final status is kept in memory)"));
    }
    return;
  }
  absl::MutexLock lock(&mu_);
  archiving_.erase(number);
}

absl::StatusOr<std::optional<v1::JobStatus>> Coordinator::ArchivedLocked(const JobId& id) {
  if (!jobs_.Removed(id)) return absl::NotFoundError(absl::StrCat("unknown job ", id.value()));
  const std::optional<uint64_t> number = JobNumber(id.value());
  auto held = archiving_.find(*number);
  if (held == archiving_.end() || held->second.job_id() != id.value()) return std::nullopt;
  v1::JobStatus status = held->second;
  status.set_archived(true);
  return status;
}

absl::StatusOr<v1::JobStatus> Coordinator::LoadArchivedJob(const JobId& id) {
  absl::StatusOr<v1::JobStatus> job = store_->LoadArchived(id.value());
  if (job.ok()) {
    job->set_archived(true);
    return job;
  }
  if (job.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError(absl::StrCat("unknown job ", id.value()));
  }
  return absl::Status(job.status().code(),
                      absl::StrCat("job ", id.value(), " is archived and the job store could not "
                                   "read it: ", job.status().message()));
}

}  // namespace ringleader
