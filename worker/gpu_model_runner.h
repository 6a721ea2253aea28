// The ModelRunner of the GPU trainer: GpuMlp + GpuSgdOptimizer on one CUDA device, the reducer's
// and drift check's memory a CudaTensorMemory on the model's compute stream.
//
// Evaluation and checkpoints copy the parameters (and momentum buffers) back into the host Mlp
// the runner was created from, and run the CPU code there. The local gradient norm is reduced on
// the device (one partials kernel per noted gradient, enqueued before the reducer may launch
// that gradient's bucket) and copied back once per step.
//
// Numbers: the GPU trainer tracks the CPU trainer within worker/gpu/tolerances.h (see
// worker/gpu/README.md); the SGD update and the drift figure are bit-identical for equal inputs.
#ifndef RINGLEADER_WORKER_GPU_MODEL_RUNNER_H_
#define RINGLEADER_WORKER_GPU_MODEL_RUNNER_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/model_runner.h"
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
// -1 (the rank was started without --gpu, i.e. not by a GPU worker), no driver / no device
// (DetectGpus' explanation), or an index out of range (the valid range named).
absl::Status CheckUsableGpu(int gpu);

// Uploads `initial` (kept as the host mirror for evaluation and checkpoints) to the GPU.
// `sgd` must pass ValidateSgdOptions. Errors: CheckUsableGpu's; UNIMPLEMENTED when the model has
// buffers (model.with_buffers: the GPU trainer has none yet); RESOURCE_EXHAUSTED (GPU memory);
// INTERNAL for other CUDA / cuBLAS failures.
absl::StatusOr<std::unique_ptr<ModelRunner>> CreateGpuModelRunner(std::unique_ptr<Mlp> initial,
                                                                  const SgdOptions& sgd,
                                                                  const GpuRunnerOptions& options);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_GPU_MODEL_RUNNER_H_
