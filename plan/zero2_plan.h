// Which gradient and parameter elements each rank owns under strategy zero2 (ZeRO stage 2: the
// gradients and the optimizer state are sharded, the parameters are not).
//
// The owner of an element must be the rank that reduce-scatter hands its averaged gradient to.
// ReduceScatter splits its input into world equal slices, so ownership follows the buckets
// (bucket_layout.h), not zero1's split of the concatenation (shard_plan.h):
//
//   - the trainable parameters are bucketed exactly as the DDP reducer buckets them at start
//     (reverse registration order, sync.first_bucket_mb then sync.bucket_cap_mb), without the
//     readiness tail; the layout is FIXED for the run (zero2 never rebuilds buckets);
//   - bucket b of c_b elements is padded with zeros to p_b = N x s_b, s_b = ceil(c_b / N), and
//     reduce-scattered: rank r receives slice r, bucket elements [r s_b, (r+1) s_b);
//   - rank r owns the real (unpadded) elements of that slice. A parameter lies wholly in one
//     bucket, so rank r owns at most ONE contiguous range of each parameter: a ShardPlan
//     describes it, and zero1's sharded optimizer and shard gathers run on it unchanged.
//
//   bucket layout: b0 = [p3 p2] (8 + 3 = 11 elements), b1 = [p1 p0] (2 + 6 = 8); N = 3
//     b0: s = 4, padded 12: rank 0 [0,4) = p3[0,4)  rank 1 [4,8) = p3[4,8)  rank 2 [8,11) = p2
//     b1: s = 3, padded 9:  rank 0 [0,3) = p1, p0[0,1)  rank 1 p0[1,4)  rank 2 p0[4,6)
//
// The gradient shard of a rank is its slice of every bucket back to back: Σ_b s_b floats
// (padding included, the same on every rank), bucket b's slice at shard_offset[b].
//
// Pure arithmetic, no I/O; the same on every rank for the same counts, world size and options.
#ifndef RINGLEADER_PLAN_ZERO2_PLAN_H_
#define RINGLEADER_PLAN_ZERO2_PLAN_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "plan/bucket_layout.h"
#include "plan/shard_plan.h"

namespace ringleader {

// Bucket-sized gradient buffers the zero2 reducer keeps (one being written by backward, one
// being reduce-scattered), fewer when the model has fewer buckets. worker/sync/zero2_reducer.h.
inline constexpr size_t kZero2PoolBuffers = 2;

struct Zero2Plan {
  size_t world_size = 1;
  // Over the trainable parameters only (indices into the `trainable` list, see PlanZero2).
  BucketLayout layout;
  std::vector<size_t> slice;         // per bucket: s_b = ceil(c_b / N)
  std::vector<size_t> shard_offset;  // per bucket: where slice b starts in the gradient shard
  size_t shard_elements = 0;         // Σ_b s_b: every rank's gradient shard
  size_t pool_buffer_elements = 0;   // max_b N s_b: one padded bucket
  size_t pool_buffers = 0;           // min(kZero2PoolBuffers, buckets)
  // Over ALL model parameters (a frozen one: count 0, owned by none), as zero1's plan; its
  // capacity is max_r owned_count(r), what the parameter gather moves per rank.
  ShardPlan shards;
  std::vector<size_t> trainable;  // trainable index -> model parameter index

  // Where rank r's owned elements of trainable parameter t lie in r's gradient shard (their
  // count is shards.owned[r][trainable[t]].size(); meaningless when that is 0).
  size_t ShardPosition(size_t rank, size_t t) const;
};

// The layout options zero2 uses for sync.first_bucket_mb / sync.bucket_cap_mb (the reducer's
// MiB -> bytes conversion, float32 elements, no readiness tail).
BucketLayoutOptions Zero2LayoutOptions(double first_bucket_mb, double bucket_cap_mb);

// The plan for model parameters of `counts` elements (0 for a frozen parameter) over
// `world_size` ranks. Errors: INVALID_ARGUMENT when world_size is 0 or no parameter has
// elements ("every parameter is frozen"), and ComputeBucketLayout's.
absl::StatusOr<Zero2Plan> PlanZero2(const std::vector<size_t>& counts, size_t world_size,
                                    const BucketLayoutOptions& options);

}  // namespace ringleader

#endif  // RINGLEADER_PLAN_ZERO2_PLAN_H_
