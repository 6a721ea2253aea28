#include "worker/collective/traced_collective.h"

#include <algorithm>
#include <utility>

namespace ringleader {

const char* TraceStateName(TraceRecord::State state) {
  switch (state) {
    case TraceRecord::State::kEnqueued:
      return "enqueued";
    case TraceRecord::State::kStarted:
      return "started";
    case TraceRecord::State::kCompleted:
      return "completed";
    case TraceRecord::State::kFailed:
      return "failed";
  }
  return "?";  // unreachable
}

CollectiveTrace::CollectiveTrace(Clock* clock, size_t capacity)
    : clock_(clock != nullptr ? clock : Clock::Real()),
      capacity_(std::max<size_t>(1, capacity)),
      origin_(clock_->Now()) {}

uint64_t CollectiveTrace::Add(CollectiveKind kind, DataType dtype, uint64_t bytes, int bucket,
                              std::shared_ptr<Work> work) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  Entry entry;
  entry.record.sequence = next_sequence_++;
  entry.record.kind = kind;
  entry.record.dtype = dtype;
  entry.record.bytes = bytes;
  entry.record.bucket = bucket;
  entry.record.step = step_;
  entry.record.enqueued = now - origin_;
  entry.work = std::move(work);
  if (ring_.size() == capacity_) ring_.pop_front();
  ring_.push_back(std::move(entry));
  return ring_.back().record.sequence;
}

void CollectiveTrace::SetStep(uint64_t step) {
  absl::MutexLock lock(&mu_);
  step_ = step;
}

uint64_t CollectiveTrace::issued() const {
  absl::MutexLock lock(&mu_);
  return next_sequence_;
}

uint64_t CollectiveTrace::completed() const {
  absl::MutexLock lock(&mu_);
  for (const Entry& e : ring_) {
    if (!e.work->IsDone()) return e.record.sequence;
  }
  return next_sequence_;
}

TraceRecord CollectiveTrace::Read(const Entry& entry, absl::Time origin) {
  TraceRecord r = entry.record;
  const std::optional<absl::Time> start = entry.work->StartTime();
  if (start.has_value()) r.started = *start - origin;
  if (entry.work->IsDone()) {
    r.state = entry.work->Wait().ok() ? TraceRecord::State::kCompleted
                                      : TraceRecord::State::kFailed;
    r.duration = entry.work->Duration();
    if (r.started.has_value()) r.completed = *r.started + r.duration;
  } else {
    r.state = start.has_value() ? TraceRecord::State::kStarted : TraceRecord::State::kEnqueued;
  }
  return r;
}

std::vector<TraceRecord> CollectiveTrace::Snapshot() const {
  absl::MutexLock lock(&mu_);
  std::vector<TraceRecord> out;
  out.reserve(ring_.size());
  for (const Entry& e : ring_) out.push_back(Read(e, origin_));
  return out;
}

std::vector<absl::Duration> CollectiveTrace::DurationsSince(uint64_t first, size_t max) const {
  absl::MutexLock lock(&mu_);
  std::vector<absl::Duration> out;
  if (ring_.empty() || first < ring_.front().record.sequence) return out;
  for (size_t i = first - ring_.front().record.sequence; i < ring_.size() && out.size() < max;
       ++i) {
    const Work& work = *ring_[i].work;
    if (!work.IsDone()) break;
    out.push_back(work.Duration());
  }
  return out;
}

TracedCollective::TracedCollective(std::unique_ptr<Collective> inner, CollectiveTrace* trace)
    : owned_(std::move(inner)), inner_(owned_.get()), trace_(trace) {
  Collective* side = inner_->side_channel();
  if (side != nullptr) side_.reset(new TracedCollective(side, trace));
}

TracedCollective::TracedCollective(Collective* side, CollectiveTrace* trace)
    : inner_(side), trace_(trace) {}

std::shared_ptr<Work> TracedCollective::Traced(CollectiveKind kind, TensorView view, int bucket,
                                               std::shared_ptr<Work> work) {
  trace_->Add(kind, view.dtype, view.bytes(), bucket, work);
  return work;
}

std::shared_ptr<Work> TracedCollective::AllReduce(TensorView buf, ReduceOp op,
                                                  const CollectiveOptions& opts) {
  return Traced(CollectiveKind::kAllReduce, buf, opts.bucket, inner_->AllReduce(buf, op, opts));
}

std::shared_ptr<Work> TracedCollective::Broadcast(TensorView buf, int root,
                                                  const CollectiveOptions& opts) {
  return Traced(CollectiveKind::kBroadcast, buf, opts.bucket,
                inner_->Broadcast(buf, root, opts));
}

std::shared_ptr<Work> TracedCollective::AllGather(TensorView in, TensorView out,
                                                  const CollectiveOptions& opts) {
  return Traced(CollectiveKind::kAllGather, in, opts.bucket, inner_->AllGather(in, out, opts));
}

std::shared_ptr<Work> TracedCollective::ReduceScatter(TensorView in, TensorView out, ReduceOp op,
                                                      const CollectiveOptions& opts) {
  return Traced(CollectiveKind::kReduceScatter, in, opts.bucket,
                inner_->ReduceScatter(in, out, op, opts));
}

std::shared_ptr<Work> TracedCollective::Barrier(const CollectiveOptions& opts) {
  return Traced(CollectiveKind::kBarrier, TensorView{}, opts.bucket, inner_->Barrier(opts));
}

}  // namespace ringleader
