// The GPU seam of the rank process in the CPU-only build (no CUDA toolkit): a nccl job fails
// before any GPU or collective work, saying the build is why, and everything else runs as usual.
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/gpu/no_usable_gpu.h"
#include "common/status_macros.h"
#include "worker/rank/gpu/gpu_model_runner.h"

namespace ringleader {
namespace {

absl::Status NoGpuSupport() {
  return absl::FailedPreconditionError(absl::StrCat(
      gpu::kNoUsableGpu,
      "this build has no GPU support (built without the CUDA toolkit), so it cannot run backend "
      "nccl: rebuild where CUDA 13 with NCCL is installed, or use backend gloo"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelRunner>> CreateGpuModelRunner(std::unique_ptr<Mlp> initial,
                                                                  const SgdOptions& sgd,
                                                                  const GpuRunnerOptions& options) {
  // Names the rank's own problem first when it has one (started without --gpu).
  RETURN_IF_ERROR(CheckUsableGpu(options.gpu));
  return NoGpuSupport();
}

absl::StatusOr<std::unique_ptr<Collective>> CreateRankNcclCollective(
    std::shared_ptr<KeyValueStore> store, const std::string& prefix, int rank, int world_size,
    const ComputePlacement& placement, const RankNcclOptions& options) {
  return NoGpuSupport();
}

}  // namespace ringleader
