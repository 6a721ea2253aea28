// CheckUsableGpu: the same in the CUDA and the CPU-only build (DetectGpus says which).
#include "absl/strings/str_cat.h"
#include "common/gpu/gpu_devices.h"
#include "worker/rank/gpu/gpu_model_runner.h"

namespace ringleader {

absl::Status CheckUsableGpu(int gpu) {
  if (gpu < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        gpu::kNoUsableGpu,
        "backend nccl runs on GPU workers, and this rank was started without a GPU (start the "
        "worker daemon with --gpu N, one daemon per GPU)"));
  }
  absl::Status s = gpu::CheckGpuIndex(gpu);
  if (s.ok() || s.code() == absl::StatusCode::kFailedPrecondition) return s;
  return absl::FailedPreconditionError(
      absl::StrCat(gpu::kNoUsableGpu, "GPU ", gpu, ": ", s.message()));
}

}  // namespace ringleader
