// The rank process's work: one rank of one data-parallel job attempt, start to finish
// (docs/architecture.md, "A rank").
//
//   JoinJob (echoing the spec fingerprint) → data + DistributedSampler → model runner (CPU on
//   gloo, GPU on nccl) → the job's SyncStrategy (worker/strategy/sync_strategy.h) → resume or
//   model.init_from (starting_state.h) → collective rendezvous (the factory) → steps
//   (step_runner.h), drift check every drift_interval_steps, checkpoints (checkpoint_writer.h),
//   an evaluation all-reduce per epoch → close the collective → flush reports → final.ckpt.
//
// Step reports carry two gradient norms: local_grad_norm (this rank's gradients before
// synchronisation, noted in the backward hook before the reducer may average them) and
// synced_grad_norm (what the optimizer steps with: equal on every rank of a correct job).
//
// Fault injection (spec.model.faults; tests and demos only): bypass_sync (a rank steps with its
// local gradients while still feeding the reducer), unused_parameters_on_rank, crash_at_step,
// slow_rank, nan_loss, pause; docs/diagnosis.md describes each.
//
// Errors name the rank, step and epoch; the reducer's add the bucket and parameters.
#ifndef RINGLEADER_WORKER_RANK_TRAINING_LOOP_H_
#define RINGLEADER_WORKER_RANK_TRAINING_LOOP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/ringleader.pb.h"
#include "worker/collective/collective.h"
#include "worker/collective/traced_collective.h"
#include "worker/coordinator_client/coordinator_client.h"
#include "worker/rank/model_runner.h"
#include "worker/rank/preflight_check.h"
#include "worker/rank/progress_reporter.h"

