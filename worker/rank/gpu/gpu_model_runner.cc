#include "worker/rank/gpu/gpu_model_runner.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/gpu/cuda_status.h"
#include "common/gpu/gpu_devices.h"
#include "common/status_macros.h"
#include "worker/checkpoint/training_state.h"
#include "worker/rank/gpu/local_norm_notes.h"
#include "worker/sync/gpu/cuda_tensor_memory.h"
#include "worker/trainer/gpu/gpu_mlp.h"
#include "worker/trainer/gpu/gpu_mlp_kernels.h"
#include "worker/trainer/gpu/gpu_sgd.h"

namespace ringleader {
namespace {

class GpuModelRunner : public ModelRunner {
 public:
  GpuModelRunner(std::unique_ptr<Mlp> host, const SgdOptions& sgd,
                 std::unique_ptr<gpu::GpuMlp> model)
      : host_(std::move(host)),
        sgd_(sgd),
        model_(std::move(model)),
        memory_(model_->device(), model_->stream()),
        notes_(model_->parameters().size()) {}

  absl::Status Init() {
    ASSIGN_OR_RETURN(optimizer_, gpu::GpuSgdOptimizer::Create(model_->parameters(), sgd_,
                                                              model_->device(), model_->stream()));
    ASSIGN_OR_RETURN(norm_partials_,
                     TensorBuffer<double>::Allocate(
                         &memory_, model_->parameters().size() * gpu::kSquaredSumBlocks));
    return absl::OkStatus();
  }

  std::string device_name() const override { return memory_.name(); }
  ComputePlacement placement() const override {
    ComputePlacement p;
    p.gpu = model_->device();
    p.compute_stream = model_->stream();
    return p;
  }
  TensorMemory* memory() override { return &memory_; }
  const std::vector<ParameterInfo>& parameters() const override { return model_->parameters(); }
  size_t parameter_count() const override { return model_->parameter_count(); }
  std::vector<BufferInfo> buffers() override { return {}; }  // GpuMlp::Create refuses them

  float* grad(size_t i) override { return model_->grad(i); }
  std::vector<const float*> parameter_ptrs() override {
    const std::vector<float*> p = model_->param_ptrs();
    return std::vector<const float*>(p.begin(), p.end());
  }
  // The caller writes the parameters through these (zero1/zero2's all-gather of the shards)
  // before the next ForwardBackward: the bf16 copy is recast then.
  std::vector<float*> mutable_parameter_ptrs() override {
    model_->MarkParametersChanged();
    return model_->param_ptrs();
  }
  void BindGradients(std::vector<float*> slots) override {
    model_->BindGradients(std::move(slots));
  }
  void ReleaseOwnGradients(const std::vector<bool>& which) override {
    model_->ReleaseOwnGradients(which);
  }
  absl::Status ZeroGradients() override { return model_->ZeroGradients(); }

  absl::StatusOr<double> ForwardBackward(const float* x, const int32_t* y, size_t batch,
                                         const BackwardOptions& opts) override {
    if (shard_ == nullptr) return model_->ForwardBackward(x, y, batch, opts);
    // fsdp: each layer gathered into device staging one layer ahead (the compute stream waits
    // for it on the device), the pass's gathers waited for and released after it.
    BackwardOptions gathered = opts;
    gathered.params_for = [this](size_t k) { return shard_->Acquire(k); };
    absl::StatusOr<double> loss = model_->ForwardBackward(x, y, batch, gathered);
    const absl::Status released = shard_->Release();
    if (loss.ok() && !released.ok()) return released;
    return loss;
  }

  // strategy fsdp: the owned elements go into the shard (device to device), then the model's
  // own parameters are freed.
  absl::Status ShardParameters(ParameterShard* params) override {
    if (params == nullptr) return absl::InvalidArgumentError("ShardParameters: null parameters");
    const std::vector<float*> full = model_->param_ptrs();
    RETURN_IF_ERROR(params->LoadOwned(std::vector<const float*>(full.begin(), full.end())));
    model_->ReleaseParameters();
    shard_ = params;
    return absl::OkStatus();
  }
  // The gathered parameters go into the host mirror, which is what checkpoints read.
  absl::Status GatherFullParameters() override {
    if (shard_ == nullptr) return ModelRunner::GatherFullParameters();
    ASSIGN_OR_RETURN(std::vector<std::vector<float>> full, shard_->GatherAll());
    for (size_t i = 0; i < full.size(); ++i) {
      std::copy(full[i].begin(), full[i].end(), host_->param(i));
    }
    host_gathered_ = true;
    return absl::OkStatus();
  }
  void ReleaseFullParameters() override { host_gathered_ = false; }

