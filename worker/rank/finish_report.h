// Delivering a rank's FinishRank through a coordinator outage: the last word of a rank process
// (the built-in trainer's and a command job's launcher alike).
#ifndef RINGLEADER_WORKER_RANK_FINISH_REPORT_H_
#define RINGLEADER_WORKER_RANK_FINISH_REPORT_H_

#include <functional>

#include "absl/time/time.h"
#include "proto/ringleader.pb.h"
#include "worker/coordinator_client/coordinator_client.h"

namespace ringleader {

// Sends `request`; while the answer is transient (UNAVAILABLE, DEADLINE_EXCEEDED: the client's
// own retries ran out) tries again every `pause` for up to `grace` (a coordinator restarting
// within its grace still gets the report). `sleep` waits between tries (empty =
// absl::SleepFor). Returns true when nobody needs to report for this rank any more: the call
// went through, or the coordinator refused it because the attempt is over
// (FAILED_PRECONDITION, NOT_FOUND). Logs a failure to stderr.
bool DeliverFinishRank(CoordinatorClient* client, const v1::FinishRankRequest& request,
                       absl::Duration grace, absl::Duration pause,
                       const std::function<void(absl::Duration)>& sleep = {});

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_FINISH_REPORT_H_
