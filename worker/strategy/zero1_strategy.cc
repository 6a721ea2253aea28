// strategy zero1 (see zero1_strategy.h).
#include "worker/strategy/zero1_strategy.h"

#include "common/status_macros.h"

namespace ringleader {
namespace {

// Every trainable parameter's elements, split across the ranks (frozen ones take no part).
ShardPlan PlanZero1(const StrategyContext& context) {
  return PlanShards(ReducerElementCounts(*context.plan), context.world_size);
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

absl::StatusOr<CheckpointData> Zero1Strategy::CaptureShard(uint64_t step, uint64_t epoch,
                                                           const std::string& fingerprint) {
  return shards_.CaptureShardWithWholeParameters(runner_, step, epoch, fingerprint);
}

void Zero1Strategy::MeasureMemory(v1::RankMemory* memory) const {
  DdpStrategy::MeasureMemory(memory);
  memory->set_comm_buffer_bytes(memory->comm_buffer_bytes() + shards_.gather_staging_bytes());
}

}  // namespace ringleader
