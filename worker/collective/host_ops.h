// What the CPU backends (gloo over TCP, shared memory) share: element-wise reductions on host
// buffers and the argument checks of every Collective operation, so both backends reduce the
// same way and refuse the same mistakes with the same words.
//
// Reductions: float32 sum/avg/max; bfloat16 (stored as uint16) sum/avg/max, each pairwise step
// computed in float and rounded to nearest even (common/bf16.h), like NCCL; uint8 sum (wrapping mod
// 256) and max; kAvg reduces as kSum and is then divided by the world size (DivideInPlace).
// Max propagates NaN so the drift check sees one anywhere.
#ifndef RINGLEADER_WORKER_COLLECTIVE_HOST_OPS_H_
#define RINGLEADER_WORKER_COLLECTIVE_HOST_OPS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "worker/collective/collective.h"

namespace ringleader {

// out[i] = a[i] (op) b[i] for n elements; out may alias a or b.
using PairwiseFn = void (*)(void* out, const void* a, const void* b, size_t n);

// The pairwise function for `op` on `dtype` (kAvg reduces as kSum); null for combinations no CPU
// backend supports (kAvg on uint8).
PairwiseFn PairwiseReduction(DataType dtype, ReduceOp op);

// Divides `count` elements of a sum by `divisor`, turning it into a mean (uint8: untouched).
void DivideInPlace(void* data, size_t count, DataType dtype, int divisor);

// INVALID_ARGUMENT naming `name` when the view has elements but no data.
absl::Status ValidateView(const TensorView& v, const char* name);
// The checks of each operation's arguments (INVALID_ARGUMENT with the fix), OK when valid.
absl::Status ValidateAllReduce(const TensorView& buf, ReduceOp op);
absl::Status ValidateBroadcast(const TensorView& buf, int root, int world_size);
absl::Status ValidateAllGather(const TensorView& in, const TensorView& out, int world_size);
absl::Status ValidateReduceScatter(const TensorView& in, const TensorView& out, ReduceOp op,
                                   int world_size);
// A per-operation timeout must be finite and >= 0 (0 = the collective's default).
absl::Status ValidateTimeout(absl::Duration timeout);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_HOST_OPS_H_
