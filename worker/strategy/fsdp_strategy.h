// strategy fsdp (ZeRO-3): zero2's gradients and optimizer, and the parameters sharded alike
// (plan/fsdp_plan.h): the runner holds only its shard (ModelRunner::ShardParameters) and gathers
// each layer's buckets one layer ahead of use, forward and backward, releasing them after
// (worker/sync/fsdp_parameters.h), on the collective's side channel when it has one (NCCL: a
// second communicator, so the gathers never queue behind the reduce-scatters). Nothing is
// gathered after the step; checkpoints and the drift check gather what they need.
#ifndef RINGLEADER_WORKER_STRATEGY_FSDP_STRATEGY_H_
#define RINGLEADER_WORKER_STRATEGY_FSDP_STRATEGY_H_

#include <memory>
#include <string>

#include "plan/fsdp_plan.h"
#include "worker/strategy/zero2_strategy.h"
#include "worker/sync/fsdp_parameters.h"

namespace ringleader {

class FsdpStrategy : public Zero2Strategy {
 public:
  explicit FsdpStrategy(const StrategyContext& context, FsdpPlan plan);

  absl::StatusOr<absl::Duration> GatherAfterStep() override { return absl::ZeroDuration(); }
  uint64_t parameter_gathers() const override { return parameters_shard_->gathers(); }
  absl::StatusOr<DriftResult> MeasureDrift(const DriftOptions& options) override;
  absl::StatusOr<MomentumBuffers> GatherCheckpointState() override;
  void ReleaseCheckpointState() override;
  absl::StatusOr<CheckpointData> CaptureShard(uint64_t step, uint64_t epoch,
                                              const std::string& fingerprint) override;
  void MeasureMemory(v1::RankMemory* memory) const override;

 private:
  absl::Status ShardParameters() override;

  const FsdpPlan fsdp_plan_;
  std::unique_ptr<FsdpParameters> parameters_shard_;
};

// PlanFsdp over every parameter of `context.plan` (frozen ones too: they are sharded with their
// buckets), checked against ValidateStrategyCombination.
absl::StatusOr<FsdpPlan> PlanFsdpFor(const StrategyContext& context);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_STRATEGY_FSDP_STRATEGY_H_
