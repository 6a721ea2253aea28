// The collectives of strategy zero1 (plan/shard_plan.h): after each optimizer step every rank's
// updated shard is all-gathered so every rank holds the full parameters, and before a
// checkpoint the momentum shards are all-gathered into full buffers (the checkpoint format of
// ddp, unchanged).
//
// Every rank calls each function at the same point with the same plan, so the collectives match
// (one all-gather each, of a fixed size). Given a ledger, each is recorded there (kAllGather,
// kTagShardGather / kTagMomentumGather, the per-rank element count) and covered by the reducer's
// next ledger check, like the buffer broadcast and the drift check.
#ifndef RINGLEADER_WORKER_SYNC_SHARD_SYNC_H_
#define RINGLEADER_WORKER_SYNC_SHARD_SYNC_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "plan/memory_plan.h"
#include "plan/shard_plan.h"
#include "worker/collective/collective.h"
#include "worker/sync/collective_ledger.h"
#include "worker/sync/tensor_memory.h"

namespace ringleader {

// The parameter gather moves a shard in chunks of at most this many elements per rank (1 MiB of
// floats), so its staging stays (world + 1) MiB however big the model.
// (The memory plan predicts the same staging: one constant, plan/memory_plan.h.)
inline constexpr size_t kGatherChunkElements = kZero1GatherChunkElements;
// Elements per rank of one gather chunk for `plan`: min(plan.capacity, kGatherChunkElements).
size_t GatherChunkElements(const ShardPlan& plan);

struct ShardSyncOptions {
  absl::Duration timeout = absl::ZeroDuration();  // per collective (0 = the collective's default)
  TensorMemory* memory = nullptr;  // where the parameters live (null = host); not owned
  CollectiveLedger* ledger = nullptr;  // not owned; null = not recorded
  // If set: receives the bytes of the staging buffers the call allocated in `memory` (and freed
  // before returning): AllGatherParameterShards' send and receive buffers,
  // GatherChunkElements(plan) x (world + 1) floats. For the rank's memory report. Not owned.
  size_t* staging_bytes = nullptr;
};

// Packs this rank's owned elements of `params` (one pointer per plan parameter, in `memory`)
// chunk by chunk (GatherChunkElements floats, the last zero padded), all-gathers world × chunk
// floats per chunk (one ledger record each) and writes every other rank's owned elements into
// `params`. Bytes are copied, never computed on,
// so every rank ends with exactly the values each owner computed.
// Errors: INVALID_ARGUMENT (a null comm, a plan for another world size or parameter count, a
// memory kind the collective cannot use); the collective's and the memory's, prefixed
// "parameter-shard gather: ".
absl::Status AllGatherParameterShards(Collective* comm, const ShardPlan& plan,
                                      const std::vector<float*>& params,
                                      const ShardSyncOptions& opts);

// `local[i]`: this rank's momentum buffer of parameter i (plan.owned[rank][i].size() elements,
// or empty = none yet). Returns the full buffers, one per parameter (plan.counts[i] elements),
// empty where no rank holds one — what SgdOptimizer::momentum_buffers() holds without
// sharding. Host vectors, staged through opts.memory for the collective (one all-gather of
// world × (capacity + parameters) floats: the shard and a has-buffer flag per parameter).
// Errors: as AllGatherParameterShards ("momentum-shard gather: "); INVALID_ARGUMENT for a local
// buffer of the wrong size.
absl::StatusOr<std::vector<std::vector<float>>> AllGatherMomentumShards(
    Collective* comm, const ShardPlan& plan, const std::vector<std::vector<float>>& local,
    const ShardSyncOptions& opts);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_SYNC_SHARD_SYNC_H_
