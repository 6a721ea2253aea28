// Where the coordinator keeps job records beyond its own memory.
//
// The core saves a job's full status on every state transition and when an alarm is raised.
// InMemoryJobStore (tests, and a coordinator without --state_dir) and SqliteJobStore
// (sqlite_job_store.h: durable; a restarted coordinator loses no job) implement it.
#ifndef RINGLEADER_COORDINATOR_JOB_STORE_H_
#define RINGLEADER_COORDINATOR_JOB_STORE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// Implementations are thread-safe and must not call back into the coordinator. Save is called
// after the coordinator's lock is released (before the call that changed the job returns), so
// saves of one job may arrive out of order: keep the highest JobStatus.version.
class JobStore {
 public:
  virtual ~JobStore() = default;
  // Inserts or replaces the record of `job.job_id()`. Errors: UNAVAILABLE (storage failed;
  // the coordinator logs it and goes on in memory).
  virtual absl::Status Save(const v1::JobStatus& job) = 0;
  // Every saved job, in job-id order. Errors: UNAVAILABLE, DATA_LOSS (unreadable record).
  virtual absl::StatusOr<std::vector<v1::JobStatus>> LoadAll() const = 0;
};

// Keeps the latest saved status of each job in memory. Thread-safe.
class InMemoryJobStore : public JobStore {
 public:
  absl::Status Save(const v1::JobStatus& job) override;
  absl::StatusOr<std::vector<v1::JobStatus>> LoadAll() const override;
  // How many times Save was called (tests check that every transition was saved).
  int save_count() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, v1::JobStatus> jobs_ ABSL_GUARDED_BY(mu_);
  int save_count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_JOB_STORE_H_
