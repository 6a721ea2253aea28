#include "worker/collective/gpu/nccl_collective.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/gpu/cuda_status.h"
#include "common/rank_failure.h"
#include "common/status_macros.h"
#include "worker/collective/gpu/nccl_unique_id.h"
#include "worker/collective/gpu/nccl_work.h"

namespace ringleader {
namespace gpu {
namespace {

absl::StatusOr<ncclDataType_t> ToNcclType(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kBFloat16:
      return ncclBfloat16;
    case DataType::kUInt8:
      return ncclUint8;
  }
  return absl::InvalidArgumentError("unknown data type");
}

absl::StatusOr<ncclRedOp_t> ToNcclOp(ReduceOp op, DataType t) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kAvg:
      if (t == DataType::kUInt8) {
        return absl::InvalidArgumentError(
            "reduce op avg on uint8 is not supported: use sum or max (bool buffers: max)");
      }
      return ncclAvg;
  }
  return absl::InvalidArgumentError("unknown reduce op");
}

// Polls a non-blocking communicator's init (or split) until it is ready, failed, or `deadline`
// passes (below).
absl::Status WaitForInit(NcclRuntime& runtime, ncclComm_t comm, absl::Time deadline,
                         const Poller& poller, absl::Duration init_timeout);

// A CUDA event recorded on the compute stream (NcclCollective::MarkCompute); back to its pool
// when the last operation that waits for it has been issued and the caller lets it go.
class NcclComputeMark : public ComputeMark {
 public:
  NcclComputeMark(std::shared_ptr<EventPool> events, cudaEvent_t event)
      : events_(std::move(events)), event_(event) {}
  ~NcclComputeMark() override { events_->Release(event_); }
  cudaEvent_t event() const { return event_; }

 private:
  const std::shared_ptr<EventPool> events_;
  const cudaEvent_t event_;
};

absl::Status CheckView(const TensorView& v, const char* name) {
  if (v.data == nullptr && v.count > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ".data is null but ", name, ".count is ", v.count));
  }
  return absl::OkStatus();
}

class NcclCollective : public Collective {
 public:
  NcclCollective(int rank, int world_size, int device, const NcclOptions& options,
                 std::shared_ptr<NcclRuntime> runtime, std::shared_ptr<CommState> state,
                 cudaStream_t comm_stream, void* barrier_buffer, Poller poller)
      : rank_(rank),
        world_size_(world_size),
        device_(device),
        compute_stream_(options.compute_stream),
        collective_timeout_(options.collective_timeout),
        runtime_(std::move(runtime)),
        state_(std::move(state)),
        events_(std::make_shared<EventPool>(runtime_)),
        comm_stream_(comm_stream),
        barrier_buffer_(barrier_buffer),
        poller_(std::move(poller)) {}