  // Enqueued on the compute stream before the reducer's MarkReady can issue the collective that
  // averages this gradient in place, so the kernel reads the local values. A gradient noted
  // again before the Take (zero2/fsdp: once per micro-batch) adds to its partials, as the CPU
  // runner adds every note (local_norm_notes.h).
  void NoteLocalGradient(size_t i) override {
    if (!norm_error_.ok()) return;
    double* partials = norm_partials_.data() + i * gpu::kSquaredSumBlocks;
    const bool first = notes_.Note(i) == LocalNormNotes::Launch::kWrite;
    const cudaError_t launched =
        first ? gpu::LaunchSquaredSumPartials(model_->grad(i), parameters()[i].count, partials,
                                              model_->stream())
              : gpu::LaunchAddSquaredSumPartials(model_->grad(i), parameters()[i].count,
                                                 partials, model_->stream());
    if (launched != cudaSuccess) {
      norm_error_ = gpu::CudaStatus(
          launched, first ? "LaunchSquaredSumPartials" : "LaunchAddSquaredSumPartials", __FILE__,
          __LINE__);
    }
  }
  absl::StatusOr<double> TakeLocalSquaredNorm() override {
    absl::Status error = std::move(norm_error_);
    norm_error_ = absl::OkStatus();
    if (!error.ok() || !notes_.any()) {
      notes_.Clear();
      RETURN_IF_ERROR(error);
      return 0.0;
    }
    std::vector<double> partials(norm_partials_.size());
    const absl::Status copied =
        memory_.CopyToHost(partials.data(), norm_partials_.data(), norm_partials_.bytes());
    if (!copied.ok()) {
      notes_.Clear();
      return copied;
    }
    return notes_.Take(partials, gpu::kSquaredSumBlocks);
  }
  absl::StatusOr<double> GradNorm(const std::vector<bool>& include) override {
    return model_->GradNorm(include);
  }

  absl::Status OptimizerStep(const std::vector<bool>& has_grad) override {
    model_->MarkParametersChanged();  // bf16: recast before the next ForwardBackward
    return optimizer_->Step(model_->param_ptrs(), model_->grad_ptrs(), has_grad);
  }

  // strategy zero2: the sharded optimizer steps the owned elements with the reduce-scattered
  // shard (device pointers into the reducer's memory, which is memory_).
  absl::Status OptimizerStepOwned(const std::vector<bool>& has_grad,
                                  const std::vector<const float*>& owned_grads) override {
    if (shard_ == nullptr) {
      model_->MarkParametersChanged();  // bf16: recast before the next ForwardBackward
      return optimizer_->StepOwned(model_->param_ptrs(), owned_grads, has_grad);
    }
    // fsdp: the owned parameter elements are all this rank holds.
    std::vector<float*> owned_params;
    for (size_t i = 0; i < parameters().size(); ++i) {
      owned_params.push_back(shard_->owned_parameter(i));
    }
    return optimizer_->StepShard(owned_params, owned_grads, has_grad);
  }