namespace ringleader {

// Builds the attempt's Collective (rendezvous included) for `assignment`, whose spec has its
// defaults applied. `placement` says where the rank computes: the NCCL collective must run on
// that GPU and order itself after that compute stream (NcclOptions::compute_stream). `progress`
// hears where the rendezvous is (the rank's liveness reports say it).
using CollectiveFactory = std::function<absl::StatusOr<std::unique_ptr<Collective>>(
    const v1::Assignment& assignment, const ComputePlacement& placement,
    const RendezvousProgress& progress)>;

struct TrainingLoopOptions {
  // This rank's worker id (JoinJob checks it against the assignment).
  std::string worker_id;
  // The pairs' collectives of the pre-flight check a spec with checks.preflight runs before
  // training (preflight_rank.h; rank_main: MakePreflightPairFactory). Required by such specs.
  PairCollectiveFactory make_preflight_pair;
  // Creates the collective. Required (rank_main builds it: gloo or NCCL over the coordinator's
  // store). Called after the model runner exists, so a rank without a usable GPU never
  // rendezvouses.
  CollectiveFactory make_collective;
  // CUDA device for backend nccl (rank_main's --gpu, passed down by a GPU worker daemon).
  // -1 = none: a nccl job then fails with FAILED_PRECONDITION "no usable GPU: ...".
  int gpu = -1;
  // Step/epoch report batching (progress_reporter.h). Its empty `log` takes `log` below.
  ProgressReporterOptions reporting;
  // The rank's collective trace (traced_collective.h), for a caller that reports it after a
  // failure. Not owned; nullptr = the trainer keeps its own.
  CollectiveTrace* trace = nullptr;
  // Time source for step timings and reporting. Not owned; nullptr = Clock::Real().
  Clock* clock = nullptr;
  // One line per epoch, plus start and end. Empty = stderr.
  std::function<void(const std::string&)> log;
  // Called before step `step` on the fault's crash rank. Empty = print and abort(): the
  // supervising daemon reports the signal. Tests return an error instead.
  std::function<absl::Status(uint64_t step)> crash;
  // A rank whose collectives failed with UNAVAILABLE or DEADLINE_EXCEEDED is usually the
  // victim of a peer that died; that peer's daemon is about to report the root cause. RunRank
  // gives that report up to this long a head start (probing the coordinator with empty
  // ReportProgress calls every victim_probe_interval, and reporting at once when the attempt
  // is already over) so the job's failure names the culprit, not its first victim.
  absl::Duration victim_report_delay = absl::Seconds(2);
  absl::Duration victim_probe_interval = absl::Milliseconds(100);
  // Training never waits on the coordinator (reports queue while it is unreachable). At the
  // end, the final reports and FinishRank are tried again every coordinator_retry_pause, for
  // about this long, while the coordinator is unreachable (UNAVAILABLE, DEADLINE_EXCEEDED): a
  // coordinator restarting within its grace still hears how the rank ended. The daemon passes
  // the coordinator's own grace (rank_main's --coordinator_grace).
  absl::Duration coordinator_grace = absl::Seconds(60);
  absl::Duration coordinator_retry_pause = absl::Seconds(1);
  // Performs those waits (and the slow_ms of a slow_rank fault). Empty = absl::SleepFor; tests
  // record instead.
  std::function<void(absl::Duration)> sleep;
  // Test hook: called on a rank right before its epoch-end evaluation, with the epoch and how
  // many test examples that rank evaluates. Empty = nothing.
  std::function<void(uint32_t epoch, size_t examples)> before_evaluation;
  // How long a rank of a restarted attempt waits for the others' part in the resume decision
  // (resume.h), at least the spec's collective timeout: they may start later (rank_main's
  // --rendezvous_timeout).
  absl::Duration rendezvous_timeout = absl::Seconds(120);
  // This rank's snapshot directory (snapshots.h; rank_main's --snapshot_dir, given by the
  // daemon: its --snapshot_dir/<job>). Empty = this rank takes no snapshots.
  std::string snapshot_dir;
  // Test hook (rank_main's --test_only_mutate_spec): the rank doubles its learning rate before
  // fingerprinting, as a rank that mutated its config object would. Never set in real jobs.
  bool mutate_spec_for_test = false;
};

// What a finished training produced.
struct TrainingOutcome {
  uint64_t steps = 0;                // optimizer steps run
  double final_loss = 0;             // loss of the last step (this rank)
  std::string checkpoint_path;       // rank 0 with a checkpoint_dir: the file written
  double last_test_accuracy = -1;    // rank 0: last evaluation (-1 = none)
  // Momentum-buffer elements this rank's optimizer holds at the end: every trainable element
  // under ddp (with momentum), about 1/world of them under zero1 and zero2.
  uint64_t momentum_elements = 0;
  // What this rank held after its first step of the attempt (also sent with that step's
  // report): parameters, the reducer's arena (zero2: its gradient shard and bucket pool),
  // momentum, communication buffers. Empty when the
  // attempt ran no step.
  v1::RankMemory memory;
};

// Runs the attempt (see the file comment) without the final FinishRank.
// Errors: FAILED_PRECONDITION from JoinJob (fingerprint mismatch, stale generation), from
// the reducer (unused parameters, collective desync), or "no usable GPU: ..." (backend nccl on a
// rank without a GPU); INVALID_ARGUMENT for a spec this rank cannot run (naming the field; bool
// buffers on nccl without sync.ignore_bool_buffers); UNIMPLEMENTED for model.with_buffers on
// nccl; ABORTED "stopped by the coordinator: ..." (also when the rank failed after its reports
// were answered with stop: a peer that noticed the stop first aborted the collectives; the
// message then adds "this rank then failed: ..."); UNAVAILABLE / DEADLINE_EXCEEDED "reporting:
// ..." when the final reports could not be delivered; data loading,
// collective and checkpoint errors — each prefixed with the rank and, during training, the step
// and epoch.
absl::StatusOr<TrainingOutcome> RunTraining(const v1::Assignment& assignment,
                                            CoordinatorClient* client,
                                            const TrainingLoopOptions& options);

struct RankRunResult {
  absl::Status status;          // RunTraining's
  TrainingOutcome outcome;      // valid when status is OK
  // FinishRank went through, or the coordinator refused it because the attempt is over
  // (FAILED_PRECONDITION / NOT_FOUND): nobody needs to report for this rank any more.
  bool finish_reported = false;
};

// RunTraining, then FinishRank(ok, error, checkpoint_path) — after the victim delay (see
// TrainingLoopOptions::victim_report_delay) when the failure looks like a peer's.
RankRunResult RunRank(const v1::Assignment& assignment, CoordinatorClient* client,
                      const TrainingLoopOptions& options);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_TRAINING_LOOP_H_