  ~NcclCollective() override {
    state_->Fail(absl::AbortedError(absl::StrCat("rank ", rank_, ": NCCL collective destroyed")))
        .IgnoreError();  // the first error, if any, stays; nothing to report to
    if (comm_stream_ != nullptr) runtime_->StreamDestroy(comm_stream_);
    if (barrier_buffer_ != nullptr) runtime_->Free(barrier_buffer_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend_name() const override { return "nccl"; }
  MemoryKind memory_kind() const override { return MemoryKind::kDevice; }

  std::shared_ptr<Work> AllReduce(TensorView buf, ReduceOp op,
                                  const CollectiveOptions& opts) override {
    return LabeledAllReduce(buf, op, opts, "");
  }
  std::shared_ptr<Work> Broadcast(TensorView buf, int root,
                                  const CollectiveOptions& opts) override {
    return LabeledBroadcast(buf, root, opts, "");
  }
  std::shared_ptr<Work> AllGather(TensorView in, TensorView out,
                                  const CollectiveOptions& opts) override {
    return LabeledAllGather(in, out, opts, "");
  }
  std::shared_ptr<Work> ReduceScatter(TensorView in, TensorView out, ReduceOp op,
                                      const CollectiveOptions& opts) override {
    return LabeledReduceScatter(in, out, op, opts, "");
  }

  absl::StatusOr<std::shared_ptr<const ComputeMark>> MarkCompute() override {
    RETURN_IF_ERROR(state_->dead_status());
    RL_CUDA_RETURN_IF_ERROR(runtime_->SetDevice(device_));
    ASSIGN_OR_RETURN(cudaEvent_t event, events_->Acquire());
    const cudaError_t recorded = runtime_->EventRecord(event, compute_stream_);
    if (recorded != cudaSuccess) {
      events_->Release(event);
      return CudaStatus(recorded, "cudaEventRecord(mark, compute_stream)", __FILE__, __LINE__);
    }
    return std::shared_ptr<const ComputeMark>(std::make_shared<NcclComputeMark>(events_, event));
  }

  Collective* side_channel() override { return side_.get(); }

  std::shared_ptr<Work> Barrier(const CollectiveOptions& opts) override {
    // NCCL has no barrier: an all-reduce of one float every rank must join.
    TensorView one{barrier_buffer_, 1, DataType::kFloat32};
    return Issue("barrier", "ncclAllReduce", one, opts, [=](ncclComm_t comm) {
      return runtime_->AllReduce(one.data, one.data, 1, ncclFloat32, ncclSum, comm, comm_stream_);
    });
  }

 private:
  // The operations, their names in messages prefixed with `label` ("connection warm-up ").
  std::shared_ptr<Work> LabeledAllReduce(TensorView buf, ReduceOp op,
                                         const CollectiveOptions& opts, const char* label) {
    absl::Status bad = CheckView(buf, "buf");
    auto type = ToNcclType(buf.dtype);
    auto nccl_op = ToNcclOp(op, buf.dtype);
    if (!bad.ok() || !type.ok() || !nccl_op.ok()) {
      return Refuse(!bad.ok() ? bad : !type.ok() ? type.status() : nccl_op.status());
    }
    return Issue(absl::StrCat(label, "all-reduce(", ReduceOpName(op), ")"), "ncclAllReduce", buf,
                 opts, [=](ncclComm_t comm) {
                   return runtime_->AllReduce(buf.data, buf.data, buf.count, *type, *nccl_op, comm,
                                              comm_stream_);
                 });
  }

  std::shared_ptr<Work> LabeledBroadcast(TensorView buf, int root,
                                         const CollectiveOptions& opts, const char* label) {
    absl::Status bad = CheckView(buf, "buf");
    if (bad.ok() && (root < 0 || root >= world_size_)) {
      bad = absl::InvalidArgumentError(
          absl::StrCat("broadcast root ", root, " is outside [0, ", world_size_, ")"));
    }
    auto type = ToNcclType(buf.dtype);
    if (!bad.ok() || !type.ok()) return Refuse(!bad.ok() ? bad : type.status());
    return Issue(absl::StrCat(label, "broadcast(root ", root, ")"), "ncclBroadcast", buf, opts,
                 [=](ncclComm_t comm) {
                   return runtime_->Broadcast(buf.data, buf.data, buf.count, *type, root, comm,
                                              comm_stream_);
                 });
  }

  std::shared_ptr<Work> LabeledAllGather(TensorView in, TensorView out,
                                         const CollectiveOptions& opts, const char* label) {
    absl::Status bad = CheckView(in, "in");
    if (bad.ok()) bad = CheckView(out, "out");
    if (bad.ok() && (in.dtype != out.dtype || out.count != in.count * world_size_)) {
      bad = absl::InvalidArgumentError(absl::StrCat(
          "all-gather: out must hold world_size (", world_size_, ") x in.count (", in.count, ") ",
          DataTypeName(in.dtype), " elements, got ", out.count, " ", DataTypeName(out.dtype)));
    }
    auto type = ToNcclType(in.dtype);
    if (!bad.ok() || !type.ok()) return Refuse(!bad.ok() ? bad : type.status());
    return Issue(absl::StrCat(label, "all-gather"), "ncclAllGather", in, opts,
                 [=](ncclComm_t comm) {
                   return runtime_->AllGather(in.data, out.data, in.count, *type, comm,
                                              comm_stream_);
                 });
  }

  std::shared_ptr<Work> LabeledReduceScatter(TensorView in, TensorView out, ReduceOp op,
                                             const CollectiveOptions& opts, const char* label) {
    absl::Status bad = CheckView(in, "in");
    if (bad.ok()) bad = CheckView(out, "out");
    if (bad.ok() && (in.dtype != out.dtype || in.count != out.count * world_size_)) {
      bad = absl::InvalidArgumentError(absl::StrCat(
          "reduce-scatter: in must hold world_size (", world_size_, ") x out.count (", out.count,
          ") ", DataTypeName(out.dtype), " elements, got ", in.count, " ", DataTypeName(in.dtype)));
    }
    auto type = ToNcclType(in.dtype);
    auto nccl_op = ToNcclOp(op, in.dtype);
    if (!bad.ok() || !type.ok() || !nccl_op.ok()) {
      return Refuse(!bad.ok() ? bad : !type.ok() ? type.status() : nccl_op.status());
    }
    return Issue(absl::StrCat(label, "reduce-scatter(", ReduceOpName(op), ")"),
                 "ncclReduceScatter", in, opts, [=](ncclComm_t comm) {
                   return runtime_->ReduceScatter(in.data, out.data, out.count, *type, *nccl_op,
                                                  comm, comm_stream_);
                 });
  }

 public:
  // Barrier (every rank closes), then ncclCommFinalize (polled to completion) and
  // ncclCommDestroy; the communicator is aborted instead if any of them fails.
  absl::Status Close(absl::Duration timeout) override {
    if (side_ != nullptr) {
      // The side channel first (each rank closes both, in this order); a failure aborts both.
      const absl::Status side = side_->Close(timeout);
      if (!side.ok()) {
        return state_->Fail(WithContext(
            side, absl::StrCat("rank ", rank_, ": closing the side channel: ")));
      }
    }
    const absl::Time deadline = poller_.clock->Now() + timeout;
    CollectiveOptions opts;
    opts.timeout = timeout;
    // A failed barrier has already aborted the communicator (the state is dead).
    RETURN_IF_ERROR(Barrier(opts)->Wait());
    ncclComm_t comm = state_->TakeForClose(absl::FailedPreconditionError(
        absl::StrCat("rank ", rank_, ": NCCL collective closed")));
    if (comm == nullptr) return state_->dead_status();  // aborted meanwhile
    absl::Status finalized = Finalize(comm, deadline, timeout);
    if (!finalized.ok()) {
      runtime_->CommAbort(comm);
      return WithContext(finalized, absl::StrCat("rank ", rank_, ": closing: "));
    }
    return WithContext(
        NcclStatus(runtime_->CommDestroy(comm), "ncclCommDestroy(comm)", __FILE__, __LINE__),
        absl::StrCat("rank ", rank_, ": closing: "));
  }

  // Connects the ranks within the init deadline: an all-reduce of one float, then each of
  // `ops` (validated by CreateNcclCollective) on one scratch buffer as large as the largest,
  // reduce-scatter and all-gather in place. NCCL 2.28 connects lazily by default
  // (NCCL_RUNTIME_CONNECT=1), each algorithm when an operation first selects it; with the
  // warm-up the job's first real operations find their peers connected in either mode.
  // Operations are numbered from #0 after it.
  absl::Status WarmUp(const std::vector<WarmUpOperation>& ops, absl::Time deadline,
                      absl::Duration min_timeout) {
    const auto timeout = [&] { return std::max(deadline - poller_.clock->Now(), min_timeout); };
    const size_t world = static_cast<size_t>(world_size_);
    const auto elements_of = [world](const WarmUpOperation& op) {
      const bool per_rank =
          op.kind == CollectiveKind::kReduceScatter || op.kind == CollectiveKind::kAllGather;
      return per_rank ? (op.elements + world - 1) / world * world : op.elements;
    };
    CollectiveOptions opts;
    opts.timeout = timeout();
    TensorView one{barrier_buffer_, 1, DataType::kFloat32};
    absl::Status s = Issue("connection warm-up all-reduce(sum)", "ncclAllReduce", one, opts,
                           [=](ncclComm_t comm) {
                             return runtime_->AllReduce(one.data, one.data, 1, ncclFloat32,
                                                        ncclSum, comm, comm_stream_);
                           })
                         ->Wait();
    size_t scratch_bytes = 0;
    for (const WarmUpOperation& op : ops) {
      scratch_bytes = std::max(scratch_bytes, elements_of(op) * DataTypeSize(op.dtype));
    }
    void* scratch = nullptr;
    if (s.ok() && scratch_bytes > 0) {
      s = CudaStatus(runtime_->Malloc(&scratch, scratch_bytes), "cudaMalloc(&scratch, bytes)",
                     __FILE__, __LINE__);
      // Zeroed in the stream's order, like the barrier's float: no rank sends uninitialised
      // memory.
      if (s.ok()) {
        s = CudaStatus(runtime_->MemsetAsync(scratch, 0, scratch_bytes, comm_stream_),
                       "cudaMemsetAsync(scratch, 0, bytes, comm_stream)", __FILE__, __LINE__);
      }
      if (!s.ok()) {
        s = state_->Fail(WithContext(
            s, absl::StrCat("rank ", rank_, ": the connection warm-up's buffer (",
                            scratch_bytes, " bytes): ")));
      }
    }
    for (const WarmUpOperation& op : ops) {
      if (!s.ok()) break;
      opts.timeout = timeout();
      const size_t n = elements_of(op);
      const size_t part = n / world;
      char* base = static_cast<char*>(scratch);
      TensorView all{scratch, n, op.dtype};
      TensorView mine{base + rank_ * part * DataTypeSize(op.dtype), part, op.dtype};
      std::shared_ptr<Work> work;
      switch (op.kind) {
        case CollectiveKind::kAllReduce:
          work = LabeledAllReduce(all, op.op, opts, "connection warm-up ");
          break;
        case CollectiveKind::kReduceScatter:
          work = LabeledReduceScatter(all, mine, op.op, opts, "connection warm-up ");
          break;
        case CollectiveKind::kAllGather:
          work = LabeledAllGather(mine, all, opts, "connection warm-up ");
          break;
        default:
          work = LabeledBroadcast(all, 0, opts, "connection warm-up ");
          break;
      }
      s = work->Wait();
    }
    // After every operation finished, or the communicator was aborted (Fail drains the stream).
    if (scratch != nullptr) runtime_->Free(scratch);
    absl::MutexLock lock(&issue_mu_);
    next_seq_ = 0;
    return s;
  }

  // The side channel (Collective::side_channel): ncclCommSplit of this communicator (every
  // rank, color 0, key = rank: the same ranks in the same order), non-blocking, polled within
  // `deadline`, on its own stream, warmed up with `options.warm_up`'s all-gathers. This state
  // then fails it whenever it fails (CommState::set_dependent). Every rank calls it at the same
  // point (ncclCommSplit is collective on this communicator).
  absl::Status SplitSideChannel(const NcclOptions& options, absl::Time deadline) {
    RL_CUDA_RETURN_IF_ERROR(runtime_->SetDevice(device_));
    // On a non-blocking communicator the split runs as a job of this one, which reads the
    // config and sets the new handle only when it completes: both are members, alive as long
    // as this communicator (an abort ends the job first).
    split_config_ = NCCL_CONFIG_INITIALIZER;
    split_config_.blocking = 0;
    split_comm_ = nullptr;
    absl::Status split = state_->Call(
        [&](ncclComm_t comm) {
          return runtime_->CommSplit(comm, 0, rank_, &split_comm_, &split_config_);
        },
        "ncclCommSplit(comm, 0, rank, &side, &config)");
    ncclComm_t side = nullptr;
    if (split.ok()) split = AwaitSplit(deadline, options.init_timeout, &side);
    if (split.ok()) split = WaitForInit(*runtime_, side, deadline, poller_, options.init_timeout);
    if (!split.ok()) {
      if (side != nullptr) runtime_->CommAbort(side);
      return state_->Fail(WithContext(split, "creating the side channel: "));
    }
    cudaStream_t side_stream = nullptr;
    void* side_barrier = nullptr;
    absl::Status setup = CudaStatus(runtime_->StreamCreate(&side_stream),
                                    "cudaStreamCreate(&side_stream)", __FILE__, __LINE__);
    if (!setup.ok()) side_stream = nullptr;
    auto side_state = std::make_shared<CommState>(runtime_, side, rank_, device_, side_stream,
                                                  poller_, options.collective_timeout);
    if (setup.ok()) {
      setup = CudaStatus(runtime_->Malloc(&side_barrier, sizeof(float)),
                         "cudaMalloc(&side_barrier, 4)", __FILE__, __LINE__);
    }
    if (setup.ok()) {
      setup = CudaStatus(runtime_->MemsetAsync(side_barrier, 0, sizeof(float), side_stream),
                         "cudaMemsetAsync(side_barrier, 0, 4, side_stream)", __FILE__, __LINE__);
    }
    // From here on the side channel owns its communicator, stream and buffer.
    side_ = std::make_unique<NcclCollective>(rank_, world_size_, device_, options, runtime_,
                                             side_state, side_stream, side_barrier, poller_);
    state_->set_dependent(side_state);
    if (setup.ok()) {
      std::vector<WarmUpOperation> gathers;
      for (const WarmUpOperation& op : options.warm_up) {
        if (op.kind == CollectiveKind::kAllGather) gathers.push_back(op);
      }
      setup = side_->WarmUp(gathers, deadline, options.poll_interval);
    }
    if (!setup.ok()) {
      return state_->Fail(WithContext(setup, "creating the side channel: "));
    }
    return absl::OkStatus();
  }

  // Polls this communicator until the split job is over (no job in progress) and has set the new
  // handle (*side), this communicator fails, or `deadline` passes.
  absl::Status AwaitSplit(absl::Time deadline, absl::Duration budget, ncclComm_t* side) {
    Backoff backoff(poller_);
    while (true) {
      bool in_progress = false;
      RETURN_IF_ERROR(state_->PollAsyncError(&in_progress));
      // Written by NCCL's job thread.
      *side = __atomic_load_n(&split_comm_, __ATOMIC_ACQUIRE);
      if (!in_progress && *side != nullptr) return absl::OkStatus();
      if (poller_.clock->Now() >= deadline) {
        return WithFailureKind(
            absl::DeadlineExceededError(absl::StrCat("ncclCommSplit did not finish within ",
                                                     absl::FormatDuration(budget))),
            v1::RankFailure::PEER_TIMED_OUT);
      }
      backoff.Pause(deadline);
    }
  }

  void Abort(const absl::Status& reason) override {
    state_
        ->Fail(absl::AbortedError(
            absl::StrCat("rank ", rank_, ": NCCL collective aborted: ", reason.ToString())))
        .IgnoreError();  // an earlier error stays the one every Work reports
  }

 private:
  static std::shared_ptr<Work> Refuse(absl::Status status) {
    return std::make_shared<DoneWork>(std::move(status));
  }

  // Issues one operation on the communication stream after the compute stream's current work,
  // or after opts.after's mark only. `kind` and `v` only describe it for error messages
  // ("all-reduce(sum) #7 of bucket 2 (1024 x fp32)").
  std::shared_ptr<Work> Issue(const std::string& kind, const char* nccl_call, const TensorView& v,
                              const CollectiveOptions& opts,
                              const std::function<ncclResult_t(ncclComm_t)>& call) {
    const NcclComputeMark* after = nullptr;
    if (opts.after != nullptr) {
      after = dynamic_cast<const NcclComputeMark*>(opts.after.get());
      if (after == nullptr) {
        return Refuse(absl::InvalidArgumentError(
            "CollectiveOptions::after: a compute mark of another backend (take it from this "
            "collective's MarkCompute)"));
      }
    }
    absl::MutexLock lock(&issue_mu_);  // operations keep issue order
    const std::string what =
        absl::StrCat(kind, " #", next_seq_++,
                     opts.bucket >= 0 ? absl::StrCat(" of bucket ", opts.bucket) : std::string(),
                     " (", v.count, " x ", DataTypeName(v.dtype), ")");
    const absl::Duration timeout =
        opts.timeout > absl::ZeroDuration() ? opts.timeout : collective_timeout_;
    const absl::Time start = poller_.clock->Now();
    absl::Status dead = state_->dead_status();
    if (!dead.ok()) return Refuse(dead);
    const std::string context = absl::StrCat("rank ", rank_, ": ", what, ": ");
    absl::Status s = IssueOnStreamLocked(nccl_call, start, timeout, call, after);
    if (!s.ok()) return Refuse(state_->Fail(WithContext(s, context)));
    absl::StatusOr<cudaEvent_t> done = events_->Acquire();
    s = done.status();
    if (s.ok()) {
      s = CudaStatus(runtime_->EventRecord(*done, comm_stream_),
                     "cudaEventRecord(done, comm_stream)", __FILE__, __LINE__);
      if (!s.ok()) events_->Release(*done);
    }
    if (!s.ok()) return Refuse(state_->Fail(WithContext(s, context)));
    return std::make_shared<NcclWork>(state_, runtime_, events_, *done, what, start, timeout,
                                      poller_, compute_stream_);
  }

  // ncclCommFinalize on a non-blocking communicator: polled until done, failed or `deadline`.
  absl::Status Finalize(ncclComm_t comm, absl::Time deadline, absl::Duration timeout) {
    RL_CUDA_RETURN_IF_ERROR(runtime_->SetDevice(device_));
    RL_NCCL_RETURN_IF_ERROR(runtime_->CommFinalize(comm));
    Backoff backoff(poller_);
    while (true) {
      ncclResult_t async = ncclSuccess;
      RL_NCCL_RETURN_IF_ERROR(runtime_->CommGetAsyncError(comm, &async));
      if (async == ncclSuccess) return absl::OkStatus();
      if (async != ncclInProgress) {
        return NcclStatus(async, "ncclCommFinalize (asynchronous result)", __FILE__, __LINE__,
                          comm);
      }
      if (poller_.clock->Now() >= deadline) {
        return WithFailureKind(absl::DeadlineExceededError(absl::StrCat(
                                   "ncclCommFinalize did not finish within ",
                                   absl::FormatDuration(timeout), "; communicator aborted")),
                               v1::RankFailure::PEER_TIMED_OUT);
      }
      backoff.Pause(deadline);
    }
  }

  // Orders the communication stream after the compute stream (after `after`'s mark only, when
  // given), enqueues `call` and waits until NCCL has actually put it on the stream (a
  // non-blocking communicator may return ncclInProgress first; an event recorded before that
  // would not cover the operation).
  absl::Status IssueOnStreamLocked(const char* nccl_call, absl::Time start, absl::Duration timeout,
                                   const std::function<ncclResult_t(ncclComm_t)>& call,
                                   const NcclComputeMark* after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mu_) {
    RL_CUDA_RETURN_IF_ERROR(runtime_->SetDevice(device_));
    if (after != nullptr) {
      RL_CUDA_RETURN_IF_ERROR(runtime_->StreamWaitEvent(comm_stream_, after->event()));
      return EnqueueLocked(nccl_call, start, timeout, call);
    }
    ASSIGN_OR_RETURN(cudaEvent_t ready, events_->Acquire());
    const cudaError_t recorded = runtime_->EventRecord(ready, compute_stream_);
    const cudaError_t waited =
        recorded == cudaSuccess ? runtime_->StreamWaitEvent(comm_stream_, ready) : recorded;
    // Reusing the event right away is fine: the stream wait already captured this record.
    events_->Release(ready);
    RL_CUDA_RETURN_IF_ERROR(recorded);
    RL_CUDA_RETURN_IF_ERROR(waited);
    return EnqueueLocked(nccl_call, start, timeout, call);
  }

  // Enqueues `call` and polls until NCCL has put it on the stream (or fails, or `timeout`).
  absl::Status EnqueueLocked(const char* nccl_call, absl::Time start, absl::Duration timeout,
                             const std::function<ncclResult_t(ncclComm_t)>& call)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mu_) {
    RETURN_IF_ERROR(state_->Call(call, nccl_call));
    Backoff backoff(poller_);
    while (true) {
      bool in_progress = false;
      RETURN_IF_ERROR(state_->PollAsyncError(&in_progress));
      if (!in_progress) return absl::OkStatus();
      if (poller_.clock->Now() - start >= timeout) {
        return WithFailureKind(
            absl::DeadlineExceededError(
                absl::StrCat("NCCL did not finish enqueueing the operation within ",
                             absl::FormatDuration(timeout), "; communicator aborted")),
            v1::RankFailure::PEER_TIMED_OUT);
      }
      backoff.Pause(start + timeout);
    }
  }

  const int rank_;
  const int world_size_;
  const int device_;
  const cudaStream_t compute_stream_;
  const absl::Duration collective_timeout_;
  const std::shared_ptr<NcclRuntime> runtime_;
  const std::shared_ptr<CommState> state_;
  const std::shared_ptr<EventPool> events_;  // shared with the Works
  const cudaStream_t comm_stream_;
  void* const barrier_buffer_;
  const Poller poller_;

  absl::Mutex issue_mu_;
  uint64_t next_seq_ ABSL_GUARDED_BY(issue_mu_) = 0;
  // Set once by SplitSideChannel, before the Collective is handed out; its destruction (after
  // this one's, which fails its state) frees its stream and buffer.
  std::unique_ptr<NcclCollective> side_;
  // What the non-blocking split job reads and writes (SplitSideChannel).
  ncclConfig_t split_config_ = NCCL_CONFIG_INITIALIZER;
  ncclComm_t split_comm_ = nullptr;
};

absl::Status ValidateCreateArgs(const std::shared_ptr<KeyValueStore>& store,
                                const std::string& key_prefix, int rank, int world_size, int device,
                                const NcclOptions& o) {
  if (store == nullptr)
    return absl::InvalidArgumentError("store is null: pass the attempt's store");
  if (key_prefix.empty()) {
    return absl::InvalidArgumentError(
        "key_prefix is empty: use one unique per job attempt, e.g. \"<job>/<generation>/\"");
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " / world_size ", world_size,
                     ": need world_size >= 1 and 0 <= rank < world_size"));
  }
  if (device < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("device ", device, " is negative: give a CUDA device ordinal"));
  }
  if (o.init_timeout <= absl::ZeroDuration() || o.collective_timeout <= absl::ZeroDuration() ||
      o.poll_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "NcclOptions: init_timeout, collective_timeout and poll_interval must be > 0");
  }
  for (size_t i = 0; i < o.warm_up.size(); ++i) {
    const WarmUpOperation& op = o.warm_up[i];
    const std::string which = absl::StrCat("NcclOptions::warm_up[", i, "] (",
                                           CollectiveKindName(op.kind), "): ");
    if (op.kind != CollectiveKind::kAllReduce && op.kind != CollectiveKind::kReduceScatter &&
        op.kind != CollectiveKind::kAllGather && op.kind != CollectiveKind::kBroadcast) {
      return absl::InvalidArgumentError(absl::StrCat(
          which, "the warm-up runs all-reduce, reduce-scatter, all-gather and broadcast only"));
    }
    if (op.elements == 0) {
      return absl::InvalidArgumentError(absl::StrCat(which, "needs at least one element"));
    }
    const bool reduces =
        op.kind == CollectiveKind::kAllReduce || op.kind == CollectiveKind::kReduceScatter;
    if (reduces) {
      absl::Status op_ok = ToNcclOp(op.op, op.dtype).status();
      if (!op_ok.ok()) return WithContext(op_ok, which);
    }
  }
  return absl::OkStatus();
}