  absl::StatusOr<Mlp::EvalResult> Evaluate(const Dataset& test, size_t batch) override {
    if (shard_ == nullptr) {
      RETURN_IF_ERROR(model_->CopyParametersTo(*host_));
      return host_->Evaluate(test, batch);
    }
    // fsdp: every layer gathered once (the CPU runner's gathers, in its order), copied into the
    // host mirror, released.
    const size_t num_layers = parameters().size() / 2;
    absl::Status copied;
    for (size_t k = 0; k < num_layers && copied.ok(); ++k) {
      absl::StatusOr<LayerParameters> layer = shard_->Acquire(k);
      copied = layer.status();
      if (!copied.ok()) break;
      copied = memory_.CopyToHost(host_->param(2 * k), layer->weight,
                                  parameters()[2 * k].count * sizeof(float));
      if (copied.ok()) {
        copied = memory_.CopyToHost(host_->param(2 * k + 1), layer->bias,
                                    parameters()[2 * k + 1].count * sizeof(float));
      }
    }
    const absl::Status released = shard_->Release();
    RETURN_IF_ERROR(copied);
    RETURN_IF_ERROR(released);
    return host_->Evaluate(test, batch);
  }
  // strategy zero1: a sharded GpuSgdOptimizer takes over, holding only the owned elements of
  // the momentum already held (a restored checkpoint's), on the device.
  absl::Status ShardOptimizerState(const std::vector<ElementRange>& owned) override {
    RETURN_IF_ERROR(CheckOptimizerShard(parameters(), owned));
    ASSIGN_OR_RETURN(std::vector<std::vector<float>> held,
                     optimizer_->CopyMomentumBuffersToHost());
    ASSIGN_OR_RETURN(std::unique_ptr<gpu::GpuSgdOptimizer> sharded,
                     gpu::GpuSgdOptimizer::CreateSharded(model_->parameters(), sgd_, owned,
                                                         model_->device(), model_->stream()));
    RETURN_IF_ERROR(sharded->RestoreMomentumBuffers(held, optimizer_->step_count()));
    optimizer_ = std::move(sharded);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::vector<float>>> MomentumBuffers() override {
    return optimizer_->CopyMomentumBuffersToHost();
  }
  size_t momentum_elements() const override { return optimizer_->momentum_elements(); }

  absl::StatusOr<CheckpointData> CaptureState(uint64_t step, uint64_t epoch,
                                              const std::string& fingerprint) override {
    if (optimizer_->sharded()) {
      return absl::FailedPreconditionError(
          "the optimizer state is sharded (strategy zero1 or zero2): a checkpoint needs the momentum "
          "gathered from every rank (CaptureStateWithMomentum)");
    }
    ASSIGN_OR_RETURN(std::vector<std::vector<float>> momentum,
                     optimizer_->CopyMomentumBuffersToHost());
    return CaptureStateWithMomentum(step, epoch, fingerprint, std::move(momentum));
  }
  absl::StatusOr<CheckpointData> CaptureStateWithMomentum(
      uint64_t step, uint64_t epoch, const std::string& fingerprint,
      std::vector<std::vector<float>> momentum) override {
    if (shard_ == nullptr) {
      RETURN_IF_ERROR(model_->CopyParametersTo(*host_));
    } else if (!host_gathered_) {
      return absl::FailedPreconditionError(
          "the parameters are sharded (strategy fsdp): a checkpoint needs them gathered from "
          "every rank first (GatherFullParameters)");
    }
    SgdOptimizer host_optimizer(host_->parameters(), sgd_);
    RETURN_IF_ERROR(host_optimizer.RestoreMomentumBuffers(std::move(momentum)));
    host_optimizer.set_step_count(optimizer_->step_count());
    return CaptureTrainingState(host_.get(), host_optimizer, step, epoch, fingerprint);
  }

  absl::Status RestoreOptimizerState(const std::vector<std::vector<float>>& momentum,
                                     uint64_t step_count) override {
    return optimizer_->RestoreMomentumBuffers(momentum, step_count);
  }

 private:
  std::unique_ptr<Mlp> host_;  // the initial model, then the host mirror
  const SgdOptions sgd_;
  // Declaration order = the reverse of destruction order: everything below model_ uses its
  // stream, so it goes first.
  std::unique_ptr<gpu::GpuMlp> model_;
  gpu::CudaTensorMemory memory_;
  std::unique_ptr<gpu::GpuSgdOptimizer> optimizer_;
  TensorBuffer<double> norm_partials_;  // kSquaredSumBlocks per parameter
  LocalNormNotes notes_;                // parameters noted since the last Take
  absl::Status norm_error_;
  ParameterShard* shard_ = nullptr;  // sharded parameters (fsdp): where they live; not owned
  bool host_gathered_ = false;      // fsdp: host_ holds the gathered parameters
};

}  // namespace

absl::StatusOr<std::unique_ptr<ModelRunner>> CreateGpuModelRunner(std::unique_ptr<Mlp> initial,
                                                                  const SgdOptions& sgd,
                                                                  const GpuRunnerOptions& options) {
  RETURN_IF_ERROR(CheckUsableGpu(options.gpu));
  // The reducer's and the training loop's per-step buffers come from the device's pool
  // (CudaTensorMemory): keep what they free there instead of unmapping it every step.
  RETURN_IF_ERROR(gpu::RetainFreedDeviceMemory(options.gpu));
  gpu::GpuMlpOptions mlp;
  mlp.device = options.gpu;
  mlp.precision = options.bf16_mixed_precision ? gpu::Precision::kBf16 : gpu::Precision::kFp32;
  ASSIGN_OR_RETURN(std::unique_ptr<gpu::GpuMlp> model, gpu::GpuMlp::Create(*initial, mlp));
  auto runner = std::make_unique<GpuModelRunner>(std::move(initial), sgd, std::move(model));
  RETURN_IF_ERROR(runner->Init());
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

}  // namespace ringleader
