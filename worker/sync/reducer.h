// The gradient reducer: data-parallel gradient synchronisation with PyTorch DDP's semantics,
// over any `Collective` backend.
//
// Use (one Reducer per rank, on the training thread):
//
//   ASSIGN_OR_RETURN(auto reducer, Reducer::Create(comm, model.parameters(), opts));
//   model.BindGradients(reducer->gradient_slots());
//   for each step:
//     reducer->ZeroGradients();
//     for k in 0..K-1:                                   // K = gradient_accumulation_steps
//       reducer->BeginMicroBatch(k);
//       model.ForwardBackward(x_k, y_k, n, {.loss_scale = 1.0f / K,
//                                           .on_ready = [&](size_t i) { reducer->MarkReady(i); }});
//     RETURN_IF_ERROR(reducer->FinishStep(&stats));      // gradients now averaged over ranks
//     if (reducer->layout_changed()) model.BindGradients(reducer->gradient_slots());
//     optimizer step (reads the gradients through the slots)
//
// What it does (see plan/bucket_layout.h for the assignment):
// - Bucket views: every gradient lives in one flat float arena; parameter i's slot is a view into
//   its bucket. Backward writes straight into the buckets: no copy in or out. With
//   comm_dtype kBFloat16 each bucket is cast to a bf16 buffer (round to nearest even), reduced,
//   and cast back: the only copy.
// - Overlap: MarkReady(i) counts i's bucket down; when a bucket is complete AND every earlier
//   bucket has been launched, its all-reduce (ReduceOp::kAvg) is issued asynchronously, so
//   communication runs while backward continues. Buckets are always launched in bucket order, so
//   every rank issues the same collective sequence whatever order its gradients arrive in.
//   FinishStep launches what is left and waits.
// - Gradient accumulation (no_sync): only the last micro-batch of a step (index K-1) syncs;
//   earlier ones just accumulate into the slots.
// - Rebuild (rebuild_buckets): after the first synced step the buckets are recomputed in the
//   gradient-ready order observed on rank 0 during that step's sync micro-batch (broadcast, so
//   all ranks get the same layout); the reduced gradients are copied into the new arena.
//
// Unused parameters and the no-hang guarantee. A parameter is unready if MarkReady was not
// called for it in the sync micro-batch. The last bucket's collective carries one extra float,
// the readiness sentinel: each rank puts the number of its unready parameters there, so after
// the all-reduce every rank knows whether ANY rank had unready parameters. Every rank always
// issues every bucket, in order (a bucket with unready parameters is launched by FinishStep with
// those slots zero-filled when they got no gradient in any micro-batch of the step), so no rank
// can wait for a bucket another rank never sends. Then:
//   - find_unused_parameters: nothing more; unready slots took part as zeros (or as what earlier
//     micro-batches accumulated), so the result is the average with zeros.
//   - otherwise, if the sentinel is non-zero on every rank alike, every rank issues one more
//     all-gather of per-rank "unready" bitmaps and FinishStep fails on EVERY rank with
//     FAILED_PRECONDITION naming the step, each offending rank and its parameters and the fix.
// No collective that could hang is issued; the error comes at the same step on every rank.
//
// Desync check (the collective ledger, collective_ledger.h). Every collective is recorded. At
// the start of a sync micro-batch (BeginMicroBatch(K-1)) the reducer records the bucket
// all-reduces it is about to issue and starts a tiny all-gather comparing (step, record count,
// digest) of everything recorded since the last check; it overlaps the forward pass and is waited
// for before the first bucket is launched. So a rank with a different bucket sequence is named
// (first divergent collective, ranks) BEFORE mismatched buckets could hang or crash the
// transport; collectives issued after the buckets (unused bitmap, layout broadcast, buffer
// broadcasts and drift checks given the ledger) are compared at the next check.
// ledger_check_interval_steps trades that safety for one small all-gather per checked step.
//
// Step state machine (K = gradient_accumulation_steps):
//
//            BeginMicroBatch(k < K-1)              FinishStep (no sync, OK)
//   IDLE ──────────────────────────> ACCUMULATING ──────────────────────────> IDLE
//     │                                  │ BeginMicroBatch(K-1)
//     │ BeginMicroBatch(K-1)             v
//     └─────────────────────────────> SYNCING ──FinishStep ok──> IDLE (step + 1)
//          (ledger check started;        │
//           buckets launch on MarkReady) └──FinishStep error──> FAILED (sticky: every later
//                                                               FinishStep returns the error)
//
// Memory: the reducer touches its arena only through ReducerOptions::memory (tensor_memory.h):
// host memory for gloo, the GPU trainer's device memory (on its compute stream) for NCCL. The
// reducer itself never picks one; a memory whose kind differs from the collective's is refused.
//
// Thread-safety: not thread-safe. One training thread calls every method, MarkReady included
// (Mlp calls on_ready on the thread that runs ForwardBackward). The collective's own threads
// never call into the Reducer.
#ifndef RINGLEADER_WORKER_SYNC_REDUCER_H_
#define RINGLEADER_WORKER_SYNC_REDUCER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "plan/bucket_layout.h"
#include "worker/collective/collective.h"
#include "worker/sync/collective_ledger.h"
#include "worker/sync/tensor_memory.h"
#include "worker/trainer/parameter.h"

