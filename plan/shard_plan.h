// Which elements of the parameters each rank owns under strategy zero1 (ZeRO stage 1: the
// optimizer state is sharded, the parameters and gradients are not).
//
// The trainable parameters are concatenated in registration order: P elements. Rank r of N owns
// elements [P*r/N, P*(r+1)/N) of that concatenation (integer division), which is, per parameter,
// a sub-range (often empty). Shard sizes differ by at most one element; every shard fits in
// ceil(P/N) elements, the padded size each rank contributes to the parameter all-gather.
//
//   counts   [6, 3, 0, 4]   (a count of 0: a frozen parameter, not in the concatenation)
//   N = 3 →  P = 13, capacity 5
//     rank 0: elements [0, 4)  → param 0 [0, 4)
//     rank 1: elements [4, 8)  → param 0 [4, 6), param 1 [0, 2)
//     rank 2: elements [8, 13) → param 1 [2, 3), param 3 [0, 4)
//
// Pure arithmetic, no I/O; the same on every rank for the same counts and world size.
#ifndef RINGLEADER_PLAN_SHARD_PLAN_H_
#define RINGLEADER_PLAN_SHARD_PLAN_H_

#include <cstddef>
#include <vector>

#include "plan/element_range.h"

namespace ringleader {

struct ShardPlan {
  size_t world_size = 1;
  std::vector<size_t> counts;  // per parameter, as given to PlanShards
  size_t total = 0;     // P: elements of every parameter together
  size_t capacity = 0;  // ceil(P / world_size): the padded shard every rank all-gathers
  // owned[r][i]: rank r's elements of parameter i (indices into that parameter; empty when
  // rank r owns none of it). world_size entries of counts.size() ranges.
  std::vector<std::vector<ElementRange>> owned;

  // Elements rank r owns (<= capacity).
  size_t owned_count(size_t rank) const;
};

// The plan for parameters of `counts` elements (a 0 for a parameter that takes no part, e.g. a
// frozen one) over `world_size` ranks (>= 1; 0 is treated as 1).
ShardPlan PlanShards(const std::vector<size_t>& counts, size_t world_size);

}  // namespace ringleader

#endif  // RINGLEADER_PLAN_SHARD_PLAN_H_
