// strategy zero1 (ZeRO-1): ddp's bucketed all-reduce, but each rank's optimizer keeps and steps
// only its shard of the elements (plan/shard_plan.h); the updated shards are all-gathered after
// every step so every rank holds the whole parameters again.
#ifndef RINGLEADER_WORKER_STRATEGY_ZERO1_STRATEGY_H_
#define RINGLEADER_WORKER_STRATEGY_ZERO1_STRATEGY_H_

#include <string>

#include "worker/strategy/ddp_strategy.h"
#include "worker/strategy/optimizer_shards.h"

namespace ringleader {

class Zero1Strategy : public DdpStrategy {
 public:
  explicit Zero1Strategy(const StrategyContext& context);

  absl::Status PrepareRunner(ModelRunner* runner) override;
  absl::StatusOr<absl::Duration> GatherAfterStep() override;
  bool holds_whole_state() const override { return false; }
  absl::StatusOr<MomentumBuffers> GatherCheckpointState() override;
  absl::StatusOr<CheckpointData> CaptureShard(uint64_t step, uint64_t epoch,
                                              const std::string& fingerprint) override;
  void MeasureMemory(v1::RankMemory* memory) const override;
  std::string Description() const override { return shards_.Describe(); }

 private:
  OptimizerShards shards_;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_STRATEGY_ZERO1_STRATEGY_H_