namespace ringleader {

struct ReducerOptions {
  // Cap of every bucket after the first, MiB (DDP's bucket_cap_mb). > 0.
  double bucket_cap_mb = 25;
  // Size of the first bucket, MiB (DDP: 1 MiB, so communication starts early). > 0.
  double first_bucket_mb = 1;
  // Reduce parameters that got no gradient as zeros instead of failing the step.
  bool find_unused_parameters = false;
  // Micro-batches per optimizer step; only the last one syncs. >= 1.
  int gradient_accumulation_steps = 1;
  // Wire dtype of the bucket all-reduces: kFloat32, or kBFloat16 (half the bytes). bf16
  // tolerance: every input, partial sum and the final division round to nearest even with
  // relative error <= 2^-8, so each averaged element is within 2^-8 x (sum_r |g_r| + |avg|) of
  // the fp32 average (reducer_test checks it; measured at 4 ranks: worst 0.43 x that bound,
  // 0.0083 x mean_r |g_r|).
  DataType comm_dtype = DataType::kFloat32;
  // Start bucket all-reduces during backward as buckets complete (false: all in FinishStep).
  bool overlap = true;
  // After the first synced step, rebuild buckets in rank 0's observed gradient-ready order.
  bool rebuild_buckets = false;
  // Cross-rank ledger check every this many synced steps (1 = every step, 0 = never). The
  // first synced step is always checked unless 0.
  int ledger_check_interval_steps = 1;
  // Timeout of every collective the reducer issues. > 0.
  absl::Duration timeout = absl::Seconds(60);
  // Number of the first optimizer step (for messages and stats; e.g. after a resume).
  int64_t first_step = 1;
  // Measures the stats' durations. Not owned; must outlive the reducer.
  Clock* clock = Clock::Real();
  // Where the arena and every staging buffer live: the memory of the trainer whose gradients
  // the reducer holds (its kind must be the collective's memory_kind()). nullptr = host memory.
  // Not owned; must outlive the reducer. See tensor_memory.h.
  TensorMemory* memory = nullptr;
};

// What one FinishStep did. Durations come from `ReducerOptions::clock` and Work::Duration().
struct StepSyncStats {
  int64_t step = 0;          // the optimizer step (first_step-based)
  bool synced = false;       // false after a non-sync micro-batch (nothing was reduced)
  // Busy time of the step's bucket all-reduces: the sum of their durations (collectives that
  // ran concurrently on several communication threads each count in full).
  absl::Duration comm_time;
  // The part of comm_time that ran before FinishStep was called, i.e. hidden behind backward
  // (an op still running then contributes only what it had run; measured conservatively).
  absl::Duration hidden_comm_time;
  // How long FinishStep waited for the buckets: the communication backward did not hide.
  absl::Duration exposed_wait_time;
  // Wall time of FinishStep (waiting, casting back, checks, rebuild).
  absl::Duration finish_time;
  int buckets = 0;                      // bucket all-reduces this step
  int buckets_launched_in_backward = 0;  // ... of which MarkReady launched
  int collectives = 0;                  // collectives recorded for this step
  uint64_t collective_digest = 0;       // FNV-1a over this step's ledger records
  bool ledger_checked = false;          // this step's cross-rank ledger check ran (and passed)
  size_t bytes_communicated = 0;        // payload of the bucket all-reduces (wire dtype)
  // Parameters this rank left unready in the sync micro-batch (only with
  // find_unused_parameters; otherwise FinishStep failed).
  std::vector<std::string> unused_parameters;
};

// Owner: the rank's training loop. See the file comment for use and thread-safety.
class Reducer {
 public:
  // `comm` is not owned and must outlive the reducer; `params` in registration order. Issues no
  // collective. Errors: INVALID_ARGUMENT naming the field (null comm, no parameters, a parameter
  // with 0 elements, bucket_cap_mb / first_bucket_mb <= 0, gradient_accumulation_steps < 1,
  // comm_dtype kUInt8, timeout <= 0, ledger_check_interval_steps < 0, null clock, or a memory
  // whose kind is not comm->memory_kind(), e.g. an NCCL collective with host memory); the
  // memory's allocation errors (RESOURCE_EXHAUSTED, FAILED_PRECONDITION "no usable GPU").
  static absl::StatusOr<std::unique_ptr<Reducer>> Create(Collective* comm,
                                                         std::vector<ParameterInfo> params,
                                                         ReducerOptions opts);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // parameter i's gradient slot (parameters()[i].count floats inside the arena, in
  // ReducerOptions::memory), for Mlp::BindGradients / GpuMlp::BindGradients. They change after
  // a rebuild (see layout_changed()); the old slots stay valid, holding the same reduced
  // gradients, until the next BeginMicroBatch(0).
  std::vector<float*> gradient_slots();
  // True once after FinishStep rebuilt the buckets: re-bind the slots before the next
  // BeginMicroBatch.
  bool layout_changed();

