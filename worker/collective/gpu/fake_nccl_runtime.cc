#include "worker/collective/gpu/fake_nccl_runtime.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringleader {
namespace gpu {

void FakeNcclRuntime::set_set_device_result(cudaError_t e) {
  absl::MutexLock lock(&mu_);
  set_device_result_ = e;
}
void FakeNcclRuntime::set_init_call_result(ncclResult_t r) {
  absl::MutexLock lock(&mu_);
  init_call_result_ = r;
}
void FakeNcclRuntime::set_init_async_result(ncclResult_t r) {
  absl::MutexLock lock(&mu_);
  init_async_result_ = r;
}
void FakeNcclRuntime::set_init_polls(int n) {
  absl::MutexLock lock(&mu_);
  init_polls_ = n;
}
void FakeNcclRuntime::set_op_result(ncclResult_t r) {
  absl::MutexLock lock(&mu_);
  op_result_ = r;
}
void FakeNcclRuntime::set_enqueue_polls(int n) {
  absl::MutexLock lock(&mu_);
  enqueue_polls_ = n;
}
void FakeNcclRuntime::set_events_complete(bool complete) {
  absl::MutexLock lock(&mu_);
  events_complete_ = complete;
}
void FakeNcclRuntime::set_event_polls(int n) {
  absl::MutexLock lock(&mu_);
  event_polls_ = n;
}
void FakeNcclRuntime::set_ops_that_complete(int n) {
  absl::MutexLock lock(&mu_);
  ops_that_complete_ = n;
}
void FakeNcclRuntime::set_finalize_result(ncclResult_t r) {
  absl::MutexLock lock(&mu_);
  finalize_result_ = r;
}
void FakeNcclRuntime::set_finalize_polls(int n) {
  absl::MutexLock lock(&mu_);
  finalize_polls_ = n;
}
void FakeNcclRuntime::set_stream_busy_polls(int n) {
  absl::MutexLock lock(&mu_);
  stream_busy_polls_ = n;
}
void FakeNcclRuntime::DrainStreams() {
  absl::MutexLock lock(&mu_);
  stream_busy_polls_ = 0;
}
void FakeNcclRuntime::CompleteEvents() {
  absl::MutexLock lock(&mu_);
  pending_events_.clear();
}
void FakeNcclRuntime::SetAsyncError(ncclResult_t r) {
  absl::MutexLock lock(&mu_);
  async_error_ = r;
}

std::vector<FakeNcclRuntime::Op> FakeNcclRuntime::ops() const {
  absl::MutexLock lock(&mu_);
  return ops_;
}
std::vector<std::string> FakeNcclRuntime::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}
int FakeNcclRuntime::abort_calls() const {
  absl::MutexLock lock(&mu_);
  return abort_calls_;
}
void FakeNcclRuntime::AwaitAbortCall() const {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](const int* calls) { return *calls > 0; }, &abort_calls_));
}
int FakeNcclRuntime::finalize_calls() const {
  absl::MutexLock lock(&mu_);
  return finalize_calls_;
}
int FakeNcclRuntime::destroy_calls() const {
  absl::MutexLock lock(&mu_);
  return destroy_calls_;
}
void FakeNcclRuntime::ClearObservations() {
  absl::MutexLock lock(&mu_);
  calls_.clear();
  ops_.clear();
}
int FakeNcclRuntime::init_calls() const {
  absl::MutexLock lock(&mu_);
  return init_calls_;
}
int FakeNcclRuntime::split_calls() const {
  absl::MutexLock lock(&mu_);
  return split_calls_;
}
int FakeNcclRuntime::last_split_blocking() const {
  absl::MutexLock lock(&mu_);
  return last_split_blocking_;
}
int FakeNcclRuntime::last_split_key() const {
  absl::MutexLock lock(&mu_);
  return last_split_key_;
}
int FakeNcclRuntime::last_init_blocking() const {
  absl::MutexLock lock(&mu_);
  return last_init_blocking_;
}
int FakeNcclRuntime::last_init_rank() const {
  absl::MutexLock lock(&mu_);
  return last_init_rank_;
}
int FakeNcclRuntime::last_init_nranks() const {
  absl::MutexLock lock(&mu_);
  return last_init_nranks_;
}
std::string FakeNcclRuntime::last_init_id() const {
  absl::MutexLock lock(&mu_);
  return last_init_id_;
}
int FakeNcclRuntime::live_streams() const {
  absl::MutexLock lock(&mu_);
  return live_streams_;
}
int FakeNcclRuntime::live_allocations() const {
  absl::MutexLock lock(&mu_);
  return live_allocations_;
}
int FakeNcclRuntime::event_creations() const {
  absl::MutexLock lock(&mu_);
  return event_creations_;
}
int FakeNcclRuntime::live_events() const {
  absl::MutexLock lock(&mu_);
  return live_events_;
}
int FakeNcclRuntime::event_queries() const {
  absl::MutexLock lock(&mu_);
  return event_queries_;
}
size_t FakeNcclRuntime::largest_allocation() const {
  absl::MutexLock lock(&mu_);
  return largest_allocation_;
}
cudaStream_t FakeNcclRuntime::created_stream() const {
  absl::MutexLock lock(&mu_);
  return created_stream_;
}

