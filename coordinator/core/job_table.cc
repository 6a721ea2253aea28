#include "coordinator/core/job_table.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/core/job_state.h"
#include "coordinator/store/job_store.h"

namespace ringleader {

JobRecord* JobTable::Add(v1::JobSpec spec, std::string fingerprint, absl::Time now,
                         bool enqueue) {
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
  if (enqueue) queue_.push_back(id);
  return &job;
}

absl::StatusOr<JobRecord*> JobTable::Restore(v1::JobStatus status) {
  const std::optional<uint64_t> number = JobNumber(status.job_id());
  if (!number.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("saved job id '", status.job_id(), "' is not of the form job-N"));
  }
  const uint64_t sequence = *number;
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
  if (IsTerminal(job.status.state())) {
    const int transitions = job.status.transitions_size();
    MarkEnded(&job, transitions == 0 ? absl::InfinitePast()
                                     : absl::FromUnixMillis(job.status.transitions(transitions - 1)
                                                                .time_unix_ms()));
  }
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

std::vector<JobRecord*> JobTable::After(uint64_t after_number, size_t limit) {
  std::vector<JobRecord*> page;
  for (auto it = by_sequence_.upper_bound(after_number);
       it != by_sequence_.end() && page.size() < limit; ++it) {
    page.push_back(&it->second);
  }
  return page;
}

void JobTable::MarkEnded(JobRecord* job, absl::Time when) {
  if (job->ended != absl::InfiniteFuture()) return;
  auto it = sequence_by_id_.find(JobId(job->status.job_id()));
  if (it == sequence_by_id_.end()) return;
  job->ended = when;
  ended_.emplace(when, it->second);
}

JobRecord* JobTable::FirstEnded() {
  if (ended_.empty()) return nullptr;
  return &by_sequence_.at(ended_.begin()->second);
}

void JobTable::Remove(const JobId& id) {
  auto it = sequence_by_id_.find(id);
  if (it == sequence_by_id_.end()) return;
  const uint64_t sequence = it->second;
  auto record = by_sequence_.find(sequence);
  if (record->second.ended != absl::InfiniteFuture()) {
    ended_.erase({record->second.ended, sequence});
  }
  Dequeue(id);
  by_sequence_.erase(record);
  sequence_by_id_.erase(it);
}

bool JobTable::Removed(const JobId& id) const {
  const std::optional<uint64_t> number = JobNumber(id.value());
  return number.has_value() && *number < next_sequence_ && by_sequence_.count(*number) == 0;
}

void JobTable::ReserveThrough(uint64_t number) {
  if (number != std::numeric_limits<uint64_t>::max()) {
    next_sequence_ = std::max(next_sequence_, number + 1);
  }
}

void JobTable::Requeue(const JobId& id) {
  Dequeue(id);
  queue_.push_front(id);
}

void JobTable::Dequeue(const JobId& id) {
  queue_.erase(std::remove(queue_.begin(), queue_.end(), id), queue_.end());
}

}  // namespace ringleader
