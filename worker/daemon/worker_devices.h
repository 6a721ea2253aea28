// The devices a worker daemon registers: the host CPU, or one GPU (--gpu N).
#ifndef RINGLEADER_WORKER_DAEMON_WORKER_DEVICES_H_
#define RINGLEADER_WORKER_DAEMON_WORKER_DEVICES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// The CPU device: kind "cpu", index 0, name "cpu (<n> cores)", memory = physical memory.
v1::Device CpuDevice();

// `gpu` < 0: {CpuDevice()}. Otherwise GPU `gpu` as CUDA reports it (CUDA is touched only then).
// Errors: FAILED_PRECONDITION "--gpu=N: no usable GPU: ..." on a machine without a usable GPU;
// INVALID_ARGUMENT "--gpu=N: ..." naming the valid range when the index does not exist.
absl::StatusOr<std::vector<v1::Device>> WorkerDevices(int gpu);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_DAEMON_WORKER_DEVICES_H_
