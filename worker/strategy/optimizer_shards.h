// What zero1, zero2 and fsdp share: a ShardPlan saying which elements of each parameter every
// rank's optimizer owns (plan/shard_plan.h), and the collectives over it: the
// parameter all-gather after the step, the momentum gather for a consolidated checkpoint, and
// this rank's slices of a sharded checkpoint.
// Thread-safety: not thread-safe; the rank's training thread owns it.
#ifndef RINGLEADER_WORKER_STRATEGY_OPTIMIZER_SHARDS_H_
#define RINGLEADER_WORKER_STRATEGY_OPTIMIZER_SHARDS_H_

#include <string>

#include "plan/shard_plan.h"
#include "worker/strategy/sync_strategy.h"

namespace ringleader {

// Per model parameter, its element count where the reducer holds it and 0 where it does not
// (frozen): what the shard plans split.
std::vector<size_t> ReducerElementCounts(const ParameterPlan& plan);

class OptimizerShards {
 public:
  OptimizerShards(ShardPlan plan, const StrategyContext& context);

  const ShardPlan& plan() const { return plan_; }

  // The runner's optimizer keeps this rank's elements only (ModelRunner::ShardOptimizerState);
  // errors are prefixed "strategy <name>: ".
  absl::Status ShardOptimizer(ModelRunner* runner) const;
  // Every rank's stepped shard into every rank's parameters (AllGatherParameterShards).
  // Returns the time it took.
  absl::StatusOr<absl::Duration> GatherParameters(ModelRunner* runner, Collective* comm,
                                                  CollectiveLedger* ledger);
  // Every rank's momentum shard gathered into whole buffers (AllGatherMomentumShards).
  absl::StatusOr<MomentumBuffers> GatherMomentum(ModelRunner* runner, Collective* comm,
                                                 CollectiveLedger* ledger) const;
  // Adds this rank's momentum slices to `shard` and, with `owned_parameters` (fsdp: parameter
  // i's owned elements in the runner's memory), its parameter slices.
  absl::Status AddSlices(ModelRunner* runner,
                         const std::function<const float*(size_t)>& owned_parameters,
                         CheckpointData* shard) const;

  // This rank's shard of a sharded checkpoint where every rank holds the whole parameters
  // (zero1, zero2): rank 0's also holds those and the buffers; then the momentum slices.
  absl::StatusOr<CheckpointData> CaptureShardWithWholeParameters(
      ModelRunner* runner, uint64_t step, uint64_t epoch, const std::string& fingerprint) const;

  // "zero1 (optimizer state for 58786 of 235146 elements)"
  std::string Describe() const;
  // The most bytes the parameter gather staged in one step (0 before the first).
  size_t gather_staging_bytes() const { return gather_staging_bytes_; }

 private:
  const ShardPlan plan_;
  const StrategyContext c_;
  size_t gather_staging_bytes_ = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_STRATEGY_OPTIMIZER_SHARDS_H_
