#include "common/gpu/gpu_devices.h"

#include <cuda_runtime_api.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/gpu/cuda_status.h"

namespace ringleader {
namespace gpu {
namespace {

// "CUDA runtime 13000, driver 12040" — the usual cause of error 35 is a driver older than the
// runtime (or none at all), so both versions belong in the message.
std::string VersionsText() {
  int runtime = 0;
  int driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  return absl::StrCat("CUDA runtime ", runtime, ", driver ",
                      driver == 0 ? std::string("none") : absl::StrCat(driver));
}

}  // namespace

bool BuiltWithCuda() { return true; }

absl::StatusOr<std::vector<ringleader::v1::Device>> DetectGpus() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    const std::string detail = absl::StrCat("(cudaGetDeviceCount: error ", static_cast<int>(error),
                                            " ", cudaGetErrorName(error), ": ",
                                            cudaGetErrorString(error), "; ", VersionsText(), ")");
    if (CudaErrorCode(error) == absl::StatusCode::kFailedPrecondition) {
      return absl::FailedPreconditionError(
          absl::StrCat(kNoUsableGpu, "CUDA driver insufficient or no GPU ", detail));
    }
    return absl::InternalError(absl::StrCat("cannot list GPUs ", detail));
  }
  if (count == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(kNoUsableGpu, "the CUDA driver sees no GPU (check CUDA_VISIBLE_DEVICES; ",
                     VersionsText(), ")"));
  }
  std::vector<ringleader::v1::Device> devices;
  devices.reserve(count);
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    RL_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, i));
    ringleader::v1::Device d;
    d.set_kind("cuda");
    d.set_index(i);
    d.set_name(prop.name);
    d.set_memory_bytes(prop.totalGlobalMem);
    devices.push_back(std::move(d));
  }
  return devices;
}

}  // namespace gpu
}  // namespace ringleader
