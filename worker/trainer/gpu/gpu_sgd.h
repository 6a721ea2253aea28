// torch.optim.SGD for parameters in GPU memory: the update of worker/trainer/sgd.h
// (SgdUpdateElement, one CUDA thread per element, built without FMA contraction), so a GPU rank
// and a CPU rank given the same gradients end with bit-identical parameters and momentum
// buffers.
//
// Momentum buffers live on the device; a parameter's buffer is created at its first step with a
// gradient (torch's `momentum_buffer is None`). Updates are enqueued on the stream given at
// creation (the model's stream()); Step does not wait for them.
//
// Thread-safety: not thread-safe; one training thread owns it.
#ifndef RINGLEADER_WORKER_TRAINER_GPU_GPU_SGD_H_
#define RINGLEADER_WORKER_TRAINER_GPU_GPU_SGD_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/trainer/parameter.h"
#include "worker/trainer/sgd.h"

namespace ringleader {
namespace gpu {

class GpuSgdOptimizer {
 public:
  // Errors: INVALID_ARGUMENT from ValidateSgdOptions (naming the optimizer.* field).
  static absl::StatusOr<std::unique_ptr<GpuSgdOptimizer>> Create(std::vector<ParameterInfo> params,
                                                                 SgdOptions options, int device,
                                                                 cudaStream_t stream);
  ~GpuSgdOptimizer();
  GpuSgdOptimizer(const GpuSgdOptimizer&) = delete;
  GpuSgdOptimizer& operator=(const GpuSgdOptimizer&) = delete;

  // SgdOptimizer::Step with device pointers. Errors: INVALID_ARGUMENT if a vector's size is not
  // parameters().size(); CUDA errors (cuda_status.h).
  absl::Status Step(const std::vector<float*>& params, const std::vector<const float*>& grads,
                    const std::vector<bool>& has_grad);

  const std::vector<ParameterInfo>& parameters() const { return params_; }
  const SgdOptions& options() const { return options_; }
  void set_lr(double lr) { options_.lr = lr; }
  uint64_t step_count() const { return step_count_; }
  // Momentum elements held on the device (the parameters that have a buffer).
  size_t momentum_elements() const;

  // Like SgdOptimizer::momentum_buffers(): one entry per parameter, empty while it has none.
  // Waits for the stream.
  absl::StatusOr<std::vector<std::vector<float>>> CopyMomentumBuffersToHost() const;
  // The reverse, for a resumed training: uploads the buffers (an empty entry = none yet) on the
  // trainer's stream and sets the step count. Errors: INVALID_ARGUMENT for a wrong number of
  // entries or a wrong size (naming the parameter), nothing changed; CUDA errors.
  absl::Status RestoreMomentumBuffers(const std::vector<std::vector<float>>& buffers,
                                      uint64_t step_count);

 private:
  GpuSgdOptimizer(std::vector<ParameterInfo> params, SgdOptions options, int device,
                  cudaStream_t stream);

  std::vector<ParameterInfo> params_;
  SgdOptions options_;
  const int device_;
  const cudaStream_t stream_;
  std::vector<float*> buffers_;  // device, null until the parameter's first step with momentum
  uint64_t step_count_ = 0;
};

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_TRAINER_GPU_GPU_SGD_H_
