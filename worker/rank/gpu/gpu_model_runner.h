// The ModelRunner of the GPU trainer: GpuMlp + GpuSgdOptimizer on one CUDA device, the reducer's
// and drift check's memory a CudaTensorMemory on the model's compute stream.
//
// Evaluation and checkpoints copy the parameters (and momentum buffers) back into the host Mlp
// the runner was created from, and run the CPU code there. The local gradient norm is reduced on
// the device (one partials kernel per noted gradient, enqueued before the reducer may launch
// that gradient's bucket) and copied back once per step; a gradient noted again within the step
// (zero2 and fsdp note it every micro-batch) adds to its partials, as the CPU runner adds every
// note (local_norm_notes.h).
//
// bf16 mixed precision: the GpuMlp recasts its bf16 copy of the parameters only after they
// changed (GpuMlp::MarkParametersChanged): OptimizerStep / OptimizerStepOwned and
// mutable_parameter_ptrs() (the shard gathers of zero1 and zero2 write through it) mark them. A
// checkpoint's parameters are loaded into the host Mlp before CreateGpuModelRunner uploads it.
//
// strategy zero1 (ShardOptimizerState): the GpuSgdOptimizer steps only the rank's owned elements
// and keeps their momentum only, on the device; the training loop all-gathers the parameter
// shards through the runner's device memory, as on the CPU runner. strategy zero2 likewise, with
// the gradients reduce-scattered by the zero2 reducer in the runner's device memory: backward
// writes each gradient into the slot the reducer's pool hands out (slot_for), the model's own
// gradient storage is released, and OptimizerStepOwned steps with the owned shard. strategy
// fsdp (ShardParameters): the FsdpParameters' shard and layer staging live in the runner's
// device memory; the GpuMlp frees its parameters and takes each layer from the gathers; a
// checkpoint's GatherFullParameters gathers into the host mirror.
//
// Numbers: the GPU trainer tracks the CPU trainer within worker/trainer/gpu_tolerances.h (see
// docs/gpu.md); the SGD update and the drift figure are bit-identical for equal inputs.
//
// In the CPU-only build (no CUDA toolkit) these functions exist too and answer FAILED_PRECONDITION
// "no usable GPU: this build has no GPU support ..." (without_cuda.cc), so the rank process and
// the training loop build and run every gloo job unchanged.
#ifndef RINGLEADER_WORKER_RANK_GPU_GPU_MODEL_RUNNER_H_
#define RINGLEADER_WORKER_RANK_GPU_GPU_MODEL_RUNNER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/collective/collective.h"
#include "worker/collective/key_value_store.h"
#include "worker/collective/warm_up.h"
#include "worker/rank/model_runner.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/sgd.h"

namespace ringleader {

struct GpuRunnerOptions {
  // CUDA device ordinal (the worker daemon's --gpu). -1 = none.
  int gpu = -1;
  // JobSpec.mixed_precision "bf16": bf16 GEMM inputs, fp32 master weights (gpu_mlp.h).
  bool bf16_mixed_precision = false;
};

// FAILED_PRECONDITION starting "no usable GPU: " unless `gpu` names a GPU this process can use:
// -1 (the rank was started without --gpu, i.e. not by a GPU worker), no driver / no device / a
// CPU-only build (DetectGpus' explanation), or an index out of range (the valid range named).
absl::Status CheckUsableGpu(int gpu);

// Uploads `initial` (kept as the host mirror for evaluation and checkpoints) to the GPU.
// `sgd` must pass ValidateSgdOptions. Errors: CheckUsableGpu's; UNIMPLEMENTED when the model has
// buffers (model.with_buffers: the GPU trainer has none yet); RESOURCE_EXHAUSTED (GPU memory);
// INTERNAL for other CUDA / cuBLAS failures.
absl::StatusOr<std::unique_ptr<ModelRunner>> CreateGpuModelRunner(std::unique_ptr<Mlp> initial,
                                                                  const SgdOptions& sgd,
                                                                  const GpuRunnerOptions& options);

struct RankNcclOptions {
  // How long communicator creation (rank 0's unique id, ncclCommInitRankConfig and the warm-up
  // that connects the ranks) may take.
  absl::Duration init_timeout = absl::Seconds(120);
  // Deadline of each collective (JobSpec.collective_timeout_ms).
  absl::Duration collective_timeout = absl::Seconds(60);
  // The operations the job will issue, warmed up after the one-float all-reduce
  // (worker/collective/warm_up.h; collective_factory.h's WarmUpOperationsFor).
  std::vector<WarmUpOperation> warm_up;
  // Also a side channel for the parameter gathers (strategy fsdp; NcclOptions::side_channel).
  bool side_channel = false;
};

// The NCCL collective of rank `rank` of `world_size` on placement.gpu, ordered after
// placement.compute_stream, rendezvousing through `store` under `prefix` (NcclCollective).
// Errors: CreateNcclCollective's; FAILED_PRECONDITION "no usable GPU: ..." in the CPU-only build.
absl::StatusOr<std::unique_ptr<Collective>> CreateRankNcclCollective(
    std::shared_ptr<KeyValueStore> store, const std::string& prefix, int rank, int world_size,
    const ComputePlacement& placement, const RankNcclOptions& options);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_GPU_GPU_MODEL_RUNNER_H_
