// strategy zero1 (see zero1_strategy.h).
#include "worker/strategy/zero1_strategy.h"

#include "common/status_macros.h"

namespace ringleader {
namespace {

// Every trainable parameter's elements, split across the ranks (frozen ones take no part).
ShardPlan PlanZero1(const StrategyContext& context) {
  std::vector<size_t> counts;
  for (size_t i = 0; i < context.plan->reducer_index.size(); ++i) {
    counts.push_back(context.plan->reducer_index[i] >= 0
                         ? context.plan->trainable[context.plan->reducer_index[i]].count
                         : 0);
  }
  return PlanShards(counts, context.world_size);
}

}  // namespace

Zero1Strategy::Zero1Strategy(const StrategyContext& context)
    : DdpStrategy(context), shards_(PlanZero1(context), context) {}

absl::Status Zero1Strategy::PrepareRunner(ModelRunner* runner) {
  RETURN_IF_ERROR(DdpStrategy::PrepareRunner(runner));
  return shards_.ShardOptimizer(runner);
}

absl::StatusOr<absl::Duration> Zero1Strategy::GatherAfterStep() {
  // This rank stepped its shard only; the others' come from their owners.
  return shards_.GatherParameters(runner_, comm_, ledger());
}

absl::StatusOr<MomentumBuffers> Zero1Strategy::GatherCheckpointState() {
  return shards_.GatherMomentum(runner_, comm_, ledger());
}

absl::StatusOr<CheckpointData> CaptureWholeParametersOnRankZero(ModelRunner* runner,
                                                                uint32_t rank, uint64_t step,
                                                                uint64_t epoch,
                                                                const std::string& fingerprint) {
  CheckpointData shard;
  if (rank == 0) {
    ASSIGN_OR_RETURN(shard, runner->CaptureStateWithMomentum(
                                step, epoch, fingerprint,
                                MomentumBuffers(runner->parameters().size())));
  }
  shard.step = step;
  shard.epoch = epoch;
  shard.spec_fingerprint = fingerprint;
  return shard;
}

absl::StatusOr<CheckpointData> Zero1Strategy::CaptureShard(uint64_t step, uint64_t epoch,
                                                           const std::string& fingerprint) {
  ASSIGN_OR_RETURN(CheckpointData shard,
                   CaptureWholeParametersOnRankZero(runner_, c_.rank, step, epoch, fingerprint));
  RETURN_IF_ERROR(shards_.AddSlices(runner_, nullptr, &shard));
  return shard;
}

void Zero1Strategy::MeasureMemory(v1::RankMemory* memory) const {
  DdpStrategy::MeasureMemory(memory);
  memory->set_comm_buffer_bytes(memory->comm_buffer_bytes() + shards_.gather_staging_bytes());
}

}  // namespace ringleader
