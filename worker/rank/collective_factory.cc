#include "worker/rank/collective_factory.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/spec_kinds.h"
#include "common/status_macros.h"
#include "worker/collective/shm/shm_collective.h"
#include "worker/coordinator_client/coordinator_key_value_store.h"
#include "worker/rank/gpu/gpu_model_runner.h"

namespace ringleader {

CollectiveFactory MakeCollectiveFactory(CoordinatorClient* client, const GlooOptions& gloo) {
  return [client, gloo](
             const v1::Assignment& a, const ComputePlacement& placement,
             const RendezvousProgress& progress) -> absl::StatusOr<std::unique_ptr<Collective>> {
    auto store = std::make_shared<CoordinatorKeyValueStore>(client, a.job_id(), a.generation());
    const std::string prefix = absl::StrCat(a.job_id(), "/", a.generation(), "/");
    const absl::Duration collective_timeout = absl::Milliseconds(a.spec().collective_timeout_ms());
    const int rank = static_cast<int>(a.rank());
    const int world_size = static_cast<int>(a.world_size());
    ASSIGN_OR_RETURN(const Backend backend, ParseBackend(a.spec().backend()));
    if (backend == Backend::kNccl) {
      RankNcclOptions nccl;
      nccl.init_timeout = gloo.rendezvous_timeout;
      nccl.collective_timeout = collective_timeout;
      if (progress) {
        progress(RendezvousStage::kExchangingAddresses, "creating the NCCL communicator");
      }
      return CreateRankNcclCollective(store, prefix, rank, world_size, placement, nccl);
    }
    // gloo: over this host's shared memory when every rank can map it, else TCP.
    if (a.spec().sync().shared_memory()) {
      ShmOptions shm;
      shm.rendezvous_timeout = gloo.rendezvous_timeout;
      shm.collective_timeout = collective_timeout;
      shm.clock = gloo.clock;
      shm.on_progress = progress;
      ASSIGN_OR_RETURN(ShmRendezvous on_host,
                       CreateShmCollective(store, prefix, rank, world_size, shm));
      if (on_host.collective != nullptr) return std::move(on_host.collective);
      std::fprintf(stderr,
                   "[ringleader-rank] rank %d: not every rank can map this host's shared memory "
                   "(%s): using gloo over TCP\n",
                   rank, on_host.unavailable.c_str());
    }
    GlooOptions options = gloo;
    options.collective_timeout = collective_timeout;
    options.on_progress = progress;
    return CreateGlooCollective(store, prefix, rank, world_size, options);
  };
}

PairCollectiveFactory MakePreflightPairFactory(CoordinatorClient* client,
                                               const v1::Assignment& assignment,
                                               const GlooOptions& gloo) {
  return [client, assignment, gloo](const std::string& pair_prefix,
                                    int rank) -> absl::StatusOr<std::unique_ptr<Collective>> {
    auto store = std::make_shared<CoordinatorKeyValueStore>(client, assignment.job_id(),
                                                            assignment.generation());
    GlooOptions options = gloo;
    options.collective_timeout = absl::Milliseconds(assignment.spec().collective_timeout_ms());
    options.rendezvous_timeout = std::min(options.rendezvous_timeout, options.collective_timeout);
    options.comm_threads = 1;
    return CreateGlooCollective(
        std::move(store),
        absl::StrCat(assignment.job_id(), "/", assignment.generation(), "/", pair_prefix), rank,
        2, options);
  };
}

}  // namespace ringleader