ncclResult_t FakeNcclRuntime::GetUniqueId(ncclUniqueId* id) {
  absl::MutexLock lock(&mu_);
  std::memset(id->internal, 0, sizeof(id->internal));
  const uint64_t n = ++unique_ids_;
  std::memcpy(id->internal, "fake-id", 7);
  std::memcpy(id->internal + 8, &n, sizeof(n));
  calls_.push_back("GetUniqueId");
  return ncclSuccess;
}

ncclResult_t FakeNcclRuntime::CommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id,
                                                 int rank, ncclConfig_t* config) {
  absl::MutexLock lock(&mu_);
  calls_.push_back("CommInitRankConfig");
  ++init_calls_;
  last_init_blocking_ = config->blocking;
  last_init_rank_ = rank;
  last_init_nranks_ = nranks;
  last_init_id_.assign(id.internal, sizeof(id.internal));
  *comm = reinterpret_cast<ncclComm_t>(static_cast<uintptr_t>(0xC0));
  state_ = init_async_result_;
  polls_left_ = init_polls_;
  return init_call_result_;
}

ncclResult_t FakeNcclRuntime::CommSplit(ncclComm_t, int color, int key, ncclComm_t* newcomm,
                                        ncclConfig_t* config) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(absl::StrCat("CommSplit(color ", color, ", key ", key, ")"));
  ++split_calls_;
  last_split_blocking_ = config->blocking;
  last_split_key_ = key;
  *newcomm = reinterpret_cast<ncclComm_t>(static_cast<uintptr_t>(0xC1));
  state_ = init_async_result_;
  polls_left_ = init_polls_;
  return init_call_result_;
}

ncclResult_t FakeNcclRuntime::CommGetAsyncError(ncclComm_t, ncclResult_t* async_error) {
  absl::MutexLock lock(&mu_);
  if (async_error_ != ncclSuccess) {
    *async_error = async_error_;
  } else if (polls_left_ > 0) {
    --polls_left_;
    *async_error = ncclInProgress;
  } else {
    *async_error = state_;
  }
  calls_.push_back(absl::StrCat("CommGetAsyncError -> ", static_cast<int>(*async_error)));
  return ncclSuccess;
}

ncclResult_t FakeNcclRuntime::CommAbort(ncclComm_t) {
  absl::MutexLock lock(&mu_);
  calls_.push_back("CommAbort");
  ++abort_calls_;
  return ncclSuccess;
}

ncclResult_t FakeNcclRuntime::CommFinalize(ncclComm_t) {
  absl::MutexLock lock(&mu_);
  calls_.push_back("CommFinalize");
  ++finalize_calls_;
  if (finalize_result_ == ncclInProgress) {
    state_ = ncclSuccess;
    polls_left_ = finalize_polls_;
  }
  return finalize_result_;
}

ncclResult_t FakeNcclRuntime::CommDestroy(ncclComm_t) {
  absl::MutexLock lock(&mu_);
  calls_.push_back("CommDestroy");
  ++destroy_calls_;
  return ncclSuccess;
}

ncclResult_t FakeNcclRuntime::RecordOpLocked(Op op) {
  calls_.push_back(op.kind);
  ops_.push_back(std::move(op));
  ++op_calls_;
  if (op_result_ == ncclInProgress) {
    state_ = ncclSuccess;
    polls_left_ = enqueue_polls_;
  }
  return op_result_;
}

ncclResult_t FakeNcclRuntime::AllReduce(const void* send, void* recv, size_t count,
                                        ncclDataType_t type, ncclRedOp_t op, ncclComm_t,
                                        cudaStream_t stream) {
  absl::MutexLock lock(&mu_);
  return RecordOpLocked({"AllReduce", send, recv, count, type, op, -1, stream});
}

ncclResult_t FakeNcclRuntime::Broadcast(const void* send, void* recv, size_t count,
                                        ncclDataType_t type, int root, ncclComm_t,
                                        cudaStream_t stream) {
  absl::MutexLock lock(&mu_);
  return RecordOpLocked({"Broadcast", send, recv, count, type, ncclSum, root, stream});
}

