// What a rank's trainer knows about a failure beyond its kind: the step it ran and the
// collective that failed (from its collective trace), for FinishRankRequest.failure.
#ifndef RINGLEADER_WORKER_RANK_FAILURE_CONTEXT_H_
#define RINGLEADER_WORKER_RANK_FAILURE_CONTEXT_H_

#include <cstdint>
#include <vector>

#include "proto/job_status.pb.h"
#include "worker/collective/traced_collective.h"

namespace ringleader {

// A RankFailure with only `step` (0 = before the first step) and, when `trace` (a
// CollectiveTrace snapshot, oldest first) holds a failed collective, the first one's sequence
// and bucket; kind unset. Merged into a failure with AddRankFailure (common/rank_failure.h), it
// fills what the detection site did not know. A pure function: safe from any thread.
v1::RankFailure FailureContext(const std::vector<TraceRecord>& trace, uint64_t step);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_FAILURE_CONTEXT_H_
