#include "worker/rank/cpu_model_runner.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/checkpoint/training_state.h"
#include "worker/trainer/norm.h"

namespace ringleader {
namespace {

class CpuModelRunner : public ModelRunner {
 public:
  CpuModelRunner(std::unique_ptr<Mlp> model, const SgdOptions& sgd)
      : model_(std::move(model)),
        sgd_(sgd),
        optimizer_(std::make_unique<SgdOptimizer>(model_->parameters(), sgd)) {}

  std::string device_name() const override { return "cpu"; }
  ComputePlacement placement() const override { return ComputePlacement(); }
  TensorMemory* memory() override { return HostMemory(); }
  const std::vector<ParameterInfo>& parameters() const override { return model_->parameters(); }
  size_t parameter_count() const override { return model_->parameter_count(); }
  std::vector<BufferInfo> buffers() override { return model_->buffers(); }

  float* grad(size_t i) override { return model_->grad(i); }
  std::vector<const float*> parameter_ptrs() override {
    std::vector<const float*> out;
    for (size_t i = 0; i < parameters().size(); ++i) out.push_back(model_->param(i));
    return out;
  }
  std::vector<float*> mutable_parameter_ptrs() override {
    std::vector<float*> out;
    for (size_t i = 0; i < parameters().size(); ++i) out.push_back(model_->param(i));
    return out;
  }
  void BindGradients(std::vector<float*> slots) override {
    model_->BindGradients(std::move(slots));
  }
  void ReleaseOwnGradients(const std::vector<bool>& which) override {
    model_->ReleaseOwnGradients(which);
  }
  absl::Status ZeroGradients() override {
    model_->ZeroGradients();
    return absl::OkStatus();
  }

  absl::StatusOr<double> ForwardBackward(const float* x, const int32_t* y, size_t batch,
                                         const BackwardOptions& opts) override {
    if (shard_ == nullptr) return model_->ForwardBackward(x, y, batch, opts);
    BackwardOptions gathered = opts;
    gathered.params_for = Provider();
    absl::StatusOr<double> loss = model_->ForwardBackward(x, y, batch, gathered);
    const absl::Status released = shard_->Release();  // the pass's gathers, waited for
    if (loss.ok() && !released.ok()) return released;
    return loss;
  }

  absl::Status ShardParameters(ParameterShard* params) override {
    if (params == nullptr) return absl::InvalidArgumentError("ShardParameters: null parameters");
    std::vector<const float*> full;
    for (size_t i = 0; i < parameters().size(); ++i) full.push_back(model_->param(i));
    RETURN_IF_ERROR(params->LoadOwned(full));
    model_->ReleaseParameters();
    shard_ = params;
    return absl::OkStatus();
  }
  absl::Status GatherFullParameters() override {
    if (shard_ == nullptr) return ModelRunner::GatherFullParameters();
    ASSIGN_OR_RETURN(std::vector<std::vector<float>> full, shard_->GatherAll());
    model_->AdoptParameters(std::move(full));
    return absl::OkStatus();
  }
  void ReleaseFullParameters() override {
    if (shard_ != nullptr) model_->ReleaseParameters();
  }

  void NoteLocalGradient(size_t i) override {
    const double norm = L2Norm(model_->grad(i), parameters()[i].count);
    local_squared_ += norm * norm;
  }
  absl::StatusOr<double> TakeLocalSquaredNorm() override {
    const double sum = local_squared_;
    local_squared_ = 0;
    return sum;
  }
  absl::StatusOr<double> GradNorm(const std::vector<bool>& include) override {
    std::vector<const float*> grads;
    std::vector<size_t> counts;
    for (size_t i = 0; i < parameters().size(); ++i) {
      if (!include[i]) continue;
      grads.push_back(model_->grad(i));
      counts.push_back(parameters()[i].count);
    }
    return L2Norm(grads, counts);
  }

  absl::Status OptimizerStep(const std::vector<bool>& has_grad) override {
    std::vector<float*> params;
    std::vector<const float*> grads;
    for (size_t i = 0; i < parameters().size(); ++i) {
      params.push_back(model_->param(i));
      grads.push_back(model_->grad(i));
    }
    optimizer_->Step(params, grads, has_grad);
    return absl::OkStatus();
  }

