// The pieces of NcclCollective (nccl_collective.h) that outlive a call: the communicator's
// shared state (CommState: the communicator and its first error, so a Work may outlive the
// Collective), the CUDA events its operations reuse (EventPool), how a wait paces its polls
// (Backoff) and the Works an operation returns (NcclWork: done when its event on the
// communication stream completes; while waiting it polls the communicator's asynchronous error
// and its own deadline, and aborts the communicator on either). Internal to the NCCL backend.
//
//   CommState:  LIVE ──Fail(status) / TakeForClose(closed)──> DEAD (the first status, sticky)
//
// Thread-safety: CommState, EventPool and the Works are thread-safe; a Backoff belongs to one
// wait on one thread.
#ifndef RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_WORK_H_
#define RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_WORK_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "worker/collective/collective.h"
#include "worker/collective/gpu/nccl_runtime.h"

namespace ringleader {
namespace gpu {

using Sleeper = std::function<void(absl::Duration)>;

// `s` with `context` in front of its message (OK stays OK).
absl::Status WithContext(const absl::Status& s, const std::string& context);

// The CUDA events of one communicator's operations (each operation takes two: one recorded on
// the compute stream, one marking its completion on the communication stream), reused instead of
// created and destroyed per operation. Re-recording a returned event is safe: a stream that
// waited on it captured its earlier record, and a query sees only the latest one. Shared by the
// Collective and its Works (a Work returns its event when destroyed); the events still in the
// pool are destroyed with it. Never shrinks: it holds as many events as were ever in use at once.
class EventPool {
 public:
  explicit EventPool(std::shared_ptr<NcclRuntime> runtime) : runtime_(std::move(runtime)) {}
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  // A free event, or a new one (cudaEventCreateWithFlags(cudaEventDisableTiming), on the current
  // device: call it after cudaSetDevice).
  absl::StatusOr<cudaEvent_t> Acquire();
  // Gives `event` back for reuse. Its last record may still be pending.
  void Release(cudaEvent_t event);

 private:
  const std::shared_ptr<NcclRuntime> runtime_;
  absl::Mutex mu_;
  std::vector<cudaEvent_t> free_ ABSL_GUARDED_BY(mu_);
};

// How a Work, the enqueue, init and finalize loops wait: clock, sleep and the longest pause.
struct Poller {
  Clock* clock;
  Sleeper sleep;
  absl::Duration interval;  // the longest pause between two polls (NcclOptions::poll_interval)
};

// The pauses between the polls of one wait: first it spins, yielding the thread between polls,
// for up to kSpinTime (and at most kMaxSpins polls, so a clock that stands still in tests cannot
// spin forever); then it sleeps, kFirstSleep first, each sleep twice the last, never more than
// the poller's interval nor past `deadline`. A short operation is thus seen done within a
// poll or two of finishing, a long one costs a few dozen polls instead of one every interval.
class Backoff {
 public:
  static constexpr absl::Duration kSpinTime = absl::Microseconds(50);
  static constexpr int kMaxSpins = 256;
  static constexpr absl::Duration kFirstSleep = absl::Microseconds(5);

  explicit Backoff(const Poller& poller)
      : poller_(poller), started_(poller.clock->Now()) {}

  // Pauses before the next poll. `deadline` (if any) caps a sleep, so the poll that notices it
  // comes on time.
  void Pause(absl::Time deadline = absl::InfiniteFuture());

  // The sleeps so far (0 while it spins).
  int sleeps() const { return sleeps_; }

 private:
  const Poller& poller_;
  const absl::Time started_;
  int spins_ = 0;
  int sleeps_ = 0;
  absl::Duration next_sleep_ = kFirstSleep;
};

// The communicator and the first error, shared by the Collective and its Works.
//
// An abort is over only once the communication stream has drained: ncclCommAbort tells the
// NCCL kernels to stop, but a kernel issued before it may still be running, and writing the
// buffer it was given, when the call returns. Whoever learns of the failure goes on to free
// device memory (the reducer's arenas, freed in the compute stream's order, which never waits
// for the communication stream), so no caller learns of it before the drain: dead_status(),
// Fail() and therefore every failing Work return only once the abort and the drain are over.
class CommState {
 public:
  // `comm_stream` (null: none) is the stream the operations run on, drained after an abort on
  // `device`, polled every poller.interval for at most `drain_timeout`.
  CommState(std::shared_ptr<NcclRuntime> runtime, ncclComm_t comm, int rank, int device,
            cudaStream_t comm_stream, Poller poller, absl::Duration drain_timeout)
      : runtime_(std::move(runtime)),
        rank_(rank),
        device_(device),
        comm_stream_(comm_stream),
        poller_(std::move(poller)),
        drain_timeout_(drain_timeout),
        comm_(comm) {}

  int rank() const { return rank_; }

  // OK while live; the first error once dead (waiting for an abort in progress to be over).
  absl::Status dead_status() const;

