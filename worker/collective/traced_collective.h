// A rank's collective trace: what its last collectives were and where each one is.
//
// TracedCollective wraps the rank's Collective (any backend): every operation gets the next
// sequence number and an entry in a CollectiveTrace ring (kind, dtype, bytes, bucket, the step
// it was issued in, when it was enqueued, and its Work, whose StartTime / IsDone / Duration say
// the rest). Two readers:
//   - hang forensics (docs/diagnosis.md): the coordinator compares the rings of every rank and
//     names the first collective the ranks disagree on and who never entered it;
//   - the step judge's arrival evidence: how long each of a step's collectives ran on this rank
//     (the rank that arrived last waits least).
//
// An entry's state:  ENQUEUED --the backend starts it--> STARTED --done--> COMPLETED | FAILED
// (a backend that cannot tell when it starts, NCCL, goes from ENQUEUED straight to done).
//
// Memory: `capacity` entries (256 by default), each holding its Work until evicted.
// Thread-safety: every method may be called from any thread.
#ifndef RINGLEADER_WORKER_COLLECTIVE_TRACED_COLLECTIVE_H_
#define RINGLEADER_WORKER_COLLECTIVE_TRACED_COLLECTIVE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "worker/collective/collective.h"

namespace ringleader {

// One entry of the ring as read at one moment.
struct TraceRecord {
  enum class State { kEnqueued, kStarted, kCompleted, kFailed };
  uint64_t sequence = 0;  // 0-based, per rank: the same collective has the same number on every
                          // rank of a correct job
  CollectiveKind kind = CollectiveKind::kNone;
  DataType dtype = DataType::kFloat32;
  uint64_t bytes = 0;
  int bucket = -1;
  uint64_t step = 0;  // the step it was issued in (0 = before the first)
  State state = State::kEnqueued;
  // Since the trace's origin (its construction), on its clock.
  absl::Duration enqueued;
  std::optional<absl::Duration> started;
  std::optional<absl::Duration> completed;  // started + how long it ran, when both are known
  absl::Duration duration;                  // how long it ran (zero until done)
};

const char* TraceStateName(TraceRecord::State state);

class CollectiveTrace {
 public:
  static constexpr size_t kDefaultCapacity = 256;

  // `clock` (not owned; nullptr = Clock::Real()) must be the backend's: an entry's start time
  // is read from its Work. `capacity` >= 1.
  explicit CollectiveTrace(Clock* clock = nullptr, size_t capacity = kDefaultCapacity);
  CollectiveTrace(const CollectiveTrace&) = delete;
  CollectiveTrace& operator=(const CollectiveTrace&) = delete;

  // Records an operation just issued; returns its sequence number. `work` must not be null.
  uint64_t Add(CollectiveKind kind, DataType dtype, uint64_t bytes, int bucket,
               std::shared_ptr<Work> work);
  // Operations issued from now on belong to `step`.
  void SetStep(uint64_t step);

  // Operations issued so far.
  uint64_t issued() const;
  // Operations done, counted in order: the sequence number of the oldest one not done yet
  // (issued() when every one is done). An entry evicted from the ring counts as done.
  uint64_t completed() const;
  // The ring, oldest first.
  std::vector<TraceRecord> Snapshot() const;
  // How long each operation from sequence `first` on ran, in order, stopping at the first one
  // not done (or evicted: `first` older than the ring) and after `max` of them.
  std::vector<absl::Duration> DurationsSince(uint64_t first, size_t max) const;

 private:
  struct Entry {
    TraceRecord record;  // state, started, completed, duration filled when read
    std::shared_ptr<Work> work;
  };
  static TraceRecord Read(const Entry& entry, absl::Time origin);

  Clock* const clock_;
  const size_t capacity_;
  const absl::Time origin_;
  mutable absl::Mutex mu_;
  std::deque<Entry> ring_ ABSL_GUARDED_BY(mu_);
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t step_ ABSL_GUARDED_BY(mu_) = 0;
};

// Forwards every call to `inner` and records each operation in `trace` (not owned; must outlive
// this). Refused operations (a bad argument) are recorded too: every rank issues them alike.
// The backend's side channel, if any, is traced into the same ring: its operations take the
// next sequence numbers in issue order, like this one's.
class TracedCollective : public Collective {
 public:
  TracedCollective(std::unique_ptr<Collective> inner, CollectiveTrace* trace);

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string backend_name() const override { return inner_->backend_name(); }
  MemoryKind memory_kind() const override { return inner_->memory_kind(); }

  std::shared_ptr<Work> AllReduce(TensorView buf, ReduceOp op,
                                  const CollectiveOptions& opts = {}) override;
  std::shared_ptr<Work> Broadcast(TensorView buf, int root,
                                  const CollectiveOptions& opts = {}) override;
  std::shared_ptr<Work> AllGather(TensorView in, TensorView out,
                                  const CollectiveOptions& opts = {}) override;
  std::shared_ptr<Work> ReduceScatter(TensorView in, TensorView out, ReduceOp op,
                                      const CollectiveOptions& opts = {}) override;
  std::shared_ptr<Work> Barrier(const CollectiveOptions& opts = {}) override;
  absl::StatusOr<std::shared_ptr<const ComputeMark>> MarkCompute() override {
    return inner_->MarkCompute();
  }
  Collective* side_channel() override { return side_.get(); }
  void Abort(const absl::Status& reason) override { inner_->Abort(reason); }
  // Its closing barrier is the backend's own: not traced.
  absl::Status Close(absl::Duration timeout) override { return inner_->Close(timeout); }

 private:
  // The backend's side channel, owned by the backend.
  TracedCollective(Collective* side, CollectiveTrace* trace);

  std::shared_ptr<Work> Traced(CollectiveKind kind, TensorView view, int bucket,
                               std::shared_ptr<Work> work);

  const std::unique_ptr<Collective> owned_;  // null for a side channel
  Collective* const inner_;
  CollectiveTrace* const trace_;
  std::unique_ptr<TracedCollective> side_;  // inner_'s side channel, traced; null if none
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_TRACED_COLLECTIVE_H_