  // Zeroes every gradient slot (call at the start of a step, before micro-batch 0).
  void ZeroGradients();

  // Call before micro-batch `micro_batch_index`'s backward, 0..K-1 in order (aborts otherwise:
  // a programmer bug). Index K-1 is the sync micro-batch: starts the ledger check if due.
  void BeginMicroBatch(int micro_batch_index);

  // Parameter `param_index`'s gradient is complete for this micro-batch (backward hook). In the
  // sync micro-batch with overlap, launches every bucket that is now complete, in bucket order
  // (first waiting for the step's ledger check). A repeated call for the same parameter in one
  // micro-batch is ignored. Aborts if param_index is out of range.
  void MarkReady(size_t param_index);

  // After a non-sync micro-batch: returns OK at once (stats->synced = false). After the sync
  // micro-batch: launches the remaining buckets, waits for all, casts back (bf16), handles
  // unready parameters, rebuilds the buckets if due, and fills `stats` (may be null).
  // Errors (each also makes the reducer FAILED: later calls return the same error):
  //   FAILED_PRECONDITION: unready parameters without find_unused_parameters (names the step,
  //     the ranks and parameters, and the fix), or a collective desync found by the ledger
  //     (names the first divergent collective and the ranks), or FinishStep called before any
  //     BeginMicroBatch of the step;
  //   DEADLINE_EXCEEDED / UNAVAILABLE / ABORTED / INTERNAL from the collectives (the message
  //     names the bucket and step);
  //   the memory's errors from any arena operation since the last FinishStep (ZeroGradients,
  //     MarkReady and BeginMicroBatch cannot return one: it is kept for FinishStep).
  absl::Status FinishStep(StepSyncStats* stats);

