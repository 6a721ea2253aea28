// absl::Status from CUDA runtime, cuBLAS and NCCL results.
//
//   RL_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
//   RL_CUBLAS_RETURN_IF_ERROR(cublasCreate(&handle));
//   RL_NCCL_RETURN_IF_ERROR(ncclAllReduce(...));
//
// On failure the enclosing function returns a Status whose message records the failing
// expression, file:line and the library's own description, e.g.
//   "cudaMalloc(&p, bytes) failed at worker/trainer/gpu/gpu_mlp.cc:42: cudaErrorMemoryAllocation
//    (error 2): out of memory"
//
// Code mapping (Abseil's rules: what should the caller do next?):
//   CUDA   cudaErrorInsufficientDriver, cudaErrorNoDevice, cudaErrorDevicesUnavailable,
//          cudaErrorSystemDriverMismatch, cudaErrorCompatNotSupportedOnDevice
//            -> FAILED_PRECONDITION, message prefixed "no usable GPU: " (fix the machine)
//          cudaErrorMemoryAllocation -> RESOURCE_EXHAUSTED
//          cudaErrorInvalidDevice -> INVALID_ARGUMENT (a GPU index that does not exist)
//          cudaErrorLaunchTimeout, cudaErrorTimeout -> DEADLINE_EXCEEDED
//          anything else -> INTERNAL
//   NCCL   ncclRemoteError, ncclSystemError -> UNAVAILABLE (a peer or the network went away:
//            the attempt must be re-created) — the text includes ncclGetLastError()
//          ncclUnhandledCudaError, ncclInvalidArgument, ncclInvalidUsage, ncclInternalError
//            -> INTERNAL (a CUDA failure inside NCCL, or our bug); the text includes
//            ncclGetLastError(), which names the CUDA error
//          ncclSuccess and ncclInProgress are not errors (a non-blocking communicator answers
//            ncclInProgress; completion is checked with ncclCommGetAsyncError)
//   cuBLAS CUBLAS_STATUS_NOT_INITIALIZED -> FAILED_PRECONDITION "no usable GPU: " (cuBLAS
//            could not reach the driver)
//          CUBLAS_STATUS_ALLOC_FAILED -> RESOURCE_EXHAUSTED
//          anything else -> INTERNAL
//
// A GPU the build has no device code for (cudaErrorNoKernelImageForDevice, and
// cudaErrorUnsupportedPtxVersion / cudaErrorInvalidPtx / cudaErrorJitCompilerNotFound when the
// driver cannot JIT the embedded PTX) gets the build's architectures appended
// (RL_CUDA_BUILT_ARCHITECTURES, from //third_party:cuda.bzl) with the current device's compute
// capability, e.g. "...: this build holds device code for sm_80, sm_90 and PTX compute_90 only
// (GPU 0 is compute capability 7.5, sm_75): add the GPU's architecture to ...".
//
// Failure kinds (common/rank_failure.h payloads): cudaErrorMemoryAllocation and
// CUBLAS_STATUS_ALLOC_FAILED are OUT_OF_MEMORY, ncclRemoteError PEER_CLOSED; the rest carry none.
//
// The conversion functions are exposed so tests (and callers holding a result code) can use
// them directly. All functions are thread-safe.
#ifndef RINGLEADER_COMMON_GPU_CUDA_STATUS_H_
#define RINGLEADER_COMMON_GPU_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "common/gpu/no_usable_gpu.h"

namespace ringleader {
namespace gpu {

// OK for cudaSuccess; otherwise the mapped Status naming `expr` at `file`:`line`.
absl::Status CudaStatus(cudaError_t error, const char* expr, const char* file, int line);

// OK for ncclSuccess and ncclInProgress; otherwise the mapped Status, with
// ncclGetLastError(comm) appended (comm may be null).
absl::Status NcclStatus(ncclResult_t result, const char* expr, const char* file, int line,
                        ncclComm_t comm = nullptr);

// OK for CUBLAS_STATUS_SUCCESS; otherwise the mapped Status.
absl::Status CublasStatus(cublasStatus_t status, const char* expr, const char* file, int line);

// The status code each library result maps to (OK for success), per the table above.
absl::StatusCode CudaErrorCode(cudaError_t error);
absl::StatusCode NcclResultCode(ncclResult_t result);
absl::StatusCode CublasStatusCode(cublasStatus_t status);

}  // namespace gpu
}  // namespace ringleader

#define RL_CUDA_RETURN_IF_ERROR(expr)                                                  \
  do {                                                                                 \
    const cudaError_t rl_cuda_error_ = (expr);                                         \
    if (rl_cuda_error_ != cudaSuccess) {                                               \
      return ::ringleader::gpu::CudaStatus(rl_cuda_error_, #expr, __FILE__, __LINE__); \
    }                                                                                  \
  } while (0)

#define RL_NCCL_RETURN_IF_ERROR(expr)                                                   \
  do {                                                                                  \
    const ncclResult_t rl_nccl_result_ = (expr);                                        \
    if (rl_nccl_result_ != ncclSuccess && rl_nccl_result_ != ncclInProgress) {          \
      return ::ringleader::gpu::NcclStatus(rl_nccl_result_, #expr, __FILE__, __LINE__); \
    }                                                                                   \
  } while (0)

#define RL_CUBLAS_RETURN_IF_ERROR(expr)                                                     \
  do {                                                                                      \
    const cublasStatus_t rl_cublas_status_ = (expr);                                        \
    if (rl_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                       \
      return ::ringleader::gpu::CublasStatus(rl_cublas_status_, #expr, __FILE__, __LINE__); \
    }                                                                                       \
  } while (0)

#endif  // RINGLEADER_COMMON_GPU_CUDA_STATUS_H_
