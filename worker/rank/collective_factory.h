// The rank process's CollectiveFactory (training_loop.h): the job's backend over the coordinator's
// key-value store, keys prefixed "<job>/<generation>/" so attempts never see each other's keys.
//
//   backend gloo  → with sync.shared_memory (default), ShmCollective when every rank maps this
//                   host's segment; else GlooCollective (TCP; listens on gloo.hostname)
//   backend nccl  → NcclCollective on the runner's GPU, after its compute stream
//                   (CreateRankNcclCollective; "no usable GPU: ..." in the CPU-only build),
//                   its connection warm-up the job's operations (WarmUpOperationsFor); under
//                   strategy fsdp with a side channel for the parameter gathers
//   anything else → INVALID_ARGUMENT naming `backend`
#ifndef RINGLEADER_WORKER_RANK_COLLECTIVE_FACTORY_H_
#define RINGLEADER_WORKER_RANK_COLLECTIVE_FACTORY_H_

#include <vector>

#include "proto/ringleader.pb.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/warm_up.h"
#include "worker/coordinator_client/coordinator_client.h"
#include "worker/rank/preflight_check.h"
#include "worker/rank/training_loop.h"

namespace ringleader {

// `client` must outlive the factory and every collective it makes. gloo.collective_timeout is
// replaced by the spec's collective_timeout_ms; gloo.rendezvous_timeout also bounds NCCL's
// communicator creation.
CollectiveFactory MakeCollectiveFactory(CoordinatorClient* client, const GlooOptions& gloo);

// What an nccl job of `spec` (defaults applied) at `world_size` ranks issues, for the
// communicator's connection warm-up (warm_up.h), beside the one-float all-reduce every warm-up
// starts with (barriers, evaluation sums, checkpoint flags):
//   every strategy  a one-float-per-rank all-gather (the collective ledger's step summary)
//   ddp, zero1      all-reduce (avg, sync.comm_dtype) of the first bucket and of a full bucket
//   zero2, fsdp     reduce-scatter (avg, sync.comm_dtype) of the first and of a full bucket
//   zero1, zero2    all-gather (fp32) of the parameter-shard gather's chunks
//   fsdp            all-gather (fp32) of a full bucket's parameters
//   drift check     broadcast (fp32) of the parameters (drift_interval_steps > 0)
// Buckets are sync.first_bucket_mb / sync.bucket_cap_mb of fp32 gradients, or the trainable
// parameters if fewer; no operation is larger than sync.bucket_cap_mb's elements (above a few
// MiB NCCL's choice no longer changes with size, and the warm-up's buffer stays one bucket).
// Exact duplicates are listed once.
std::vector<WarmUpOperation> WarmUpOperationsFor(const v1::JobSpec& spec, int world_size);

// The pairs of `assignment`'s pre-flight check (preflight_check.h): gloo over TCP (never shared
// memory: the check measures the network) under "<job>/<generation>/<pair prefix>", with the
// spec's collective timeout, its rendezvous bounded by it too (a partner that is gone fails
// its pair, not the check).
PairCollectiveFactory MakePreflightPairFactory(CoordinatorClient* client,
                                               const v1::Assignment& assignment,
                                               const GlooOptions& gloo);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_COLLECTIVE_FACTORY_H_
