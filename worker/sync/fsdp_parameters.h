// The parameters of one rank under strategy fsdp (ZeRO stage 3): the rank keeps only its shard
// (plan/fsdp_plan.h: its slice of every bucket, laid out like its zero2 gradient shard) and gathers
// a layer's buckets from their owners right before the layer runs.
//
// Use (one per rank, on the training thread; the CPU trainer with host memory, or the GPU
// trainer with its device memory, tensor_memory.h):
//
//   ASSIGN_OR_RETURN(auto params, FsdpParameters::Create(comm, infos, plan, opts));
//   RETURN_IF_ERROR(params->LoadOwned(model's full parameters));   then Mlp::ReleaseParameters
//   per pass: model.ForwardBackward(..., {.params_for = [&](k) { return params->Acquire(k); }})
//             params->Release();                                    staging freed
//   optimizer.StepShard({params->owned_parameter(i)...}, owned gradients, has_grad)
//   (no parameter all-gather after the step: only the owned elements changed, and only their
//   owner needs them until the next gather)
//
// Acquire(k): releases every held bucket layer k does not use, then all-gathers (kAllGather,
// the bucket's id, s_b floats per rank) each bucket of layer k not held yet, in ascending
// bucket order, and waits for it. Every rank makes the same Acquire calls in the same order
// (the Mlp calls it 2K - 1 times per pass, Evaluate once per layer), so every rank issues the
// same gathers; each is recorded in the ledger (opts.ledger) and covered by the reducer's next
// ledger check. The gathers run in issue order behind the zero2 reducer's reduce-scatters on
// the same collective.
//
//   per bucket:  NOT HELD --Acquire(a layer using it)--> HELD
//                HELD --Acquire(a layer not using it), Release, GatherAll(Into)--> NOT HELD
//
// Memory: the shard and the staging live in opts.memory (host memory, or device memory on the
// trainer's compute stream: every pointer this class takes or hands out lies there; it never
// reads or writes them from the host itself). shard_elements floats kept (padding zeroed
// through the memory), plus at most plan.staging_elements of staging at once (one layer's
// buckets, each allocated when gathered and freed when released; no prefetch).
// parameter_bytes() = 4 x (shard + the most staging held at once so far), what
// plan/memory_plan.h predicts for fsdp's parameters. GatherAll / GatherAllInto (checkpoints)
// and MeasureGatheredDrift stage one bucket at a time through the same buffers.
//
// Values: the gathers copy bytes, so every rank computes with exactly the values each owner
// holds: the forward and backward of an fsdp rank are those of a zero2 rank, bit for bit.
//
// Thread-safety: not thread-safe; one training thread calls every method.
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
};

class FsdpParameters : public ParameterShard {
 public:
  // `params`: every model parameter (plan.zero2.shards.counts' counts), `plan` for comm's world
  // size. Allocates the shard in opts.memory and zeroes it. Issues no collective.
  // Errors: INVALID_ARGUMENT naming what is wrong (null comm, a plan for another world size or
  // other parameters, timeout <= 0, a memory of another kind than comm's); the memory's
  // allocation errors.
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
  // that order), gathered as the file comment says: pointers into the memory's staging, valid
  // until the next Acquire, Release, GatherAll, GatherAllInto or MeasureGatheredDrift. A
  // ParameterProvider for the Mlp.
  // Errors: INVALID_ARGUMENT for k out of range or a layer without exactly two parameters; the
  // staging allocation's; the gather's ("fsdp parameter gather of bucket B (layer k): ...").
  absl::StatusOr<LayerParameters> Acquire(size_t k) override;
  // Frees every held bucket (end of a pass). No collective.
  void Release() override;

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
  // 4 x (shard + the most staging held at once so far).
  size_t parameter_bytes() const;
  size_t staging_peak_elements() const { return staging_peak_; }
  // Gathers issued so far (Acquire, GatherAll, MeasureGatheredDrift).
  uint64_t gathers() const { return gathers_; }

 private:
  FsdpParameters(Collective* comm, std::vector<ParameterInfo> params, FsdpPlan plan,
                 FsdpParametersOptions opts, TensorMemory* memory);
  // Gathers bucket b into held_[b] (allocated here). `layer` for messages (-1: none).
  absl::Status Gather(size_t b, int layer);
  // The one gather loop of GatherAll, GatherAllInto and MeasureGatheredDrift: releases held
  // buckets, then gathers each bucket in turn, calls fn(b) while it is held, and releases it.
  // Stops at the first error (the gather's or fn's).
  absl::Status ForEachGatheredBucket(const std::function<absl::Status(size_t b)>& fn);
  const float* InBucket(size_t i) const;  // parameter i inside its held bucket
  size_t StagingHeld() const;

  Collective* comm_;
  std::vector<ParameterInfo> params_;
  FsdpPlan plan_;
  FsdpParametersOptions opts_;
  TensorMemory* memory_;
  size_t rank_;
  TensorBuffer<float> shard_;
  std::map<size_t, TensorBuffer<float>> held_;  // bucket -> its gathered, padded contents
  size_t staging_peak_ = 0;
  uint64_t gathers_ = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_SYNC_FSDP_PARAMETERS_H_