  const BucketLayout& layout() const { return layout_; }
  // Bytes of the gradient arena (every gradient and the readiness sentinel, fp32) and of its
  // bf16 wire copy (0 unless comm_dtype is kBFloat16), as allocated in the memory.
  size_t arena_bytes() const { return arena_.bytes(); }
  size_t wire_buffer_bytes() const { return bf16_arena_.bytes(); }
  const std::vector<ParameterInfo>& parameters() const { return params_; }
  // The next optimizer step FinishStep will sync.
  int64_t step() const { return step_; }
  // The ledger, for other modules (buffer broadcast, drift) whose collectives should be checked
  // along with the reducer's.
  CollectiveLedger* ledger() { return &ledger_; }

  // Test-only: on the next synced step this rank plans (and, if no ledger check stops it,
  // issues) one extra all-reduce of `count` floats, before bucket 0, as bucket id
  // layout().buckets.size(): a deliberate desync.
  void InjectExtraBucketForTest(size_t count) { extra_bucket_for_test_ = count; }

 private:
  Reducer(Collective* comm, std::vector<ParameterInfo> params, ReducerOptions opts,
          BucketLayout layout, TensorMemory* memory);

  // Launching, finishing and rebuilding (reducer.cc explains each).
  absl::Status AllocateArena();
  void LaunchReadyBuckets();
  void LaunchBucket(size_t b, bool from_backward);
  absl::Status FinishSync(StepSyncStats* stats);
  absl::Status WaitForBuckets(const std::vector<bool>& done_at_finish, absl::Time finish_start,
                              StepSyncStats* stats);
  absl::Status ReadAndClearSentinel(float* sentinel);
  absl::Status RebuildBuckets();
  // The cross-rank checks (reducer_checks.cc): the ledger check of each sync micro-batch, and
  // naming the unready parameters of every rank.
  void StartSyncMicroBatch();
  absl::Status ResolveLedgerCheck();
  absl::Status CheckUnready(const std::vector<size_t>& local_unready);
  void RecordForStep(CollectiveKind kind, int32_t bucket, size_t count, DataType dtype);
  std::string BucketName(size_t b) const;
  // Keeps the first failed arena operation for FinishStep (for methods that return void).
  void NoteMemoryError(const absl::Status& s);

  Collective* comm_;
  std::vector<ParameterInfo> params_;
  ReducerOptions opts_;
  BucketLayout layout_;
  CollectiveLedger ledger_;
  TensorMemory* memory_;  // opts_.memory, or HostMemory()

  TensorBuffer<float> arena_;          // gradients + readiness sentinel
  TensorBuffer<float> retired_arena_;  // previous arena after a rebuild, freed at micro-batch 0
  TensorBuffer<uint16_t> bf16_arena_;  // wire buffer when comm_dtype is kBFloat16
  bool layout_changed_ = false;

  // Per step.
  int64_t step_;
  int64_t synced_steps_ = 0;
  int micro_batch_ = -1;              // current micro-batch, -1 = none begun this step
  bool syncing_ = false;              // in the sync micro-batch
  std::vector<uint8_t> ready_now_;    // param marked in the current micro-batch
  std::vector<uint8_t> ready_in_step_;  // param marked in any micro-batch of the step
  std::vector<size_t> bucket_pending_;  // per bucket: params not yet marked (sync micro-batch)
  std::vector<size_t> ready_order_;   // sync micro-batch mark order (first synced step)
  size_t next_bucket_ = 0;            // next bucket to launch
  std::vector<std::shared_ptr<Work>> bucket_work_;
  std::vector<absl::Time> bucket_launch_time_;
  int launched_in_backward_ = 0;
  std::unique_ptr<LedgerCheck> ledger_check_;
  bool ledger_check_resolved_ = true;
  bool ledger_checked_this_step_ = false;
  absl::Status pending_error_;        // found during backward, returned by FinishStep
  absl::Status memory_error_;         // first failed arena operation, returned by FinishStep
  std::vector<CollectiveRecord> step_records_;
  size_t extra_bucket_for_test_ = 0;
  TensorBuffer<float> extra_bucket_buffer_;
  std::shared_ptr<Work> extra_bucket_work_;

  absl::Status failed_;               // sticky error (FAILED state)
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_SYNC_REDUCER_H_
