#include "coordinator/job_store.h"

namespace ringleader {

absl::Status InMemoryJobStore::Save(const v1::JobStatus& job) {
  absl::MutexLock lock(&mu_);
  ++save_count_;
  auto it = jobs_.find(job.job_id());
  if (it != jobs_.end() && it->second.version() > job.version()) return absl::OkStatus();
  jobs_[job.job_id()] = job;
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
