// CreateRankNcclCollective in the CUDA build: NcclCollective on the runner's device and stream.
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>

#include "worker/collective/gpu/nccl_collective.h"
#include "worker/rank/gpu/gpu_model_runner.h"

namespace ringleader {

absl::StatusOr<std::unique_ptr<Collective>> CreateRankNcclCollective(
    std::shared_ptr<KeyValueStore> store, const std::string& prefix, int rank, int world_size,
    const ComputePlacement& placement, const RankNcclOptions& options) {
  gpu::NcclOptions nccl;
  nccl.init_timeout = options.init_timeout;
  nccl.collective_timeout = options.collective_timeout;
  nccl.compute_stream = static_cast<cudaStream_t>(placement.compute_stream);
  nccl.warm_up = options.warm_up;
  nccl.side_channel = options.side_channel;
  return gpu::CreateNcclCollective(std::move(store), prefix, rank, world_size, placement.gpu, nccl);
}

}  // namespace ringleader
