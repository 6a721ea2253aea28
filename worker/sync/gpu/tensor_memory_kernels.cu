// CudaTensorMemory's kernels: the drift check's per-tensor max|a - b| on the device, with
// drift_math.h's arithmetic (the host's), so GPU and CPU ranks report the same drift; the
// element-wise add of zero2's gradient accumulation.
#include <cuda_runtime.h>

#include "worker/sync/drift_math.h"
#include "worker/sync/gpu/tensor_memory_kernels.h"

namespace ringleader {
namespace gpu {
namespace {

constexpr int kThreads = 256;

// One partial per block: each thread folds its grid-stride share, then a tree in shared memory.
// max is order-independent (NaN wins either way), so the result does not depend on the shape.
__global__ void MaxAbsDiffPartialsKernel(const float* a, const float* b, size_t n,
                                         double* partials) {
  __shared__ double worst[kThreads];
  double acc = 0.0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    acc = MaxKeepingNan(acc, AbsDiff(a[i], b[i]));
  }
  worst[threadIdx.x] = acc;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) {
      worst[threadIdx.x] = MaxKeepingNan(worst[threadIdx.x], worst[threadIdx.x + width]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = worst[0];
}

__global__ void AddInPlaceKernel(float* dst, const float* src, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] = __fadd_rn(dst[i], src[i]);
  }
}

}  // namespace

cudaError_t LaunchAddInPlace(float* dst, const float* src, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const size_t wanted = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < 4096 ? wanted : 4096);
  AddInPlaceKernel<<<blocks, kThreads, 0, stream>>>(dst, src, n);
  return cudaGetLastError();
}

cudaError_t LaunchMaxAbsDiffPartials(const float* a, const float* b, size_t n, double* partials,
                                     cudaStream_t stream) {
  MaxAbsDiffPartialsKernel<<<kMaxAbsDiffBlocks, kThreads, 0, stream>>>(a, b, n, partials);
  return cudaGetLastError();
}

}  // namespace gpu
}  // namespace ringleader
