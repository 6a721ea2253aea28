// strategy ddp: every rank holds the whole model and optimizer; the gradients are all-reduced
// bucket by bucket during backward (worker/sync/reducer.h), as PyTorch DDP does.
//
// The bypass_sync faults live here: a bypassing rank keeps its own gradients and steps with them
// while still feeding the reducer copies (so its peers neither hang nor notice); with
// bypass_sync_all_ranks no rank runs the reducer at all.
#ifndef RINGLEADER_WORKER_STRATEGY_DDP_STRATEGY_H_
#define RINGLEADER_WORKER_STRATEGY_DDP_STRATEGY_H_

#include <memory>
#include <string>
#include <vector>

#include "worker/strategy/sync_strategy.h"

namespace ringleader {

class DdpStrategy : public SyncStrategy {
 public:
  explicit DdpStrategy(const StrategyContext& context);

  absl::Status PrepareRunner(ModelRunner* runner) override;
  absl::Status Connect(ModelRunner* runner, Collective* comm) override;
  absl::Status BeginStep() override;
  void PrepareMicroBatch(int k, bool sync, BackwardOptions* backward) override;
  absl::Status FinishMicroBatch(bool sync) override;
  absl::Status FinishBackward() override;
  absl::Status Synchronize(StepSyncStats* stats) override;
  absl::StatusOr<double> OptimizerStep() override;
  absl::StatusOr<absl::Duration> GatherAfterStep() override;
  CollectiveLedger* ledger() override;
  absl::StatusOr<DriftResult> MeasureDrift(const DriftOptions& options) override;
  bool holds_whole_state() const override { return true; }
  absl::StatusOr<MomentumBuffers> GatherCheckpointState() override;
  absl::StatusOr<CheckpointData> CaptureShard(uint64_t step, uint64_t epoch,
                                              const std::string& fingerprint) override;
  void MeasureMemory(v1::RankMemory* memory) const override;
  std::string Description() const override;
  size_t bucket_count() const override;

 protected:
  // Points the model's gradients at the reducer's bucket views (frozen parameters keep the
  // runner's own slot); a bypassing rank keeps its own storage.
  void BindGradients();
  // The bypassing rank hands copies of its local gradients to the reducer, in backward order.
  absl::Status HandOverLocalGradients();

  const StrategyContext c_;
  const ParameterPlan& plan_;
  ModelRunner* runner_ = nullptr;
  Collective* comm_ = nullptr;
  std::unique_ptr<Reducer> reducer_;
  std::vector<float*> own_grads_;  // the runner's own gradient slots (frozen parameters keep them)
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_STRATEGY_DDP_STRATEGY_H_
