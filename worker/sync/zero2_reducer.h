// The gradient reducer of strategy zero2 (ZeRO stage 2, DeepSpeed's semantics): every rank ends
// the step holding only the AVERAGED gradient of the elements it owns (plan/zero2_plan.h), and
// never a full-size gradient arena.
//
// Use (one Zero2Reducer per rank, on the training thread; the CPU trainer with host memory, or
// the GPU trainer with its device memory, tensor_memory.h):
//
//   ASSIGN_OR_RETURN(auto reducer, Zero2Reducer::Create(comm, trainable, plan, opts));
//   for each step:
//     reducer->BeginStep();
//     for each micro-batch k < K (opts.accumulation_steps):
//       model.ForwardBackward(x, y, n, {.on_ready = [&](size_t t) { reducer->MarkReady(t); },
//                                       .slot_for = [&](size_t t) { return reducer->SlotFor(t); }});
//       if (k < K - 1) RETURN_IF_ERROR(reducer->FinishMicroBatch());
//     RETURN_IF_ERROR(reducer->FinishStep(&stats, &grad_norm));
//     optimizer.StepOwned(params, {reducer->owned_gradient(t)...}, has_grad);
//     AllGatherParameterShards(comm, plan.shards, params, ...)     // shard_sync.h
//
// Memory: the gradient shard (plan.shard_elements floats: this rank's slice of every bucket)
// and a pool of plan.pool_buffers bucket-sized buffers (plan.pool_buffer_elements floats each).
// SlotFor(t) gives backward a slot inside the pool buffer of t's bucket, taking a buffer for the
// bucket at its first slot (zeroed, padding included). When every parameter of a bucket is
// ready (and every earlier bucket has been launched) the bucket is reduce-scattered
// (ReduceOp::kAvg) straight into its slice of the shard, overlapping the rest of backward. A
// buffer comes back to the pool when its reduce-scatter has finished: taking a buffer when none
// is free waits for the oldest launched bucket. Only if none of the held buckets has been
// launched (gradients arriving out of bucket order, e.g. a parameter that gets no gradient) does
// the pool grow by one buffer; gradient_bytes() counts every buffer ever allocated. The Mlp's
// backward produces gradients in bucket order, so the pool stays at plan.pool_buffers.
//
// Gradient accumulation (DeepSpeed's way, not DDP's no_sync: no rank may hold a full local
// gradient to accumulate into): every micro-batch runs the whole bucket cycle, the first
// reduce-scattering into the shard, each later one into a second shard-sized buffer that is
// then added to the shard. The shard ends with the sum over micro-batches of the averaged
// (loss-scaled) gradients: DDP's result up to the order of the additions (fp32 rounding). Cost:
// K reduce-scatters per bucket per step and one more shard of memory.
//
// bf16 on the wire (bf16_wire): each pool buffer has a bf16 copy the bucket is cast into right
// before its reduce-scatter, which reduces (in bf16, the collective's rounding) into a bf16
// shard; once every bucket of the micro-batch is done the bf16 shard is cast back into the fp32
// one (or the second shard, then added). The SGD step and the norm stay fp32.
//
// The layout is the DDP reducer's initial one and never changes (no rebuild_buckets):
// common/job_spec.cc refuses the other combinations with zero2.
//
// Unused parameters and the no-hang guarantee: every rank issues every bucket's reduce-scatter,
// in bucket order, every micro-batch (FinishMicroBatch and FinishStep launch the incomplete ones
// with the missing gradients as zeros), then one 2-float all-reduce (kSum, ledger tag
// kTagZero2Stats) of [parameters this rank left unready in some micro-batch, this rank's sum of
// squared owned gradients]. The first entry is the readiness sentinel: if it is non-zero (on
// every rank alike, it is an all-reduce result), with find_unused_parameters the unready
// gradients simply took part as zeros (StepSyncStats::unused_parameters names this rank's);
// without it every rank all-gathers the per-rank unready bitmaps and FinishStep fails on EVERY
// rank with FAILED_PRECONDITION naming the step, each offending rank and its parameters and the
// fix. The second gives the global gradient norm, the same on every rank.
//
// Ledger: BeginStep records the step's reduce-scatters (kReduceScatter, bucket id, the padded
// bucket's element count) and the stats all-reduce, and starts the cross-rank ledger check
// (collective_ledger.h) when due; it is waited for before bucket 0 goes out, as in the DDP
// reducer (reducer.h).
//
// Step state machine (K = accumulation_steps):
//
//   IDLE ──BeginStep──> MICRO-BATCH k ──FinishMicroBatch ok (k < K-1)──> MICRO-BATCH k+1
//                          │  └──FinishStep ok (k = K-1)──> IDLE (step + 1)
//                          └──any error, or Finish* out of turn──> FAILED (sticky)
//
// Thread-safety: not thread-safe; one training thread calls every method (SlotFor and MarkReady
// from the backward hooks included). The collective's threads never call into it.
#ifndef RINGLEADER_WORKER_SYNC_ZERO2_REDUCER_H_
#define RINGLEADER_WORKER_SYNC_ZERO2_REDUCER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "plan/zero2_plan.h"
#include "worker/collective/collective.h"
#include "worker/sync/collective_ledger.h"
#include "worker/sync/reducer.h"
#include "worker/sync/tensor_memory.h"
#include "worker/trainer/parameter.h"

