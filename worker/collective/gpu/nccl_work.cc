#include "worker/collective/gpu/nccl_work.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/gpu/cuda_status.h"
#include "common/rank_failure.h"
#include "common/status_macros.h"

namespace ringleader {
namespace gpu {

absl::Status WithContext(const absl::Status& s, const std::string& context) {
  return WithPrefix(s, context);
}

absl::Status CommState::dead_status() const {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&settled_));
  return dead_;
}

void CommState::set_dependent(std::shared_ptr<CommState> dependent) {
  absl::MutexLock lock(&mu_);
  dependent_ = std::move(dependent);
}

absl::Status CommState::Fail(absl::Status status) {
  ncclComm_t to_abort = nullptr;
  std::shared_ptr<CommState> dependent;
  absl::Status cause;
  {
    absl::MutexLock lock(&mu_);
    if (!dead_.ok()) {
      mu_.Await(absl::Condition(&settled_));  // another thread's abort: over before we say so
      return dead_;
    }
    dead_ = std::move(status);
    cause = dead_;
    to_abort = comm_;
    comm_ = nullptr;
    dependent = dependent_;
    settled_ = to_abort == nullptr;
  }
  if (to_abort == nullptr) return dead_status();
  // Outside the lock: nobody can reach the communicator any more (comm_ is null), and
  // ncclCommAbort and the drain may take a while; other threads may still poll the lock (and
  // wait for settled_).
  runtime_->CommAbort(to_abort);
  // The dependent's kernels may hold up the compute stream, which this stream may wait for:
  // they end first (the dependent never calls back into this state).
  if (dependent != nullptr) dependent->Fail(cause).IgnoreError();  // its Works report it
  const absl::Status drained = DrainAfterAbort();
  absl::MutexLock lock(&mu_);
  if (!drained.ok()) {
    dead_ = WithMessage(dead_, absl::StrCat(dead_.message(), "; ", drained.message()));
  }
  settled_ = true;
  return dead_;
}

absl::Status CommState::DrainAfterAbort() {
  if (comm_stream_ == nullptr) return absl::OkStatus();
  const cudaError_t set = runtime_->SetDevice(device_);
  if (set != cudaSuccess) {
    return WithContext(CudaStatus(set, "cudaSetDevice(device)", __FILE__, __LINE__),
                       "after the abort, waiting for the communication stream: ");
  }
  const absl::Time deadline = poller_.clock->Now() + drain_timeout_;
  while (true) {
    const cudaError_t query = runtime_->StreamQuery(comm_stream_);
    if (query == cudaSuccess) return absl::OkStatus();
    if (query != cudaErrorNotReady) {
      return WithContext(CudaStatus(query, "cudaStreamQuery(comm_stream)", __FILE__, __LINE__),
                         "after the abort, waiting for the communication stream: ");
    }
    if (poller_.clock->Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "after the abort, the communication stream did not drain within ",
          absl::FormatDuration(drain_timeout_),
          ": NCCL kernels may still write the buffers of this collective's operations"));
    }
    poller_.sleep(poller_.interval);
  }
}

ncclComm_t CommState::TakeForClose(absl::Status closed) {
  absl::MutexLock lock(&mu_);
  if (!dead_.ok()) return nullptr;
  dead_ = std::move(closed);
  ncclComm_t comm = comm_;
  comm_ = nullptr;
  return comm;
}

absl::Status CommState::Call(const std::function<ncclResult_t(ncclComm_t)>& call,
                             const char* expr) {
  absl::MutexLock lock(&mu_);
  if (!dead_.ok()) return dead_;
  const ncclResult_t r = call(comm_);
  return NcclStatus(r, expr, __FILE__, __LINE__, comm_);
}

absl::Status CommState::PollAsyncError(bool* in_progress) {
  absl::MutexLock lock(&mu_);
  if (!dead_.ok()) return dead_;
  ncclResult_t async = ncclSuccess;
  const ncclResult_t r = runtime_->CommGetAsyncError(comm_, &async);
  if (r != ncclSuccess) {
    return NcclStatus(r, "ncclCommGetAsyncError(comm, &async)", __FILE__, __LINE__, comm_);
  }
  *in_progress = async == ncclInProgress;
  return NcclStatus(async, "ncclCommGetAsyncError (asynchronous error)", __FILE__, __LINE__,
                    comm_);
}

