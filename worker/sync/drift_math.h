// The drift check's element arithmetic, shared by the host (tensor_memory.cc) and the CUDA
// kernel (worker/sync/gpu/tensor_memory_kernels.cu), so a GPU rank reports the same drift figure
// as a CPU rank for the same parameters, bit for bit.
#ifndef RINGLEADER_WORKER_SYNC_DRIFT_MATH_H_
#define RINGLEADER_WORKER_SYNC_DRIFT_MATH_H_

#include "common/host_device.h"

namespace ringleader {

// |a - b| in double: exact for two floats (no rounding), NaN if either is NaN.
RL_HOST_DEVICE inline double AbsDiff(float a, float b) {
  const double d = static_cast<double>(a) - static_cast<double>(b);
  return d < 0 ? -d : d;
}

// The larger of two drift values, where NaN wins over every number (a plain max would drop it:
// a diverged tensor must be the one reported).
RL_HOST_DEVICE inline double MaxKeepingNan(double acc, double d) {
  if (acc != acc) return acc;
  if (d != d) return d;
  return d > acc ? d : acc;
}

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_SYNC_DRIFT_MATH_H_
