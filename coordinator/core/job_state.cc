#include "coordinator/core/job_state.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ringleader {

bool IsLegalTransition(v1::JobState from, v1::JobState to) {
  switch (from) {
    case v1::JOB_STATE_UNSPECIFIED:
      return to == v1::JOB_STATE_QUEUED;
    case v1::JOB_STATE_QUEUED:
      return to == v1::JOB_STATE_RENDEZVOUS || to == v1::JOB_STATE_CANCELLED;
    case v1::JOB_STATE_RENDEZVOUS:
      return to == v1::JOB_STATE_RUNNING || to == v1::JOB_STATE_FAILED ||
             to == v1::JOB_STATE_CANCELLED || to == v1::JOB_STATE_QUEUED;
    case v1::JOB_STATE_RUNNING:
      return to == v1::JOB_STATE_SUCCEEDED || to == v1::JOB_STATE_FAILED ||
             to == v1::JOB_STATE_CANCELLED || to == v1::JOB_STATE_QUEUED;
    default:
      return false;  // terminal states have no way out
  }
}

absl::Status RecordTransition(v1::JobStatus* job, v1::JobState to, absl::Time now,
                              std::string reason) {
  if (!IsLegalTransition(job->state(), to)) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job->job_id(), " cannot go from ",
                                                      JobStateName(job->state()), " to ",
                                                      JobStateName(to)));
  }
  job->set_state(to);
  v1::StateTransition* transition = job->add_transitions();
  transition->set_state(to);
  transition->set_time_unix_ms(absl::ToUnixMillis(now));
  transition->set_reason(std::move(reason));
  return absl::OkStatus();
}

std::string LastReason(const v1::JobStatus& job) {
  if (job.transitions().empty()) return "";
  return job.transitions(job.transitions_size() - 1).reason();
}

bool AttemptOver(const v1::JobStatus& job) {
  return IsTerminal(job.state()) || job.state() == v1::JOB_STATE_QUEUED;
}

}  // namespace ringleader
