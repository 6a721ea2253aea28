// The jobs whose latest JobStore::Save failed (etcd without quorum, a full disk), kept so that
// the coordinator saves them again once the store answers, and so that a call whose change was
// not committed does not answer OK (never a false success).
//
// Thread-safe (its own lock: the coordinator records outcomes after releasing its own).
#ifndef RINGLEADER_COORDINATOR_CORE_UNSAVED_JOBS_H_
#define RINGLEADER_COORDINATOR_CORE_UNSAVED_JOBS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace ringleader {

class UnsavedJobs {
 public:
  // A save of `job_id` failed with `error`.
  void Failed(const std::string& job_id, absl::Status error) {
    absl::MutexLock lock(&mu_);
    unsaved_[job_id] = std::move(error);
  }
  // A save of `job_id` landed (it holds the job's latest status at the time it was taken).
  void Saved(const std::string& job_id) {
    absl::MutexLock lock(&mu_);
    unsaved_.erase(job_id);
  }
  // Why the last save of `job_id` failed; nullopt when it is not unsaved.
  std::optional<absl::Status> ErrorOf(const std::string& job_id) const {
    absl::MutexLock lock(&mu_);
    auto it = unsaved_.find(job_id);
    if (it == unsaved_.end()) return std::nullopt;
    return it->second;
  }
  // Empties the set, returning its ids (for a retry, which records its outcomes again).
  std::vector<std::string> Take() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> ids;
    for (const auto& [id, error] : unsaved_) ids.push_back(id);
    unsaved_.clear();
    return ids;
  }
  size_t size() const {
    absl::MutexLock lock(&mu_);
    return unsaved_.size();
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, absl::Status> unsaved_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_UNSAVED_JOBS_H_
