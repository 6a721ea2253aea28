// torch.optim.SGD for parameters in GPU memory: the update of worker/trainer/sgd.h
// (SgdUpdateElement, one CUDA thread per element, built without FMA contraction), so a GPU rank
// and a CPU rank given the same gradients end with bit-identical parameters and momentum
// buffers.
//
// Momentum buffers live on the device; a parameter's buffer is created at its first step with a
// gradient (torch's `momentum_buffer is None`). Updates are enqueued on the stream given at
// creation (the model's stream()); Step does not wait for them.
//
// Sharded (strategies zero1, zero2 and fsdp, CreateSharded): like SgdOptimizer's sharded form, it steps only
// owned[i] of parameter i's elements, with the same kernel on that sub-range (the update of
// element k reads and writes element k only, so each owned element ends bit for bit as the
// unsharded optimizer leaves it), and a device momentum buffer holds owned[i].size() elements.
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
  // The optimizer of one rank under strategy zero1: it owns only owned[i] of parameter i's
  // elements (one entry per parameter, possibly empty). Errors: Create's; INVALID_ARGUMENT from
  // CheckOptimizerShard ("optimizer shard: ...").
  static absl::StatusOr<std::unique_ptr<GpuSgdOptimizer>> CreateSharded(
      std::vector<ParameterInfo> params, SgdOptions options, std::vector<ElementRange> owned,
      int device, cudaStream_t stream);
  ~GpuSgdOptimizer();
  GpuSgdOptimizer(const GpuSgdOptimizer&) = delete;
  GpuSgdOptimizer& operator=(const GpuSgdOptimizer&) = delete;

  // SgdOptimizer::Step with device pointers. Errors: INVALID_ARGUMENT if a vector's size is not
  // parameters().size(); CUDA errors (cuda_status.h).
  absl::Status Step(const std::vector<float*>& params, const std::vector<const float*>& grads,
                    const std::vector<bool>& has_grad);
  // SgdOptimizer::StepOwned (strategy zero2): owned_grads[i] points at the gradient of the
  // owned elements only (the reduce-scattered shard; null where nothing is owned). Errors:
  // Step's; INVALID_ARGUMENT if the optimizer is not sharded.
  absl::Status StepOwned(const std::vector<float*>& params,
                         const std::vector<const float*>& owned_grads,
                         const std::vector<bool>& has_grad);
  // SgdOptimizer::StepShard (strategy fsdp): owned_params[i] points at the owned elements too.
  // Errors: StepOwned's.
  absl::Status StepShard(const std::vector<float*>& owned_params,
                         const std::vector<const float*>& owned_grads,
                         const std::vector<bool>& has_grad);

  const std::vector<ParameterInfo>& parameters() const { return params_; }
  const SgdOptions& options() const { return options_; }
  // Per parameter, the elements this optimizer steps: [0, count) unless sharded.
  const std::vector<ElementRange>& owned() const { return owned_; }
  bool sharded() const { return sharded_; }
  void set_lr(double lr) { options_.lr = lr; }
  uint64_t step_count() const { return step_count_; }
  // Momentum elements held on the device (the owned elements of the parameters that have a
  // buffer).
  size_t momentum_elements() const;

  // Like SgdOptimizer::momentum_buffers(): one entry per parameter, empty while it has none;
  // sharded, an entry holds the owned elements only. Waits for the stream.
  absl::StatusOr<std::vector<std::vector<float>>> CopyMomentumBuffersToHost() const;
  // The reverse, for a resumed training: the buffers become exactly `buffers` (an empty entry =
  // none yet), uploaded on the trainer's stream, and the step count is set. Sizes as
  // SgdOptimizer::RestoreMomentumBuffers (MomentumElementsToKeep): whole parameters, or
  // sharded the owned elements too; of a whole buffer a sharded optimizer keeps the owned
  // elements. Errors: INVALID_ARGUMENT for a wrong number of entries or a wrong size (naming
  // the parameter), nothing changed; CUDA errors.
  absl::Status RestoreMomentumBuffers(const std::vector<std::vector<float>>& buffers,
                                      uint64_t step_count);

 private:
  GpuSgdOptimizer(std::vector<ParameterInfo> params, SgdOptions options,
                  std::vector<ElementRange> owned, bool sharded, int device, cudaStream_t stream);

  // Step, StepOwned, StepShard: grads[i] points at element owned_[i].begin's gradient when
  // `grads_at_owned`, else at element 0's; params[i] likewise with `params_at_owned`.
  absl::Status StepImpl(const char* who, const std::vector<float*>& params,
                        const std::vector<const float*>& grads, const std::vector<bool>& has_grad,
                        bool grads_at_owned, bool params_at_owned);

  std::vector<ParameterInfo> params_;
  SgdOptions options_;
  std::vector<ElementRange> owned_;
  bool sharded_ = false;
  const int device_;
  const cudaStream_t stream_;
  // Device, owned_[i].size() floats each; null until the parameter's first step with momentum.
  std::vector<float*> buffers_;
  uint64_t step_count_ = 0;
};

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_TRAINER_GPU_GPU_SGD_H_
