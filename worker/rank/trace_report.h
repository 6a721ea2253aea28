// A rank's collective trace as the coordinator reads it (proto/job_status.proto:
// CollectiveTraceEntry).
#ifndef RINGLEADER_WORKER_RANK_TRACE_REPORT_H_
#define RINGLEADER_WORKER_RANK_TRACE_REPORT_H_

#include <vector>

#include "proto/ringleader.pb.h"
#include "worker/collective/traced_collective.h"

namespace ringleader {

// The ring's records, oldest first, as entries (times in microseconds since the trace began).
std::vector<v1::CollectiveTraceEntry> TraceToProto(const std::vector<TraceRecord>& records);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_TRACE_REPORT_H_
