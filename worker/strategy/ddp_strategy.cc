// strategy ddp: the bucketed all-reduce (see ddp_strategy.h).
#include "worker/strategy/ddp_strategy.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringleader {

DdpStrategy::DdpStrategy(const StrategyContext& context) : c_(context), plan_(*context.plan) {}

absl::Status DdpStrategy::PrepareRunner(ModelRunner* runner) {
  runner_ = runner;
  return absl::OkStatus();
}

absl::Status DdpStrategy::Connect(ModelRunner* runner, Collective* comm) {
  runner_ = runner;
  comm_ = comm;
  const v1::SyncSpec& sync = c_.spec->sync();
  ReducerOptions options;
  options.bucket_cap_mb = sync.bucket_cap_mb();
  options.first_bucket_mb = sync.first_bucket_mb();
  options.find_unused_parameters = sync.find_unused_parameters();
  options.gradient_accumulation_steps = static_cast<int>(sync.gradient_accumulation_steps());
  options.comm_dtype =
      CommDtypeOf(*c_.spec) == Precision::kBf16 ? DataType::kBFloat16 : DataType::kFloat32;
  options.overlap = sync.overlap();
  options.rebuild_buckets = sync.rebuild_buckets();
  options.timeout = c_.timeout;
  options.clock = c_.clock;
  options.memory = runner_->memory();
  ASSIGN_OR_RETURN(reducer_, Reducer::Create(comm_, plan_.trainable, options));
  for (size_t i = 0; i < plan_.has_grad.size(); ++i) own_grads_.push_back(runner_->grad(i));
  BindGradients();
  return absl::OkStatus();
}

void DdpStrategy::BindGradients() {
  if (plan_.bypass) return;
  const std::vector<float*> slots = reducer_->gradient_slots();
  std::vector<float*> bound(plan_.reducer_index.size());
  for (size_t i = 0; i < bound.size(); ++i) {
    bound[i] = plan_.reducer_index[i] >= 0 ? slots[plan_.reducer_index[i]] : own_grads_[i];
  }
  runner_->BindGradients(bound);
}

absl::Status DdpStrategy::BeginStep() {
  // With every rank bypassing, no rank runs the reducer: no collective for the gradients.
  if (!plan_.bypass_all) reducer_->ZeroGradients();
  if (plan_.bypass) RETURN_IF_ERROR(runner_->ZeroGradients());
  return absl::OkStatus();
}

void DdpStrategy::PrepareMicroBatch(int k, bool sync, BackwardOptions* backward) {
  if (!plan_.bypass_all) reducer_->BeginMicroBatch(k);
  if (plan_.bypass) return;
  backward->on_ready = [this, sync](size_t i) {
    // Before MarkReady: it may launch the bucket, which averages this gradient in place.
    if (sync) runner_->NoteLocalGradient(i);
    reducer_->MarkReady(static_cast<size_t>(plan_.reducer_index[i]));
  };
}

absl::Status DdpStrategy::FinishMicroBatch(bool sync) {
  (void)sync;
  return absl::OkStatus();
}

absl::Status DdpStrategy::FinishBackward() {
  if (plan_.bypass && !plan_.bypass_all) RETURN_IF_ERROR(HandOverLocalGradients());
  if (plan_.bypass_all) {
    for (size_t i = 0; i < plan_.has_grad.size(); ++i) {
      if (plan_.has_grad[i] && !plan_.skip[i]) runner_->NoteLocalGradient(i);
    }
  }
  return absl::OkStatus();
}

absl::Status DdpStrategy::HandOverLocalGradients() {
  const std::vector<float*> slots = reducer_->gradient_slots();
  const std::vector<ParameterInfo>& infos = runner_->parameters();
  for (size_t i = infos.size(); i-- > 0;) {
    if (plan_.reducer_index[i] < 0) continue;
    runner_->NoteLocalGradient(i);
    RETURN_IF_ERROR(runner_->memory()->Copy(slots[plan_.reducer_index[i]], runner_->grad(i),
                                            infos[i].count * sizeof(float)));
    if (!plan_.skip[i]) reducer_->MarkReady(static_cast<size_t>(plan_.reducer_index[i]));
  }
  return absl::OkStatus();
}

absl::Status DdpStrategy::Synchronize(StepSyncStats* stats) {
  if (plan_.bypass_all) return absl::OkStatus();
  RETURN_IF_ERROR(reducer_->FinishStep(stats));
  if (reducer_->layout_changed()) BindGradients();
  return absl::OkStatus();
}

absl::StatusOr<double> DdpStrategy::OptimizerStep() {
  // The gradients the optimizer uses: the bucket views, or a bypassing rank's own.
  ASSIGN_OR_RETURN(const double norm, runner_->GradNorm(plan_.has_grad));
  RETURN_IF_ERROR(runner_->OptimizerStep(plan_.has_grad));
  return norm;
}

absl::StatusOr<absl::Duration> DdpStrategy::GatherAfterStep() { return absl::ZeroDuration(); }

CollectiveLedger* DdpStrategy::ledger() {
  return plan_.bypass_all ? nullptr : reducer_->ledger();
}

absl::StatusOr<DriftResult> DdpStrategy::MeasureDrift(const DriftOptions& options) {
  return ringleader::MeasureDrift(comm_, runner_->parameters(), runner_->parameter_ptrs(),
                                  options);
}

absl::StatusOr<MomentumBuffers> DdpStrategy::GatherCheckpointState() {
  return runner_->MomentumBuffers();  // every rank holds them whole: no collective
}

absl::StatusOr<CheckpointData> DdpStrategy::CaptureShard(uint64_t step, uint64_t epoch,
                                                         const std::string& fingerprint) {
  (void)step, (void)epoch, (void)fingerprint;
  return absl::FailedPreconditionError(absl::StrCat(
      "checkpoint_format sharded: strategy ", Name(StrategyOf(*c_.spec)),
      " holds everything on every rank; use consolidated"));
}

void DdpStrategy::MeasureMemory(v1::RankMemory* memory) const {
  memory->set_parameter_bytes(runner_->parameter_count() * sizeof(float));
  memory->set_gradient_bytes(reducer_->arena_bytes());
  memory->set_comm_buffer_bytes(reducer_->wire_buffer_bytes());
}

std::string DdpStrategy::Description() const { return Name(StrategyOf(*c_.spec)); }

size_t DdpStrategy::bucket_count() const { return reducer_->layout().buckets.size(); }

}  // namespace ringleader
