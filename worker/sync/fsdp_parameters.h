// The parameters of one rank under strategy fsdp (ZeRO stage 3): the rank keeps only its shard
// (plan/fsdp_plan.h: its slice of every bucket, laid out like its zero2 gradient shard) and gathers
// a layer's buckets from their owners one layer ahead of their use.
//
// Use (one per rank, on the training thread; the CPU trainer with host memory, or the GPU
// trainer with its device memory, tensor_memory.h):
//
//   ASSIGN_OR_RETURN(auto params, FsdpParameters::Create(comm, infos, plan, opts));
//   RETURN_IF_ERROR(params->LoadOwned(model's full parameters));   then Mlp::ReleaseParameters
//   per pass: model.ForwardBackward(..., {.params_for = [&](k) { return params->Acquire(k); }})
//             RETURN_IF_ERROR(params->Release());               the pass's gathers waited for
//   optimizer.StepShard({params->owned_parameter(i)...}, owned gradients, has_grad)
//   (no parameter all-gather after the step: only the owned elements changed, and only their
//   owner needs them until the next gather)
//
// Acquire(k) follows the plan's pass (plan.pass, one entry per request: the Mlp asks for layers
// 0..K-1, then K-1..1; evaluation 0..K-1): it releases the held buckets that neither layer k nor
// the next layer needs, issues the all-gathers (kAllGather, the bucket's id, s_b floats per
// rank) of layer k's buckets not held yet and then of the next layer's (the prefetch, so they
// run while layer k computes), orders the caller's compute after layer k's gathers and returns
// — it never waits for a gather on the host. A request off the plan's pass (another order)
// falls back to layer k's buckets alone, without prefetch, until Release. Every rank makes the
// same requests in the same order, so every rank issues the same gathers; each is recorded in
// the ledger (opts.ledger) and covered by the reducer's next ledger check.
//
//   per bucket:  NOT HELD --Acquire (its layer's, or the one before it)--> HELD (gather issued)
//                HELD --Acquire(neither needs it), Release, GatherAll(Into), drift--> NOT HELD
//
// Ordering, with compute on a device stream (NCCL; host backends do all of it by waiting):
//   * a gather waits on the compute stream only for the pass's mark (opts.gather_channel's
//     MarkCompute, CollectiveOptions::after): taken at the pass's first request, after the
//     optimizer step — the shard the gathers read changes only there — and taken again before
//     a request's gathers when that request released buckets: the staging a gather writes may
//     have held a released bucket, which kernels queued before the release still read. Nothing
//     else: kernels queued after the mark (the current layer's) run beside the gather;
//   * the compute that uses a layer waits for that layer's gathers on the device
//     (Work::OrderCompute: the compute stream waits for their completion events), not on the
//     host;
//   * Release waits on the host for the pass's gathers (each bounded by opts.timeout; by then
//     the device has used them all, the Mlp having synchronised for its loss), so a failed
//     gather is reported there at the latest, and the optimizer step that follows cannot write
//     the shard under a gather still reading it.
// The gathers go to opts.gather_channel when given (the backend's side channel: on NCCL a
// second communicator with its own stream, so a gather never queues behind the zero2 reducer's
// in-flight reduce-scatters, Collective::side_channel), else to comm, in issue order behind
// the reduce-scatters.
//
// Memory: the shard and the staging live in opts.memory (host memory, or device memory on the
// trainer's compute stream: every pointer this class takes or hands out lies there; it never
// reads or writes them from the host itself). shard_elements floats kept (padding zeroed
// through the memory), plus the staging arena, plan.staging_elements floats, allocated once:
// each bucket is gathered into its own place in it (plan.staging_offset), and buckets held at
// once never overlap; a request holds at most two layers' buckets (the one computing, the one
// arriving). parameter_bytes() = 4 x (shard + arena), what plan/memory_plan.h predicts for
// fsdp's parameters. GatherAll / GatherAllInto (checkpoints) and MeasureGatheredDrift gather one
// bucket at a time into the same arena and wait for each on the host.
//
// Values: the gathers copy bytes, so every rank computes with exactly the values each owner
// holds: the forward and backward of an fsdp rank are those of a zero2 rank, bit for bit.
//
// Thread-safety: not thread-safe; one training thread calls every method. The caller writes the
// shard (owned_parameter, LoadOwned) only between passes (after Release).
#ifndef RINGLEADER_WORKER_SYNC_FSDP_PARAMETERS_H_
#define RINGLEADER_WORKER_SYNC_FSDP_PARAMETERS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "plan/fsdp_plan.h"
#include "worker/collective/collective.h"
#include "worker/sync/collective_ledger.h"
#include "worker/sync/drift.h"
#include "worker/sync/tensor_memory.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/parameter_shard.h"
#include "worker/trainer/parameter.h"

