#include "worker/rank/failure_context.h"

namespace ringleader {

v1::RankFailure FailureContext(const std::vector<TraceRecord>& trace, uint64_t step) {
  v1::RankFailure context;
  context.set_step(step);
  for (const TraceRecord& record : trace) {
    if (record.state != TraceRecord::State::kFailed) continue;
    context.set_has_collective(true);
    context.set_collective_sequence(record.sequence);
    context.set_bucket(record.bucket);
    break;
  }
  return context;
}

}  // namespace ringleader