  absl::Status OptimizerStepOwned(const std::vector<bool>& has_grad,
                                  const std::vector<const float*>& owned_grads) override {
    if (owned_grads.size() != parameters().size() || !optimizer_->sharded()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "OptimizerStepOwned: needs a sharded optimizer (ShardOptimizerState) and one owned "
          "gradient per parameter; got ", owned_grads.size(), " for ", parameters().size()));
    }
    std::vector<float*> params;
    if (shard_ != nullptr) {
      // fsdp: the owned parameter elements are all this rank holds.
      for (size_t i = 0; i < parameters().size(); ++i) params.push_back(shard_->owned_parameter(i));
      optimizer_->StepShard(params, owned_grads, has_grad);
      return absl::OkStatus();
    }
    for (size_t i = 0; i < parameters().size(); ++i) params.push_back(model_->param(i));
    optimizer_->StepOwned(params, owned_grads, has_grad);
    return absl::OkStatus();
  }

  absl::Status ShardOptimizerState(const std::vector<ElementRange>& owned) override {
    RETURN_IF_ERROR(CheckOptimizerShard(parameters(), owned));
    auto sharded = std::make_unique<SgdOptimizer>(model_->parameters(), sgd_, owned);
    // Whatever momentum is held (a restored checkpoint's, whole) is cut to the owned elements.
    RETURN_IF_ERROR(sharded->RestoreMomentumBuffers(optimizer_->momentum_buffers()));
    sharded->set_step_count(optimizer_->step_count());
    optimizer_ = std::move(sharded);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::vector<float>>> MomentumBuffers() override {
    return optimizer_->momentum_buffers();
  }
  size_t momentum_elements() const override { return optimizer_->momentum_elements(); }

  absl::StatusOr<Mlp::EvalResult> Evaluate(const Dataset& test, size_t batch) override {
    if (shard_ == nullptr) return model_->Evaluate(test, batch);
    // One chunk: one gather per layer, the same on every rank whatever its share's size.
    absl::StatusOr<Mlp::EvalResult> result =
        model_->Evaluate(test, std::max<size_t>(test.size, 1), Provider());
    const absl::Status released = shard_->Release();
    if (result.ok() && !released.ok()) return released;
    return result;
  }
  absl::StatusOr<CheckpointData> CaptureState(uint64_t step, uint64_t epoch,
                                              const std::string& fingerprint) override {
    if (optimizer_->sharded()) {
      return absl::FailedPreconditionError(
          "the optimizer state is sharded (strategy zero1): a checkpoint needs the momentum "
          "gathered from every rank (CaptureStateWithMomentum)");
    }
    return CaptureTrainingState(model_.get(), *optimizer_, step, epoch, fingerprint);
  }
  absl::StatusOr<CheckpointData> CaptureStateWithMomentum(
      uint64_t step, uint64_t epoch, const std::string& fingerprint,
      std::vector<std::vector<float>> momentum) override {
    if (model_->parameters_released()) {
      return absl::FailedPreconditionError(
          "the parameters are sharded (strategy fsdp): a checkpoint needs them gathered from "
          "every rank first (GatherFullParameters)");
    }
    SgdOptimizer whole(model_->parameters(), sgd_);
    RETURN_IF_ERROR(whole.RestoreMomentumBuffers(std::move(momentum)));
    whole.set_step_count(optimizer_->step_count());
    return CaptureTrainingState(model_.get(), whole, step, epoch, fingerprint);
  }

  absl::Status RestoreOptimizerState(const std::vector<std::vector<float>>& momentum,
                                     uint64_t step_count) override {
    RETURN_IF_ERROR(optimizer_->RestoreMomentumBuffers(momentum));
    optimizer_->set_step_count(step_count);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<Mlp> model_;
  const SgdOptions sgd_;
  ParameterProvider Provider() {
    return [this](size_t k) { return shard_->Acquire(k); };
  }

  std::unique_ptr<SgdOptimizer> optimizer_;  // sharded after ShardOptimizerState
  double local_squared_ = 0;
  ParameterShard* shard_ = nullptr;  // sharded parameters (fsdp): where they live; not owned
};

}  // namespace

std::unique_ptr<ModelRunner> CreateCpuModelRunner(std::unique_ptr<Mlp> model,
                                                  const SgdOptions& sgd) {
  return std::make_unique<CpuModelRunner>(std::move(model), sgd);
}

}  // namespace ringleader
