// strategy zero2 (ZeRO-2): backward writes into the Zero2Reducer's pool of two bucket-sized
// buffers (BackwardOptions::slot_for); each bucket is reduce-scattered into this rank's gradient
// shard during backward (worker/sync/zero2_reducer.h), so no rank holds a full gradient; the
// optimizer steps the shard (ModelRunner::OptimizerStepOwned) and the parameters are
// all-gathered as under zero1. Ownership follows the reduce-scatter (plan/zero2_plan.h).
#ifndef RINGLEADER_WORKER_STRATEGY_ZERO2_STRATEGY_H_
#define RINGLEADER_WORKER_STRATEGY_ZERO2_STRATEGY_H_

#include <memory>
#include <optional>
#include <string>

#include "plan/zero2_plan.h"
#include "worker/strategy/optimizer_shards.h"
#include "worker/strategy/sync_strategy.h"
#include "worker/sync/zero2_reducer.h"

namespace ringleader {

class Zero2Strategy : public SyncStrategy {
 public:
  // `plan`: the buckets and ownership (PlanZero2, or fsdp's).
  Zero2Strategy(const StrategyContext& context, Zero2Plan plan);

  absl::Status PrepareRunner(ModelRunner* runner) override;
  absl::Status Connect(ModelRunner* runner, Collective* comm) override;
  absl::Status BeginStep() override;
  void PrepareMicroBatch(int k, bool sync, BackwardOptions* backward) override;
  absl::Status FinishMicroBatch(bool sync) override;
  absl::Status FinishBackward() override { return absl::OkStatus(); }
  absl::Status Synchronize(StepSyncStats* stats) override;
  absl::StatusOr<double> OptimizerStep() override;
  absl::StatusOr<absl::Duration> GatherAfterStep() override;
  CollectiveLedger* ledger() override { return reducer_->ledger(); }
  absl::StatusOr<DriftResult> MeasureDrift(const DriftOptions& options) override;
  bool holds_whole_state() const override { return false; }
  absl::StatusOr<MomentumBuffers> GatherCheckpointState() override;
  absl::StatusOr<CheckpointData> CaptureShard(uint64_t step, uint64_t epoch,
                                              const std::string& fingerprint) override;
  void MeasureMemory(v1::RankMemory* memory) const override;
  std::string Description() const override { return shards_.Describe(); }
  size_t bucket_count() const override { return plan_.layout.buckets.size(); }

 protected:
  // Connect's step between creating the reducer and releasing the model's own gradients
  // (fsdp: the parameter shard). Nothing here.
  virtual absl::Status ShardParameters() { return absl::OkStatus(); }
  // fsdp's frozen parameters: ready (as zeros) from the start of every micro-batch.
  void MarkAlwaysReady();

  const StrategyContext c_;
  const ParameterPlan& parameters_;
  const Zero2Plan plan_;
  OptimizerShards shards_;
  ModelRunner* runner_ = nullptr;
  Collective* comm_ = nullptr;
  std::unique_ptr<Zero2Reducer> reducer_;
  double norm_ = 0;  // the step's global gradient norm (Zero2Reducer::FinishStep)
};

// PlanZero2 over the trainable parameters of `context.plan`.
absl::StatusOr<Zero2Plan> PlanZero2For(const StrategyContext& context);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_STRATEGY_ZERO2_STRATEGY_H_
