#include "worker/rank/trace_report.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace ringleader {
namespace {

uint64_t Micros(absl::Duration d) {
  return d < absl::ZeroDuration() ? 0 : static_cast<uint64_t>(absl::ToInt64Microseconds(d));
}

v1::CollectiveTraceEntry::State StateOf(TraceRecord::State state) {
  switch (state) {
    case TraceRecord::State::kEnqueued:
      return v1::CollectiveTraceEntry::ENQUEUED;
    case TraceRecord::State::kStarted:
      return v1::CollectiveTraceEntry::STARTED;
    case TraceRecord::State::kCompleted:
      return v1::CollectiveTraceEntry::COMPLETED;
    case TraceRecord::State::kFailed:
      return v1::CollectiveTraceEntry::FAILED;
  }
  return v1::CollectiveTraceEntry::STATE_UNSPECIFIED;  // unreachable
}

}  // namespace

std::vector<v1::CollectiveTraceEntry> TraceToProto(const std::vector<TraceRecord>& records) {
  std::vector<v1::CollectiveTraceEntry> out;
  out.reserve(records.size());
  for (const TraceRecord& r : records) {
    v1::CollectiveTraceEntry e;
    e.set_sequence(r.sequence);
    // CollectiveKind's numbers are v1::CollectiveOp's (collective.h).
    e.set_op(static_cast<v1::CollectiveOp>(static_cast<uint32_t>(r.kind)));
    e.set_dtype(DataTypeName(r.dtype));
    e.set_bytes(r.bytes);
    e.set_bucket(r.bucket);
    e.set_state(StateOf(r.state));
    // 0 means "not yet": a time at the trace's very origin reads as 1 us.
    e.set_enqueued_us(std::max<uint64_t>(1, Micros(r.enqueued)));
    if (r.started) e.set_started_us(std::max<uint64_t>(1, Micros(*r.started)));
    if (r.completed) e.set_completed_us(std::max<uint64_t>(1, Micros(*r.completed)));
    e.set_step(r.step);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace ringleader
