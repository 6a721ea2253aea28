#include "common/gpu/cuda_status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/gpu/cuda_architectures.h"
#include "common/rank_failure.h"

namespace ringleader {
namespace gpu {
namespace {

std::string Where(const char* expr, const char* file, int line) {
  return absl::StrCat(expr, " failed at ", file, ":", line, ": ");
}

// For an error that means "no device code this GPU can run": what the build holds, what the
// GPU is, and what to do. Empty for other errors.
std::string ArchitectureHint(cudaError_t error) {
  const char* remedy = nullptr;
  switch (error) {
    case cudaErrorNoKernelImageForDevice:
      remedy = "add the GPU's architecture to CUDA_SASS_ARCHITECTURES in third_party/cuda.bzl";
      break;
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorInvalidPtx:
    case cudaErrorJitCompilerNotFound:
      remedy =
          "the driver cannot compile the embedded PTX (a driver older than the CUDA 13 toolkit "
          "that built it?): update the driver, or add the GPU's architecture to "
          "CUDA_SASS_ARCHITECTURES in third_party/cuda.bzl";
      break;
    default:
      return "";
  }
  std::string gpu = "the current GPU's architecture unknown";
  int device = -1;
  int major = 0;
  int minor = 0;
  // Best effort: these errors leave the context usable, but a lost device answers nothing.
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess) {
    gpu = absl::StrCat("GPU ", device, " is compute capability ", major, ".", minor, ", sm_",
                       major, minor);
  }
  return absl::StrCat("; this build holds device code for " RL_CUDA_BUILT_ARCHITECTURES " only (",
                      gpu, "): ", remedy);
}

}  // namespace

absl::StatusCode CudaErrorCode(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return absl::StatusCode::kOk;
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return absl::StatusCode::kFailedPrecondition;
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorInvalidDevice:
      return absl::StatusCode::kInvalidArgument;
    case cudaErrorLaunchTimeout:
    case cudaErrorTimeout:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusCode NcclResultCode(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
    case ncclInProgress:
      return absl::StatusCode::kOk;
    case ncclRemoteError:
    case ncclSystemError:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusCode CublasStatusCode(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return absl::StatusCode::kOk;
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return absl::StatusCode::kFailedPrecondition;
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::StatusCode::kResourceExhausted;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status CudaStatus(cudaError_t error, const char* expr, const char* file, int line) {
  const absl::StatusCode code = CudaErrorCode(error);
  if (code == absl::StatusCode::kOk) return absl::OkStatus();
  std::string detail = absl::StrCat(cudaGetErrorName(error), " (error ", static_cast<int>(error),
                                    "): ", cudaGetErrorString(error), ArchitectureHint(error));
  // A driver/device problem is about the machine, not the call: say so first.
  const char* prefix = code == absl::StatusCode::kFailedPrecondition ? kNoUsableGpu : "";
  absl::Status status(code, absl::StrCat(prefix, Where(expr, file, line), detail));
  return error == cudaErrorMemoryAllocation
             ? WithFailureKind(std::move(status), v1::RankFailure::OUT_OF_MEMORY)
             : status;
}

absl::Status NcclStatus(ncclResult_t result, const char* expr, const char* file, int line,
                        ncclComm_t comm) {
  const absl::StatusCode code = NcclResultCode(result);
  if (code == absl::StatusCode::kOk) return absl::OkStatus();
  // ncclGetLastError holds the detail (which peer, which CUDA call); it may be empty.
  const char* last = ncclGetLastError(comm);
  std::string detail =
      absl::StrCat(ncclGetErrorString(result), " (nccl result ", static_cast<int>(result), ")");
  if (last != nullptr && last[0] != '\0') absl::StrAppend(&detail, "; last NCCL error: ", last);
  absl::Status status(code, absl::StrCat(Where(expr, file, line), detail));
  // ncclRemoteError: "a remote process exited prematurely, or the network failed" (NCCL).
  return result == ncclRemoteError ? WithFailureKind(std::move(status), v1::RankFailure::PEER_CLOSED)
                                   : status;
}

absl::Status CublasStatus(cublasStatus_t status, const char* expr, const char* file, int line) {
  const absl::StatusCode code = CublasStatusCode(status);
  if (code == absl::StatusCode::kOk) return absl::OkStatus();
  std::string detail = absl::StrCat(cublasGetStatusName(status), " (status ",
                                    static_cast<int>(status), "): ", cublasGetStatusString(status));
  const char* prefix = code == absl::StatusCode::kFailedPrecondition ? kNoUsableGpu : "";
  absl::Status failed(code, absl::StrCat(prefix, Where(expr, file, line), detail));
  return status == CUBLAS_STATUS_ALLOC_FAILED
             ? WithFailureKind(std::move(failed), v1::RankFailure::OUT_OF_MEMORY)
             : failed;
}

}  // namespace gpu
}  // namespace ringleader
