#include "worker/trainer/gpu/gpu_mlp.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/gpu/cuda_status.h"
#include "common/status_macros.h"
#include "worker/trainer/gpu/gpu_mlp_kernels.h"

namespace ringleader {
namespace gpu {
namespace {

void CheckOrDie(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "GpuMlp: check failed: %s\n", what);
    std::abort();
  }
}

template <typename T>
absl::Status DeviceAlloc(T** ptr, size_t count) {
  void* raw = nullptr;
  RL_CUDA_RETURN_IF_ERROR(cudaMalloc(&raw, std::max<size_t>(count, 1) * sizeof(T)));
  *ptr = static_cast<T*>(raw);
  return absl::OkStatus();
}

template <typename T>
absl::Status PinnedAlloc(T** ptr, size_t count) {
  void* raw = nullptr;
  RL_CUDA_RETURN_IF_ERROR(cudaMallocHost(&raw, std::max<size_t>(count, 1) * sizeof(T)));
  *ptr = static_cast<T*>(raw);
  return absl::OkStatus();
}

template <typename T>
void DeviceFree(T** ptr) {
  if (*ptr != nullptr) cudaFree(*ptr);
  *ptr = nullptr;
}

template <typename T>
void PinnedFree(T** ptr) {
  if (*ptr != nullptr) cudaFreeHost(*ptr);
  *ptr = nullptr;
}

// BackwardOptions::slot_for's slot for parameter i (Mlp's contract: non-null, checked).
float* TakeSlot(const BackwardOptions& opts, size_t i) {
  float* slot = opts.slot_for(i);
  CheckOrDie(slot != nullptr, "BackwardOptions::slot_for returned a null slot");
  return slot;
}

}  // namespace

GpuMlp::GpuMlp(const Mlp& initial, const GpuMlpOptions& options)
    : layers_(initial.layers()), options_(options), infos_(initial.parameters()) {}

absl::StatusOr<std::unique_ptr<GpuMlp>> GpuMlp::Create(const Mlp& initial,
                                                       const GpuMlpOptions& options) {
  // buffers() is non-const only because it hands out mutable pointers; nothing is written.
  if (!const_cast<Mlp&>(initial).buffers().empty()) {
    return absl::UnimplementedError(
        "model.with_buffers is not supported by the GPU trainer yet: drop it or use backend "
        "\"gloo\"");
  }
  std::unique_ptr<GpuMlp> model(new GpuMlp(initial, options));
  RETURN_IF_ERROR(model->Init(initial));
  return model;
}

absl::Status GpuMlp::Init(const Mlp& initial) {
  RL_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  RL_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  RL_CUBLAS_RETURN_IF_ERROR(cublasCreate(&cublas_));
  RL_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas_, stream_));
  // Strict fp32 (no TF32 tensor-op shortcut), so fp32 runs match the CPU within 1e-4.
  RL_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));

  for (const ParameterInfo& info : infos_) total_params_ += info.count;
  RETURN_IF_ERROR(DeviceAlloc(&params_, total_params_));
  RETURN_IF_ERROR(DeviceAlloc(&own_grads_, total_params_));
  RETURN_IF_ERROR(DeviceAlloc(&norm_partials_, kSquaredSumBlocks * infos_.size()));
  RETURN_IF_ERROR(PinnedAlloc(&pinned_norm_partials_, kSquaredSumBlocks * infos_.size()));
  if (options_.precision == Precision::kBf16) {
    RETURN_IF_ERROR(DeviceAlloc(&params_bf16_, total_params_));
  }
  size_t offset = 0;
  for (size_t i = 0; i < infos_.size(); ++i) {
    param_ptrs_.push_back(params_ + offset);
    own_grad_ptrs_.push_back(own_grads_ + offset);
    if (params_bf16_ != nullptr) param_bf16_ptrs_.push_back(params_bf16_ + offset);
    RL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(params_ + offset, initial.param(i),
                                            infos_[i].count * sizeof(float),
                                            cudaMemcpyHostToDevice, stream_));
    offset += infos_[i].count;
  }
  RL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(own_grads_, 0, total_params_ * sizeof(float), stream_));
  grad_slots_ = own_grad_ptrs_;
  // Everything is ordered on stream_ (never the legacy default stream, which does not order
  // itself with a non-blocking stream); the model is ready once the copies have landed.
  RL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

