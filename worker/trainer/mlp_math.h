// Per-element and per-row arithmetic of the MLP (worker/trainer/mlp.h), written once and compiled
// twice: by g++ for host tests and by nvcc into the GPU trainer's kernels (RL_HOST_DEVICE). Each
// function reproduces the CPU Mlp's arithmetic in the same order and precision, so on the host it
// gives bit-identical results; on the GPU the kernels are built with --fmad=false so the
// element-wise parts stay bit-identical too (the GEMMs, done by cuBLAS, are not).
//
// Plain arithmetic only: no std:: containers, no exceptions, no allocation.
#ifndef RINGLEADER_WORKER_TRAINER_MLP_MATH_H_
#define RINGLEADER_WORKER_TRAINER_MLP_MATH_H_

#include <math.h>
#include <stddef.h>

#include "common/host_device.h"

namespace ringleader {
namespace gpu {

// The epilogue of a Linear layer for one output element: acc (the GEMM result x·W^T) plus the
// bias, then ReLU on hidden layers (`relu`), not on the logits. ReLU(NaN) = 0, like the CPU Mlp.
RL_HOST_DEVICE inline float BiasActivation(float acc, float bias, bool relu) {
  const float v = acc + bias;
  if (!relu) return v;
  return v > 0.0f ? v : 0.0f;
}

// ReLU backward for one element: the incoming gradient passes where the layer's output (after
// ReLU) is positive, and is 0 elsewhere.
RL_HOST_DEVICE inline float ReluBackward(float delta, float activation) {
  return activation > 0.0f ? delta : 0.0f;
}

// Softmax cross-entropy of one row of `classes` logits against `label` (in range; checked by the
// caller). Writes dLoss/dlogits for this row, scaled, into `delta`:
//   delta[j] = (softmax(logits)[j] - [j == label]) * scale     (scale = loss_scale / batch)
// and returns the row's loss -log softmax(logits)[label], computed in double as
// max + log(sum exp(logit - max)) - logit[label].
RL_HOST_DEVICE inline double SoftmaxCrossEntropyRow(const float* logits, size_t classes, int label,
                                                    float scale, float* delta) {
  float max = logits[0];
  for (size_t j = 1; j < classes; ++j) max = logits[j] > max ? logits[j] : max;
  const double max_d = static_cast<double>(max);
  double sum = 0.0;
  for (size_t j = 0; j < classes; ++j) sum += exp(static_cast<double>(logits[j]) - max_d);
  for (size_t j = 0; j < classes; ++j) {
    delta[j] = static_cast<float>(exp(static_cast<double>(logits[j]) - max_d) / sum);
  }
  delta[label] -= 1.0f;
  for (size_t j = 0; j < classes; ++j) delta[j] *= scale;
  return max_d + log(sum) - static_cast<double>(logits[label]);
}

// The bias gradient of output column `j`: `initial` (the gradient so far: accumulation) plus
// delta[b, j] for b = 0 .. batch-1, added in row order in float. `delta` is row-major
// batch x cols.
RL_HOST_DEVICE inline float BiasGradColumn(const float* delta, size_t batch, size_t cols, size_t j,
                                           float initial) {
  float acc = initial;
  for (size_t b = 0; b < batch; ++b) acc += delta[b * cols + j];
  return acc;
}

// Blocks of the GPU's squared-sum reduction (LaunchSquaredSumPartials): one partial sum each.
inline constexpr int kSquaredSumBlocks = 64;

// Sum of v[i]^2 (each square taken in double) for i = begin, begin+stride, ... < end, in that
// order: one thread's share of a gradient-norm reduction. The partial sums are then added in a
// fixed order, so the GPU norm is deterministic and differs from norm.h's sequential sum only by
// the order of double additions (relative difference ~1e-15).
RL_HOST_DEVICE inline double SquaredSumStrided(const float* v, size_t begin, size_t end,
                                               size_t stride) {
  double acc = 0.0;
  for (size_t i = begin; i < end; i += stride) {
    const double x = static_cast<double>(v[i]);
    acc += x * x;
  }
  return acc;
}

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_TRAINER_MLP_MATH_H_
