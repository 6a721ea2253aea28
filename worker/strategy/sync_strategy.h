// How a data-parallel job keeps its ranks in sync: one class per JobSpec.strategy, built once by
// CreateSyncStrategy. The training loop, the step runner and the checkpoint writer call this
// interface and never ask which strategy they run.
//
//   ddp     every rank holds everything; gradients all-reduced in buckets (ddp_strategy.h)
//   zero1   + the optimizer state sharded; parameters all-gathered after the step (zero1_strategy.h)
//   zero2   + gradients reduce-scattered into shards from a two-buffer pool (zero2_strategy.h)
//   fsdp    + parameters sharded, each layer gathered as it runs (fsdp_strategy.h)
//
// Life of a strategy (one attempt of one rank):
//
//   CreateSyncStrategy(context)        plans (shard ownership, buckets); refuses bad combinations
//     → PrepareRunner(runner)          before a resumed optimizer state goes in (sharding it)
//     → Connect(runner, comm)          builds the reducer over the collective, binds gradients
//     → per step: BeginStep, per micro-batch { PrepareMicroBatch, ForwardBackward,
//       FinishMicroBatch }, FinishBackward, Synchronize, [buffer broadcast], OptimizerStep,
//       GatherAfterStep
//     → between steps: MeasureDrift; checkpoints: GatherCheckpointState / CaptureShard
//
// Every method that runs a collective must be called by every rank at the same point.
// Errors are the reducer's, the collective's and the runner's (each documented there).
// Thread-safety: not thread-safe; the rank's training thread owns it.
#ifndef RINGLEADER_WORKER_STRATEGY_SYNC_STRATEGY_H_
#define RINGLEADER_WORKER_STRATEGY_SYNC_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "checkpoint/checkpoint.h"
#include "common/clock.h"
#include "common/spec_kinds.h"
#include "proto/ringleader.pb.h"
#include "worker/collective/collective.h"
#include "worker/rank/model_runner.h"
#include "worker/rank/parameter_plan.h"
#include "worker/sync/collective_ledger.h"
#include "worker/sync/drift.h"
#include "worker/sync/reducer.h"
#include "worker/trainer/mlp.h"

namespace ringleader {

// What a strategy is built from. Pointers are not owned and outlive the strategy.
struct StrategyContext {
  const v1::JobSpec* spec = nullptr;  // defaults applied
  uint32_t rank = 0;
  uint32_t world_size = 1;
  const ParameterPlan* plan = nullptr;  // PlanParameters' for this rank
  size_t model_layers = 0;              // the MLP's weight layers (fsdp gathers per layer)
  Clock* clock = nullptr;
  absl::Duration timeout = absl::Seconds(60);  // each collective's (spec.collective_timeout_ms)
};

// Full momentum buffers per parameter (an empty entry = none), as a consolidated checkpoint
// holds them.
using MomentumBuffers = std::vector<std::vector<float>>;

class SyncStrategy {
 public:
  virtual ~SyncStrategy() = default;

  // --- Set-up ---
  // Before the runner receives a resumed optimizer state: a sharding strategy cuts the
  // optimizer state to this rank's elements. Errors: the runner's.
  virtual absl::Status PrepareRunner(ModelRunner* runner) = 0;
  // Builds the reducer (and fsdp's parameter shard) over `comm` and points the model's
  // gradients at it. Errors: the reducer's Create (invalid buckets), the runner's.
  virtual absl::Status Connect(ModelRunner* runner, Collective* comm) = 0;

  // --- One optimizer step (StepRunner) ---
  // Zeroes this step's gradients.
  virtual absl::Status BeginStep() = 0;
  // Before micro-batch k's ForwardBackward (`sync`: the last of the step): sets the backward's
  // on_ready hook (which notes the local gradient norm before the reducer may average it) and,
  // where gradients come from the reducer's pool, slot_for.
  virtual void PrepareMicroBatch(int k, bool sync, BackwardOptions* backward) = 0;
  // After micro-batch k's ForwardBackward.
  virtual absl::Status FinishMicroBatch(bool sync) = 0;
  // After the last micro-batch, before the runner's local norm is taken.
  virtual absl::Status FinishBackward() = 0;
  // Waits for the step's gradient collectives; fills `stats`.
  virtual absl::Status Synchronize(StepSyncStats* stats) = 0;
  // Steps the optimizer with the synchronised gradients; returns their global L2 norm (the
  // same on every rank of a correct job).
  virtual absl::StatusOr<double> OptimizerStep() = 0;
  // After the optimizer step: whatever makes the next step's parameters whole (the parameter
  // all-gather of zero1 and zero2). Returns the time it took.
  virtual absl::StatusOr<absl::Duration> GatherAfterStep() = 0;
  // The ledger this step's collectives are recorded in (null when no rank runs a reducer).
  virtual CollectiveLedger* ledger() = 0;
  // Parameter gathers run since the start (fsdp's per-layer gathers; 0 elsewhere).
  virtual uint64_t parameter_gathers() const { return 0; }

  // --- Between steps ---
  // max|W_r - W_0| across ranks, the worst tensor named (a collective).
  virtual absl::StatusOr<DriftResult> MeasureDrift(const DriftOptions& options) = 0;

  // --- Checkpoints (checkpoint_writer.h) ---
  // True when every rank holds its whole training state, so rank 0 captures a consolidated
  // checkpoint without a collective.
  virtual bool holds_whole_state() const = 0;
  // Otherwise (a collective): every rank's momentum gathered whole and, where parameters are
  // sharded, the parameters gathered whole into the runner until ReleaseCheckpointState.
  virtual absl::StatusOr<MomentumBuffers> GatherCheckpointState() = 0;
  virtual void ReleaseCheckpointState() {}
  // This rank's shard of a checkpoint_format sharded checkpoint (checkpoint/sharded_checkpoint.h).
  // Errors: FAILED_PRECONDITION when the strategy holds the whole state (ddp); the runner's.
  virtual absl::StatusOr<CheckpointData> CaptureShard(uint64_t step, uint64_t epoch,
                                                      const std::string& fingerprint) = 0;

  // --- Reporting ---
  // parameter_bytes, gradient_bytes and comm_buffer_bytes of what this rank holds
  // (plan/memory_plan.h predicts the same figures).
  virtual void MeasureMemory(v1::RankMemory* memory) const = 0;
  // For the start line: "ddp", or "zero1 (optimizer state for 58786 of 235146 elements)".
  virtual std::string Description() const = 0;
  virtual size_t bucket_count() const = 0;
};

// The strategy `context.spec` names. Errors: INVALID_ARGUMENT for a combination the strategy
// does not run (ValidateStrategyCombination) or buckets it cannot plan.
absl::StatusOr<std::unique_ptr<SyncStrategy>> CreateSyncStrategy(const StrategyContext& context);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_STRATEGY_SYNC_STRATEGY_H_