GpuMlp::~GpuMlp() {
  // Best effort: nothing useful can be done about a failing free in a destructor.
  if (cudaSetDevice(options_.device) != cudaSuccess) return;
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  FreeBatchBuffers();
  DeviceFree(&params_);
  DeviceFree(&own_grads_);
  DeviceFree(&params_bf16_);
  DeviceFree(&weight_bf16_staging_);
  DeviceFree(&norm_partials_);
  PinnedFree(&pinned_norm_partials_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void GpuMlp::FreeBatchBuffers() {
  DeviceFree(&input_);
  DeviceFree(&input_bf16_);
  DeviceFree(&labels_);
  for (float*& a : activations_) DeviceFree(&a);
  for (uint16_t*& a : activations_bf16_) DeviceFree(&a);
  DeviceFree(&delta_);
  DeviceFree(&delta_prev_);
  DeviceFree(&delta_bf16_);
  DeviceFree(&row_loss_);
  PinnedFree(&pinned_x_);
  PinnedFree(&pinned_y_);
  PinnedFree(&pinned_row_loss_);
  capacity_ = 0;
}

absl::Status GpuMlp::ReserveBatch(size_t batch) {
  if (batch <= capacity_) return absl::OkStatus();
  RL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  FreeBatchBuffers();
  const bool bf16 = options_.precision == Precision::kBf16;
  const size_t num_linear = layers_.size() - 1;
  const size_t widest = *std::max_element(layers_.begin(), layers_.end());
  RETURN_IF_ERROR(DeviceAlloc(&input_, batch * input_features()));
  RETURN_IF_ERROR(DeviceAlloc(&labels_, batch));
  activations_.assign(num_linear, nullptr);
  activations_bf16_.assign(num_linear, nullptr);
  for (size_t k = 0; k < num_linear; ++k) {
    RETURN_IF_ERROR(DeviceAlloc(&activations_[k], batch * layers_[k + 1]));
    if (bf16) RETURN_IF_ERROR(DeviceAlloc(&activations_bf16_[k], batch * layers_[k + 1]));
  }
  RETURN_IF_ERROR(DeviceAlloc(&delta_, batch * widest));
  RETURN_IF_ERROR(DeviceAlloc(&delta_prev_, batch * widest));
  RETURN_IF_ERROR(DeviceAlloc(&row_loss_, batch));
  if (bf16) {
    RETURN_IF_ERROR(DeviceAlloc(&input_bf16_, batch * input_features()));
    RETURN_IF_ERROR(DeviceAlloc(&delta_bf16_, batch * widest));
  }
  RETURN_IF_ERROR(PinnedAlloc(&pinned_x_, batch * input_features()));
  RETURN_IF_ERROR(PinnedAlloc(&pinned_y_, batch));
  RETURN_IF_ERROR(PinnedAlloc(&pinned_row_loss_, batch));
  // Set last: a failure above leaves capacity_ 0, so the next call retries the allocation.
  capacity_ = batch;
  return absl::OkStatus();
}

void GpuMlp::BindGradients(std::vector<float*> slots) {
  if (slots.empty()) {
    CheckOrDie(own_grads_ != nullptr, "BindGradients({}) after ReleaseOwnGradients");
    grad_slots_ = own_grad_ptrs_;
    return;
  }
  CheckOrDie(slots.size() == infos_.size(), "BindGradients: one slot per parameter");
  for (float* s : slots) CheckOrDie(s != nullptr, "BindGradients: non-null slots");
  grad_slots_ = std::move(slots);
}

void GpuMlp::ReleaseOwnGradients(const std::vector<bool>& which) {
  CheckOrDie(which.size() == infos_.size(), "ReleaseOwnGradients: one entry per parameter");
  for (size_t i = 0; i < infos_.size(); ++i) {
    if (!which[i]) continue;
    if (grad_slots_[i] == own_grad_ptrs_[i]) grad_slots_[i] = nullptr;
    own_grad_ptrs_[i] = nullptr;
  }
  // One allocation holds every own gradient: it goes once no parameter uses it any more.
  if (std::all_of(own_grad_ptrs_.begin(), own_grad_ptrs_.end(),
                  [](const float* p) { return p == nullptr; }) &&
      own_grads_ != nullptr) {
    // Kernels enqueued earlier may still read it; a failed wait means a lost device, and the
    // next call reports that.
    if (cudaSetDevice(options_.device) == cudaSuccess) cudaStreamSynchronize(stream_);
    DeviceFree(&own_grads_);
  }
}

void GpuMlp::ReleaseParameters() {
  // Kernels enqueued earlier may still read them; a failed wait means a lost device, and the
  // next call reports that.
  if (cudaSetDevice(options_.device) == cudaSuccess) cudaStreamSynchronize(stream_);
  DeviceFree(&params_);
  DeviceFree(&params_bf16_);
  std::fill(param_ptrs_.begin(), param_ptrs_.end(), nullptr);
  std::fill(param_bf16_ptrs_.begin(), param_bf16_ptrs_.end(), nullptr);
}

absl::StatusOr<GpuMlp::Layer> GpuMlp::LayerFor(size_t k, const ParameterProvider* provider) {
  const bool bf16 = options_.precision == Precision::kBf16;
  Layer layer;
  if (provider == nullptr) {
    CheckOrDie(params_ != nullptr, "released parameters need a ParameterProvider (params_for)");
    layer.weight = param_ptrs_[2 * k];
    layer.bias = param_ptrs_[2 * k + 1];
    layer.weight_gemm = GemmInput(layer.weight, bf16 ? param_bf16_ptrs_[2 * k] : nullptr);
    return layer;
  }
  ASSIGN_OR_RETURN(LayerParameters provided, (*provider)(k));
  CheckOrDie(provided.weight != nullptr && provided.bias != nullptr,
             "a ParameterProvider returned a null weight or bias");
  layer.weight = provided.weight;
  layer.bias = provided.bias;
  layer.weight_gemm = layer.weight;
  if (bf16) {
    if (weight_bf16_staging_ == nullptr) {
      size_t largest = 0;
      for (size_t j = 0; j + 1 < layers_.size(); ++j) {
        largest = std::max(largest, layers_[j] * layers_[j + 1]);
      }
      RETURN_IF_ERROR(DeviceAlloc(&weight_bf16_staging_, largest));
    }
    // Stream order: the previous GEMM reading the staging runs before this cast overwrites it.
    RL_CUDA_RETURN_IF_ERROR(LaunchFloatToBf16(layer.weight, weight_bf16_staging_,
                                              infos_[2 * k].count, stream_));
    layer.weight_gemm = weight_bf16_staging_;
  }
  return layer;
}

absl::Status GpuMlp::ZeroGradients() {
  RL_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  for (size_t i = 0; i < infos_.size(); ++i) {
    if (grad_slots_[i] == nullptr) continue;  // released, handed out per step (slot_for)
    RL_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(grad_slots_[i], 0, infos_[i].count * sizeof(float), stream_));
  }
  return absl::OkStatus();
}

const void* GpuMlp::GemmInput(const float* f, const uint16_t* h) const {
  return options_.precision == Precision::kBf16 ? static_cast<const void*>(h)
                                                : static_cast<const void*>(f);
}

// cuBLAS is column-major; a row-major R x C matrix is the column-major C x R matrix with the same
// memory. Callers pass the column-major view (see ForwardBackward for each product).
absl::Status GpuMlp::Gemm(cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k,
                          const void* a, int lda, const void* b, int ldb, float beta, float* c,
                          int ldc) {
  const float alpha = 1.0f;
  const cudaDataType_t in_type = options_.precision == Precision::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
  RL_CUBLAS_RETURN_IF_ERROR(cublasGemmEx(cublas_, op_a, op_b, m, n, k, &alpha, a, in_type, lda, b,
                                         in_type, ldb, &beta, c, CUDA_R_32F, ldc,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

absl::StatusOr<double> GpuMlp::ForwardBackward(const float* x, const int32_t* y, size_t batch,
                                               const BackwardOptions& opts) {
  if (batch == 0) return absl::InvalidArgumentError("ForwardBackward: batch is empty");
  if (!opts.skip.empty() && opts.skip.size() != infos_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("ForwardBackward: skip has ", opts.skip.size(),
                                                   " entries, the model has ", infos_.size(),
                                                   " parameters"));
  }
  const size_t classes = num_classes();
  for (size_t b = 0; b < batch; ++b) {
    if (y[b] < 0 || static_cast<size_t>(y[b]) >= classes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ForwardBackward: label ", y[b], " of example ", b, " is outside [0, ", classes, ")"));
    }
  }
  const auto skipped = [&](size_t i) { return !opts.skip.empty() && opts.skip[i]; };
  const bool bf16 = options_.precision == Precision::kBf16;
  const size_t num_linear = layers_.size() - 1;
  const int nb = static_cast<int>(batch);

  RL_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  RETURN_IF_ERROR(ReserveBatch(batch));
  // The previous call ended with a stream synchronisation, so the pinned buffers are free.
  std::memcpy(pinned_x_, x, batch * input_features() * sizeof(float));
  std::memcpy(pinned_y_, y, batch * sizeof(int32_t));
  RL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(input_, pinned_x_,
                                          batch * input_features() * sizeof(float),
                                          cudaMemcpyHostToDevice, stream_));
  RL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(labels_, pinned_y_, batch * sizeof(int32_t),
                                          cudaMemcpyHostToDevice, stream_));
  const ParameterProvider* provider = opts.params_for ? &opts.params_for : nullptr;
  CheckOrDie(provider != nullptr || params_ != nullptr,
             "released parameters need a ParameterProvider (params_for)");
  if (bf16) {
    // The bf16 copy follows the fp32 master weights: recast only after they changed
    // (MarkParametersChanged), so the micro-batches of one step share one cast; the same values
    // give the same bits either way. A provider's weights are cast one by one (LayerFor).
    if (provider == nullptr && params_bf16_stale_) {
      RL_CUDA_RETURN_IF_ERROR(LaunchFloatToBf16(params_, params_bf16_, total_params_, stream_));
      params_bf16_stale_ = false;
    }
    RL_CUDA_RETURN_IF_ERROR(
        LaunchFloatToBf16(input_, input_bf16_, batch * input_features(), stream_));
  }

  // Forward. Layer k: act_k[batch, out] = in[batch, in] · W[out, in]^T + b, i.e. column-major
  // act_k^T (out x batch) = W (op T of the in x out view) · in^T (in x batch).
  for (size_t k = 0; k < num_linear; ++k) {
    const int fan_in = static_cast<int>(layers_[k]);
    const int fan_out = static_cast<int>(layers_[k + 1]);
    ASSIGN_OR_RETURN(const Layer layer, LayerFor(k, provider));
    const void* in = k == 0 ? GemmInput(input_, input_bf16_)
                            : GemmInput(activations_[k - 1], activations_bf16_[k - 1]);
    RETURN_IF_ERROR(Gemm(CUBLAS_OP_T, CUBLAS_OP_N, fan_out, nb, fan_in, layer.weight_gemm, fan_in,
                         in, fan_in, 0.0f, activations_[k], fan_out));
    const bool hidden = k + 1 < num_linear;
    RL_CUDA_RETURN_IF_ERROR(LaunchBiasActivation(activations_[k], layer.bias, batch,
                                                 layers_[k + 1], hidden, stream_));
    if (bf16 && hidden) {
      RL_CUDA_RETURN_IF_ERROR(LaunchFloatToBf16(activations_[k], activations_bf16_[k],
                                                batch * layers_[k + 1], stream_));
    }
  }

  // dLoss/dlogits = (softmax - onehot) x loss_scale / batch, and the per-row losses.
  const float scale = opts.loss_scale / static_cast<float>(batch);
  RL_CUDA_RETURN_IF_ERROR(LaunchSoftmaxCrossEntropy(activations_[num_linear - 1], labels_, batch,
                                                    classes, scale, delta_, row_loss_, stream_));

  // Backward, last layer first; per layer the bias, then the weight (the CPU Mlp's order).
  for (size_t k = num_linear; k-- > 0;) {
    const int fan_in = static_cast<int>(layers_[k]);
    const int fan_out = static_cast<int>(layers_[k + 1]);
    const size_t w_index = 2 * k;
    const size_t b_index = 2 * k + 1;
    if (bf16) {
      RL_CUDA_RETURN_IF_ERROR(
          LaunchFloatToBf16(delta_, delta_bf16_, batch * layers_[k + 1], stream_));
    }
    const void* delta = GemmInput(delta_, delta_bf16_);
    if (!skipped(b_index)) {
      if (opts.slot_for) grad_slots_[b_index] = TakeSlot(opts, b_index);
      CheckOrDie(grad_slots_[b_index] != nullptr,
                 "a released gradient needs BackwardOptions::slot_for");
      RL_CUDA_RETURN_IF_ERROR(
          LaunchBiasGrad(delta_, batch, layers_[k + 1], grad_slots_[b_index], stream_));
      if (opts.on_ready) opts.on_ready(b_index);
    }
    if (!skipped(w_index)) {
      // gW[out, in] += delta^T · in: column-major gW^T (in x out) += in^T (in x batch) ·
      // delta (op T of the out x batch view).
      const void* in = k == 0 ? GemmInput(input_, input_bf16_)
                              : GemmInput(activations_[k - 1], activations_bf16_[k - 1]);
      if (opts.slot_for) grad_slots_[w_index] = TakeSlot(opts, w_index);
      CheckOrDie(grad_slots_[w_index] != nullptr,
                 "a released gradient needs BackwardOptions::slot_for");
      RETURN_IF_ERROR(Gemm(CUBLAS_OP_N, CUBLAS_OP_T, fan_in, fan_out, nb, in, fan_in, delta,
                           fan_out, 1.0f, grad_slots_[w_index], fan_in));
      if (opts.on_ready) opts.on_ready(w_index);
    }
    if (k == 0) break;  // no gradient for the input
    // delta_prev[batch, in] = delta[batch, out] · W[out, in]: column-major delta_prev^T
    // (in x batch) = W^T view (in x out) · delta^T (out x batch). Then through the ReLU.
    ASSIGN_OR_RETURN(const Layer layer, LayerFor(k, provider));
    RETURN_IF_ERROR(Gemm(CUBLAS_OP_N, CUBLAS_OP_N, fan_in, nb, fan_out, layer.weight_gemm, fan_in,
                         delta, fan_out, 0.0f, delta_prev_, fan_in));
    RL_CUDA_RETURN_IF_ERROR(
        LaunchReluBackward(delta_prev_, activations_[k - 1], batch * layers_[k], stream_));
    std::swap(delta_, delta_prev_);
  }

  // The loss: per-row values summed on the host in row order, like the CPU Mlp.
  RL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(pinned_row_loss_, row_loss_, batch * sizeof(double),
                                          cudaMemcpyDeviceToHost, stream_));
  RL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  double loss_sum = 0.0;
  for (size_t b = 0; b < batch; ++b) loss_sum += pinned_row_loss_[b];
  return loss_sum / static_cast<double>(batch);
}

