// Per-rank memory of a built-in trainer job, predicted from its spec, for every strategy: what
// `ringleader plan` prints before submitting (the way people read DeepSpeed's memory
// estimator) and what `ringleader status` shows beside each rank's measured figures.
//
// Notation (all counts are fp32 elements; a byte figure is 4 x elements unless said):
//   P   parameter elements of the MLP: sum over its linear layers of in x out (weight) + out
//       (bias); layers [4, 3, 2] -> P = 4*3 + 3 + 3*2 + 2 = 23
//   T   trainable elements: P minus the model.frozen_parameters (those get no gradient and no
//       optimizer state)
//   N   world size; r the rank (0..N-1)
//   S_r rank r's shard of the T trainable elements: floor(T(r+1)/N) - floor(Tr/N), the split of
//       plan/shard_plan.h; C = ceil(T/N) bounds every S_r
//   G   zero1's gather chunk: min(C, kZero1GatherChunkElements = 2^18) elements
//   m   1 when optimizer.momentum > 0 (SGD keeps one fp32 momentum buffer per stepped
//       element), else 0
//   b   1 when sync.comm_dtype is bf16, else 0
//   a   1 when sync.gradient_accumulation_steps > 1, else 0
//   zero2's figures come from its bucket layout (plan/zero2_plan.h: the DDP reducer's
//   initial buckets over the trainable parameters, no readiness float), bucket b of c_b
//   elements split in N slices of s_b = ceil(c_b / N):
//   Z   the gradient shard, Σ_b s_b (the same on every rank; >= C, padding included)
//   K   the bucket pool: min(2, buckets) buffers of max_b N s_b elements (>= the largest bucket,
//       so >= the largest trainable parameter)
//   O_r rank r's owned elements (the real elements of its slices); Q = max_r O_r
//   H   zero2's gather chunk: min(Q, 2^18)
//   fsdp uses zero2's plan over every parameter (frozen ones too: they are sharded with their
//   buckets and reduce as zeros; O_r counts the trainable ones only, which have momentum), and
//   S   its staging arena (plan/fsdp_plan.h): room for the padded buckets N s_b of the layer
//       computing and of the next one, prefetched, each bucket in a place of its own clear of
//       every bucket it is held with (about two layers' buckets)
//
// Per rank, in bytes:
//
//   strategy  parameters      gradients        optimizer  comm buffers
//   ddp       4P              4(T + 1)         4T m       2(T + 1) b
//   zero1     4P              4(T + 1)         4S_r m     2(T + 1) b + 4G(N + 1)
//   zero2     4P              4(Z(1 + a) + K)  4O_r m     4H(N + 1) + 2(Z + K) b
//   fsdp      4(Z + S)        4(Z(1 + a) + K)  4O_r m     2(Z + K) b
//
// - ddp, zero1 (what the ranks run today): the reducer's arena holds every trainable gradient
//   plus one readiness float (worker/sync/reducer.h), and with bf16 communication a bf16 wire
//   copy of the whole arena. zero1 steps only its shard (4S_r of momentum) and all-gathers the
//   updated parameters chunk by chunk through a send buffer of G floats and a receive buffer of
//   N x G floats (worker/sync/shard_sync.h), at most (N + 1) MiB whatever the model.
// - zero2 (worker/sync/zero2_reducer.h): backward writes into a pool of two bucket-sized
//   buffers; each bucket is reduce-scattered into the rank's gradient shard while backward fills
//   the next, so a rank holds its shard (Z) and the pool (K), never a full-size arena. With
//   gradient accumulation every micro-batch is reduce-scattered into a second shard (aZ) and
//   added to the first. It steps its owned elements (O_r of momentum) and all-gathers the updated parameters
//   through zero1's chunked staging (H(N + 1) floats): the parameters are per-layer tensors, not
//   one flat buffer, so the gather is not in place. With bf16 communication each pool buffer
//   has a bf16 copy and the reduced slices land in a bf16 shard (2(Z + K) bytes). The pool dominates unless the buckets are small next to the model:
//   gradients + optimizer fall to <= 40% of ddp's at 4 ranks only when 2 buckets are below
//   ~30% of T (sync.bucket_cap_mb well under the model's size, no single parameter that large).
// - fsdp (worker/sync/fsdp_parameters.h): zero2's gradients and optimizer; the
//   parameters are kept as the rank's slice of every bucket (Z, laid out like the gradient
//   shard) and each layer's buckets are all-gathered into the staging arena while the layer
//   before it runs, in forward and again in backward, two layers at a time (S, allocated once,
//   counted with the parameters). No gather after the step, so no communication buffer: a gather sends from the
//   shard and receives into the staging. (zero1's gather staging, G(N + 1) floats, costs more
//   than the momentum it saves on models under a few million parameters; it is bounded, the
//   saving is not.)
// - Not counted: activations (batch-size dependent), the data set, the model's buffers
//   (model.with_buffers), the collective library's own transport buffers, and the GPU trainer's
//   bf16 mixed-precision copies (mixed_precision: bf16).
//
// Pure functions: no I/O, the same answer in every process.
#ifndef RINGLEADER_PLAN_MEMORY_PLAN_H_
#define RINGLEADER_PLAN_MEMORY_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// Elements per rank of one chunk of zero1's parameter gather (worker/sync/shard_sync.h uses this
// constant): 1 MiB of floats.
inline constexpr uint64_t kZero1GatherChunkElements = uint64_t{1} << 18;

// The strategies a plan covers, in table order.
const std::vector<std::string>& PlannedStrategies();

// The element counts of the formulas above for `model` (an MLP; frozen parameters excluded
// from `trainable`). All zero for an unknown kind or fewer than 2 layer sizes.
struct ModelElementCounts {
  uint64_t parameters = 0;     // P
  uint64_t trainable = 0;      // T
  uint64_t largest_layer = 0;  // the largest layer's elements (weight + bias)
};
ModelElementCounts CountModelElements(const v1::ModelSpec& model);

// Rank `rank`'s predicted bytes under `strategy` for `spec` (defaults applied; its own
// strategy and world size are ignored) at `world_size` ranks. total_bytes is the sum.
// INVALID_ARGUMENT naming the argument: an unknown strategy, world_size 0, rank >= world_size,
// a command job or a model kind other than mlp.
absl::StatusOr<v1::RankMemory> PredictRankMemory(const v1::JobSpec& spec,
                                                 const std::string& strategy,
                                                 uint32_t world_size, uint32_t rank);

// Every strategy of PlannedStrategies() for `spec` (defaults applied) at `world_size` ranks:
// each the rank that holds the most, its ratio to ddp's total, and whether it runs today
// (ddp, zero1: yes, gloo and nccl; zero2: gloo and nccl with the settings
// ValidateZero2Combination accepts, else unavailable with a note such as "not with
// sync.gradient_accumulation_steps"; fsdp: the same with ValidateFsdpCombination, e.g. "not
// with model.frozen_parameters"). Errors as PredictRankMemory.
absl::StatusOr<v1::MemoryPlan> PlanMemory(const v1::JobSpec& spec, uint32_t world_size);

// "512 B", "1.50 KiB", "91.9 KiB", "919 KiB", "1.23 MiB", "4.00 GiB" (binary units; 3
// significant digits from KiB on).
std::string FormatBytes(uint64_t bytes);

}  // namespace ringleader

#endif  // RINGLEADER_PLAN_MEMORY_PLAN_H_