std::string RankList(const std::vector<int>& ranks) {
  return ranks.empty() ? std::string("none") : absl::StrJoin(ranks, ",");
}

// What to say when this rank's communicator init failed or timed out.
std::string InitFailureHint(KeyValueStore& store, const std::string& key_prefix, int rank,
                            int world_size) {
  const std::vector<int> not_started =
      RanksWithoutKey(store, world_size, [&](int r) { return NcclStartedKey(key_prefix, r); });
  std::string hint =
      absl::StrCat(" (ranks that never started communicator init: ", RankList(not_started), ")");
  if (rank != 0) {
    absl::StrAppend(&hint,
                    "; rank 0 created the NCCL unique id and hosts NCCL's bootstrap root: if "
                    "rank 0 crashed or exited, every other rank fails like this — check rank 0");
  }
  return hint;
}

// Polls a non-blocking communicator's init until it is ready, failed, or `deadline` passes.
absl::Status WaitForInit(NcclRuntime& runtime, ncclComm_t comm, absl::Time deadline,
                         const Poller& poller, absl::Duration init_timeout) {
  Backoff backoff(poller);
  while (true) {
    ncclResult_t async = ncclSuccess;
    RL_NCCL_RETURN_IF_ERROR(runtime.CommGetAsyncError(comm, &async));
    if (async == ncclSuccess) return absl::OkStatus();
    if (async != ncclInProgress) {
      return NcclStatus(async, "ncclCommInitRankConfig (asynchronous result)", __FILE__, __LINE__,
                        comm);
    }
    if (poller.clock->Now() >= deadline) {
      return WithFailureKind(
          absl::DeadlineExceededError(absl::StrCat("NCCL communicator init did not finish within ",
                                                   absl::FormatDuration(init_timeout))),
          v1::RankFailure::PEER_TIMED_OUT);
    }
    backoff.Pause(deadline);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Collective>> CreateNcclCollective(
    std::shared_ptr<KeyValueStore> store, const std::string& key_prefix, int rank, int world_size,
    int device, const NcclOptions& options) {
  RETURN_IF_ERROR(ValidateCreateArgs(store, key_prefix, rank, world_size, device, options));
  std::shared_ptr<NcclRuntime> runtime = options.runtime ? options.runtime : RealNcclRuntime();
  Poller poller{
      options.clock != nullptr ? options.clock : Clock::Real(),
      options.sleep ? options.sleep : Sleeper([](absl::Duration d) { absl::SleepFor(d); }),
      options.poll_interval};
  const std::string context = absl::StrCat("rank ", rank, " (GPU ", device, "): ");
  const absl::Time deadline = poller.clock->Now() + options.init_timeout;

  RETURN_IF_ERROR(WithContext(
      CudaStatus(runtime->SetDevice(device), "cudaSetDevice(device)", __FILE__, __LINE__),
      context));
  ASSIGN_OR_RETURN(
      ncclUniqueId id,
      ExchangeNcclUniqueId(*store, key_prefix, rank, world_size, deadline - poller.clock->Now(),
                           [&runtime](ncclUniqueId* out) { return runtime->GetUniqueId(out); }));
  RETURN_IF_ERROR(WithContext(PublishStarted(*store, key_prefix, rank), context));

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init and every call return at once; we poll and can always abort
  ncclComm_t comm = nullptr;
  absl::Status init = NcclStatus(runtime->CommInitRankConfig(&comm, world_size, id, rank, &config),
                                 "ncclCommInitRankConfig(&comm, world_size, id, rank, &config)",
                                 __FILE__, __LINE__);
  if (init.ok()) init = WaitForInit(*runtime, comm, deadline, poller, options.init_timeout);
  if (!init.ok()) {
    if (comm != nullptr) runtime->CommAbort(comm);
    return WithMessage(init, absl::StrCat(context, init.message(),
                                          InitFailureHint(*store, key_prefix, rank, world_size)));
  }

  cudaStream_t comm_stream = nullptr;
  void* barrier_buffer = nullptr;
  absl::Status setup = CudaStatus(runtime->StreamCreate(&comm_stream),
                                  "cudaStreamCreate(&comm_stream)", __FILE__, __LINE__);
  if (!setup.ok()) comm_stream = nullptr;
  // The state drains the communication stream after an abort, for at most one collective
  // timeout (nccl_work.h).
  auto state = std::make_shared<CommState>(runtime, comm, rank, device, comm_stream, poller,
                                           options.collective_timeout);
  if (setup.ok()) {
    setup = CudaStatus(runtime->Malloc(&barrier_buffer, sizeof(float)),
                       "cudaMalloc(&barrier_buffer, 4)", __FILE__, __LINE__);
  }
  if (setup.ok()) {
    // Every all-reduce of the warm-up and the barriers sums it: zero it first, in the order of
    // the stream they run on, so no rank ever sends uninitialised memory (0 stays 0).
    setup = CudaStatus(runtime->MemsetAsync(barrier_buffer, 0, sizeof(float), comm_stream),
                       "cudaMemsetAsync(barrier_buffer, 0, 4, comm_stream)", __FILE__, __LINE__);
  }
  // From here on the Collective owns comm, stream and buffer; its destructor releases them.
  auto collective = std::make_unique<NcclCollective>(rank, world_size, device, options, runtime,
                                                     state, comm_stream, barrier_buffer, poller);
  if (setup.ok()) {
    // Within the init budget (at least one poll each, so a spent budget fails rather than
    // falling back to the collective timeout).
    setup = collective->WarmUp(options.warm_up, deadline, options.poll_interval);
    if (!setup.ok()) {
      setup = WithMessage(setup, absl::StrCat("connecting to the other ranks: ", setup.message(),
                                              InitFailureHint(*store, key_prefix, rank,
                                                              world_size)));
    }
  }
  if (setup.ok() && options.side_channel) {
    setup = collective->SplitSideChannel(options, deadline);
    if (!setup.ok()) {
      setup = WithMessage(setup, absl::StrCat(setup.message(), InitFailureHint(*store, key_prefix,
                                                                               rank, world_size)));
    }
  }
  if (setup.ok()) setup = PublishJoined(*store, key_prefix, rank);
  if (setup.ok() && rank == 0) {
    // Rank 0's process hosts the bootstrap root: it may go on (and possibly exit) only once
    // every rank has a working communicator.
    setup = WaitAllJoined(*store, key_prefix, world_size, deadline, *poller.clock);
  }
  if (!setup.ok()) return WithContext(setup, context);
  return std::unique_ptr<Collective>(std::move(collective));
}

}  // namespace gpu
}  // namespace ringleader
