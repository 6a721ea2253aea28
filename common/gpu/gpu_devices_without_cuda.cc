// DetectGpus in the CPU-only build (no CUDA toolkit): there is never a usable GPU, and the
// message says why and what to do, e.g. for a worker started with --gpu=0.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/gpu/gpu_devices.h"

namespace ringleader {
namespace gpu {

bool BuiltWithCuda() { return false; }

absl::StatusOr<std::vector<ringleader::v1::Device>> DetectGpus() {
  return absl::FailedPreconditionError(absl::StrCat(
      kNoUsableGpu,
      "this build has no GPU support (built without the CUDA toolkit; install CUDA 13 with NCCL "
      "at /usr/local/cuda or set RINGLEADER_CUDA_PATH, and build without --config=cpu_only)"));
}

}  // namespace gpu
}  // namespace ringleader
