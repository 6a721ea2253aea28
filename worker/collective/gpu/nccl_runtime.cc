#include "worker/collective/gpu/nccl_runtime.h"

#include <cuda_runtime.h>

namespace ringleader {
namespace gpu {
namespace {

class RealRuntime : public NcclRuntime {
 public:
  ncclResult_t GetUniqueId(ncclUniqueId* id) override { return ncclGetUniqueId(id); }
  ncclResult_t CommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                  ncclConfig_t* config) override {
    return ncclCommInitRankConfig(comm, nranks, id, rank, config);
  }
  ncclResult_t CommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                         ncclConfig_t* config) override {
    return ncclCommSplit(comm, color, key, newcomm, config);
  }
  ncclResult_t CommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) override {
    return ncclCommGetAsyncError(comm, async_error);
  }
  ncclResult_t CommAbort(ncclComm_t comm) override { return ncclCommAbort(comm); }
  ncclResult_t CommFinalize(ncclComm_t comm) override { return ncclCommFinalize(comm); }
  ncclResult_t CommDestroy(ncclComm_t comm) override { return ncclCommDestroy(comm); }
  ncclResult_t AllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) override {
    return ncclAllReduce(send, recv, count, type, op, comm, stream);
  }
  ncclResult_t Broadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                         ncclComm_t comm, cudaStream_t stream) override {
    return ncclBroadcast(send, recv, count, type, root, comm, stream);
  }
  ncclResult_t AllGather(const void* send, void* recv, size_t send_count, ncclDataType_t type,
                         ncclComm_t comm, cudaStream_t stream) override {
    return ncclAllGather(send, recv, send_count, type, comm, stream);
  }
  ncclResult_t ReduceScatter(const void* send, void* recv, size_t recv_count, ncclDataType_t type,
                             ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) override {
    return ncclReduceScatter(send, recv, recv_count, type, op, comm, stream);
  }
  cudaError_t SetDevice(int device) override { return cudaSetDevice(device); }
  cudaError_t StreamCreate(cudaStream_t* stream) override {
    return cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking);
  }
  cudaError_t StreamDestroy(cudaStream_t stream) override { return cudaStreamDestroy(stream); }
  cudaError_t StreamQuery(cudaStream_t stream) override { return cudaStreamQuery(stream); }
  cudaError_t EventCreate(cudaEvent_t* event) override {
    return cudaEventCreateWithFlags(event, cudaEventDisableTiming);
  }
  cudaError_t EventDestroy(cudaEvent_t event) override { return cudaEventDestroy(event); }
  cudaError_t EventRecord(cudaEvent_t event, cudaStream_t stream) override {
    return cudaEventRecord(event, stream);
  }
  cudaError_t EventQuery(cudaEvent_t event) override { return cudaEventQuery(event); }
  cudaError_t StreamWaitEvent(cudaStream_t stream, cudaEvent_t event) override {
    return cudaStreamWaitEvent(stream, event, 0);
  }
  cudaError_t Malloc(void** ptr, size_t bytes) override { return cudaMalloc(ptr, bytes); }
  cudaError_t Free(void* ptr) override { return cudaFree(ptr); }
  cudaError_t MemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) override {
    return cudaMemsetAsync(ptr, value, bytes, stream);
  }
};

}  // namespace

std::shared_ptr<NcclRuntime> RealNcclRuntime() {
  static auto* const runtime = new std::shared_ptr<NcclRuntime>(std::make_shared<RealRuntime>());
  return *runtime;
}

}  // namespace gpu
}  // namespace ringleader
