// strategy zero2 (see zero2_strategy.h).
#include "worker/strategy/zero2_strategy.h"

#include <utility>

#include "common/status_macros.h"

namespace ringleader {

absl::StatusOr<Zero2Plan> PlanZero2For(const StrategyContext& context) {
  const v1::SyncSpec& sync = context.spec->sync();
  return PlanZero2(ReducerElementCounts(*context.plan), context.world_size,
                   Zero2LayoutOptions(sync.first_bucket_mb(), sync.bucket_cap_mb()));
}

Zero2Strategy::Zero2Strategy(const StrategyContext& context, Zero2Plan plan)
    : c_(context), parameters_(*context.plan), plan_(std::move(plan)),
      shards_(plan_.shards, context) {}

absl::Status Zero2Strategy::PrepareRunner(ModelRunner* runner) {
  runner_ = runner;
  return shards_.ShardOptimizer(runner);
}

absl::Status Zero2Strategy::Connect(ModelRunner* runner, Collective* comm) {
  runner_ = runner;
  comm_ = comm;
  const v1::SyncSpec& sync = c_.spec->sync();
  Zero2ReducerOptions options;
  options.timeout = c_.timeout;
  options.clock = c_.clock;
  options.memory = runner_->memory();
  options.accumulation_steps = static_cast<int>(sync.gradient_accumulation_steps());
  options.find_unused_parameters = sync.find_unused_parameters();
  options.bf16_wire = CommDtypeOf(*c_.spec) == Precision::kBf16;
  ASSIGN_OR_RETURN(reducer_,
                   Zero2Reducer::Create(comm_, parameters_.trainable, plan_, options));
  RETURN_IF_ERROR(ShardParameters());
  // Every trainable gradient comes from the reducer's pool each step (slot_for): the model's
  // own full-size storage would only hold memory zero2 exists to save.
  std::vector<bool> trainable(parameters_.reducer_index.size());
  for (size_t i = 0; i < trainable.size(); ++i) trainable[i] = parameters_.reducer_index[i] >= 0;
  runner_->ReleaseOwnGradients(trainable);
  return absl::OkStatus();
}

void Zero2Strategy::MarkAlwaysReady() {
  for (size_t i = 0; i < parameters_.always_ready.size(); ++i) {
    if (parameters_.always_ready[i]) {
      reducer_->MarkReady(static_cast<size_t>(parameters_.reducer_index[i]));
    }
  }
}

absl::Status Zero2Strategy::BeginStep() {
  reducer_->BeginStep();
  MarkAlwaysReady();
  return absl::OkStatus();
}

void Zero2Strategy::PrepareMicroBatch(int k, bool sync, BackwardOptions* backward) {
  (void)k, (void)sync;
  // Every micro-batch reduce-scatters (and notes its local gradients: under zero2 the local
  // norm is over the micro-batches' gradients, which no rank ever sums locally).
  backward->slot_for = [this](size_t i) {
    return reducer_->SlotFor(static_cast<size_t>(parameters_.reducer_index[i]));
  };
  backward->on_ready = [this](size_t i) {
    // Before MarkReady: it may launch the bucket's reduce-scatter.
    runner_->NoteLocalGradient(i);
    reducer_->MarkReady(static_cast<size_t>(parameters_.reducer_index[i]));
  };
}

absl::Status Zero2Strategy::FinishMicroBatch(bool sync) {
  if (sync) return absl::OkStatus();  // the last micro-batch's buckets finish in Synchronize
  RETURN_IF_ERROR(reducer_->FinishMicroBatch());
  MarkAlwaysReady();
  return absl::OkStatus();
}

absl::Status Zero2Strategy::Synchronize(StepSyncStats* stats) {
  return reducer_->FinishStep(stats, &norm_);
}

absl::StatusOr<double> Zero2Strategy::OptimizerStep() {
  // The reducer's global norm; the optimizer steps the owned elements with the shard.
  std::vector<const float*> owned(parameters_.reducer_index.size(), nullptr);
  for (size_t i = 0; i < owned.size(); ++i) {
    const int t = parameters_.reducer_index[i];
    if (t >= 0) owned[i] = reducer_->owned_gradient(static_cast<size_t>(t));
  }
  RETURN_IF_ERROR(runner_->OptimizerStepOwned(parameters_.has_grad, owned));
  return norm_;
}

absl::StatusOr<absl::Duration> Zero2Strategy::GatherAfterStep() {
  // This rank stepped its shard only; the others' come from their owners.
  return shards_.GatherParameters(runner_, comm_, ledger());
}

absl::StatusOr<DriftResult> Zero2Strategy::MeasureDrift(const DriftOptions& options) {
  return ringleader::MeasureDrift(comm_, runner_->parameters(), runner_->parameter_ptrs(),
                                  options);
}

absl::StatusOr<MomentumBuffers> Zero2Strategy::GatherCheckpointState() {
  return shards_.GatherMomentum(runner_, comm_, ledger());
}

absl::StatusOr<CheckpointData> Zero2Strategy::CaptureShard(uint64_t step, uint64_t epoch,
                                                           const std::string& fingerprint) {
  return shards_.CaptureShardWithWholeParameters(runner_, step, epoch, fingerprint);
}

void Zero2Strategy::MeasureMemory(v1::RankMemory* memory) const {
  // The gradient shard and the bucket pool, no full-size arena.
  memory->set_parameter_bytes(runner_->parameter_count() * sizeof(float));
  memory->set_gradient_bytes(reducer_->gradient_bytes());
  memory->set_comm_buffer_bytes(reducer_->wire_buffer_bytes() + shards_.gather_staging_bytes());
}

}  // namespace ringleader
