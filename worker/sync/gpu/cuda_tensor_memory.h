// TensorMemory (worker/sync/tensor_memory.h) in the memory of one CUDA GPU, ordered on the
// trainer's compute stream: the reducer's bucket arena and the drift check's scratch live next
// to the GpuMlp's parameters and gradients, and every operation is enqueued on the same stream
// as the backward kernels that write the gradients.
//
//   Allocate / Free      cudaMallocAsync / cudaFreeAsync on the stream (stream-ordered: a
//                        buffer freed after a collective's Work::Wait() is safe to reuse), from
//                        the device's current memory pool: call RetainFreedDeviceMemory once
//                        per device, or each step's staging is unmapped and mapped again
//   Zero                 cudaMemsetAsync
//   CopyFromHost         cudaMemcpyAsync, then cudaStreamSynchronize (the caller may reuse the
//                        pageable source at once; the copies are a few bytes per step)
//   CopyToHost           cudaMemcpyAsync, then cudaStreamSynchronize (the host needs the value)
//   Copy                 cudaMemcpyAsync device to device
//   CastToBf16/FromBf16  gpu_mlp_kernels.h's cast kernels (common/bf16.h's rounding)
//   MaxAbsDiff           tensor_memory_kernels.h's reduction, one partials copy back
//   SquaredSum           gpu_mlp_kernels.h's squared-sum partials, one copy back, added in
//                        block order (deterministic)
//   Add                  tensor_memory_kernels.h's element-wise add
//
// Why the compute stream: NcclCollective makes its communication stream wait for the compute
// stream at each call (NcclOptions::compute_stream), so a cast or the sentinel write enqueued
// here before an all-reduce is seen by it, without a host synchronisation.
//
// Errors: cuda_status.h's mapping (FAILED_PRECONDITION "no usable GPU: ...", RESOURCE_EXHAUSTED
// for out of memory, INTERNAL). Thread-safety: like the stream's owner, one training thread.
#ifndef RINGLEADER_WORKER_SYNC_GPU_CUDA_TENSOR_MEMORY_H_
#define RINGLEADER_WORKER_SYNC_GPU_CUDA_TENSOR_MEMORY_H_

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "worker/sync/tensor_memory.h"

namespace ringleader {
namespace gpu {

// Sets the release threshold of `device`'s current memory pool (the one cudaMallocAsync draws
// from: the device's default pool unless someone set another) to UINT64_MAX. With CUDA's default
// threshold, 0, the pool hands every unused byte back to the driver at each synchronisation
// (cudaStreamSynchronize, which CopyToHost calls every step), so the buffers the training loop
// allocates and frees every step (the collective ledger's summaries, the drift check's scratch,
// fsdp's layer staging, zero2's gradient slots) are unmapped and mapped again each time. Now
// the pool keeps what was freed and reuses it: its size settles at the job's peak. Process-wide
// for the device and idempotent: the rank calls it where it sets up its GPU
// (CreateGpuModelRunner). Errors: cuda_status.h's mapping.
absl::Status RetainFreedDeviceMemory(int device);

class CudaTensorMemory : public TensorMemory {
 public:
  // `stream` (not owned) must outlive this object and every allocation made through it.
  CudaTensorMemory(int device, cudaStream_t stream) : device_(device), stream_(stream) {}

  MemoryKind kind() const override { return MemoryKind::kDevice; }
  bool host_accessible() const override { return false; }
  std::string name() const override;
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* ptr) override;
  absl::Status Zero(void* dst, size_t bytes) override;
  absl::Status CopyFromHost(void* dst, const void* host_src, size_t bytes) override;
  absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) override;
  absl::Status Copy(void* dst, const void* src, size_t bytes) override;
  absl::Status CastToBf16(const float* src, uint16_t* dst, size_t count) override;
  absl::Status CastFromBf16(const uint16_t* src, float* dst, size_t count) override;
  absl::Status MaxAbsDiff(const std::vector<const float*>& a, const std::vector<const float*>& b,
                          const std::vector<size_t>& counts, std::vector<double>* out) override;
  absl::Status SquaredSum(const float* src, size_t count, double* out) override;
  absl::Status Add(float* dst, const float* src, size_t count) override;

 private:
  const int device_;
  const cudaStream_t stream_;
};

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_SYNC_GPU_CUDA_TENSOR_MEMORY_H_
