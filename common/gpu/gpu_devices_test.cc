// Runs on any machine: without a usable GPU DetectGpus must say so clearly; with one it must
// list it.
#include "common/gpu/gpu_devices.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace gpu {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(GpuDevicesTest, DetectGpusListsGpusOrExplainsWhyThereAreNone) {
  auto gpus = DetectGpus();
  if (!gpus.ok()) {
    // This machine has no usable GPU (CI): the error must say so and why.
    EXPECT_EQ(gpus.status().code(), absl::StatusCode::kFailedPrecondition) << gpus.status();
    const std::string message(gpus.status().message());
    EXPECT_THAT(message, StartsWith("no usable GPU: "));
    if (!BuiltWithCuda()) {
      EXPECT_THAT(message, HasSubstr("built without the CUDA toolkit"));
      return;
    }
    EXPECT_THAT(message, AnyOf(HasSubstr("driver"), HasSubstr("no GPU")));
    EXPECT_THAT(message, HasSubstr("cudaGetDeviceCount"));
    EXPECT_THAT(message, HasSubstr("CUDA runtime "));
    return;
  }
  ASSERT_FALSE(gpus->empty());
  for (int i = 0; i < static_cast<int>(gpus->size()); ++i) {
    const auto& d = (*gpus)[i];
    EXPECT_EQ(d.kind(), "cuda");
    EXPECT_EQ(d.index(), i);
    EXPECT_FALSE(d.name().empty());
    EXPECT_GT(d.memory_bytes(), 0u);
  }
}

TEST(GpuDevicesTest, CheckGpuIndexRejectsNegativeIndices) {
  const absl::Status s = CheckGpuIndex(-1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("gpu index -1"));
}

TEST(GpuDevicesTest, CheckGpuIndexAgreesWithDetectGpus) {
  auto gpus = DetectGpus();
  if (!gpus.ok()) {
    EXPECT_EQ(CheckGpuIndex(0), gpus.status());
    return;
  }
  const int count = static_cast<int>(gpus->size());
  EXPECT_TRUE(CheckGpuIndex(count - 1).ok());
  const absl::Status s = CheckGpuIndex(count);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not exist"));
}

}  // namespace
}  // namespace gpu
}  // namespace ringleader
