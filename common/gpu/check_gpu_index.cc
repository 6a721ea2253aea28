// CheckGpuIndex over DetectGpus: the same in the CUDA and the CPU-only build.
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/gpu/gpu_devices.h"

namespace ringleader {
namespace gpu {

absl::Status CheckGpuIndex(int index) {
  if (index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpu index ", index, " is negative: give a CUDA device ordinal >= 0"));
  }
  auto devices = DetectGpus();
  if (!devices.ok()) return devices.status();
  const int count = static_cast<int>(devices->size());
  if (index >= count) {
    return absl::InvalidArgumentError(absl::StrCat("gpu index ", index, " does not exist: this ",
                                                   "machine has ", count, " GPU(s), indices 0..",
                                                   count - 1));
  }
  return absl::OkStatus();
}

}  // namespace gpu
}  // namespace ringleader
