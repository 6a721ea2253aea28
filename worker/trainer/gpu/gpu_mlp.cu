// The GPU trainer's kernels. Each kernel is a thin loop around one function of mlp_math.h,
// sgd_math.h or common/bf16.h, so CPU and GPU share the arithmetic. Built with --fmad=false (see
// BUILD): contracting a*b+c into one FMA would change the rounding and break the bit-for-bit
// match with the CPU optimizer.
#include <cuda_runtime.h>

#include "common/bf16.h"
#include "worker/trainer/gpu/gpu_mlp_kernels.h"
#include "worker/trainer/mlp_math.h"
#include "worker/trainer/sgd_math.h"

namespace ringleader {
namespace gpu {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops cover any n; more blocks than this only adds scheduling overhead.
constexpr size_t kMaxBlocks = 4096;

unsigned int BlocksFor(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

__device__ size_t GlobalIndex() {
  return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ size_t GlobalStride() { return static_cast<size_t>(gridDim.x) * blockDim.x; }

__global__ void BiasActivationKernel(float* out, const float* bias, size_t rows, size_t cols,
                                     bool relu) {
  const size_t n = rows * cols;
  for (size_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    out[i] = BiasActivation(out[i], bias[i % cols], relu);
  }
}

__global__ void ReluBackwardKernel(float* delta, const float* activation, size_t n) {
  for (size_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    delta[i] = ReluBackward(delta[i], activation[i]);
  }
}

__global__ void SoftmaxCrossEntropyKernel(const float* logits, const int32_t* labels, size_t batch,
                                          size_t classes, float scale, float* delta,
                                          double* row_loss) {
  for (size_t b = GlobalIndex(); b < batch; b += GlobalStride()) {
    row_loss[b] = SoftmaxCrossEntropyRow(logits + b * classes, classes, labels[b], scale,
                                         delta + b * classes);
  }
}

__global__ void BiasGradKernel(const float* delta, size_t batch, size_t cols, float* grad_bias) {
  for (size_t c = GlobalIndex(); c < cols; c += GlobalStride()) {
    grad_bias[c] = BiasGradColumn(delta, batch, cols, c, grad_bias[c]);
  }
}

__global__ void SgdUpdateKernel(float* param, const float* grad, float* momentum, size_t n,
                                SgdElementParams h, bool first_step) {
  for (size_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    SgdUpdateElement(&param[i], grad[i], momentum == nullptr ? nullptr : &momentum[i], first_step,
                     h);
  }
}

__global__ void FloatToBf16Kernel(const float* in, uint16_t* out, size_t n) {
  for (size_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = FloatToBf16(in[i]);
}

__global__ void Bf16ToFloatKernel(const uint16_t* in, float* out, size_t n) {
  for (size_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = Bf16ToFloat(in[i]);
}

// One partial per block: each thread sums its grid-stride share, then a tree reduction in
// shared memory (fixed shape, so the result is the same on every run). With `add` the block's
// sum is added to the partial already there instead of replacing it.
__global__ void SquaredSumPartialsKernel(const float* v, size_t n, double* partials, bool add) {
  __shared__ double sums[kThreads];
  sums[threadIdx.x] = SquaredSumStrided(v, GlobalIndex(), n, GlobalStride());
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) sums[threadIdx.x] += sums[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = add ? partials[blockIdx.x] + sums[0] : sums[0];
}

}  // namespace

cudaError_t LaunchBiasActivation(float* out, const float* bias, size_t rows, size_t cols, bool relu,
                                 cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  BiasActivationKernel<<<BlocksFor(rows * cols), kThreads, 0, stream>>>(out, bias, rows, cols,
                                                                        relu);
  return cudaGetLastError();
}

cudaError_t LaunchReluBackward(float* delta, const float* activation, size_t n,
                               cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ReluBackwardKernel<<<BlocksFor(n), kThreads, 0, stream>>>(delta, activation, n);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxCrossEntropy(const float* logits, const int32_t* labels, size_t batch,
                                      size_t classes, float scale, float* delta, double* row_loss,
                                      cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  SoftmaxCrossEntropyKernel<<<BlocksFor(batch), kThreads, 0, stream>>>(
      logits, labels, batch, classes, scale, delta, row_loss);
  return cudaGetLastError();
}

cudaError_t LaunchBiasGrad(const float* delta, size_t batch, size_t cols, float* grad_bias,
                           cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  BiasGradKernel<<<BlocksFor(cols), kThreads, 0, stream>>>(delta, batch, cols, grad_bias);
  return cudaGetLastError();
}

cudaError_t LaunchSgdUpdate(float* param, const float* grad, float* momentum, size_t n,
                            const SgdElementParams& h, bool first_step, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SgdUpdateKernel<<<BlocksFor(n), kThreads, 0, stream>>>(param, grad, momentum, n, h, first_step);
  return cudaGetLastError();
}

cudaError_t LaunchFloatToBf16(const float* in, uint16_t* out, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  FloatToBf16Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(in, out, n);
  return cudaGetLastError();
}

cudaError_t LaunchBf16ToFloat(const uint16_t* in, float* out, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  Bf16ToFloatKernel<<<BlocksFor(n), kThreads, 0, stream>>>(in, out, n);
  return cudaGetLastError();
}

cudaError_t LaunchSquaredSumPartials(const float* v, size_t n, double* partials,
                                     cudaStream_t stream) {
  // Always launched (even for n == 0) so every partial is written.
  SquaredSumPartialsKernel<<<kSquaredSumBlocks, kThreads, 0, stream>>>(v, n, partials, false);
  return cudaGetLastError();
}

cudaError_t LaunchAddSquaredSumPartials(const float* v, size_t n, double* partials,
                                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;  // adds 0 to every partial
  SquaredSumPartialsKernel<<<kSquaredSumBlocks, kThreads, 0, stream>>>(v, n, partials, true);
  return cudaGetLastError();
}

}  // namespace gpu
}  // namespace ringleader
