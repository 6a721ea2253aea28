// The first line of every test that needs a GPU:
//
//   TEST(GpuSuite, Something) {
//     RL_SKIP_WITHOUT_GPU(1);   // or 2 for tests that need two GPUs
//     ...
//
// Without a usable GPU the test is skipped (GTEST_SKIP) with "no GPU: <reason>" — DetectGpus'
// explanation, e.g. "no GPU: CUDA driver insufficient or no GPU (cudaGetDeviceCount: error 35
// ...)" — so a run on a machine without GPUs passes and says why. With RL_REQUIRE_GPU=1 in the
// test's environment (`bazel test --config=gpu`, which passes it with --test_env) the same test
// FAILS instead: on a GPU node a missing device or a driver too old for CUDA 13 must not pass
// as a row of skips. A test that needs more GPUs than a machine with GPUs has is skipped either
// way ("this test needs 2 GPUs, the machine has 1").
#ifndef RINGLEADER_COMMON_GPU_GPU_TEST_UTIL_H_
#define RINGLEADER_COMMON_GPU_GPU_TEST_UTIL_H_

#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/gpu/gpu_devices.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace gpu {

// Why a test needing `min_gpus` GPUs cannot run here, or empty when it can.
struct GpuShortfall {
  std::string reason;     // "" = enough usable GPUs
  bool no_usable_gpu = false;  // no GPU at all (driver missing or too old, none visible, CPU build)
};

inline GpuShortfall CheckGpus(int min_gpus) {
  auto gpus = DetectGpus();
  if (!gpus.ok()) {
    std::string reason(gpus.status().message());
    // The macro already says "no GPU: ".
    if (reason.rfind(kNoUsableGpu, 0) == 0) reason.erase(0, sizeof(kNoUsableGpu) - 1);
    return {reason, true};
  }
  if (static_cast<int>(gpus->size()) < min_gpus) {
    return {absl::StrCat("this test needs ", min_gpus, " GPUs, the machine has ", gpus->size()),
            false};
  }
  return {};
}

// "" if the machine has at least `min_gpus` usable GPUs; otherwise why not.
inline std::string NoGpuReason(int min_gpus) { return CheckGpus(min_gpus).reason; }

// RL_REQUIRE_GPU=1: a GPU test without a usable GPU fails instead of skipping.
inline bool GpuRequired() {
  const char* v = std::getenv("RL_REQUIRE_GPU");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// The number of usable GPUs (0 without a driver).
inline int GpuCount() {
  auto gpus = DetectGpus();
  return gpus.ok() ? static_cast<int>(gpus->size()) : 0;
}

}  // namespace gpu
}  // namespace ringleader

#define RL_SKIP_WITHOUT_GPU(min_gpus)                                                       \
  do {                                                                                      \
    const ::ringleader::gpu::GpuShortfall rl_gpu_shortfall =                                \
        ::ringleader::gpu::CheckGpus(min_gpus);                                             \
    if (!rl_gpu_shortfall.reason.empty()) {                                                 \
      if (rl_gpu_shortfall.no_usable_gpu && ::ringleader::gpu::GpuRequired()) {             \
        GTEST_FAIL() << "no GPU, and RL_REQUIRE_GPU=1 requires one: "                      \
                     << rl_gpu_shortfall.reason;                                            \
      }                                                                                     \
      GTEST_SKIP() << "no GPU: " << rl_gpu_shortfall.reason;                                \
    }                                                                                       \
  } while (0)

#endif  // RINGLEADER_COMMON_GPU_GPU_TEST_UTIL_H_
