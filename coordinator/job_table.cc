#include "coordinator/job_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/job_state.h"

namespace ringleader {

JobRecord* JobTable::Add(v1::JobSpec spec, std::string fingerprint, absl::Time now) {
  const uint64_t sequence = next_sequence_++;
  JobRecord& job = by_sequence_[sequence];
  const JobId id(absl::StrFormat("job-%06d", sequence));
  job.status.set_job_id(id.value());
  *job.status.mutable_spec() = std::move(spec);
  job.status.set_spec_fingerprint(std::move(fingerprint));
  job.status.set_submit_time_unix_ms(absl::ToUnixMillis(now));
  job.status.set_version(1);
  // UNSPECIFIED -> QUEUED is always legal.
  RecordTransition(&job.status, v1::JOB_STATE_QUEUED, now, "submitted").IgnoreError();
  sequence_by_id_[id] = sequence;
  queue_.push_back(id);
  return &job;
}

absl::StatusOr<JobRecord*> JobTable::Restore(v1::JobStatus status) {
  uint64_t sequence = 0;
  absl::string_view digits = status.job_id();
  if (!absl::ConsumePrefix(&digits, "job-") || !absl::SimpleAtoi(digits, &sequence) ||
      sequence == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("saved job id '", status.job_id(), "' is not of the form job-N"));
  }
  const JobId id(status.job_id());
  if (sequence_by_id_.count(id) > 0 || by_sequence_.count(sequence) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("job ", id.value(), " restored twice"));
  }
  const bool queued = status.state() == v1::JOB_STATE_QUEUED;
  JobRecord& job = by_sequence_[sequence];
  job.status = std::move(status);
  sequence_by_id_[id] = sequence;
  if (queued) queue_.push_back(id);
  next_sequence_ = std::max(next_sequence_, sequence + 1);
  return &job;
}

JobRecord* JobTable::Find(const JobId& id) {
  auto it = sequence_by_id_.find(id);
  return it == sequence_by_id_.end() ? nullptr : &by_sequence_.at(it->second);
}

std::vector<JobRecord*> JobTable::All() {
  std::vector<JobRecord*> all;
  all.reserve(by_sequence_.size());
  for (auto& [sequence, job] : by_sequence_) all.push_back(&job);
  return all;
}

void JobTable::Requeue(const JobId& id) {
  Dequeue(id);
  queue_.push_front(id);
}

void JobTable::Dequeue(const JobId& id) {
  queue_.erase(std::remove(queue_.begin(), queue_.end(), id), queue_.end());
}

}  // namespace ringleader
