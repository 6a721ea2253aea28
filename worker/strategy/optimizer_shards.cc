// The sharded optimizer's collectives (see optimizer_shards.h).
#include "worker/strategy/optimizer_shards.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "checkpoint/sharded_checkpoint.h"
#include "common/status_macros.h"
#include "worker/checkpoint/training_state.h"
#include "worker/sync/shard_sync.h"

namespace ringleader {

std::vector<size_t> ReducerElementCounts(const ParameterPlan& plan) {
  std::vector<size_t> counts;
  for (const int t : plan.reducer_index) counts.push_back(t >= 0 ? plan.trainable[t].count : 0);
  return counts;
}

OptimizerShards::OptimizerShards(ShardPlan plan, const StrategyContext& context)
    : plan_(std::move(plan)), c_(context) {}

absl::Status OptimizerShards::ShardOptimizer(ModelRunner* runner) const {
  const absl::Status sharded = runner->ShardOptimizerState(plan_.owned[c_.rank]);
  if (sharded.ok()) return sharded;
  return WithPrefix(sharded, absl::StrCat("strategy ", Name(StrategyOf(*c_.spec)), ": "));
}

absl::StatusOr<absl::Duration> OptimizerShards::GatherParameters(ModelRunner* runner,
                                                                 Collective* comm,
                                                                 CollectiveLedger* ledger) {
  const absl::Time start = c_.clock->Now();
  ShardSyncOptions gather;
  gather.timeout = c_.timeout;
  gather.memory = runner->memory();
  gather.ledger = ledger;
  size_t staging = 0;
  gather.staging_bytes = &staging;
  RETURN_IF_ERROR(
      AllGatherParameterShards(comm, plan_, runner->mutable_parameter_ptrs(), gather));
  gather_staging_bytes_ = std::max(gather_staging_bytes_, staging);
  return c_.clock->Now() - start;
}

absl::StatusOr<MomentumBuffers> OptimizerShards::GatherMomentum(ModelRunner* runner,
                                                                Collective* comm,
                                                                CollectiveLedger* ledger) const {
  ASSIGN_OR_RETURN(MomentumBuffers local, runner->MomentumBuffers());
  ShardSyncOptions gather;
  gather.timeout = c_.timeout;
  gather.memory = runner->memory();
  gather.ledger = ledger;
  return AllGatherMomentumShards(comm, plan_, local, gather);
}

absl::Status OptimizerShards::AddSlices(
    ModelRunner* runner, const std::function<const float*(size_t)>& owned_parameters,
    CheckpointData* shard) const {
  ASSIGN_OR_RETURN(MomentumBuffers momentum, runner->MomentumBuffers());
  const std::vector<ParameterInfo>& params = runner->parameters();
  const std::vector<ElementRange>& owned = plan_.owned[c_.rank];
  for (size_t i = 0; i < params.size() && i < owned.size(); ++i) {
    if (owned[i].empty()) continue;
    if (!momentum[i].empty()) {
      AddSlice(shard, MomentumBufferName(params[i].name), owned[i].begin, std::move(momentum[i]));
    }
    if (owned_parameters) {
      // The shard lives in the runner's memory (device memory on the GPU trainer).
      std::vector<float> values(owned[i].size());
      RETURN_IF_ERROR(runner->memory()->CopyToHost(values.data(), owned_parameters(i),
                                                   values.size() * sizeof(float)));
      AddSlice(shard, params[i].name, owned[i].begin, std::move(values));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckpointData> OptimizerShards::CaptureShardWithWholeParameters(
    ModelRunner* runner, uint64_t step, uint64_t epoch, const std::string& fingerprint) const {
  CheckpointData shard;
  if (c_.rank == 0) {
    ASSIGN_OR_RETURN(shard, runner->CaptureStateWithMomentum(
                                step, epoch, fingerprint,
                                MomentumBuffers(runner->parameters().size())));
  }
  shard.step = step;
  shard.epoch = epoch;
  shard.spec_fingerprint = fingerprint;
  RETURN_IF_ERROR(AddSlices(runner, nullptr, &shard));
  return shard;
}

std::string OptimizerShards::Describe() const {
  return absl::StrCat(Name(StrategyOf(*c_.spec)), " (",
                      TraitsOf(StrategyOf(*c_.spec)).sharded_state, " for ",
                      plan_.owned_count(c_.rank), " of ", plan_.total, " elements)");
}

}  // namespace ringleader