namespace ringleader {

struct Zero2ReducerOptions {
  // Micro-batches per step (sync.gradient_accumulation_steps). >= 1.
  int accumulation_steps = 1;
  // Parameters without gradient on some rank take part as zeros instead of failing the step
  // (sync.find_unused_parameters).
  bool find_unused_parameters = false;
  // bf16 on the wire (sync.comm_dtype bf16): each bucket is rounded to bf16 before its
  // reduce-scatter and the reduced slices are cast back into the fp32 shard (half the bytes;
  // DDP's bf16 compression hook semantics).
  bool bf16_wire = false;
  // Cross-rank ledger check every this many steps (1 = every step, 0 = never); the first step
  // is always checked unless 0.
  int ledger_check_interval_steps = 1;
  // Timeout of every collective the reducer issues. > 0.
  absl::Duration timeout = absl::Seconds(60);
  // Number of the first optimizer step (for messages and stats; e.g. after a resume).
  int64_t first_step = 1;
  // Measures the stats' durations. Not owned; must outlive the reducer.
  Clock* clock = Clock::Real();
  // Where the shard and the pool live: host memory (null = HostMemory()). Not owned.
  TensorMemory* memory = nullptr;
};

class Zero2Reducer {
 public:
  // `params`: the trainable parameters in model order, plan.trainable.size() of them with the
  // counts the plan was made for; `plan` for comm's world size. `comm` is not owned and must
  // outlive the reducer. Issues no collective.
  // Errors: INVALID_ARGUMENT naming what is wrong (null comm or clock, a plan for another world
  // size or other parameters, timeout <= 0, ledger_check_interval_steps < 0, a memory of
  // another kind than comm's); the memory's allocation errors.
  static absl::StatusOr<std::unique_ptr<Zero2Reducer>> Create(Collective* comm,
                                                              std::vector<ParameterInfo> params,
                                                              Zero2Plan plan,
                                                              Zero2ReducerOptions opts);
  ~Zero2Reducer();
  Zero2Reducer(const Zero2Reducer&) = delete;
  Zero2Reducer& operator=(const Zero2Reducer&) = delete;

  // Starts a step (forgets the last one's gradients; starts the ledger check if due). Aborts if
  // called between BeginStep and FinishStep (a programmer bug).
  void BeginStep();
  // Where trainable parameter t's gradient goes this step (params[t].count floats, zero until
  // backward writes them): BackwardOptions::slot_for. May wait for an earlier bucket's
  // reduce-scatter to free a pool buffer. Aborts if t is out of range or outside a step.
  float* SlotFor(size_t t);
  // Parameter t's gradient is complete: launches every complete bucket, in bucket order (the
  // first one after the step's ledger check). A repeated call is ignored. Aborts if out of range.
  void MarkReady(size_t t);
  // Ends micro-batch k < K-1 of the step: launches its remaining buckets, waits for all of
  //   them and adds them to the shard; the next micro-batch's SlotFor starts from fresh buffers.
  // Errors: FinishStep's (FAILED_PRECONDITION when called for the last micro-batch).
  absl::Status FinishMicroBatch();
  // Ends the last micro-batch like FinishMicroBatch, exchanges the readiness sentinel and the
  // squared norm, and fills `stats` (over the step's micro-batches) and `grad_norm` (the L2 norm
  // of the whole averaged gradient, from every rank's owned part; either may be null).
  // Errors (each makes the reducer FAILED: later calls return the same error):
  //   FAILED_PRECONDITION: parameters without gradient on some rank without
  //     find_unused_parameters (names the step, the ranks, the parameters and the fix), a
  //     collective desync found by the ledger, FinishStep without BeginStep or before the
  //     last micro-batch;
  //   DEADLINE_EXCEEDED / UNAVAILABLE / ABORTED / INTERNAL from the collectives (naming the
  //     bucket and step); the memory's errors.
  absl::Status FinishStep(StepSyncStats* stats, double* grad_norm);

