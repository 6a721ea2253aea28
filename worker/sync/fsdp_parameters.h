// The parameters of one rank under strategy fsdp (ZeRO stage 3): the rank keeps only its shard
// (fsdp_plan.h: its slice of every bucket, laid out like its zero2 gradient shard) and gathers
// a layer's buckets from their owners right before the layer runs.
//
// Use (one per rank, on the training thread; the CPU trainer, host memory):
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
//                HELD --Acquire(a layer not using it), Release, GatherAll--> NOT HELD
//
// Memory: shard_elements floats kept, plus at most plan.staging_elements of staging at once
// (one layer's buckets; no prefetch). parameter_bytes() = 4 x (shard + the most staging held
// at once so far), what common/memory_plan.h predicts for fsdp's parameters. GatherAll
// (checkpoints) and MeasureGatheredDrift stage one bucket at a time through the same buffers.
//
// Values: the gathers copy bytes, so every rank computes with exactly the values each owner
// holds: the forward and backward of an fsdp rank are those of a zero2 rank, bit for bit.
//
// Thread-safety: not thread-safe; one training thread calls every method.
#ifndef RINGLEADER_WORKER_SYNC_FSDP_PARAMETERS_H_
#define RINGLEADER_WORKER_SYNC_FSDP_PARAMETERS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/collective/collective.h"
#include "worker/sync/collective_ledger.h"
#include "worker/sync/drift.h"
#include "worker/sync/fsdp_plan.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/parameter.h"

namespace ringleader {

struct FsdpParametersOptions {
  // Timeout of every gather. > 0.
  absl::Duration timeout = absl::Seconds(60);
  // Where the gathers are recorded (the zero2 reducer's). Not owned; null = not recorded.
  CollectiveLedger* ledger = nullptr;
};

class FsdpParameters {
 public:
  // `params`: every model parameter (plan.zero2.shards.counts' counts), `plan` for comm's world
  // size. Host memory only (comm->memory_kind() must be kHost). Issues no collective.
  // Errors: INVALID_ARGUMENT naming what is wrong (null comm, a plan for another world size or
  // other parameters, a device collective "fsdp runs on the CPU trainer (gloo) only", timeout
  // <= 0).
  static absl::StatusOr<std::unique_ptr<FsdpParameters>> Create(Collective* comm,
                                                                std::vector<ParameterInfo> params,
                                                                FsdpPlan plan,
                                                                FsdpParametersOptions opts);

  // Copies this rank's owned elements of the full parameters `full` (one pointer per parameter,
  // parameters()[i].count floats) into the shard; padding stays zero. No collective.
  // Errors: INVALID_ARGUMENT for a wrong number of pointers or a null one.
  absl::Status LoadOwned(const std::vector<const float*>& full);

  // Layer k's weight and bias (the plan's layer_params[k], which must be {weight, bias} in
  // that order), gathered as the file comment says; valid until the next Acquire, Release,
  // GatherAll or MeasureGatheredDrift. A ParameterProvider for the Mlp.
  // Errors: INVALID_ARGUMENT for k out of range or a layer without exactly two parameters; the
  // gather's ("fsdp parameter gather of bucket B (layer k): ...").
  absl::StatusOr<LayerParameters> Acquire(size_t k);
  // Frees every held bucket (end of a pass). No collective.
  void Release();

  // Parameter i's owned elements (plan.zero2.shards.owned[rank][i]) in the shard, writable: what
  // the optimizer steps. Null when this rank owns none of parameter i.
  float* owned_parameter(size_t i);

  // Every parameter whole, on every rank (a collective: every rank calls it at the same point):
  // each bucket gathered in turn, copied out. For a checkpoint. Releases held buckets first.
  // Errors: the gathers'.
  absl::StatusOr<std::vector<std::vector<float>>> GatherAll();

  // The drift check of an fsdp run. fsdp keeps no replicas (each element lives on its owner
  // only), so nothing can drift between steps; what can go wrong is the assembly: a rank that
  // gathers another layout computes with another model. So each bucket is gathered in turn and
  // MeasureDrift (drift.h) compares every rank's gathered parameters with rank 0's: 0 unless
  // the ranks assemble different models. Results combined over the buckets (per_parameter per
  // model parameter; the worst one named). A collective; releases held buckets first.
  // Errors: the gathers' and MeasureDrift's.
  absl::StatusOr<DriftResult> MeasureGatheredDrift(const DriftOptions& drift);

  const FsdpPlan& plan() const { return plan_; }
  const std::vector<ParameterInfo>& parameters() const { return params_; }
  // 4 x (shard + the most staging held at once so far).
  size_t parameter_bytes() const;
  size_t staging_peak_elements() const { return staging_peak_; }
  // Gathers issued so far (Acquire, GatherAll, MeasureGatheredDrift).
  uint64_t gathers() const { return gathers_; }

 private:
  FsdpParameters(Collective* comm, std::vector<ParameterInfo> params, FsdpPlan plan,
                 FsdpParametersOptions opts);
  // Gathers bucket b into held_[b] (allocated here). `layer` for messages (-1: none).
  absl::Status Gather(size_t b, int layer);
  const float* InBucket(size_t i) const;  // parameter i inside its held bucket
  size_t StagingHeld() const;

  Collective* comm_;
  std::vector<ParameterInfo> params_;
  FsdpPlan plan_;
  FsdpParametersOptions opts_;
  size_t rank_;
  std::vector<float> shard_;
  std::map<size_t, std::vector<float>> held_;  // bucket -> its gathered, padded contents
  size_t staging_peak_ = 0;
  uint64_t gathers_ = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_SYNC_FSDP_PARAMETERS_H_
