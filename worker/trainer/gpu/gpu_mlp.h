// The MLP of worker/trainer/mlp.h, trained on one CUDA GPU: same layers, parameter names and
// order, loss (mean softmax cross-entropy), gradient accumulation, skip list and per-parameter
// gradient-ready callbacks, so the gradient reducer and the drift check treat both alike.
//
//   Mlp init(layers, seed);                         // CPU model: the initial parameters
//   ASSIGN_OR_RETURN(auto model, GpuMlp::Create(init, {.device = 0}));
//   ASSIGN_OR_RETURN(auto opt, GpuSgdOptimizer::Create(model->parameters(), sgd, model->stream()));
//   model->ZeroGradients();
//   ASSIGN_OR_RETURN(double loss, model->ForwardBackward(x, y, batch, {}));
//   opt->Step(model->param_ptrs(), model->grad_ptrs(), has_grad);
//   model->MarkParametersChanged();                 // kBf16: recast before the next pass
//
// Initial parameters are copied from a CPU Mlp (built with the same layers and seed), so CPU and
// GPU ranks start from identical weights.
//
// Math on the device: Linear layers by cublasGemmEx with CUBLAS_COMPUTE_32F (strict fp32, never
// TF32); bias+ReLU, ReLU backward, softmax cross-entropy and the bias gradient by the kernels of
// gpu_mlp_kernels.h (mlp_math.h's arithmetic). With Precision::kBf16 (JobSpec.mixed_precision
// "bf16") the GEMM inputs (weights, activations, deltas) are rounded to bfloat16 and accumulated
// in fp32; parameters ("master weights"), gradients, bias and loss math stay fp32. The bf16 copy
// of the weights is cast at the first ForwardBackward and then only after MarkParametersChanged
// (an optimizer step or any other write through param() / param_ptrs()), not per micro-batch.
//
// Gradient slots: the model's own storage by default, the reducer's bucket views after
// BindGradients, or per step from BackwardOptions::slot_for (strategy zero2, a device pointer
// the reducer's pool hands out; it is zeroed on stream() before backward writes it).
//
// Streams: everything runs on the model's own compute stream(). Host inputs are copied into
// pinned staging buffers and sent with cudaMemcpyAsync. on_ready(i) is called on the calling
// thread right after the kernels that finish parameter i's gradient were ENQUEUED: the gradient
// is complete in stream order — work that waits on stream() (NcclCollective does, through
// NcclOptions::compute_stream) sees it. ForwardBackward returns after the loss was copied back,
// so the host waits for the whole step.
//
// Strategy fsdp: after ReleaseParameters every pass takes each layer's parameters from
// BackwardOptions::params_for, in the CPU Mlp's order (2K - 1 calls per pass).
//
// Not supported yet: MlpOptions::with_buffers (Create answers UNIMPLEMENTED).
//
// Thread-safety: not thread-safe; one training thread owns a GpuMlp.
#ifndef RINGLEADER_WORKER_TRAINER_GPU_GPU_MLP_H_
#define RINGLEADER_WORKER_TRAINER_GPU_GPU_MLP_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/parameter.h"

namespace ringleader {
namespace gpu {

enum class Precision {
  kFp32,  // everything in fp32
  kBf16,  // bf16 GEMM inputs, fp32 accumulation and master weights
};

struct GpuMlpOptions {
  int device = 0;  // CUDA device ordinal
  Precision precision = Precision::kFp32;
};

class GpuMlp {
 public:
  // Uploads `initial`'s parameters to GPU `device`.
  // Errors: FAILED_PRECONDITION "no usable GPU: ..." (no driver/GPU), INVALID_ARGUMENT (no such
  // device), UNIMPLEMENTED (initial has buffers), RESOURCE_EXHAUSTED (out of GPU memory),
  // INTERNAL (other CUDA/cuBLAS failures).
  static absl::StatusOr<std::unique_ptr<GpuMlp>> Create(const Mlp& initial,
                                                        const GpuMlpOptions& options);
  ~GpuMlp();
  GpuMlp(const GpuMlp&) = delete;
  GpuMlp& operator=(const GpuMlp&) = delete;

  const std::vector<size_t>& layers() const { return layers_; }
  size_t input_features() const { return layers_.front(); }
  size_t num_classes() const { return layers_.back(); }
  const std::vector<ParameterInfo>& parameters() const { return infos_; }
  size_t parameter_count() const { return total_params_; }
  int device() const { return options_.device; }
  cudaStream_t stream() const { return stream_; }

  // Device pointers: parameter i and its current gradient slot.
  float* param(size_t i) { return param_ptrs_[i]; }
  float* grad(size_t i) { return grad_slots_[i]; }
  std::vector<float*> param_ptrs() const { return param_ptrs_; }
  std::vector<const float*> grad_ptrs() const {
    return std::vector<const float*>(grad_slots_.begin(), grad_slots_.end());
  }

  // Tells the model that its parameters were written through param() / param_ptrs() (an
  // optimizer step, the all-gather of sharded parameters): in kBf16 mode the next
  // ForwardBackward recasts its bf16 copy, which it does only then (and at the first call).
  // Whoever writes the parameters calls it before the next ForwardBackward; a write without it
  // is not seen by a kBf16 model's GEMMs. Cheap; no effect in kFp32 mode or once the
  // parameters were released (a provider's weights are cast at every use).
  void MarkParametersChanged() { params_bf16_stale_ = true; }

  // Points gradient i at device memory slots[i] (the reducer's bucket views); empty = back to
  // the model's own storage. Same contract as Mlp::BindGradients (checked; aborts otherwise).
  void BindGradients(std::vector<float*> slots);

