// The NCCL and CUDA runtime calls NcclCollective makes, behind an interface: the real one calls
// the libraries; tests substitute a fake to drive init, completion, errors and timeouts on
// machines without a GPU (the control flow is what those tests check, not NCCL itself).
//
// Every method mirrors one library call with the same arguments and result codes, so the real
// implementation is a one-line forward and the result codes go through cuda_status.h.
// Implementations are thread-safe to the same degree as the libraries: NcclCollective never
// calls two methods on one communicator at the same time.
#ifndef RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_RUNTIME_H_
#define RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_RUNTIME_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <memory>

namespace ringleader {
namespace gpu {

class NcclRuntime {
 public:
  virtual ~NcclRuntime() = default;

  // ncclGetUniqueId: opens NCCL's bootstrap listener in this process.
  virtual ncclResult_t GetUniqueId(ncclUniqueId* id) = 0;
  // ncclCommInitRankConfig (NcclCollective passes config->blocking = 0).
  virtual ncclResult_t CommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                          ncclConfig_t* config) = 0;
  // ncclCommSplit: a second communicator over the ranks that pass the same `color`, ordered by
  // `key` (NcclCollective's side channel: every rank, color 0, key = its rank). Collective on
  // `comm`. With config->blocking = 0 it may answer ncclInProgress: the split then runs as a job
  // of `comm` (CommGetAsyncError(comm) reports ncclInProgress until it is over), which sets
  // *newcomm only when it completes — *newcomm and *config must stay valid until then — and
  // CommGetAsyncError(*newcomm) reports ncclInProgress until the new communicator is ready.
  virtual ncclResult_t CommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                 ncclConfig_t* config) = 0;
  // ncclCommGetAsyncError: *async_error = ncclInProgress while init or an enqueue is running.
  virtual ncclResult_t CommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) = 0;
  // ncclCommAbort: frees the communicator without waiting for peers (the failure path).
  virtual ncclResult_t CommAbort(ncclComm_t comm) = 0;
  // ncclCommFinalize: flushes every operation issued on the communicator and tears down its
  // connections with the peers; on a non-blocking communicator it may answer ncclInProgress,
  // and CommGetAsyncError then reports ncclInProgress until it is done (the success path).
  virtual ncclResult_t CommFinalize(ncclComm_t comm) = 0;
  // ncclCommDestroy: frees a finalized communicator's local resources.
  virtual ncclResult_t CommDestroy(ncclComm_t comm) = 0;

  virtual ncclResult_t AllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                                 ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) = 0;
  virtual ncclResult_t Broadcast(const void* send, void* recv, size_t count, ncclDataType_t type,
                                 int root, ncclComm_t comm, cudaStream_t stream) = 0;
  virtual ncclResult_t AllGather(const void* send, void* recv, size_t send_count,
                                 ncclDataType_t type, ncclComm_t comm, cudaStream_t stream) = 0;
  virtual ncclResult_t ReduceScatter(const void* send, void* recv, size_t recv_count,
                                     ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream) = 0;

  // cudaSetDevice.
  virtual cudaError_t SetDevice(int device) = 0;
  // cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking).
  virtual cudaError_t StreamCreate(cudaStream_t* stream) = 0;
  virtual cudaError_t StreamDestroy(cudaStream_t stream) = 0;
  // cudaStreamQuery: cudaSuccess once everything enqueued on `stream` has finished,
  // cudaErrorNotReady before (the drain after an abort polls it).
  virtual cudaError_t StreamQuery(cudaStream_t stream) = 0;
  // cudaEventCreateWithFlags(event, cudaEventDisableTiming).
  virtual cudaError_t EventCreate(cudaEvent_t* event) = 0;
  virtual cudaError_t EventDestroy(cudaEvent_t event) = 0;
  virtual cudaError_t EventRecord(cudaEvent_t event, cudaStream_t stream) = 0;
  // cudaSuccess once the event's work is done, cudaErrorNotReady before.
  virtual cudaError_t EventQuery(cudaEvent_t event) = 0;
  virtual cudaError_t StreamWaitEvent(cudaStream_t stream, cudaEvent_t event) = 0;
  // cudaMalloc / cudaFree (the barrier's one-element buffer).
  virtual cudaError_t Malloc(void** ptr, size_t bytes) = 0;
  virtual cudaError_t Free(void* ptr) = 0;
  // cudaMemsetAsync (the barrier's buffer is zeroed before its first all-reduce).
  virtual cudaError_t MemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) = 0;
};

// The runtime that calls NCCL and the CUDA runtime. Stateless; shared.
std::shared_ptr<NcclRuntime> RealNcclRuntime();

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_RUNTIME_H_
