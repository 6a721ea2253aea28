// RL_SKIP_WITHOUT_GPU: skip without a GPU, fail under RL_REQUIRE_GPU=1, run with one.
#include "common/gpu/gpu_test_util.h"

#include <cstdlib>

#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace gpu {
namespace {

// Set by Guarded() when the guard let it through.
bool ran_past_guard = false;

void Guarded(int min_gpus) {
  ran_past_guard = false;
  RL_SKIP_WITHOUT_GPU(min_gpus);
  ran_past_guard = true;
}

void GuardedOneGpu() { Guarded(1); }

class GpuTestUtilTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("RL_REQUIRE_GPU"); }
};

TEST_F(GpuTestUtilTest, RequireGpuReadsOnlyTheValueOne) {
  unsetenv("RL_REQUIRE_GPU");
  EXPECT_FALSE(GpuRequired());
  setenv("RL_REQUIRE_GPU", "0", 1);
  EXPECT_FALSE(GpuRequired());
  setenv("RL_REQUIRE_GPU", "1", 1);
  EXPECT_TRUE(GpuRequired());
}

TEST_F(GpuTestUtilTest, WithoutAGpuRequiringOneFailsInsteadOfSkipping) {
  if (GpuCount() > 0) {
    // A GPU machine: the guard lets a one-GPU test run whether or not a GPU is required.
    setenv("RL_REQUIRE_GPU", "1", 1);
    Guarded(1);
    EXPECT_TRUE(ran_past_guard);
    return;
  }
  const GpuShortfall shortfall = CheckGpus(1);
  EXPECT_TRUE(shortfall.no_usable_gpu);
  EXPECT_FALSE(shortfall.reason.empty());
  setenv("RL_REQUIRE_GPU", "1", 1);
  EXPECT_FATAL_FAILURE(GuardedOneGpu(), "RL_REQUIRE_GPU=1 requires one");
  EXPECT_FALSE(ran_past_guard);
}

TEST_F(GpuTestUtilTest, TooFewGpusOnAGpuMachineIsNotAMissingGpu) {
  const int count = GpuCount();
  const GpuShortfall shortfall = CheckGpus(count + 1);
  EXPECT_FALSE(shortfall.reason.empty());
  // No GPU at all is "no usable GPU"; a GPU machine with one too few is only short.
  EXPECT_EQ(shortfall.no_usable_gpu, count == 0);
}

}  // namespace
}  // namespace gpu
}  // namespace ringleader
