// Which CUDA GPUs this process can use, as the worker daemon reports them to the coordinator
// (ringleader.v1.Device) and checks its --gpu flag against.
//
// Thread-safe (the CUDA runtime's device queries are).
#ifndef RINGLEADER_COMMON_GPU_GPU_DEVICES_H_
#define RINGLEADER_COMMON_GPU_GPU_DEVICES_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/gpu/no_usable_gpu.h"
#include "proto/ringleader.pb.h"

namespace ringleader {
namespace gpu {

// Whether this build has the CUDA toolkit (false in the CPU-only build: `--config=cpu_only`, or no
// toolkit at $RINGLEADER_CUDA_PATH / /usr/local/cuda when it was built).
bool BuiltWithCuda();

// Every visible GPU: kind "cuda", index (CUDA device ordinal, after CUDA_VISIBLE_DEVICES), name
// ("NVIDIA H100 80GB HBM3") and total memory in bytes, in ordinal order.
// Errors: FAILED_PRECONDITION starting "no usable GPU: " when the CUDA driver is missing or too
// old, or no device is visible, e.g.
//   "no usable GPU: CUDA driver insufficient or no GPU (cudaGetDeviceCount: error 35
//    cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version;
//    CUDA runtime 13000, driver none)";
// INTERNAL for any other CUDA failure (the message names the call). In the CPU-only build:
//   "no usable GPU: this build has no GPU support (built without the CUDA toolkit; ...)".
absl::StatusOr<std::vector<ringleader::v1::Device>> DetectGpus();

// OK if GPU `index` exists (the worker's --gpu flag). Errors: INVALID_ARGUMENT for a negative
// index or one >= the number of GPUs (the message lists the valid range); DetectGpus' errors.
absl::Status CheckGpuIndex(int index);

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_COMMON_GPU_GPU_DEVICES_H_
