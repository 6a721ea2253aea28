#include "coordinator/store/job_store.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ringleader {

std::optional<uint64_t> JobNumber(absl::string_view job_id) {
  if (!absl::ConsumePrefix(&job_id, "job-") || job_id.empty()) return std::nullopt;
  for (char c : job_id) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  uint64_t number = 0;
  if (!absl::SimpleAtoi(job_id, &number) || number == 0) return std::nullopt;
  return number;
}

absl::Status InMemoryJobStore::Save(const v1::JobStatus& job) {
  absl::MutexLock lock(&mu_);
  ++save_count_;
  if (std::optional<uint64_t> number = JobNumber(job.job_id());
      number.has_value() && archived_.count(*number) > 0) {
    return absl::OkStatus();  // archived meanwhile: its archived record is the final one
  }
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

absl::Status InMemoryJobStore::Archive(const v1::JobStatus& final_status) {
  const std::optional<uint64_t> number = JobNumber(final_status.job_id());
  if (!number.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot archive job '", final_status.job_id(), "': not of the form job-N"));
  }
  absl::MutexLock lock(&mu_);
  jobs_.erase(final_status.job_id());
  auto it = archived_.find(*number);
  if (it == archived_.end() || it->second.version() <= final_status.version()) {
    archived_[*number] = final_status;
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::JobStatus> InMemoryJobStore::LoadArchived(const std::string& job_id) const {
  const std::optional<uint64_t> number = JobNumber(job_id);
  absl::MutexLock lock(&mu_);
  auto it = number.has_value() ? archived_.find(*number) : archived_.end();
  if (it == archived_.end() || it->second.job_id() != job_id) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " is not archived"));
  }
  return it->second;
}

absl::StatusOr<std::vector<v1::JobStatus>> InMemoryJobStore::ListArchived(uint64_t after_number,
                                                                          size_t limit) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::JobStatus> page;
  for (auto it = archived_.upper_bound(after_number);
       it != archived_.end() && page.size() < limit; ++it) {
    page.push_back(it->second);
  }
  return page;
}

absl::StatusOr<uint64_t> InMemoryJobStore::HighestArchivedNumber() const {
  absl::MutexLock lock(&mu_);
  return archived_.empty() ? 0 : archived_.rbegin()->first;
}

int InMemoryJobStore::save_count() const {
  absl::MutexLock lock(&mu_);
  return save_count_;
}

}  // namespace ringleader