namespace ringleader {

struct FsdpParametersOptions {
  // Timeout of every gather. > 0.
  absl::Duration timeout = absl::Seconds(60);
  // Where the gathers are recorded (the zero2 reducer's). Not owned; null = not recorded.
  CollectiveLedger* ledger = nullptr;
  // Where the shard and the staging live, and where every parameter pointer passed in or handed
  // out lies: null = HostMemory(). Its kind must be the collective's memory_kind() (gloo: host,
  // NCCL: device). Not owned; must outlive the object.
  TensorMemory* memory = nullptr;
  // Where the gathers run: comm's side channel (comm->side_channel(), so they do not queue
  // behind comm's reduce-scatters), or null: comm itself. Same ranks and memory kind as comm.
  // Not owned; must outlive the object.
  Collective* gather_channel = nullptr;
};

class FsdpParameters : public ParameterShard {
 public:
  // `params`: every model parameter (plan.zero2.shards.counts' counts), `plan` for comm's world
  // size. Allocates the shard in opts.memory and zeroes it, and the staging arena. Issues no
  // collective.
  // Errors: INVALID_ARGUMENT naming what is wrong (null comm, a plan for another world size or
  // other parameters, timeout <= 0, a memory of another kind than comm's, a gather channel of
  // another rank, world size or memory kind); the memory's allocation errors.
  static absl::StatusOr<std::unique_ptr<FsdpParameters>> Create(Collective* comm,
                                                                std::vector<ParameterInfo> params,
                                                                FsdpPlan plan,
                                                                FsdpParametersOptions opts);

  // Copies this rank's owned elements of the full parameters `full` (one pointer per parameter,
  // parameters()[i].count floats IN THE MEMORY: the model's own parameters, device pointers on
  // the GPU) into the shard (memory->Copy); padding stays zero. No collective.
  // Errors: INVALID_ARGUMENT for a wrong number of pointers or a null one; the memory's.
  absl::Status LoadOwned(const std::vector<const float*>& full) override;

  // Layer k's weight and bias (the plan's layer_params[k], which must be {weight, bias} in
  // that order), gathered as the file comment says: pointers into the memory's staging, ready
  // for compute the caller issues after the call, valid until the next Acquire, Release,
  // GatherAll, GatherAllInto or MeasureGatheredDrift. A ParameterProvider for the Mlp.
  // Errors: INVALID_ARGUMENT for k out of range or a layer without exactly two parameters; the
  // compute mark's; what is known of a gather of layer k ("fsdp parameter gather of bucket B
  // (layer k): ..."; host backends wait for it, so every failure shows here).
  absl::StatusOr<LayerParameters> Acquire(size_t k) override;
  // Ends a pass: waits on the host for every gather issued since the last Release (each within
  // opts.timeout), then frees every held bucket. No new collective. Errors: the first failed
  // gather's ("fsdp parameter gather of bucket B (layer k): ..."); every bucket is freed anyway.
  absl::Status Release() override;

  // Parameter i's owned elements (plan.zero2.shards.owned[rank][i]) in the shard, in the memory,
  // writable: what the optimizer steps. Null when this rank owns none of parameter i.
  float* owned_parameter(size_t i) override;

  // Every parameter whole, on every rank, as host vectors (a collective: every rank calls it at
  // the same point): each bucket gathered in turn into the staging and copied to the host
  // (memory->CopyToHost). For a checkpoint. Releases held buckets first.
  // Errors: the gathers' and the memory's.
  absl::StatusOr<std::vector<std::vector<float>>> GatherAll() override;
  // The same collective, written into `full` instead: one pointer per parameter, room for
  // parameters()[i].count floats IN THE MEMORY (memory->Copy from the staging): for a runner
  // that holds full device parameters during a checkpoint. Releases held buckets first.
  // Errors: INVALID_ARGUMENT for a wrong number of pointers or a null one, checked before any
  // gather (this rank then issues none: a programmer bug the other ranks see as a timeout); the
  // gathers' and the memory's.
  absl::Status GatherAllInto(const std::vector<float*>& full);

