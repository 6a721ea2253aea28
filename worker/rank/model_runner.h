// One rank's model and optimizer, wherever they compute: the seam that lets one training loop
// (training_loop.h) drive the CPU trainer (Mlp + SgdOptimizer, cpu_model_runner.h) and the GPU
// trainer (GpuMlp + GpuSgdOptimizer, gpu_model_runner.h) alike.
//
// Pointers a runner hands out (gradient slots, parameters) live in its memory(): host memory for
// the CPU runner, device memory on the GPU runner's compute stream. The loop passes memory() to
// the reducer and the drift check, and placement() to the collective factory, so the NCCL
// collective orders itself after the runner's kernels.
//
// Per step the step runner calls ForwardBackward per micro-batch and TakeLocalSquaredNorm;
// the job's SyncStrategy (worker/strategy/) makes the other calls: BindGradients or
// ReleaseOwnGradients, GradNorm and OptimizerStep or OptimizerStepOwned, and once, before the
// first step, ShardOptimizerState / ShardParameters where it shards them. Evaluate at epoch end,
// CaptureState* for checkpoints.
//
// Thread-safety: not thread-safe; the training thread owns a runner.
#ifndef RINGLEADER_WORKER_RANK_MODEL_RUNNER_H_
#define RINGLEADER_WORKER_RANK_MODEL_RUNNER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/checkpoint.h"
#include "worker/data/dataset.h"
#include "worker/sync/tensor_memory.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/parameter_shard.h"
#include "worker/trainer/parameter.h"

namespace ringleader {

// Where a rank computes, as its collective needs to know.
struct ComputePlacement {
  int gpu = -1;                    // CUDA device ordinal; -1 = the CPU
  void* compute_stream = nullptr;  // the runner's cudaStream_t (GPU only)
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // "cpu", "cuda:0" (for logs).
  virtual std::string device_name() const = 0;
  virtual ComputePlacement placement() const = 0;
  // Where parameters and gradients live. Owned by the runner.
  virtual TensorMemory* memory() = 0;

  virtual const std::vector<ParameterInfo>& parameters() const = 0;
  virtual size_t parameter_count() const = 0;
  // The model's buffers (empty on the GPU: GpuMlp has none).
  virtual std::vector<BufferInfo> buffers() = 0;

  // Parameter i's current gradient slot / parameters, in memory().
  virtual float* grad(size_t i) = 0;
  virtual std::vector<const float*> parameter_ptrs() = 0;
  // The same, writable (strategy zero1 writes the all-gathered shards into them).
  virtual std::vector<float*> mutable_parameter_ptrs() = 0;
  // Points gradient i at slots[i] (in memory()); Mlp::BindGradients' contract.
  virtual void BindGradients(std::vector<float*> slots) = 0;
  // Releases the model's own gradient storage of every parameter i with which[i]: zero2 hands
  // every slot out per step (Mlp::ReleaseOwnGradients). The default keeps it (GPU).
  virtual void ReleaseOwnGradients(const std::vector<bool>& which) { (void)which; }
  // Zeroes every current gradient slot.
  virtual absl::Status ZeroGradients() = 0;

  // Mlp::ForwardBackward (host inputs). Errors: INVALID_ARGUMENT like Mlp; device errors.
  virtual absl::StatusOr<double> ForwardBackward(const float* x, const int32_t* y, size_t batch,
                                                 const BackwardOptions& opts) = 0;

  // Adds the squared L2 norm of gradient i as it is NOW to the local accumulator (call before
  // the reducer may average that gradient in place; the GPU runner enqueues the reduction on its
  // stream, ahead of the collective). Errors surface in TakeLocalSquaredNorm.
  virtual void NoteLocalGradient(size_t i) = 0;
  // The accumulated sum since the last call, then resets it.
  virtual absl::StatusOr<double> TakeLocalSquaredNorm() = 0;
  // The L2 norm of the concatenation of the gradients with include[i], in registration order.
  virtual absl::StatusOr<double> GradNorm(const std::vector<bool>& include) = 0;

  // One SGD step over the parameters with has_grad[i], using the current gradient slots (only
  // the owned elements once the optimizer state is sharded).
  virtual absl::Status OptimizerStep(const std::vector<bool>& has_grad) = 0;
  // strategy zero2: the same step over the owned elements (ShardOptimizerState first), with
  // their gradients taken from owned_grads[i] (owned[i].size() floats of parameter i's owned
  // gradient, in memory(); null where nothing is owned) instead of the gradient slots: the
  // reduce-scattered gradient shard. Errors: UNIMPLEMENTED on a runner without zero2;
  // INVALID_ARGUMENT for a wrong number of entries or an unsharded optimizer; device errors.
  virtual absl::Status OptimizerStepOwned(const std::vector<bool>& has_grad,
                                          const std::vector<const float*>& owned_grads) {
    return absl::UnimplementedError("this trainer does not run strategy zero2");
  }

