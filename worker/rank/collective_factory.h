// The rank process's CollectiveFactory (training_loop.h): the job's backend over the coordinator's
// key-value store, keys prefixed "<job>/<generation>/" so attempts never see each other's keys.
//
//   backend gloo  → with sync.shared_memory (default), ShmCollective when every rank maps this
//                   host's segment; else GlooCollective (TCP; listens on gloo.hostname)
//   backend nccl  → NcclCollective on the runner's GPU, after its compute stream
//                   (CreateRankNcclCollective; "no usable GPU: ..." in the CPU-only build)
//   anything else → INVALID_ARGUMENT naming `backend`
#ifndef RINGLEADER_WORKER_RANK_COLLECTIVE_FACTORY_H_
#define RINGLEADER_WORKER_RANK_COLLECTIVE_FACTORY_H_

#include "worker/collective/gloo/gloo_collective.h"
#include "worker/coordinator_client/coordinator_client.h"
#include "worker/rank/preflight_check.h"
#include "worker/rank/training_loop.h"

namespace ringleader {

// `client` must outlive the factory and every collective it makes. gloo.collective_timeout is
// replaced by the spec's collective_timeout_ms; gloo.rendezvous_timeout also bounds NCCL's
// communicator creation.
CollectiveFactory MakeCollectiveFactory(CoordinatorClient* client, const GlooOptions& gloo);

// The pairs of `assignment`'s pre-flight check (preflight_check.h): gloo over TCP (never shared
// memory: the check measures the network) under "<job>/<generation>/<pair prefix>", with the
// spec's collective timeout, its rendezvous bounded by it too (a partner that is gone fails
// its pair, not the check).
PairCollectiveFactory MakePreflightPairFactory(CoordinatorClient* client,
                                               const v1::Assignment& assignment,
                                               const GlooOptions& gloo);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_COLLECTIVE_FACTORY_H_