  // The drift check of an fsdp run. fsdp keeps no replicas (each element lives on its owner
  // only), so nothing can drift between steps; what can go wrong is the assembly: a rank that
  // gathers another layout computes with another model. So each bucket is gathered in turn and
  // MeasureDrift (drift.h) compares every rank's gathered parameters with rank 0's: 0 unless
  // the ranks assemble different models. Results combined over the buckets (per_parameter per
  // model parameter; the worst one named). A collective; releases held buckets first. The
  // comparison runs where the staging is: drift.memory must be null or this object's memory.
  // Errors: INVALID_ARGUMENT for another drift.memory; the gathers' and MeasureDrift's.
  absl::StatusOr<DriftResult> MeasureGatheredDrift(const DriftOptions& drift);

  const FsdpPlan& plan() const { return plan_; }
  const std::vector<ParameterInfo>& parameters() const { return params_; }
  // Where the shard and the staging live (opts.memory, or HostMemory()).
  TensorMemory* memory() const { return memory_; }
  // 4 x (shard + staging arena).
  size_t parameter_bytes() const;
  // The most staging held at once so far (<= plan.staging_elements).
  size_t staging_peak_elements() const { return staging_peak_; }
  // The buckets held now, ascending (on the plan's pass: plan.pass[request].held).
  std::vector<size_t> held_buckets() const;
  // Gathers issued so far (Acquire, GatherAll, MeasureGatheredDrift).
  uint64_t gathers() const { return gathers_; }

  // Waits for the gathers still in flight (their buffers are freed after).
  ~FsdpParameters() override;

 private:
  // A held bucket: its gather, whether the caller's compute was ordered after it, the layer it
  // was gathered for (messages).
  struct Held {
    std::shared_ptr<Work> gather;
    bool ordered = false;
    size_t layer = 0;
  };

  FsdpParameters(Collective* comm, std::vector<ParameterInfo> params, FsdpPlan plan,
                 FsdpParametersOptions opts, TensorMemory* memory);
  // Issues bucket b's gather into its staging, after `after` (null: all compute so far), and
  // holds it. `layer` for messages (-1: none).
  void Gather(size_t b, int layer, std::shared_ptr<const ComputeMark> after);
  // Frees held bucket b; a gather the compute was never ordered after is ordered first, so the
  // next mark covers it (its staging may be reused).
  absl::Status Drop(size_t b);
  // The compute mark the next gathers wait for: taken now if the pass has none yet or buckets
  // were freed since.
  absl::StatusOr<std::shared_ptr<const ComputeMark>> ReadyMark();
  // The one gather loop of GatherAll, GatherAllInto and MeasureGatheredDrift: releases held
  // buckets, then gathers each bucket in turn, waits for it, calls fn(b) while it is held, and
  // releases it. Stops at the first error (the gather's or fn's).
  absl::Status ForEachGatheredBucket(const std::function<absl::Status(size_t b)>& fn);
  const float* InBucket(size_t i) const;  // parameter i inside its held bucket
  absl::Status GatherError(const absl::Status& s, size_t b, int layer) const;
  void NoteHeld();  // staging_peak_

  Collective* comm_;
  Collective* gather_comm_;  // opts.gather_channel, or comm_
  std::vector<ParameterInfo> params_;
  FsdpPlan plan_;
  FsdpParametersOptions opts_;
  TensorMemory* memory_;
  size_t rank_;
  TensorBuffer<float> shard_;
  TensorBuffer<float> staging_;  // plan_.staging_elements
  std::map<size_t, Held> held_;  // bucket -> its gather into staging_ + staging_offset[b]
  // Every gather issued since the last Release, in order, with its bucket and layer.
  struct Issued {
    std::shared_ptr<Work> gather;
    size_t bucket;
    int layer;
  };
  std::vector<Issued> issued_;
  std::shared_ptr<const ComputeMark> ready_;  // null: none yet this pass
  bool freed_since_mark_ = false;
  size_t next_request_ = 0;  // the pass's next request (plan_.pass); off_schedule_ once missed
  bool off_schedule_ = false;
  size_t staging_peak_ = 0;
  uint64_t gathers_ = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_SYNC_FSDP_PARAMETERS_H_
