// The first line of every test that needs a GPU:
//
//   TEST(GpuSuite, Something) {
//     RL_SKIP_WITHOUT_GPU(1);   // or 2 for tests that need two GPUs
//     ...
//
// skips (GTEST_SKIP) with "no GPU: <reason>" — DetectGpus' explanation, e.g. "no GPU: CUDA
// driver insufficient or no GPU (cudaGetDeviceCount: error 35 ...)", or how many GPUs the test
// needs and how many the machine has — so a run without GPUs passes and says why.
#ifndef RINGLEADER_WORKER_GPU_GPU_TEST_UTIL_H_
#define RINGLEADER_WORKER_GPU_GPU_TEST_UTIL_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/gpu/cuda_status.h"
#include "worker/gpu/gpu_devices.h"

namespace ringleader {
namespace gpu {

// "" if the machine has at least `min_gpus` usable GPUs; otherwise why not.
inline std::string NoGpuReason(int min_gpus) {
  auto gpus = DetectGpus();
  if (!gpus.ok()) {
    std::string reason(gpus.status().message());
    // The macro already says "no GPU: ".
    if (reason.rfind(kNoUsableGpu, 0) == 0) reason.erase(0, sizeof(kNoUsableGpu) - 1);
    return reason;
  }
  if (static_cast<int>(gpus->size()) < min_gpus) {
    return absl::StrCat("this test needs ", min_gpus, " GPUs, the machine has ", gpus->size());
  }
  return "";
}

// The number of usable GPUs (0 without a driver).
inline int GpuCount() {
  auto gpus = DetectGpus();
  return gpus.ok() ? static_cast<int>(gpus->size()) : 0;
}

}  // namespace gpu
}  // namespace ringleader

#define RL_SKIP_WITHOUT_GPU(min_gpus)                                              \
  do {                                                                             \
    const std::string rl_no_gpu_reason = ::ringleader::gpu::NoGpuReason(min_gpus); \
    if (!rl_no_gpu_reason.empty()) GTEST_SKIP() << "no GPU: " << rl_no_gpu_reason; \
  } while (0)

#endif  // RINGLEADER_WORKER_GPU_GPU_TEST_UTIL_H_
