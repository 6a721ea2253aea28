// Which buckets strategy fsdp (ZeRO stage 3: parameters, gradients and optimizer state sharded)
// gathers before each layer runs, and how much staging that takes.
//
// fsdp keeps zero2's plan unchanged (zero2_plan.h): the DDP reducer's initial buckets, each
// padded to N x s_b and split in N slices, rank r owning slice r of every bucket. A rank keeps
// the PARAMETERS of its slices too, laid out exactly like its gradient shard: bucket b's slice
// at shard_offset[b], Σ_b s_b floats (padding included, zero). Gathering bucket b is one
// all-gather of every rank's s_b-float slice into N x s_b floats: the padded bucket, in which
// each of its parameters lies whole at its bucket offset — so the gathered buffer IS the
// parameters, no unpacking.
//
//   layer k uses parameters layer_params[k] (the Mlp: weight 2k, bias 2k+1), which lie in
//   layer_buckets[k] (one bucket, or two when a bucket boundary falls between weight and bias)
//
//   buckets b0 = [fc3.bias fc3.weight], b1 = [fc2.bias fc2.weight], b2 = [fc1.bias fc1.weight]
//   forward:  layer 0: gather b2 | layer 1: free b2, gather b1 | layer 2: free b1, gather b0
//   backward: layer 2: b0 still held | layer 1: free b0, gather b1 | end of pass: free b1
//
// Staging: the buckets of one layer at a time (no prefetch), at most
// staging_elements = max_k Σ_{b in layer_buckets[k]} N s_b floats.
//
// Frozen parameters are not supported (every count must be > 0): the job spec refuses
// model.frozen_parameters with fsdp. Pure arithmetic, the same on every rank.
#ifndef RINGLEADER_PLAN_FSDP_PLAN_H_
#define RINGLEADER_PLAN_FSDP_PLAN_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "plan/bucket_layout.h"
#include "plan/zero2_plan.h"

namespace ringleader {

struct FsdpPlan {
  Zero2Plan zero2;  // ownership, gradient shard, bucket pool: zero2's, unchanged
  std::vector<std::vector<size_t>> layer_params;   // per layer: its parameter indices
  std::vector<std::vector<size_t>> layer_buckets;  // per layer: its buckets, ascending
  size_t staging_elements = 0;  // max over layers of its buckets' padded sizes, summed
  // Parameter floats a rank keeps between steps: its shard, zero2.shard_elements.
  size_t shard_elements() const { return zero2.shard_elements; }
};

// The Mlp's layers: {{0, 1}, {2, 3}, ...}, `layers` linear layers (weight, bias each).
std::vector<std::vector<size_t>> MlpLayerParameters(size_t layers);

// The plan for parameters of `counts` elements (all > 0) grouped into `layer_params` (every
// parameter in exactly one layer), over `world_size` ranks.
// Errors: INVALID_ARGUMENT for a count of 0 ("model.frozen_parameters: fsdp ..."), a parameter
// in no layer or in two, an index out of range; PlanZero2's.
absl::StatusOr<FsdpPlan> PlanFsdp(const std::vector<size_t>& counts,
                                  std::vector<std::vector<size_t>> layer_params,
                                  size_t world_size, const BucketLayoutOptions& options);

}  // namespace ringleader

#endif  // RINGLEADER_PLAN_FSDP_PLAN_H_
