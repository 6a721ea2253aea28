#include "common/states.h"

#include "absl/strings/str_cat.h"

namespace ringleader {

std::string JobStateName(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_UNSPECIFIED:
      return "UNSPECIFIED";
    case v1::JOB_STATE_QUEUED:
      return "QUEUED";
    case v1::JOB_STATE_RENDEZVOUS:
      return "RENDEZVOUS";
    case v1::JOB_STATE_RUNNING:
      return "RUNNING";
    case v1::JOB_STATE_SUCCEEDED:
      return "SUCCEEDED";
    case v1::JOB_STATE_FAILED:
      return "FAILED";
    case v1::JOB_STATE_CANCELLED:
      return "CANCELLED";
    default:
      return absl::StrCat("UNKNOWN(", static_cast<int>(state), ")");
  }
}

std::string WorkerStateName(v1::WorkerState state) {
  switch (state) {
    case v1::WORKER_STATE_UNSPECIFIED:
      return "UNSPECIFIED";
    case v1::WORKER_STATE_IDLE:
      return "IDLE";
    case v1::WORKER_STATE_BUSY:
      return "BUSY";
    case v1::WORKER_STATE_LOST:
      return "LOST";
    case v1::WORKER_STATE_QUARANTINED:
      return "QUARANTINED";
    default:
      return absl::StrCat("UNKNOWN(", static_cast<int>(state), ")");
  }
}

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

}  // namespace ringleader
