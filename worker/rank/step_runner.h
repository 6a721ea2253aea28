// One optimizer step of one rank, and the drift check between steps.
//
//   Run(step):  zero grads
//               per micro-batch k < K: BeginMicroBatch(k), ForwardBackward with on_ready →
//                 (sync micro-batch: NoteLocalGradient) → MarkReady; loss_scale 1/K,
//                 skip = frozen + fault-unused parameters
//               [bypass_sync rank: hand copies of its local gradients to the reducer]
//               FinishStep (the reducer's last buckets; the ledger) → buffer broadcast
//               → synced grad norm → optimizer step
//               [strategy zero1: the optimizer stepped this rank's shard only; all-gather the
//                updated shards so every rank holds the full parameters]
//               [strategy zero2: backward writes into the zero2 reducer's bucket pool
//                (BackwardOptions::slot_for), the buckets are reduce-scattered into this rank's
//                gradient shard, the synced norm comes from the reducer (global, one scalar
//                all-reduce), the optimizer steps the shard (OptimizerStepOwned), then the
//                same parameter all-gather as zero1]
//               [strategy fsdp: as zero2, but the runner holds only its parameter shard
//                (ModelRunner::ShardParameters) and gathers each layer as it runs; the optimizer
//                steps the shard and nothing is gathered after the step]
//               → the StepReport's figures
//   MeasureDriftInto: max|W_r − W_0| across ranks, worst tensor named (fsdp: over the gathered
//   buckets, FsdpParameters::MeasureGatheredDrift)
//
// The model's gradients live in the reducer's bucket views (BindGradients), except on a rank
// that bypasses synchronisation (the fault), which keeps its own and steps with them, and under
// zero2, where each step's slots come from the zero2 reducer's pool.
#ifndef RINGLEADER_WORKER_RANK_STEP_RUNNER_H_
#define RINGLEADER_WORKER_RANK_STEP_RUNNER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/ringleader.pb.h"
#include "worker/collective/collective.h"
#include "worker/data/dataset.h"
#include "worker/rank/model_runner.h"
#include "worker/rank/parameter_plan.h"
#include "worker/sync/reducer.h"
#include "worker/sync/fsdp_parameters.h"
#include "worker/sync/shard_plan.h"
#include "worker/sync/zero2_reducer.h"

namespace ringleader {

class StepRunner {
 public:
  // Nothing is owned; all must outlive the StepRunner. `spec` has its defaults applied; `rank`
  // is this rank (for the step faults: slow_rank, nan_loss_rank). `shards` is the zero1 shard
  // plan (null = ddp: every rank steps every parameter); with one, the runner's optimizer state
  // must already be sharded to shards->owned[rank]. `zero2` (strategy zero2; null otherwise)
  // replaces the reducer (`reducer` is then null and `shards` is &zero2->plan().shards; no
  // bypass fault). `fsdp` (strategy fsdp, with `zero2`; null otherwise): the parameter shard
  // the runner was given with ShardParameters. `sleep` performs slow_ms (empty =
  // absl::SleepFor).
  StepRunner(const v1::JobSpec& spec, uint32_t rank, const ParameterPlan& plan,
             ModelRunner* runner, Collective* comm, Reducer* reducer, Clock* clock,
             const ShardPlan* shards = nullptr, Zero2Reducer* zero2 = nullptr,
             FsdpParameters* fsdp = nullptr,
             std::function<void(absl::Duration)> sleep = nullptr);

  // Points the model's gradients at the reducer's bucket views (frozen parameters keep the
  // runner's own slot, which nothing writes); a bypassing rank keeps its own storage. Called once
  // after creation and by Run whenever the reducer rebuilt its buckets.
  void BindGradients();

  // Step `step` (1-based) of `total_steps`, in `epoch`, on the K = gradient_accumulation_steps
  // micro-batches of `batch_size` examples of `train` starting at indices[first]. Fills the
  // report's step, loss, norms, timings and collective digest.
  // Errors: FAILED_PRECONDITION for a non-finite loss ("training diverged": the report then
  // holds the step and the loss, so the caller can still send it), or from the reducer (unused
  // parameters, collective desync); the runner's, reducer's and collective's errors.
  absl::Status Run(uint64_t step, uint64_t total_steps, uint32_t epoch, const Dataset& train,
                   const std::vector<size_t>& indices, size_t first, v1::StepReport* report);

  // The cross-rank drift check (a collective: every rank calls it at the same step); sets
  // has_drift, drift and drift_parameter in `report`.
  absl::Status MeasureDriftInto(v1::StepReport* report);

  // strategy zero1: the momentum buffers of every rank's shard gathered into whole ones (a
  // collective: every rank calls it at the same point, before rank 0 writes a checkpoint with
  // ModelRunner::CaptureStateWithMomentum). Without sharding: the runner's own buffers, no
  // collective.
  absl::StatusOr<std::vector<std::vector<float>>> GatherMomentum();
  bool sharded() const { return shards_ != nullptr; }
  // The most bytes of staging the zero1 parameter gather allocated in one step (0 without
  // sharding, or before the first step).
  size_t gather_staging_bytes() const { return gather_staging_bytes_; }

 private:
  // The ledger the step's collectives are recorded in (null when no rank runs a reducer).
  CollectiveLedger* Ledger();

  // The bypassing rank still feeds the reducer (so its peers' collectives match), with copies of
  // its local gradients, marked in backward order.
  absl::Status HandOverLocalGradients();

  const v1::JobSpec& spec_;
  const ParameterPlan& plan_;
  const ShardPlan* const shards_;
  ModelRunner* const runner_;
  Collective* const comm_;
  Reducer* const reducer_;
  Zero2Reducer* const zero2_;
  FsdpParameters* const fsdp_;
  Clock* const clock_;
  const absl::Duration collective_timeout_;
  const uint32_t rank_;
  const std::function<void(absl::Duration)> sleep_;
  std::vector<float*> own_grads_;  // the runner's own gradient slots (frozen parameters keep them)
  size_t gather_staging_bytes_ = 0;
  std::vector<float> x_;           // the micro-batch, reused across steps
  std::vector<int32_t> y_;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_STEP_RUNNER_H_
