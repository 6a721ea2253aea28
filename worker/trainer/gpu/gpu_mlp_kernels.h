// Launchers of the GPU trainer's CUDA kernels (defined in gpu_mlp.cu, built by nvcc). Plain C++
// declarations, so g++-compiled code (gpu_mlp.cc, gpu_sgd.cc) calls them without CUDA syntax.
//
// Every launcher enqueues its kernel on `stream` and returns the launch's cudaError_t
// (cudaSuccess, or e.g. cudaErrorInsufficientDriver without a GPU); n == 0 launches nothing.
// Pointers are device pointers. The arithmetic is mlp_math.h's / sgd_math.h's / common/bf16.h's,
// so it matches the CPU trainer element for element.
#ifndef RINGLEADER_WORKER_TRAINER_GPU_GPU_MLP_KERNELS_H_
#define RINGLEADER_WORKER_TRAINER_GPU_GPU_MLP_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "worker/trainer/mlp_math.h"
#include "worker/trainer/sgd_math.h"

namespace ringleader {
namespace gpu {

// out[r, c] = BiasActivation(out[r, c], bias[c], relu) for a row-major rows x cols matrix.
cudaError_t LaunchBiasActivation(float* out, const float* bias, size_t rows, size_t cols, bool relu,
                                 cudaStream_t stream);

// delta[i] = ReluBackward(delta[i], activation[i]), i < n.
cudaError_t LaunchReluBackward(float* delta, const float* activation, size_t n,
                               cudaStream_t stream);

// Per row b < batch: row_loss[b] = SoftmaxCrossEntropyRow(logits row b, labels[b], scale,
// delta row b). Labels must be in [0, classes) (the caller checks them on the host).
cudaError_t LaunchSoftmaxCrossEntropy(const float* logits, const int32_t* labels, size_t batch,
                                      size_t classes, float scale, float* delta, double* row_loss,
                                      cudaStream_t stream);

// grad_bias[c] = BiasGradColumn(delta, batch, cols, c, grad_bias[c]) (accumulates).
cudaError_t LaunchBiasGrad(const float* delta, size_t batch, size_t cols, float* grad_bias,
                           cudaStream_t stream);

// SgdUpdateElement on each of n elements. `momentum` may be null when h.momentum == 0.
cudaError_t LaunchSgdUpdate(float* param, const float* grad, float* momentum, size_t n,
                            const SgdElementParams& h, bool first_step, cudaStream_t stream);

// bfloat16 (stored as uint16_t) conversions, common/bf16.h's rounding (nearest, ties to even).
cudaError_t LaunchFloatToBf16(const float* in, uint16_t* out, size_t n, cudaStream_t stream);
cudaError_t LaunchBf16ToFloat(const uint16_t* in, float* out, size_t n, cudaStream_t stream);

// partials[k] = the sum of v[i]^2 over block k's share of v (k < kSquaredSumBlocks, mlp_math.h), in
// double. The caller adds the partials (in index order, for a deterministic result).
cudaError_t LaunchSquaredSumPartials(const float* v, size_t n, double* partials,
                                     cudaStream_t stream);
// partials[k] += the same block sum of v[i]^2: adds one more squared norm to partials written
// by LaunchSquaredSumPartials (one gradient noted once per micro-batch, GpuModelRunner).
cudaError_t LaunchAddSquaredSumPartials(const float* v, size_t n, double* partials,
                                        cudaStream_t stream);

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_TRAINER_GPU_GPU_MLP_KERNELS_H_
