// Which of the model's parameters the reducer synchronises, which the optimizer steps, and which
// a fault leaves without a gradient on this rank: decided once per attempt from the spec.
//
//   frozen (model.frozen_parameters)      out of the reducer, no gradient, not stepped
//                                         (requires_grad=False in DDP); under strategy fsdp
//                                         in the reducer (its parameters are sharded with
//                                         their gradients' buckets) but ready from the start
//                                         of every micro-batch, reduced as zeros, not stepped
//   unused on this rank (fault injection) in the reducer, but never marked ready here
//   bypass_sync on this rank (fault)      steps with its local gradients (see training_loop.h)
//   bypass_sync_all_ranks (fault)         every rank steps with its local gradients and no rank
//                                         runs the reducer at all (the loss computed on the
//                                         unwrapped model: no collective for gradients)
#ifndef RINGLEADER_WORKER_RANK_PARAMETER_PLAN_H_
#define RINGLEADER_WORKER_RANK_PARAMETER_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ringleader.pb.h"
#include "worker/trainer/parameter.h"

namespace ringleader {

struct ParameterPlan {
  std::vector<ParameterInfo> trainable;  // the reducer's parameters, in model order
  std::vector<int> reducer_index;        // model parameter -> index in `trainable`, -1 = frozen
  // fsdp's frozen parameters: in the reducer, marked ready at the start of every micro-batch.
  std::vector<bool> always_ready;
  std::vector<bool> has_grad;  // not frozen: what the optimizer steps and the synced norm covers
  std::vector<bool> skip;      // no gradient in backward on this rank (frozen or fault-unused)
  bool bypass = false;         // this rank steps with its local gradients (a bypass fault)
  bool bypass_all = false;     // model.faults.bypass_sync_all_ranks: no reducer on any rank
};

// Errors: INVALID_ARGUMENT naming model.frozen_parameters or
// model.faults.unused_parameters_on_rank for a parameter the model does not have, or when every
// parameter is frozen.
absl::StatusOr<ParameterPlan> PlanParameters(const v1::JobSpec& spec, uint32_t rank,
                                             const std::vector<ParameterInfo>& infos);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_PARAMETER_PLAN_H_
