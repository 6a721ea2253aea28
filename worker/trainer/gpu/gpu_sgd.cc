#include "worker/trainer/gpu/gpu_sgd.h"

#include <cuda_runtime.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/gpu/cuda_status.h"
#include "common/status_macros.h"
#include "worker/trainer/gpu/gpu_mlp_kernels.h"
#include "worker/trainer/sgd_math.h"

namespace ringleader {
namespace gpu {

GpuSgdOptimizer::GpuSgdOptimizer(std::vector<ParameterInfo> params, SgdOptions options, int device,
                                 cudaStream_t stream)
    : params_(std::move(params)),
      options_(options),
      device_(device),
      stream_(stream),
      buffers_(params_.size(), nullptr) {}

absl::StatusOr<std::unique_ptr<GpuSgdOptimizer>> GpuSgdOptimizer::Create(
    std::vector<ParameterInfo> params, SgdOptions options, int device, cudaStream_t stream) {
  RETURN_IF_ERROR(ValidateSgdOptions(options));
  return std::unique_ptr<GpuSgdOptimizer>(
      new GpuSgdOptimizer(std::move(params), options, device, stream));
}

GpuSgdOptimizer::~GpuSgdOptimizer() {
  if (cudaSetDevice(device_) != cudaSuccess) return;
  for (float* b : buffers_) {
    if (b != nullptr) cudaFree(b);
  }
}

absl::Status GpuSgdOptimizer::Step(const std::vector<float*>& params,
                                   const std::vector<const float*>& grads,
                                   const std::vector<bool>& has_grad) {
  if (params.size() != params_.size() || grads.size() != params_.size() ||
      has_grad.size() != params_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GpuSgdOptimizer::Step: params, grads and has_grad need ", params_.size(),
        " entries each, got ", params.size(), ", ", grads.size(), ", ", has_grad.size()));
  }
  RL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  // The same float hyper-parameters as SgdOptimizer::Step.
  const SgdElementParams h = ToElementParams(options_);
  const bool use_momentum = options_.momentum != 0.0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!has_grad[i]) continue;
    const size_t n = params_[i].count;
    bool first = true;
    if (use_momentum) {
      first = buffers_[i] == nullptr;
      if (first) {
        void* raw = nullptr;
        RL_CUDA_RETURN_IF_ERROR(cudaMalloc(&raw, n * sizeof(float)));
        buffers_[i] = static_cast<float*>(raw);
      }
    }
    RL_CUDA_RETURN_IF_ERROR(
        LaunchSgdUpdate(params[i], grads[i], buffers_[i], n, h, first, stream_));
  }
  ++step_count_;
  return absl::OkStatus();
}

size_t GpuSgdOptimizer::momentum_elements() const {
  size_t n = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (buffers_[i] != nullptr) n += params_[i].count;
  }
  return n;
}

absl::StatusOr<std::vector<std::vector<float>>> GpuSgdOptimizer::CopyMomentumBuffersToHost() const {
  RL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  std::vector<std::vector<float>> out(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    if (buffers_[i] == nullptr) continue;
    out[i].resize(params_[i].count);
    // On the trainer's stream, after the SGD kernels that wrote the buffers.
    RL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out[i].data(), buffers_[i],
                                            out[i].size() * sizeof(float),
                                            cudaMemcpyDeviceToHost, stream_));
  }
  RL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // the host reads the copies
  return out;
}

absl::Status GpuSgdOptimizer::RestoreMomentumBuffers(
    const std::vector<std::vector<float>>& buffers, uint64_t step_count) {
  if (buffers.size() != params_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("momentum buffers: expected ", params_.size(),
                                                   " entries, got ", buffers.size()));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!buffers[i].empty() && buffers[i].size() != params_[i].count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "momentum buffer of ", params_[i].name, ": expected ", params_[i].count,
          " elements, got ", buffers[i].size()));
    }
  }
  RL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  for (size_t i = 0; i < params_.size(); ++i) {
    if (buffers[i].empty()) continue;
    if (buffers_[i] == nullptr) {
      void* raw = nullptr;
      RL_CUDA_RETURN_IF_ERROR(cudaMalloc(&raw, params_[i].count * sizeof(float)));
      buffers_[i] = static_cast<float*>(raw);
    }
    RL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buffers_[i], buffers[i].data(),
                                            buffers[i].size() * sizeof(float),
                                            cudaMemcpyHostToDevice, stream_));
  }
  // The host vectors may go away when this returns.
  RL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  step_count_ = step_count;
  return absl::OkStatus();
}

}  // namespace gpu
}  // namespace ringleader
