// NcclOptions for the GPU suites: generous init and collective timeouts (real GPUs, real NCCL),
// operations ordered after the suite's compute stream. RL_GPU_TEST_DEADLINE_SCALE=F (a number
// >= 1, default 1) multiplies both timeouts: compute-sanitizer slows every kernel and CUDA call
// (deploy/gpu_check.sh runs the NCCL suites under memcheck with F = 20). A malformed value aborts
// the test naming the variable.
#ifndef RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_SUITE_OPTIONS_H_
#define RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_SUITE_OPTIONS_H_

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/time/time.h"
#include "worker/collective/gpu/nccl_collective.h"

namespace ringleader {
namespace gpu {

// `d` times RL_GPU_TEST_DEADLINE_SCALE.
inline absl::Duration SuiteDeadline(absl::Duration d) {
  const char* text = std::getenv("RL_GPU_TEST_DEADLINE_SCALE");
  if (text == nullptr || *text == '\0') return d;
  double scale = 0;
  if (!absl::SimpleAtod(text, &scale) || !(scale >= 1) || scale > 1000) {
    std::fprintf(stderr,
                 "RL_GPU_TEST_DEADLINE_SCALE='%s': expected a number from 1 to 1000 (the factor "
                 "by which the GPU suites' NCCL timeouts grow), e.g. 20 under compute-sanitizer\n",
                 text);
    std::abort();
  }
  return d * scale;
}

inline NcclOptions SuiteNcclOptions(cudaStream_t compute) {
  NcclOptions o;
  o.init_timeout = SuiteDeadline(absl::Seconds(60));
  o.collective_timeout = SuiteDeadline(absl::Seconds(30));
  o.compute_stream = compute;
  return o;
}

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_SUITE_OPTIONS_H_
