// Where the coordinator keeps job records beyond its own memory.
//
// The core saves a job's full status on every state transition and when an alarm is raised.
// InMemoryJobStore (tests, and a coordinator without --state_dir) and SqliteJobStore
// (sqlite_job_store.h: durable; a restarted coordinator loses no job) implement it.
//
// Two kinds of record:
//   saved     the jobs the coordinator holds in memory (queued, running, and the most recently
//             finished ones): Save writes them, LoadAll reads them back at start-up;
//   archived  finished jobs the coordinator dropped from memory (beyond
//             CoordinatorOptions::max_finished_jobs_kept): Archive moves a job here with its
//             final status; LoadArchived and ListArchived read them (GetJob, ListJobs with
//             include_archived); LoadAll never returns them.
// A job is in one of the two at most; ids are compared by their number (JobNumber).
#ifndef RINGLEADER_COORDINATOR_STORE_JOB_STORE_H_
#define RINGLEADER_COORDINATOR_STORE_JOB_STORE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// The number N of a job id "job-N" (leading zeros allowed; "job-000042" → 42); nullopt for
// anything else, and for N = 0.
std::optional<uint64_t> JobNumber(absl::string_view job_id);

// Implementations are thread-safe and must not call back into the coordinator. Save and Archive
// are called after the coordinator's lock is released (before the call that changed the job
// returns), so calls about one job may arrive out of order: keep the highest JobStatus.version,
// and never bring an archived job back among the saved ones (a Save arriving after the job's
// Archive changes nothing).
class JobStore {
 public:
  virtual ~JobStore() = default;
  // Inserts or replaces the record of `job.job_id()` (no-op for an archived job). Errors:
  // UNAVAILABLE (storage failed; the coordinator logs it and goes on in memory).
  virtual absl::Status Save(const v1::JobStatus& job) = 0;
  // Every saved job (archived ones not included), in job-number order. Errors: UNAVAILABLE,
  // DATA_LOSS (unreadable record).
  virtual absl::StatusOr<std::vector<v1::JobStatus>> LoadAll() const = 0;

  // Moves job `final_status.job_id()` from the saved jobs to the archive, with `final_status`
  // as its record (the coordinator's final status of the job: an earlier Save may have failed
  // or not landed yet). Archiving it again keeps the higher version. Errors: INVALID_ARGUMENT
  // (an id without a JobNumber), UNAVAILABLE (storage failed; the coordinator logs it and keeps
  // the final status in memory).
  virtual absl::Status Archive(const v1::JobStatus& final_status) = 0;
  // The archived record of `job_id`. Errors: NOT_FOUND (not archived: unknown, or still among
  // the saved jobs), UNAVAILABLE, DATA_LOSS (unreadable record).
  virtual absl::StatusOr<v1::JobStatus> LoadArchived(const std::string& job_id) const = 0;
  // At most `limit` archived jobs whose JobNumber is above `after_number` (0 = from the first),
  // in job-number order (one page of ListJobs). Errors: UNAVAILABLE, DATA_LOSS.
  virtual absl::StatusOr<std::vector<v1::JobStatus>> ListArchived(uint64_t after_number,
                                                                  size_t limit) const = 0;
  // The highest JobNumber archived (0 = none): a restarted coordinator hands out ids above it
  // too, so ids never repeat even when the newest jobs were archived. Errors: UNAVAILABLE.
  virtual absl::StatusOr<uint64_t> HighestArchivedNumber() const = 0;
};

// Keeps the latest saved status of each job, and the archived ones, in memory. Thread-safe.
class InMemoryJobStore : public JobStore {
 public:
  absl::Status Save(const v1::JobStatus& job) override;
  absl::StatusOr<std::vector<v1::JobStatus>> LoadAll() const override;
  absl::Status Archive(const v1::JobStatus& final_status) override;
  absl::StatusOr<v1::JobStatus> LoadArchived(const std::string& job_id) const override;
  absl::StatusOr<std::vector<v1::JobStatus>> ListArchived(uint64_t after_number,
                                                          size_t limit) const override;
  absl::StatusOr<uint64_t> HighestArchivedNumber() const override;
  // How many times Save was called (tests check that every transition was saved).
  int save_count() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, v1::JobStatus> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, v1::JobStatus> archived_ ABSL_GUARDED_BY(mu_);  // by JobNumber
  int save_count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_STORE_JOB_STORE_H_
