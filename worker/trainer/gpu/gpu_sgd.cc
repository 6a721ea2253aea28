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

GpuSgdOptimizer::GpuSgdOptimizer(std::vector<ParameterInfo> params, SgdOptions options,
                                 std::vector<ElementRange> owned, bool sharded, int device,
                                 cudaStream_t stream)
    : params_(std::move(params)),
      options_(options),
      owned_(std::move(owned)),
      sharded_(sharded),
      device_(device),
      stream_(stream),
      buffers_(params_.size(), nullptr) {}

absl::StatusOr<std::unique_ptr<GpuSgdOptimizer>> GpuSgdOptimizer::Create(
    std::vector<ParameterInfo> params, SgdOptions options, int device, cudaStream_t stream) {
  RETURN_IF_ERROR(ValidateSgdOptions(options));
  std::vector<ElementRange> whole;
  for (const ParameterInfo& p : params) whole.push_back(ElementRange{0, p.count});
  return std::unique_ptr<GpuSgdOptimizer>(new GpuSgdOptimizer(
      std::move(params), options, std::move(whole), /*sharded=*/false, device, stream));
}

absl::StatusOr<std::unique_ptr<GpuSgdOptimizer>> GpuSgdOptimizer::CreateSharded(
    std::vector<ParameterInfo> params, SgdOptions options, std::vector<ElementRange> owned,
    int device, cudaStream_t stream) {
  RETURN_IF_ERROR(ValidateSgdOptions(options));
  RETURN_IF_ERROR(CheckOptimizerShard(params, owned));
  return std::unique_ptr<GpuSgdOptimizer>(new GpuSgdOptimizer(
      std::move(params), options, std::move(owned), /*sharded=*/true, device, stream));
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
  return StepImpl("Step", params, grads, has_grad, /*grads_at_owned=*/false,
                  /*params_at_owned=*/false);
}

absl::Status GpuSgdOptimizer::StepOwned(const std::vector<float*>& params,
                                        const std::vector<const float*>& owned_grads,
                                        const std::vector<bool>& has_grad) {
  return StepImpl("StepOwned", params, owned_grads, has_grad, /*grads_at_owned=*/true,
                  /*params_at_owned=*/false);
}

absl::Status GpuSgdOptimizer::StepShard(const std::vector<float*>& owned_params,
                                        const std::vector<const float*>& owned_grads,
                                        const std::vector<bool>& has_grad) {
  return StepImpl("StepShard", owned_params, owned_grads, has_grad, /*grads_at_owned=*/true,
                  /*params_at_owned=*/true);
}

absl::Status GpuSgdOptimizer::StepImpl(const char* who, const std::vector<float*>& params,
                                       const std::vector<const float*>& grads,
                                       const std::vector<bool>& has_grad, bool grads_at_owned,
                                       bool params_at_owned) {
  if (params.size() != params_.size() || grads.size() != params_.size() ||
      has_grad.size() != params_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GpuSgdOptimizer::", who, ": params, grads and has_grad need ", params_.size(),
        " entries each, got ", params.size(), ", ", grads.size(), ", ", has_grad.size()));
  }
  if ((grads_at_owned || params_at_owned) && !sharded_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GpuSgdOptimizer::", who, ": the optimizer is not sharded (CreateSharded first)"));
  }
  RL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  // The same float hyper-parameters as SgdOptimizer::Step.
  const SgdElementParams h = ToElementParams(options_);
  const bool use_momentum = options_.momentum != 0.0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!has_grad[i] || owned_[i].empty()) continue;
    // Sharded, only the owned elements: the same kernel on a sub-range (SgdOptimizer::Step).
    const size_t n = owned_[i].size();
    bool first = true;
    if (use_momentum) {
      first = buffers_[i] == nullptr;
      if (first) {
        void* raw = nullptr;
        RL_CUDA_RETURN_IF_ERROR(cudaMalloc(&raw, n * sizeof(float)));
        buffers_[i] = static_cast<float*>(raw);
      }
    }
    float* param = params_at_owned ? params[i] : params[i] + owned_[i].begin;
    const float* grad = grads_at_owned ? grads[i] : grads[i] + owned_[i].begin;
    RL_CUDA_RETURN_IF_ERROR(LaunchSgdUpdate(param, grad, buffers_[i], n, h, first, stream_));
  }
  ++step_count_;
  return absl::OkStatus();
}

size_t GpuSgdOptimizer::momentum_elements() const {
  size_t n = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (buffers_[i] != nullptr) n += owned_[i].size();
  }
  return n;
}

absl::StatusOr<std::vector<std::vector<float>>> GpuSgdOptimizer::CopyMomentumBuffersToHost() const {
  RL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  std::vector<std::vector<float>> out(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    if (buffers_[i] == nullptr) continue;
    out[i].resize(owned_[i].size());
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
  // Every size is checked before anything changes (the CPU optimizer's rules and messages).
  std::vector<ElementRange> keep(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    ASSIGN_OR_RETURN(keep[i],
                     MomentumElementsToKeep(params_[i], owned_[i], sharded_, buffers[i].size()));
  }
  RL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  for (size_t i = 0; i < params_.size(); ++i) {
    if (keep[i].empty()) {
      // No buffer from now on (none yet, or a shard without elements of this parameter).
      if (buffers_[i] != nullptr) {
        RL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // no kernel still uses it
        RL_CUDA_RETURN_IF_ERROR(cudaFree(buffers_[i]));
        buffers_[i] = nullptr;
      }
      continue;
    }
    if (buffers_[i] == nullptr) {
      void* raw = nullptr;
      RL_CUDA_RETURN_IF_ERROR(cudaMalloc(&raw, owned_[i].size() * sizeof(float)));
      buffers_[i] = static_cast<float*>(raw);
    }
    // keep[i].size() == owned_[i].size(): the owned elements of a whole buffer, or all of one.
    RL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buffers_[i], buffers[i].data() + keep[i].begin,
                                            keep[i].size() * sizeof(float),
                                            cudaMemcpyHostToDevice, stream_));
  }
  // The host vectors may go away when this returns.
  RL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  step_count_ = step_count;
  return absl::OkStatus();
}

}  // namespace gpu
}  // namespace ringleader