  // Trainable parameter t's owned gradient elements (plan().shards.owned[rank] of its model
  // parameter) inside the shard, valid after FinishStep until the next BeginStep; null when
  // this rank owns none of t.
  const float* owned_gradient(size_t t) const;

  const Zero2Plan& plan() const { return plan_; }
  const std::vector<ParameterInfo>& parameters() const { return params_; }
  // Bytes of gradient memory held: the shard (two with accumulation) and every pool buffer
  // allocated so far.
  size_t gradient_bytes() const;
  size_t pool_buffers_allocated() const { return pool_.size(); }
  // Bytes of bf16 wire copies held (bf16_wire: one per pool buffer and the bf16 shard), else 0.
  size_t wire_buffer_bytes() const;
  // How many times a pool buffer was handed to a bucket (tests: reuse across buckets/steps).
  uint64_t pool_takes() const { return pool_takes_; }
  int64_t step() const { return step_; }
  CollectiveLedger* ledger() { return &ledger_; }

 private:
  Zero2Reducer(Collective* comm, std::vector<ParameterInfo> params, Zero2Plan plan,
               Zero2ReducerOptions opts, TensorMemory* memory);

  absl::Status AddWireBuffer();
  void ResetMicroBatch();
  absl::Status ReduceMicroBatch();
  void TakeBuffer(size_t b);
  void LaunchReadyBuckets();
  void Launch(size_t b, bool from_backward);
  absl::Status FinishSync(StepSyncStats* stats, double* grad_norm);
  absl::Status WaitAll(absl::Time finish_start, const std::vector<bool>& done_at_finish,
                       StepSyncStats* stats);
  absl::Status ResolveLedgerCheck();
  absl::Status NameUnready(const std::vector<size_t>& local_unready);
  void NoteError(absl::Status* slot, const absl::Status& s);
  std::string BucketName(size_t b) const;

  Collective* comm_;
  std::vector<ParameterInfo> params_;
  Zero2Plan plan_;
  Zero2ReducerOptions opts_;
  TensorMemory* memory_;
  size_t rank_;
  CollectiveLedger ledger_;

  TensorBuffer<float> shard_;
  TensorBuffer<float> incoming_;  // accumulation: a later micro-batch's reduce-scatters
  std::vector<TensorBuffer<uint16_t>> pool_wire_;  // bf16_wire: per pool buffer, its bf16 copy
  TensorBuffer<uint16_t> shard_wire_;              // bf16_wire: the reduced bf16 slices
  std::unique_ptr<StagedBytes> exchange_;  // the readiness sentinel and the squared norm
  std::vector<TensorBuffer<float>> pool_;
  std::vector<int> holder_;      // per pool buffer: the bucket holding it, -1 = free
  std::vector<int> buffer_of_;   // per bucket: its pool buffer this step, -1 = none
  uint64_t pool_takes_ = 0;

  // Per step.
  int64_t step_;
  int micro_ = 0;                     // the current micro-batch
  std::vector<uint8_t> unready_any_;  // per parameter: unready in some micro-batch
  StepSyncStats step_stats_;          // timings and bytes over the step's micro-batches
  int64_t steps_done_ = 0;
  bool in_step_ = false;
  std::vector<uint8_t> ready_;
  std::vector<size_t> pending_;  // per bucket: parameters not yet ready
  size_t next_bucket_ = 0;
  std::vector<std::shared_ptr<Work>> work_;
  std::vector<absl::Time> launch_time_;
  int launched_in_backward_ = 0;
  std::unique_ptr<LedgerCheck> ledger_check_;
  bool ledger_check_resolved_ = true;
  bool ledger_checked_this_step_ = false;
  std::vector<CollectiveRecord> step_records_;
  absl::Status pending_error_;  // the ledger check failed during backward: nothing more launches
  absl::Status wait_error_;     // a reduce-scatter waited for in SlotFor failed
  absl::Status memory_error_;   // first failed memory operation of a void method
  absl::Status failed_;         // sticky
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_SYNC_ZERO2_REDUCER_H_
