// GpuMlp / GpuSgdOptimizer paths that need no GPU: argument checks and the error a machine
// without a GPU gets. (Their math runs in gpu_trainer_suite_test on a GPU node.)
#include "worker/trainer/gpu/gpu_mlp.h"

#include <string>

#include "common/gpu/gpu_devices.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/gpu/gpu_sgd.h"
#include "worker/trainer/mlp.h"

namespace ringleader {
namespace gpu {
namespace {

using ::testing::HasSubstr;

TEST(GpuMlpTest, ModelsWithBuffersAreUnimplementedOnTheGpu) {
  MlpOptions with_buffers;
  with_buffers.with_buffers = true;
  Mlp cpu({4, 3}, 1, with_buffers);
  auto gpu = GpuMlp::Create(cpu, {});
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(gpu.status().message()), HasSubstr("with_buffers"));
}

TEST(GpuMlpTest, WithoutAGpuCreateSaysNoUsableGpu) {
  if (DetectGpus().ok()) GTEST_SKIP() << "a GPU is present: gpu_trainer_suite_test covers GpuMlp";
  Mlp cpu({4, 3}, 1);
  auto gpu = GpuMlp::Create(cpu, {});
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(gpu.status().message()), HasSubstr("no usable GPU: cudaSetDevice"));
}

TEST(GpuSgdTest, BadOptionsAreRefusedNamingTheField) {
  SgdOptions o;
  o.lr = -1;
  auto opt = GpuSgdOptimizer::Create({{"w", {2}, 2}}, o, 0, nullptr);
  EXPECT_EQ(opt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(opt.status().message()), HasSubstr("optimizer.learning_rate"));
}

TEST(GpuSgdTest, StepChecksVectorSizesBeforeTouchingTheDevice) {
  auto opt = GpuSgdOptimizer::Create({{"w", {2}, 2}, {"b", {1}, 1}}, SgdOptions{}, 0, nullptr);
  ASSERT_TRUE(opt.ok());
  const absl::Status s = (*opt)->Step({nullptr}, {nullptr, nullptr}, {true, true});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("need 2 entries each, got 1, 2, 2"));
  EXPECT_EQ((*opt)->step_count(), 0u);
}

}  // namespace
}  // namespace gpu
}  // namespace ringleader