absl::StatusOr<double> GpuMlp::GradNorm(const std::vector<bool>& include) {
  if (!include.empty() && include.size() != infos_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("GradNorm: include has ", include.size(),
                                                   " entries, the model has ", infos_.size(),
                                                   " parameters"));
  }
  RL_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  for (size_t i = 0; i < infos_.size(); ++i) {
    // A released slot (no gradient this step) launches over nothing: its partials are zeros.
    RL_CUDA_RETURN_IF_ERROR(LaunchSquaredSumPartials(
        grad_slots_[i], grad_slots_[i] == nullptr ? 0 : infos_[i].count,
        norm_partials_ + i * kSquaredSumBlocks, stream_));
  }
  const size_t n = kSquaredSumBlocks * infos_.size();
  RL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(pinned_norm_partials_, norm_partials_, n * sizeof(double),
                                          cudaMemcpyDeviceToHost, stream_));
  RL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  double sum = 0.0;
  for (size_t i = 0; i < infos_.size(); ++i) {
    if (!include.empty() && !include[i]) continue;
    for (int k = 0; k < kSquaredSumBlocks; ++k)
      sum += pinned_norm_partials_[i * kSquaredSumBlocks + k];
  }
  return std::sqrt(sum);
}

absl::Status GpuMlp::CopyParametersTo(Mlp& host) {
  if (host.layers() != layers_) {
    return absl::InvalidArgumentError(
        "CopyParametersTo: the host model's layers differ from the GPU model's");
  }
  if (params_ == nullptr) {
    return absl::FailedPreconditionError(
        "CopyParametersTo: the parameters were released (strategy fsdp): gather them instead");
  }
  RL_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  for (size_t i = 0; i < infos_.size(); ++i) {
    RL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.param(i), param_ptrs_[i],
                                            infos_[i].count * sizeof(float),
                                            cudaMemcpyDeviceToHost, stream_));
  }
  return Synchronize();  // the host reads the copies
}

absl::StatusOr<std::vector<float>> GpuMlp::CopyGradientToHost(size_t i) {
  if (i >= infos_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CopyGradientToHost: parameter ", i, " does not exist (", infos_.size(), ")"));
  }
  if (grad_slots_[i] == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CopyGradientToHost: parameter ", i, "'s gradient storage was released"));
  }
  RL_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  std::vector<float> out(infos_[i].count);
  RL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.data(), grad_slots_[i], out.size() * sizeof(float),
                                          cudaMemcpyDeviceToHost, stream_));
  RETURN_IF_ERROR(Synchronize());  // the host reads the copy
  return out;
}

absl::Status GpuMlp::Synchronize() {
  RL_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  RL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

}  // namespace gpu
}  // namespace ringleader
