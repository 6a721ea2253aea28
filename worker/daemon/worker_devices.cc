#include "worker/daemon/worker_devices.h"

#include <unistd.h>

#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/gpu/gpu_devices.h"

namespace ringleader {

v1::Device CpuDevice() {
  v1::Device device;
  device.set_kind("cpu");
  device.set_index(0);
  device.set_name(absl::StrCat("cpu (", std::thread::hardware_concurrency(), " cores)"));
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) {
    device.set_memory_bytes(static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size));
  }
  return device;
}

absl::StatusOr<std::vector<v1::Device>> WorkerDevices(int gpu) {
  if (gpu < 0) return std::vector<v1::Device>{CpuDevice()};
  if (absl::Status status = gpu::CheckGpuIndex(gpu); !status.ok()) {
    return absl::Status(status.code(), absl::StrCat("--gpu=", gpu, ": ", status.message()));
  }
  absl::StatusOr<std::vector<v1::Device>> gpus = gpu::DetectGpus();
  if (!gpus.ok()) {
    return absl::Status(gpus.status().code(),
                        absl::StrCat("--gpu=", gpu, ": ", gpus.status().message()));
  }
  for (const v1::Device& device : *gpus) {
    if (device.index() == gpu) return std::vector<v1::Device>{device};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--gpu=", gpu, ": no such GPU (", gpus->size(), " visible)"));
}

}  // namespace ringleader