  // Mlp::ReleaseOwnGradients: parameter i with which[i] (one entry per parameter, checked) no
  // longer has gradient storage of the model's own; its slot is null until
  // BackwardOptions::slot_for or BindGradients gives it one (strategy zero2 hands every slot out
  // per step). The single own-gradient allocation is freed once no parameter keeps it (after
  // waiting for stream()); BindGradients({}) is then a programmer error (checked).
  void ReleaseOwnGradients(const std::vector<bool>& which);

  // Strategy fsdp (Mlp::ReleaseParameters): frees the model's parameters (and their bf16 copy)
  // after waiting for stream(); from then on ForwardBackward needs BackwardOptions::params_for
  // (device pointers, valid in stream order until the provider's next call; checked, aborts
  // otherwise), param() and param_ptrs() are null, and CopyParametersTo answers
  // FAILED_PRECONDITION. In kBf16 mode each provided weight is cast into one staging buffer of
  // the largest weight's size right before its GEMM. Irreversible.
  void ReleaseParameters();
  bool parameters_released() const { return params_ == nullptr; }

  // Sets every gradient slot to 0 (enqueued on stream()); released slots are skipped.
  absl::Status ZeroGradients();

  // Mlp::ForwardBackward on the GPU: x is batch x input_features host floats, y batch host
  // labels. Gradients accumulate (grad += loss_scale x dLoss/dW). Returns the mean loss.
  // Errors: INVALID_ARGUMENT like Mlp (empty batch, label out of range naming the example, skip
  // size); CUDA/cuBLAS errors as in Create.
  absl::StatusOr<double> ForwardBackward(const float* x, const int32_t* y, size_t batch,
                                         const BackwardOptions& opts);

  // sqrt(sum over parameters with include[i] (empty = all) of sum grad_i^2), in double, like
  // norm.h's L2Norm of the gradients (the summation order differs: ~1e-15 relative).
  absl::StatusOr<double> GradNorm(const std::vector<bool>& include = {});

  // Waits for stream() and copies every parameter into `host` (which must have the same
  // layers). Used for evaluation, checkpoints and tests. INVALID_ARGUMENT if layers differ.
  absl::Status CopyParametersTo(Mlp& host);
  // Waits for stream() and copies gradient i to the host.
  absl::StatusOr<std::vector<float>> CopyGradientToHost(size_t i);

  // Blocks until everything enqueued on stream() has finished; its error, if any.
  absl::Status Synchronize();

 private:
  GpuMlp(const Mlp& initial, const GpuMlpOptions& options);
  absl::Status Init(const Mlp& initial);
  // Frees the per-batch scratch buffers.
  void FreeBatchBuffers();
  // Grows the per-batch scratch buffers to hold `batch` examples.
  absl::Status ReserveBatch(size_t batch);
  // C(row-major) = op(A) · op(B) on stream(), see gpu_mlp.cc for the mapping to cuBLAS.
  absl::Status Gemm(cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k,
                    const void* a, int lda, const void* b, int ldb, float beta, float* c, int ldc);
  // The pointer a GEMM should read for fp32 data `f` (or its bf16 copy `h` in kBf16 mode).
  const void* GemmInput(const float* f, const uint16_t* h) const;
  // Layer k's weight and bias, from `provider` when non-null (fsdp), else the model's own, and
  // what a GEMM reads for the weight (in kBf16 mode: the bf16 copy, or the provided weight cast
  // into the staging buffer). Errors: the provider's; CUDA errors.
  struct Layer {
    const float* weight = nullptr;
    const float* bias = nullptr;
    const void* weight_gemm = nullptr;
  };
  absl::StatusOr<Layer> LayerFor(size_t k, const ParameterProvider* provider);

  const std::vector<size_t> layers_;
  const GpuMlpOptions options_;
  std::vector<ParameterInfo> infos_;
  size_t total_params_ = 0;

  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;

  // Device memory. Parameters and own gradients are single allocations with per-parameter
  // offsets (param_ptrs_, own_grad_ptrs_).
  float* params_ = nullptr;
  float* own_grads_ = nullptr;
  uint16_t* params_bf16_ = nullptr;  // kBf16 only: bf16 copy of the parameters
  bool params_bf16_stale_ = true;    // kBf16: params_bf16_ must be recast before the next use
  uint16_t* weight_bf16_staging_ = nullptr;  // kBf16 with a provider: the current weight
  std::vector<float*> param_ptrs_;
  std::vector<uint16_t*> param_bf16_ptrs_;
  std::vector<float*> own_grad_ptrs_;
  std::vector<float*> grad_slots_;

  // Per-batch scratch (device unless noted), sized for `capacity_` examples.
  size_t capacity_ = 0;
  float* input_ = nullptr;                   // batch x input_features
  uint16_t* input_bf16_ = nullptr;           // kBf16 only
  int32_t* labels_ = nullptr;                // batch
  std::vector<float*> activations_;          // per layer, batch x layers_[k+1]
  std::vector<uint16_t*> activations_bf16_;  // kBf16 only, hidden layers
  float* delta_ = nullptr;                   // batch x max width
  float* delta_prev_ = nullptr;              // batch x max width
  uint16_t* delta_bf16_ = nullptr;           // kBf16 only
  double* row_loss_ = nullptr;               // batch
  double* norm_partials_ = nullptr;          // kSquaredSumBlocks per parameter
  double* pinned_norm_partials_ = nullptr;   // host, pinned, same layout
  float* pinned_x_ = nullptr;                // host, pinned
  int32_t* pinned_y_ = nullptr;              // host, pinned
  double* pinned_row_loss_ = nullptr;        // host, pinned, batch
};

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_TRAINER_GPU_GPU_MLP_H_
