// Helpers shared by the GPU suites (trainer and NCCL): CUDA result assertions, the suites' SGD
// settings, a device buffer freed at scope exit (ordered on a given stream), and the largest
// parameter difference.
#ifndef RINGLEADER_WORKER_TRAINER_GPU_GPU_SUITE_UTIL_H_
#define RINGLEADER_WORKER_TRAINER_GPU_GPU_SUITE_UTIL_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/sgd.h"

namespace ringleader {
namespace gpu {

#define ASSERT_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr
#define EXPECT_CUDA_OK(expr) EXPECT_EQ((expr), cudaSuccess) << #expr

inline SgdOptions TestSgd() {
  SgdOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.weight_decay = 5e-4;
  return o;
}

// Device memory freed at scope exit, filled and read in the order of `stream` (nullptr: the
// legacy default stream). Pass the stream of the work that uses the buffer: a non-blocking
// stream (GpuMlp::stream(), the NCCL communication stream) is not ordered after the legacy
// default stream, so a synchronous cudaMemcpy/cudaMemset there may still be running when that
// stream's kernels read the buffer.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n, cudaStream_t stream = nullptr) : n_(n), stream_(stream) {
    cudaMalloc(&ptr_, std::max<size_t>(n, 1) * sizeof(T));
  }
  // A copy of `host`, complete when the constructor returns (the source is pageable: copied on
  // `stream`, then `stream` synchronised).
  explicit DeviceBuffer(const std::vector<T>& host, cudaStream_t stream = nullptr)
      : DeviceBuffer(host.size(), stream) {
    cudaMemcpyAsync(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream_);
    cudaStreamSynchronize(stream_);
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return static_cast<T*>(ptr_); }
  // Zeroes the buffer, enqueued on `stream` (work enqueued there later sees the zeros).
  cudaError_t Zero() { return cudaMemsetAsync(ptr_, 0, n_ * sizeof(T), stream_); }
  // The contents once every stream's work so far is done.
  std::vector<T> ToHost() const {
    std::vector<T> out(n_);
    cudaDeviceSynchronize();
    cudaMemcpyAsync(out.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost, stream_);
    cudaStreamSynchronize(stream_);
    return out;
  }

 private:
  size_t n_;
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

// Largest |a - b| over every parameter.
inline double MaxParamDiff(const Mlp& a, const Mlp& b) {
  double worst = 0;
  for (size_t i = 0; i < a.parameters().size(); ++i) {
    for (size_t k = 0; k < a.parameters()[i].count; ++k) {
      worst = std::max(worst, std::abs(static_cast<double>(a.param(i)[k]) - b.param(i)[k]));
    }
  }
  return worst;
}

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_TRAINER_GPU_GPU_SUITE_UTIL_H_