  // strategy fsdp: from now on the runner's parameters live in `params` (not owned; outlives
  // the runner's use): this rank's owned elements are copied there and the model's own
  // parameters are freed. ForwardBackward and Evaluate then gather each layer through it
  // (one layer ahead; after each pass the gathers are waited for and the staging released, a
  // failed gather failing the call; Evaluate runs the whole test shard as one chunk, so
  // every rank gathers alike), OptimizerStepOwned steps params->owned_parameter(i), and
  // parameter_ptrs() are null until GatherFullParameters. Call after ShardOptimizerState.
  // `params` must use this runner's memory(). Errors: UNIMPLEMENTED on a runner without fsdp;
  // LoadOwned's.
  virtual absl::Status ShardParameters(ParameterShard* params) {
    (void)params;
    return absl::UnimplementedError("this trainer does not run strategy fsdp");
  }
  // strategy fsdp: every parameter gathered whole into the model (a collective: every rank
  // calls it at the same point), for a checkpoint (CaptureStateWithMomentum), until
  // ReleaseFullParameters. Errors: FAILED_PRECONDITION without ShardParameters; the gathers'.
  virtual absl::Status GatherFullParameters() {
    return absl::FailedPreconditionError("GatherFullParameters: the parameters are not sharded");
  }
  virtual void ReleaseFullParameters() {}

  // strategy zero1: from now on the optimizer owns only owned[i] of parameter i's elements (one
  // entry per parameter, possibly empty; plan/shard_plan.h): OptimizerStep updates those
  // and keeps momentum for those only. Momentum already held (a restored checkpoint's) is cut
  // to the owned elements. Call before the first OptimizerStep.
  // Errors: INVALID_ARGUMENT for a wrong number of entries or a range past its parameter
  // (CheckOptimizerShard, sgd.h); device errors (the GPU runner's momentum stays on the device).
  virtual absl::Status ShardOptimizerState(const std::vector<ElementRange>& owned) = 0;
  // The momentum buffers as the optimizer holds them, copied to the host: per parameter the
  // owned elements (all of them unless sharded), empty while it has none.
  virtual absl::StatusOr<std::vector<std::vector<float>>> MomentumBuffers() = 0;
  // Momentum elements the optimizer holds now (no copy): every stepped parameter's count
  // unsharded, the owned elements of those under zero1.
  virtual size_t momentum_elements() const = 0;

  // Loss and accuracy over `test` (the GPU runner copies its parameters to a host Mlp first).
  virtual absl::StatusOr<Mlp::EvalResult> Evaluate(const Dataset& test, size_t batch) = 0;
  // Parameters, momentum buffers and buffers as a checkpoint (training_state.h's names).
  // Errors: FAILED_PRECONDITION once the optimizer state is sharded (use
  // CaptureStateWithMomentum with the gathered buffers); device errors.
  virtual absl::StatusOr<CheckpointData> CaptureState(uint64_t step, uint64_t epoch,
                                                      const std::string& spec_fingerprint) = 0;
  // The same with `momentum` (full buffers per parameter, an empty entry = none) in place of
  // the optimizer's own: a sharded optimizer's buffers gathered from every rank.
  // Errors: INVALID_ARGUMENT naming a parameter whose buffer has the wrong size;
  // FAILED_PRECONDITION while fsdp's parameters are sharded (GatherFullParameters first);
  // device errors.
  virtual absl::StatusOr<CheckpointData> CaptureStateWithMomentum(
      uint64_t step, uint64_t epoch, const std::string& spec_fingerprint,
      std::vector<std::vector<float>> momentum) = 0;
  // Puts a resumed optimizer's state back: momentum buffers per parameter, whole (the
  // checkpoint's form; a sharded optimizer keeps its owned elements), an empty entry = none yet,
  // and its step count. (Parameters and buffers are restored into the host Mlp the
  // runner is created from.) Errors: INVALID_ARGUMENT naming a parameter whose buffer has the
  // wrong size; device errors.
  virtual absl::Status RestoreOptimizerState(const std::vector<std::vector<float>>& momentum,
                                             uint64_t step_count) = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_MODEL_RUNNER_H_
