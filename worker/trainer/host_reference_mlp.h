// GpuMlp's algorithm on the host, for tests: the same sequence of steps (GEMM, bias+ReLU,
// softmax cross-entropy, bias gradient, weight gradient, ReLU backward) built from mlp_math.h's
// functions, with plain loops for the matrix products (fp32 accumulation in index order) and,
// in bf16 mode, the GEMM inputs rounded to bfloat16 exactly where GpuMlp rounds them.
//
// It lets host tests check the shared math against the CPU Mlp, calibrate the bf16 tolerance
// without a GPU, and gives the GPU suite a bf16 reference. Not thread-safe.
#ifndef RINGLEADER_WORKER_TRAINER_HOST_REFERENCE_MLP_H_
#define RINGLEADER_WORKER_TRAINER_HOST_REFERENCE_MLP_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "worker/trainer/mlp.h"

namespace ringleader {
namespace gpu {

class HostReferenceMlp {
 public:
  // Copies `initial`'s parameters; gradients start at 0.
  HostReferenceMlp(const Mlp& initial, bool bf16);

  std::vector<std::vector<float>>& params() { return params_; }
  std::vector<std::vector<float>>& grads() { return grads_; }
  void ZeroGradients();

  // Mlp::ForwardBackward's contract (gradients accumulate, loss_scale, ready order), without
  // skip. Labels must be in range. Appends each parameter index to *ready_order (if non-null)
  // when its gradient is complete. Returns the mean loss.
  double ForwardBackward(const float* x, const int32_t* y, size_t batch, float loss_scale,
                         std::vector<size_t>* ready_order);

 private:
  // v, or v rounded to bfloat16 and back in bf16 mode.
  float In(float v) const;

  std::vector<size_t> layers_;
  bool bf16_;
  std::vector<std::vector<float>> params_;
  std::vector<std::vector<float>> grads_;
};

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_TRAINER_HOST_REFERENCE_MLP_H_
