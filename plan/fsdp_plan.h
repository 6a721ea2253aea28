// Which buckets strategy fsdp (ZeRO stage 3: parameters, gradients and optimizer state sharded)
// gathers before each layer runs, when it gathers them, and where they are staged.
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
// A pass asks for the layers in access_order (the Mlp: 0..K-1 forward, then K-1..1 backward:
// layer 0's backward needs no parameters; evaluation asks 0..K-1). The schedule `pass` says what
// each of those requests does, with a prefetch of one layer ahead: request i holds the buckets
// of its layer AND of the next layer the pass asks for (the first later request for another
// layer), so that layer's gathers run while this one computes. In order it releases the held
// buckets that neither needs, gathers its layer's missing buckets (only request 0 has any: the
// others were prefetched), then the next layer's missing ones. At most two layers' buckets are
// held at once: the one computing and the one arriving — the least that lets a gather overlap
// compute; a deeper prefetch would hold more staging and hide nothing more while one layer's
// compute outlasts one layer's gather. At the turn the last layer's next is layer K-2, still
// held from the forward: a pass gathers every bucket of layers 0..K-1 once forward, and again
// backward only those of layers K-3..1.
//
//   buckets b0 = [fc3.bias fc3.weight], b1 = [fc2.bias fc2.weight], b2 = [fc1.bias fc1.weight]
//   request 0 (layer 0): gather b2, prefetch b1    held b1 b2
//   request 1 (layer 1): free b2, prefetch b0      held b0 b1
//   request 2 (layer 2): (next is layer 1: held)   held b0 b1
//   request 3 (layer 2):                           held b0 b1
//   request 4 (layer 1): free b0                   held b1     (end of pass: free b1)
//
// Staging: one arena of staging_elements floats, allocated once; bucket b is always gathered
// into [staging_offset[b], staging_offset[b] + N s_b). Buckets held at the same time never
// overlap. They are placed in the order of their first gather, in an arena as large as the
// most staging any request holds (two adjacent layers' buckets): the buckets an even layer
// first needs as low as they fit, an odd layer's as high, so the layer computing and the one
// arriving fill it from opposite ends. Should a bucket find no place that way, every bucket
// goes at the lowest offset clear of those it is held with (first fit), a larger arena. For
// the Mlp's passes the first way fits (fsdp_plan_test sweeps shapes, bucket caps and world
// sizes). A bucket gathered alone (checkpoint, drift check) fits anywhere.
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

// What one request of a pass (FsdpPlan::pass) does, in this order: release, then gather.
struct FsdpRequest {
  size_t layer = 0;
  std::vector<size_t> release;  // held buckets neither this layer nor the next one needs
  // Gathered in this order: this layer's buckets not held yet (only the first request has
  // any), then the next layer's not held yet (the prefetch).
  std::vector<size_t> gather;
  size_t prefetched = 0;  // how many of `gather`, at its end, are the next layer's
  std::vector<size_t> held;  // held when the request returns, ascending
};

struct FsdpPlan {
  Zero2Plan zero2;  // ownership, gradient shard, bucket pool: zero2's, unchanged
  std::vector<std::vector<size_t>> layer_params;   // per layer: its parameter indices
  std::vector<std::vector<size_t>> layer_buckets;  // per layer: its buckets, ascending
  std::vector<size_t> access_order;  // the layer of each request of a pass, in order
  std::vector<FsdpRequest> pass;     // per request of access_order: what it does
  std::vector<size_t> staging_offset;  // per bucket: where its N s_b gathered floats go
  size_t staging_elements = 0;         // the staging arena: max over buckets of offset + N s_b
  // Parameter floats a rank keeps between steps: its shard, zero2.shard_elements.
  size_t shard_elements() const { return zero2.shard_elements; }
  // N s_b: bucket b gathered (padded).
  size_t gathered_elements(size_t b) const { return zero2.world_size * zero2.slice[b]; }
};

// The Mlp's layers: {{0, 1}, {2, 3}, ...}, `layers` linear layers (weight, bias each).
std::vector<std::vector<size_t>> MlpLayerParameters(size_t layers);

// The order in which the Mlp asks for its `layers` layers in a training pass: 0..K-1, then
// K-1..1 (2K - 1 requests; K = 1: just 0).
std::vector<size_t> MlpLayerAccessOrder(size_t layers);

// The plan for parameters of `counts` elements (all > 0) grouped into `layer_params` (every
// parameter in exactly one layer), over `world_size` ranks, its pass the Mlp's
// (MlpLayerAccessOrder(layer_params.size())).
// Errors: INVALID_ARGUMENT for a count of 0 ("model.frozen_parameters: fsdp ..."), a parameter
// in no layer or in two, an index out of range; PlanZero2's.
absl::StatusOr<FsdpPlan> PlanFsdp(const std::vector<size_t>& counts,
                                  std::vector<std::vector<size_t>> layer_params,
                                  size_t world_size, const BucketLayoutOptions& options);

}  // namespace ringleader

#endif  // RINGLEADER_PLAN_FSDP_PLAN_H_
