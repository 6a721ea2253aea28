// A scriptable NcclRuntime for tests of NcclCollective's control flow without a GPU: no data
// moves; the fake records every call and plays the communicator's asynchronous state machine:
//
//   CommInitRankConfig ──> IN PROGRESS (init_polls polls of CommGetAsyncError)
//        └──> init_async_result (ncclSuccess = ready; ncclInProgress = never ready; an error)
//   each collective call returns op_result (default ncclInProgress, like a non-blocking
//   communicator) and the state is IN PROGRESS for enqueue_polls polls, then ncclSuccess
//   SetAsyncError(e): from then on CommGetAsyncError reports e
//   CommSplit returns a second communicator handle and plays init again (init_call_result,
//   init_polls, init_async_result) on the one state both handles share
//   CommFinalize returns finalize_result (default ncclInProgress) and the state is IN PROGRESS
//   for finalize_polls polls (default 1), then ncclSuccess; CommDestroy succeeds
//
// Events recorded on any stream complete at once unless set_events_complete(false); then they
// stay pending until CompleteEvents(). StreamQuery reports a stream busy (cudaErrorNotReady) for
// set_stream_busy_polls(n) queries, or until DrainStreams() when n < 0, then done. Malloc fills
// its memory with 0xFF bytes (a NaN as floats), so a buffer used before it was initialised
// shows; MemsetAsync writes the host memory at once. With set_event_polls(n) a recorded event
// answers cudaErrorNotReady to its first n queries, then completes. With
// set_ops_that_complete(n) only the first n collective calls complete: an event recorded after a
// later call stays pending until CompleteEvents() (a peer that stops answering mid-way). Events
// are counted (created, live = created and not destroyed, queries). Thread-safe.
#ifndef RINGLEADER_WORKER_COLLECTIVE_GPU_FAKE_NCCL_RUNTIME_H_
#define RINGLEADER_WORKER_COLLECTIVE_GPU_FAKE_NCCL_RUNTIME_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/collective/gpu/nccl_runtime.h"

namespace ringleader {
namespace gpu {

class FakeNcclRuntime : public NcclRuntime {
 public:
  struct Op {
    std::string kind;  // "AllReduce", "Broadcast", "AllGather", "ReduceScatter"
    const void* send = nullptr;
    void* recv = nullptr;
    size_t count = 0;
    ncclDataType_t type = ncclFloat32;
    ncclRedOp_t op = ncclSum;
    int root = -1;
    cudaStream_t stream = nullptr;
  };

  // --- Script (defaults in comments) ---
  void set_set_device_result(cudaError_t e);   // cudaSuccess
  void set_init_call_result(ncclResult_t r);   // ncclInProgress
  void set_init_async_result(ncclResult_t r);  // ncclSuccess
  void set_init_polls(int n);                  // 2
  void set_op_result(ncclResult_t r);          // ncclInProgress
  void set_enqueue_polls(int n);               // 1
  void set_events_complete(bool complete);     // true
  void set_event_polls(int n);                 // 0
  void set_ops_that_complete(int n);           // -1 = every one
  void set_finalize_result(ncclResult_t r);    // ncclInProgress
  void set_finalize_polls(int n);              // 1
  void set_stream_busy_polls(int n);           // 0 (< 0: busy until DrainStreams())
  void CompleteEvents();
  void DrainStreams();
  void SetAsyncError(ncclResult_t r);

  // --- Observations ---
  std::vector<Op> ops() const;
  // One line per call, e.g. "EventRecord(event 3, stream 119)", "StreamWaitEvent(stream 1,
  // event 3)", "AllReduce", "CommGetAsyncError -> 7", "CommAbort", "StreamQuery(stream 1) ->
  // 600" (cudaErrorNotReady), "MemsetAsync(stream 1, value 0, 4 bytes)".
  std::vector<std::string> calls() const;
  int abort_calls() const;
  // Blocks until CommAbort has been called at least once (a condition, no polling).
  void AwaitAbortCall() const;
  int finalize_calls() const;
  int destroy_calls() const;
  // Forgets the calls and ops recorded so far (e.g. the ones CreateNcclCollective made).
  void ClearObservations();
  int init_calls() const;
  int split_calls() const;
  int last_split_blocking() const;  // config->blocking of the last split
  int last_split_key() const;
  int last_init_blocking() const;  // config->blocking of the last init
  int last_init_rank() const;
  int last_init_nranks() const;
  std::string last_init_id() const;  // the 128 id bytes
  int live_streams() const;
  int live_allocations() const;
  int event_creations() const;        // EventCreate calls (ClearObservations keeps the count)
  int live_events() const;            // created and not destroyed
  int event_queries() const;          // EventQuery calls
  size_t largest_allocation() const;  // the most bytes one Malloc asked for
  cudaStream_t created_stream() const;  // the last stream made by StreamCreate

