#include "common/gpu/cuda_status.h"

#include <string>

#include "common/rank_failure.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace gpu {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

absl::Status CallCuda(cudaError_t e) {
  RL_CUDA_RETURN_IF_ERROR(e);
  return absl::OkStatus();
}

absl::Status CallNccl(ncclResult_t r) {
  RL_NCCL_RETURN_IF_ERROR(r);
  return absl::OkStatus();
}

absl::Status CallCublas(cublasStatus_t s) {
  RL_CUBLAS_RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

TEST(CudaStatusTest, CudaCodesFollowTheTable) {
  EXPECT_EQ(CudaErrorCode(cudaSuccess), absl::StatusCode::kOk);
  EXPECT_EQ(CudaErrorCode(cudaErrorInsufficientDriver), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaErrorCode(cudaErrorNoDevice), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaErrorCode(cudaErrorDevicesUnavailable), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaErrorCode(cudaErrorMemoryAllocation), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CudaErrorCode(cudaErrorInvalidDevice), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaErrorCode(cudaErrorLaunchTimeout), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(CudaErrorCode(cudaErrorTimeout), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(CudaErrorCode(cudaErrorIllegalAddress), absl::StatusCode::kInternal);
}

TEST(CudaStatusTest, NcclCodesFollowTheTable) {
  EXPECT_EQ(NcclResultCode(ncclSuccess), absl::StatusCode::kOk);
  EXPECT_EQ(NcclResultCode(ncclInProgress), absl::StatusCode::kOk);
  EXPECT_EQ(NcclResultCode(ncclRemoteError), absl::StatusCode::kUnavailable);
  EXPECT_EQ(NcclResultCode(ncclSystemError), absl::StatusCode::kUnavailable);
  EXPECT_EQ(NcclResultCode(ncclUnhandledCudaError), absl::StatusCode::kInternal);
  EXPECT_EQ(NcclResultCode(ncclInvalidUsage), absl::StatusCode::kInternal);
  EXPECT_EQ(NcclResultCode(ncclInternalError), absl::StatusCode::kInternal);
}

TEST(CudaStatusTest, CublasCodesFollowTheTable) {
  EXPECT_EQ(CublasStatusCode(CUBLAS_STATUS_SUCCESS), absl::StatusCode::kOk);
  EXPECT_EQ(CublasStatusCode(CUBLAS_STATUS_NOT_INITIALIZED), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CublasStatusCode(CUBLAS_STATUS_ALLOC_FAILED), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CublasStatusCode(CUBLAS_STATUS_EXECUTION_FAILED), absl::StatusCode::kInternal);
}

TEST(CudaStatusTest, CudaMacroRecordsExpressionPlaceAndLibraryText) {
  EXPECT_TRUE(CallCuda(cudaSuccess).ok());
  const absl::Status s = CallCuda(cudaErrorInsufficientDriver);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), StartsWith("no usable GPU: "));
  EXPECT_THAT(std::string(s.message()), HasSubstr("e failed at common/gpu/cuda_status_test.cc:"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("cudaErrorInsufficientDriver (error 35)"));
  EXPECT_THAT(std::string(s.message()), HasSubstr(cudaGetErrorString(cudaErrorInsufficientDriver)));

  const absl::Status oom = CallCuda(cudaErrorMemoryAllocation);
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(oom.message()), ::testing::Not(HasSubstr("no usable GPU")));
  EXPECT_EQ(FailureOf(oom).kind(), v1::RankFailure::OUT_OF_MEMORY);
  EXPECT_FALSE(RankFailureOf(s).has_value());  // a machine without a GPU: no kind
}

// A GPU the build has no device code for: the message names what the build holds (the list
// third_party/cuda.bzl compiles for, SASS and PTX) and what to change.
TEST(CudaStatusTest, NoKernelImageNamesTheArchitecturesBuilt) {
  for (cudaError_t e : {cudaErrorNoKernelImageForDevice, cudaErrorUnsupportedPtxVersion}) {
    const absl::Status s = CallCuda(e);
    const std::string message(s.message());
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << message;
    EXPECT_THAT(message, HasSubstr(cudaGetErrorName(e)));
    EXPECT_THAT(message,
                HasSubstr("this build holds device code for sm_80, sm_90 and PTX compute_90 only"));
    EXPECT_THAT(message, HasSubstr("CUDA_SASS_ARCHITECTURES in third_party/cuda.bzl"));
  }
  EXPECT_THAT(std::string(CallCuda(cudaErrorUnsupportedPtxVersion).message()),
              HasSubstr("update the driver"));
  // Other errors carry no such hint.
  EXPECT_THAT(std::string(CallCuda(cudaErrorIllegalAddress).message()),
              ::testing::Not(HasSubstr("device code for")));
}

TEST(CudaStatusTest, NcclMacroTreatsInProgressAsSuccessAndNamesTheResult) {
  EXPECT_TRUE(CallNccl(ncclSuccess).ok());
  EXPECT_TRUE(CallNccl(ncclInProgress).ok());
  const absl::Status s = CallNccl(ncclRemoteError);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("r failed at common/gpu/cuda_status_test.cc:"));
  EXPECT_THAT(std::string(s.message()), HasSubstr(ncclGetErrorString(ncclRemoteError)));
  EXPECT_THAT(std::string(s.message()), HasSubstr("(nccl result 6)"));
  EXPECT_EQ(FailureOf(s).kind(), v1::RankFailure::PEER_CLOSED);
}

TEST(CudaStatusTest, CublasMacroNamesTheStatus) {
  EXPECT_TRUE(CallCublas(CUBLAS_STATUS_SUCCESS).ok());
  const absl::Status s = CallCublas(CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), StartsWith("no usable GPU: "));
  EXPECT_THAT(std::string(s.message()), HasSubstr("CUBLAS_STATUS_NOT_INITIALIZED"));
}

TEST(CudaStatusTest, StatusFunctionsKeepTheGivenExpressionText) {
  const absl::Status s =
      CudaStatus(cudaErrorIllegalAddress, "cudaMemcpy(dst, src, n, kind)", "some/file.cc", 12);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()),
              StartsWith("cudaMemcpy(dst, src, n, kind) failed at some/file.cc:12: "));
}

}  // namespace
}  // namespace gpu
}  // namespace ringleader
