#include "worker/daemon/worker_devices.h"

#include "common/gpu/gpu_devices.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

TEST(WorkerDevicesTest, CpuWorkerRegistersTheCpu) {
  absl::StatusOr<std::vector<v1::Device>> devices = WorkerDevices(-1);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].kind(), "cpu");
  EXPECT_EQ((*devices)[0].index(), 0);
  EXPECT_GT((*devices)[0].memory_bytes(), 0u);
  EXPECT_THAT((*devices)[0].name(), HasSubstr("cores"));
}

TEST(WorkerDevicesTest, GpuFlagOnAMachineWithoutGpuSaysSoNamingTheFlag) {
  if (gpu::DetectGpus().ok()) GTEST_SKIP() << "this machine has a GPU";
  absl::StatusOr<std::vector<v1::Device>> devices = WorkerDevices(0);
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(devices.status().message()), HasSubstr("--gpu=0: no usable GPU"));
}

TEST(WorkerDevicesTest, GpuWorkerRegistersItsGpu) {
  absl::StatusOr<std::vector<v1::Device>> gpus = gpu::DetectGpus();
  if (!gpus.ok()) GTEST_SKIP() << "no GPU: " << gpus.status().message();
  absl::StatusOr<std::vector<v1::Device>> devices = WorkerDevices(0);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].kind(), "cuda");
  EXPECT_EQ((*devices)[0].index(), 0);
  EXPECT_EQ(WorkerDevices(static_cast<int>(gpus->size())).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringleader
