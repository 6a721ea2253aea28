// NcclOptions for the GPU suites: generous init and collective timeouts (real GPUs, real NCCL),
// operations ordered after the suite's compute stream.
#ifndef RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_SUITE_OPTIONS_H_
#define RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_SUITE_OPTIONS_H_

#include <cuda_runtime_api.h>

#include "absl/time/time.h"
#include "worker/collective/gpu/nccl_collective.h"

namespace ringleader {
namespace gpu {

inline NcclOptions SuiteNcclOptions(cudaStream_t compute) {
  NcclOptions o;
  o.init_timeout = absl::Seconds(60);
  o.collective_timeout = absl::Seconds(30);
  o.compute_stream = compute;
  return o;
}

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_SUITE_OPTIONS_H_