ncclResult_t FakeNcclRuntime::AllGather(const void* send, void* recv, size_t send_count,
                                        ncclDataType_t type, ncclComm_t, cudaStream_t stream) {
  absl::MutexLock lock(&mu_);
  return RecordOpLocked({"AllGather", send, recv, send_count, type, ncclSum, -1, stream});
}

ncclResult_t FakeNcclRuntime::ReduceScatter(const void* send, void* recv, size_t recv_count,
                                            ncclDataType_t type, ncclRedOp_t op, ncclComm_t,
                                            cudaStream_t stream) {
  absl::MutexLock lock(&mu_);
  return RecordOpLocked({"ReduceScatter", send, recv, recv_count, type, op, -1, stream});
}

cudaError_t FakeNcclRuntime::SetDevice(int device) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(absl::StrCat("SetDevice(", device, ")"));
  return set_device_result_;
}

cudaError_t FakeNcclRuntime::StreamCreate(cudaStream_t* stream) {
  absl::MutexLock lock(&mu_);
  *stream = reinterpret_cast<cudaStream_t>(next_handle_++);
  created_stream_ = *stream;
  ++live_streams_;
  return cudaSuccess;
}

cudaError_t FakeNcclRuntime::StreamDestroy(cudaStream_t) {
  absl::MutexLock lock(&mu_);
  --live_streams_;
  return cudaSuccess;
}

cudaError_t FakeNcclRuntime::StreamQuery(cudaStream_t stream) {
  absl::MutexLock lock(&mu_);
  cudaError_t result = cudaSuccess;
  if (stream_busy_polls_ != 0) {
    result = cudaErrorNotReady;
    if (stream_busy_polls_ > 0) --stream_busy_polls_;
  }
  calls_.push_back(
      absl::StrCat("StreamQuery(stream ", Id(stream), ") -> ", static_cast<int>(result)));
  return result;
}

cudaError_t FakeNcclRuntime::EventCreate(cudaEvent_t* event) {
  absl::MutexLock lock(&mu_);
  *event = reinterpret_cast<cudaEvent_t>(next_handle_++);
  ++event_creations_;
  ++live_events_;
  return cudaSuccess;
}

cudaError_t FakeNcclRuntime::EventDestroy(cudaEvent_t event) {
  absl::MutexLock lock(&mu_);
  pending_events_.erase(Id(event));
  event_polls_left_.erase(Id(event));
  --live_events_;
  return cudaSuccess;
}

cudaError_t FakeNcclRuntime::EventRecord(cudaEvent_t event, cudaStream_t stream) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(absl::StrCat("EventRecord(event ", Id(event), ", stream ", Id(stream), ")"));
  // A new record replaces the event's earlier one, as in CUDA.
  pending_events_.erase(Id(event));
  event_polls_left_.erase(Id(event));
  if (!events_complete_ || (ops_that_complete_ >= 0 && op_calls_ > ops_that_complete_)) {
    pending_events_.insert(Id(event));
  }
  if (event_polls_ > 0) event_polls_left_[Id(event)] = event_polls_;
  return cudaSuccess;
}

cudaError_t FakeNcclRuntime::EventQuery(cudaEvent_t event) {
  absl::MutexLock lock(&mu_);
  ++event_queries_;
  if (pending_events_.count(Id(event)) > 0) return cudaErrorNotReady;
  auto polls = event_polls_left_.find(Id(event));
  if (polls != event_polls_left_.end() && polls->second > 0) {
    --polls->second;
    return cudaErrorNotReady;
  }
  return cudaSuccess;
}

cudaError_t FakeNcclRuntime::StreamWaitEvent(cudaStream_t stream, cudaEvent_t event) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(absl::StrCat("StreamWaitEvent(stream ", Id(stream), ", event ", Id(event), ")"));
  return cudaSuccess;
}

cudaError_t FakeNcclRuntime::Malloc(void** ptr, size_t bytes) {
  absl::MutexLock lock(&mu_);
  *ptr = std::malloc(bytes);
  std::memset(*ptr, 0xFF, bytes);  // what uninitialised memory may hold: a NaN as floats
  ++live_allocations_;
  largest_allocation_ = std::max(largest_allocation_, bytes);
  return cudaSuccess;
}

cudaError_t FakeNcclRuntime::Free(void* ptr) {
  absl::MutexLock lock(&mu_);
  std::free(ptr);
  --live_allocations_;
  return cudaSuccess;
}

cudaError_t FakeNcclRuntime::MemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(absl::StrCat("MemsetAsync(stream ", Id(stream), ", value ", value, ", ", bytes,
                                " bytes)"));
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}

}  // namespace gpu
}  // namespace ringleader