  // Numeric id of a fake stream/event handle, as calls() prints it.
  static uintptr_t Id(const void* handle) { return reinterpret_cast<uintptr_t>(handle); }

  // --- NcclRuntime ---
  ncclResult_t GetUniqueId(ncclUniqueId* id) override;
  ncclResult_t CommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                  ncclConfig_t* config) override;
  ncclResult_t CommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                         ncclConfig_t* config) override;
  ncclResult_t CommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) override;
  ncclResult_t CommAbort(ncclComm_t comm) override;
  ncclResult_t CommFinalize(ncclComm_t comm) override;
  ncclResult_t CommDestroy(ncclComm_t comm) override;
  ncclResult_t AllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) override;
  ncclResult_t Broadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                         ncclComm_t comm, cudaStream_t stream) override;
  ncclResult_t AllGather(const void* send, void* recv, size_t send_count, ncclDataType_t type,
                         ncclComm_t comm, cudaStream_t stream) override;
  ncclResult_t ReduceScatter(const void* send, void* recv, size_t recv_count, ncclDataType_t type,
                             ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) override;
  cudaError_t SetDevice(int device) override;
  cudaError_t StreamCreate(cudaStream_t* stream) override;
  cudaError_t StreamDestroy(cudaStream_t stream) override;
  cudaError_t StreamQuery(cudaStream_t stream) override;
  cudaError_t EventCreate(cudaEvent_t* event) override;
  cudaError_t EventDestroy(cudaEvent_t event) override;
  cudaError_t EventRecord(cudaEvent_t event, cudaStream_t stream) override;
  cudaError_t EventQuery(cudaEvent_t event) override;
  cudaError_t StreamWaitEvent(cudaStream_t stream, cudaEvent_t event) override;
  cudaError_t Malloc(void** ptr, size_t bytes) override;
  cudaError_t Free(void* ptr) override;
  cudaError_t MemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) override;

 private:
  ncclResult_t RecordOpLocked(Op op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  cudaError_t set_device_result_ ABSL_GUARDED_BY(mu_) = cudaSuccess;
  ncclResult_t init_call_result_ ABSL_GUARDED_BY(mu_) = ncclInProgress;
  ncclResult_t init_async_result_ ABSL_GUARDED_BY(mu_) = ncclSuccess;
  int init_polls_ ABSL_GUARDED_BY(mu_) = 2;
  ncclResult_t op_result_ ABSL_GUARDED_BY(mu_) = ncclInProgress;
  int enqueue_polls_ ABSL_GUARDED_BY(mu_) = 1;
  bool events_complete_ ABSL_GUARDED_BY(mu_) = true;
  int event_polls_ ABSL_GUARDED_BY(mu_) = 0;
  int ops_that_complete_ ABSL_GUARDED_BY(mu_) = -1;
  int op_calls_ ABSL_GUARDED_BY(mu_) = 0;  // collective calls so far (never cleared)
  ncclResult_t finalize_result_ ABSL_GUARDED_BY(mu_) = ncclInProgress;
  int finalize_polls_ ABSL_GUARDED_BY(mu_) = 1;
  int stream_busy_polls_ ABSL_GUARDED_BY(mu_) = 0;

  // The communicator's asynchronous state: `state_` after `polls_left_` more polls.
  ncclResult_t state_ ABSL_GUARDED_BY(mu_) = ncclSuccess;
  int polls_left_ ABSL_GUARDED_BY(mu_) = 0;
  ncclResult_t async_error_ ABSL_GUARDED_BY(mu_) = ncclSuccess;

  std::vector<Op> ops_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  int abort_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int finalize_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int destroy_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int init_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int split_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int last_split_blocking_ ABSL_GUARDED_BY(mu_) = -1;
  int last_split_key_ ABSL_GUARDED_BY(mu_) = -1;
  int last_init_blocking_ ABSL_GUARDED_BY(mu_) = -1;
  int last_init_rank_ ABSL_GUARDED_BY(mu_) = -1;
  int last_init_nranks_ ABSL_GUARDED_BY(mu_) = -1;
  std::string last_init_id_ ABSL_GUARDED_BY(mu_);
  uintptr_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  int live_streams_ ABSL_GUARDED_BY(mu_) = 0;
  int live_allocations_ ABSL_GUARDED_BY(mu_) = 0;
  cudaStream_t created_stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::set<uintptr_t> pending_events_ ABSL_GUARDED_BY(mu_);
  std::map<uintptr_t, int> event_polls_left_ ABSL_GUARDED_BY(mu_);
  int event_creations_ ABSL_GUARDED_BY(mu_) = 0;
  int live_events_ ABSL_GUARDED_BY(mu_) = 0;
  int event_queries_ ABSL_GUARDED_BY(mu_) = 0;
  size_t largest_allocation_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t unique_ids_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_GPU_FAKE_NCCL_RUNTIME_H_