EventPool::~EventPool() {
  absl::MutexLock lock(&mu_);
  for (cudaEvent_t event : free_) runtime_->EventDestroy(event);
}

absl::StatusOr<cudaEvent_t> EventPool::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      cudaEvent_t event = free_.back();
      free_.pop_back();
      return event;
    }
  }
  cudaEvent_t event = nullptr;
  RL_CUDA_RETURN_IF_ERROR(runtime_->EventCreate(&event));
  return event;
}

void EventPool::Release(cudaEvent_t event) {
  if (event == nullptr) return;
  absl::MutexLock lock(&mu_);
  free_.push_back(event);
}

void Backoff::Pause(absl::Time deadline) {
  const absl::Time now = poller_.clock->Now();
  if (spins_ < kMaxSpins && now - started_ < kSpinTime) {
    ++spins_;
    std::this_thread::yield();
    return;
  }
  absl::Duration pause = std::min(next_sleep_, poller_.interval);
  if (deadline - now < pause) pause = std::max(deadline - now, absl::ZeroDuration());
  next_sleep_ = std::min(next_sleep_ * 2, poller_.interval);
  ++sleeps_;
  if (pause > absl::ZeroDuration()) {
    poller_.sleep(pause);
  } else {
    std::this_thread::yield();  // the deadline is here: the next poll reports it
  }
}

absl::Status NcclWork::Wait() {
  Backoff backoff(poller_);
  while (true) {
    std::optional<absl::Status> result = Check();
    if (result.has_value()) return *result;
    backoff.Pause(start_ + timeout_);
  }
}

absl::Status NcclWork::OrderCompute() {
  RETURN_IF_ERROR(state_->dead_status());
  const cudaError_t waited = runtime_->StreamWaitEvent(compute_stream_, done_event_);
  if (waited == cudaSuccess) return absl::OkStatus();
  return state_->Fail(WithContext(
      CudaStatus(waited, "cudaStreamWaitEvent(compute_stream, done_event)", __FILE__, __LINE__),
      absl::StrCat("rank ", state_->rank(), ": ", what_, ": ")));
}

absl::Duration NcclWork::Duration() const {
  absl::MutexLock lock(&mu_);
  return duration_;
}

std::optional<absl::Status> NcclWork::Check() {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return result_;
  }
  // A dead communicator first: after ncclCommAbort the event completes with garbage data.
  absl::Status dead = state_->dead_status();
  if (!dead.ok()) return Finish(dead);
  const cudaError_t query = runtime_->EventQuery(done_event_);
  if (query == cudaSuccess) return Finish(absl::OkStatus());
  if (query != cudaErrorNotReady) {
    return Finish(state_->Fail(
        WithContext(CudaStatus(query, "cudaEventQuery(done_event)", __FILE__, __LINE__),
                    absl::StrCat("rank ", state_->rank(), ": ", what_, ": "))));
  }
  bool in_progress = false;
  absl::Status async = state_->PollAsyncError(&in_progress);
  if (!async.ok()) {
    return Finish(state_->Fail(
        WithContext(async, absl::StrCat("rank ", state_->rank(), ": ", what_, ": "))));
  }
  if (poller_.clock->Now() - start_ >= timeout_) {
    return Finish(state_->Fail(WithFailureKind(
        absl::DeadlineExceededError(absl::StrCat(
            "rank ", state_->rank(), ": NCCL ", what_, " did not finish within ",
            absl::FormatDuration(timeout_),
            "; communicator aborted (a peer is slow, hung or dead, or the ranks issued "
            "different collectives)")),
        v1::RankFailure::PEER_TIMED_OUT)));
  }
  return std::nullopt;
}

absl::Status NcclWork::Finish(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (!finished_) {
    finished_ = true;
    result_ = std::move(status);
    duration_ = poller_.clock->Now() - start_;
  }
  return result_;
}

}  // namespace gpu
}  // namespace ringleader
