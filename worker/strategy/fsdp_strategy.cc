// strategy fsdp (see fsdp_strategy.h).
#include "worker/strategy/fsdp_strategy.h"

#include <utility>
#include <vector>

#include "checkpoint/sharded_checkpoint.h"
#include "common/status_macros.h"
#include "worker/checkpoint/training_state.h"

namespace ringleader {

absl::StatusOr<FsdpPlan> PlanFsdpFor(const StrategyContext& context) {
  const v1::SyncSpec& sync = context.spec->sync();
  return PlanFsdp(ReducerElementCounts(*context.plan), MlpLayerParameters(context.model_layers), context.world_size,
                  Zero2LayoutOptions(sync.first_bucket_mb(), sync.bucket_cap_mb()));
}

FsdpStrategy::FsdpStrategy(const StrategyContext& context, FsdpPlan plan)
    : Zero2Strategy(context, plan.zero2), fsdp_plan_(std::move(plan)) {}

absl::Status FsdpStrategy::ShardParameters() {
  FsdpParametersOptions options;
  options.timeout = c_.timeout;
  options.ledger = reducer_->ledger();
  options.memory = runner_->memory();
  // NCCL: the gathers on their own communicator, beside the reduce-scatters (null: comm_).
  options.gather_channel = comm_->side_channel();
  ASSIGN_OR_RETURN(parameters_shard_, FsdpParameters::Create(comm_, runner_->parameters(),
                                                             fsdp_plan_, options));
  const absl::Status sharded = runner_->ShardParameters(parameters_shard_.get());
  return sharded.ok() ? sharded : WithPrefix(sharded, "strategy fsdp: ");
}

absl::StatusOr<DriftResult> FsdpStrategy::MeasureDrift(const DriftOptions& options) {
  return parameters_shard_->MeasureGatheredDrift(options);
}

absl::StatusOr<MomentumBuffers> FsdpStrategy::GatherCheckpointState() {
  ASSIGN_OR_RETURN(MomentumBuffers momentum, Zero2Strategy::GatherCheckpointState());
  // The parameters too, whole, until ReleaseCheckpointState.
  RETURN_IF_ERROR(runner_->GatherFullParameters());
  return momentum;
}

void FsdpStrategy::ReleaseCheckpointState() { runner_->ReleaseFullParameters(); }

absl::StatusOr<CheckpointData> FsdpStrategy::CaptureShard(uint64_t step, uint64_t epoch,
                                                          const std::string& fingerprint) {
  CheckpointData shard;
  shard.step = step;
  shard.epoch = epoch;
  shard.spec_fingerprint = fingerprint;
  if (c_.rank == 0) {
    // No rank holds a parameter whole: the model's order and shapes, for ConsolidateShards.
    std::vector<std::string> names;
    std::vector<std::vector<uint64_t>> shapes;
    for (const ParameterInfo& p : runner_->parameters()) {
      names.push_back(p.name);
      shapes.emplace_back(p.shape.begin(), p.shape.end());
    }
    RecordModelLayout(&shard, names, shapes);
    // The model buffers are kept whole on every rank (broadcast from rank 0): rank 0's go in.
    for (CheckpointTensor& t : CaptureBuffers(runner_->buffers())) {
      shard.tensors.push_back(std::move(t));
    }
  }
  RETURN_IF_ERROR(shards_.AddSlices(
      runner_, [this](size_t i) { return parameters_shard_->owned_parameter(i); }, &shard));
  return shard;
}

void FsdpStrategy::MeasureMemory(v1::RankMemory* memory) const {
  Zero2Strategy::MeasureMemory(memory);
  // The parameter shard and the most layer staging held at once.
  memory->set_parameter_bytes(parameters_shard_->parameter_bytes());
}

}  // namespace ringleader
