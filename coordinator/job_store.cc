#include "coordinator/job_store.h"

namespace ringleader {

absl::Status InMemoryJobStore::Save(const v1::JobStatus& job) {
  absl::MutexLock lock(&mu_);
  jobs_[job.job_id()] = job;
  ++save_count_;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::JobStatus>> InMemoryJobStore::LoadAll() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::JobStatus> all;
  all.reserve(jobs_.size());
  for (const auto& [id, job] : jobs_) all.push_back(job);
  return all;
}

int InMemoryJobStore::save_count() const {
  absl::MutexLock lock(&mu_);
  return save_count_;
}

}  // namespace ringleader
