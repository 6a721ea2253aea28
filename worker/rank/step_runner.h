// One optimizer step of one rank, and the drift check between steps.
//
//   Run(step):  strategy BeginStep (zero this step's gradients)
//               per micro-batch k < K: strategy PrepareMicroBatch(k) (the backward's on_ready /
//                 slot_for hooks), ForwardBackward (loss_scale 1/K, skip = frozen +
//                 fault-unused parameters), strategy FinishMicroBatch
//               strategy FinishBackward → the local grad norm → strategy Synchronize (the
//               step's gradient collectives) → buffer broadcast → strategy OptimizerStep (the
//               synced norm) → strategy GatherAfterStep → the StepReport's figures
//   MeasureDriftInto: max|W_r − W_0| across ranks, worst tensor named (strategy MeasureDrift)
//
// What each strategy does in those calls: worker/strategy/sync_strategy.h.
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
#include "worker/collective/traced_collective.h"
#include "worker/data/dataset.h"
#include "worker/rank/model_runner.h"
#include "worker/rank/parameter_plan.h"
#include "worker/strategy/sync_strategy.h"

namespace ringleader {

class StepRunner {
 public:
  // Nothing is owned; all must outlive the StepRunner. `spec` has its defaults applied; `rank`
  // is this rank (for the step faults: slow_rank, nan_loss_rank). `strategy` is connected
  // (SyncStrategy::Connect) to `runner` and `comm`. `sleep` performs slow_ms (empty =
  // absl::SleepFor). `trace` (may be null) records `comm`'s operations: each step's are then
  // put in the report's collective_times.
  StepRunner(const v1::JobSpec& spec, uint32_t rank, const ParameterPlan& plan,
             ModelRunner* runner, Collective* comm, SyncStrategy* strategy, Clock* clock,
             std::function<void(absl::Duration)> sleep = nullptr,
             CollectiveTrace* trace = nullptr);

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

 private:
  const v1::JobSpec& spec_;
  const ParameterPlan& plan_;
  ModelRunner* const runner_;
  Collective* const comm_;
  SyncStrategy* const strategy_;
  Clock* const clock_;
  const absl::Duration collective_timeout_;
  const uint32_t rank_;
  const std::function<void(absl::Duration)> sleep_;
  CollectiveTrace* const trace_;
  std::vector<float> x_;  // the micro-batch, reused across steps
  std::vector<int32_t> y_;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_STEP_RUNNER_H_