  // Makes the state DEAD with `status` unless it already is, aborting the communicator exactly
  // once (outside the lock: ncclCommAbort may take a while) and then draining the communication
  // stream. Returns the status in force (the first one), once the abort and the drain are over
  // (also when another thread runs them). A stream that does not drain within drain_timeout,
  // or a device error while waiting, is added to the status's message ("...; after the abort,
  // the communication stream did not drain ..."): the buffers may still be written then.
  absl::Status Fail(absl::Status status);

  // Ends the communicator's life for a graceful close: from now on the state is DEAD with
  // `closed` (so no operation can reach the communicator) and the caller owns it for
  // ncclCommFinalize / ncclCommDestroy. nullptr if it was already dead (aborted).
  ncclComm_t TakeForClose(absl::Status closed);

  // `dependent` (a side channel's state) fails with this one's first error, aborted right
  // after this communicator and drained before this one's stream is: the compute stream may
  // wait for the dependent's operations, and this one's for the compute stream, so this
  // stream drains only once the dependent's kernels are over. Set once, before any operation.
  void set_dependent(std::shared_ptr<CommState> dependent);

  // Runs `call` on the communicator under the lock (NCCL calls on one communicator must not
  // overlap). Returns the dead status if dead, otherwise the call's Status.
  // `expr` names the call in the error ("ncclAllReduce(...)").
  absl::Status Call(const std::function<ncclResult_t(ncclComm_t)>& call, const char* expr);

  // One ncclCommGetAsyncError. OK with *in_progress telling whether an enqueue is still running;
  // the mapped error if the communicator failed (e.g. UNAVAILABLE when a peer died).
  absl::Status PollAsyncError(bool* in_progress);

 private:
  // Polls the communication stream until it is idle (after an abort): OK, or why it did not.
  absl::Status DrainAfterAbort();

  const std::shared_ptr<NcclRuntime> runtime_;
  const int rank_;
  const int device_;
  const cudaStream_t comm_stream_;
  const Poller poller_;
  const absl::Duration drain_timeout_;
  mutable absl::Mutex mu_;
  ncclComm_t comm_ ABSL_GUARDED_BY(mu_);
  absl::Status dead_ ABSL_GUARDED_BY(mu_);
  // False while an abort (and its drain) runs: until then nobody is told the state is dead.
  bool settled_ ABSL_GUARDED_BY(mu_) = true;
  std::shared_ptr<CommState> dependent_ ABSL_GUARDED_BY(mu_);
};

// A Work that finished when it was created (refused or failed at issue).
class DoneWork : public Work {
 public:
  explicit DoneWork(absl::Status status) : status_(std::move(status)) {}
  absl::Status Wait() override { return status_; }
  bool IsDone() const override { return true; }
  absl::Duration Duration() const override { return absl::ZeroDuration(); }

 private:
  const absl::Status status_;
};

// An operation on the communication stream; done when `done_event` has completed (returned to
// `events` with the Work). Fails, aborting the communicator, when the event reports an error,
// the communicator an asynchronous error, or `timeout` passes since `start` (DEADLINE_EXCEEDED
// naming the rank and `what`). Wait() polls with a Backoff. OrderCompute() makes
// `compute_stream` wait for `done_event` (cudaStreamWaitEvent), without blocking the host.
class NcclWork : public Work {
 public:
  NcclWork(std::shared_ptr<CommState> state, std::shared_ptr<NcclRuntime> runtime,
           std::shared_ptr<EventPool> events, cudaEvent_t done_event, std::string what,
           absl::Time start, absl::Duration timeout, Poller poller, cudaStream_t compute_stream)
      : state_(std::move(state)),
        runtime_(std::move(runtime)),
        events_(std::move(events)),
        done_event_(done_event),
        what_(std::move(what)),
        start_(start),
        timeout_(timeout),
        poller_(std::move(poller)),
        compute_stream_(compute_stream) {}

  ~NcclWork() override { events_->Release(done_event_); }

  absl::Status Wait() override;
  bool IsDone() const override { return const_cast<NcclWork*>(this)->Check().has_value(); }
  absl::Duration Duration() const override;
  // Errors: the communicator's first error once it failed; cudaStreamWaitEvent's (which fails
  // the communicator, like a failed enqueue).
  absl::Status OrderCompute() override;

 private:
  // One look at the operation; its final status once it has one.
  std::optional<absl::Status> Check();
  absl::Status Finish(absl::Status status);

  const std::shared_ptr<CommState> state_;
  const std::shared_ptr<NcclRuntime> runtime_;
  const std::shared_ptr<EventPool> events_;
  const cudaEvent_t done_event_;
  const std::string what_;
  const absl::Time start_;
  const absl::Duration timeout_;
  const Poller poller_;
  const cudaStream_t compute_stream_;

  mutable absl::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status result_ ABSL_GUARDED_BY(mu_);
  absl::Duration duration_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
};

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_WORK_H_
