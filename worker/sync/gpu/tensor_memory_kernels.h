// Launchers of CudaTensorMemory's kernels (defined in tensor_memory_kernels.cu, built by nvcc).
// Plain C++ declarations, so g++-compiled code calls them without CUDA syntax. Each enqueues on
// `stream` and returns the launch's cudaError_t. Pointers are device pointers.
#ifndef RINGLEADER_WORKER_SYNC_GPU_TENSOR_MEMORY_KERNELS_H_
#define RINGLEADER_WORKER_SYNC_GPU_TENSOR_MEMORY_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>

namespace ringleader {
namespace gpu {

// Blocks used by LaunchMaxAbsDiffPartials: `partials` holds this many doubles.
inline constexpr int kMaxAbsDiffBlocks = 32;

// partials[k] = max over block k's share of i < n of AbsDiff(a[i], b[i]) (drift_math.h), NaN
// winning over numbers; 0 where a block has no element. The caller combines the partials with
// MaxKeepingNan. Always launched (n == 0 included), so every partial is written.
cudaError_t LaunchMaxAbsDiffPartials(const float* a, const float* b, size_t n, double* partials,
                                     cudaStream_t stream);

// dst[i] += src[i], i < n (fp32, no contraction: the host's result bit for bit).
cudaError_t LaunchAddInPlace(float* dst, const float* src, size_t n, cudaStream_t stream);

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_SYNC_GPU_TENSOR_MEMORY_KERNELS_H_
