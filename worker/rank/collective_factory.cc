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
#include "plan/memory_plan.h"
#include "worker/collective/shm/shm_collective.h"
#include "worker/coordinator_client/coordinator_key_value_store.h"
#include "worker/rank/gpu/gpu_model_runner.h"

namespace ringleader {

std::vector<WarmUpOperation> WarmUpOperationsFor(const v1::JobSpec& spec, int world_size) {
  const StrategyTraits& traits = TraitsOf(StrategyOf(spec));
  const ModelElementCounts counts = CountModelElements(spec.model());
  const size_t world = static_cast<size_t>(std::max(world_size, 1));
  const DataType wire =
      CommDtypeOf(spec) == Precision::kBf16 ? DataType::kBFloat16 : DataType::kFloat32;
  constexpr double kMiB = 1 << 20;
  // Elements of a bucket of `mb` MiB of fp32 gradients, at least 1.
  const auto bucket_elements = [](double mb) {
    return std::max<size_t>(1, static_cast<size_t>(mb * kMiB / sizeof(float)));
  };
  const size_t cap = bucket_elements(spec.sync().bucket_cap_mb());
  const auto at_most_a_bucket = [cap](uint64_t elements) {
    return static_cast<size_t>(std::max<uint64_t>(1, std::min<uint64_t>(elements, cap)));
  };

  std::vector<WarmUpOperation> ops;
  const auto add = [&ops](WarmUpOperation op) {
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  };
  add({CollectiveKind::kAllGather, world, DataType::kFloat32, ReduceOp::kSum});
  if (counts.trainable > 0) {
    const CollectiveKind gradients =
        traits.shards_gradients ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
    for (double mb : {spec.sync().first_bucket_mb(), spec.sync().bucket_cap_mb()}) {
      add({gradients, at_most_a_bucket(std::min<uint64_t>(bucket_elements(mb), counts.trainable)),
           wire, ReduceOp::kAvg});
    }
  }
  if (traits.shards_parameters) {
    add({CollectiveKind::kAllGather, at_most_a_bucket(counts.parameters), DataType::kFloat32,
         ReduceOp::kSum});
  } else if (traits.shards_optimizer_state && counts.trainable > 0) {
    const uint64_t per_rank =
        std::min<uint64_t>((counts.trainable + world - 1) / world, kZero1GatherChunkElements);
    add({CollectiveKind::kAllGather, at_most_a_bucket(per_rank * world), DataType::kFloat32,
         ReduceOp::kSum});
  }
  if (spec.drift_interval_steps() > 0 && counts.parameters > 0) {
    add({CollectiveKind::kBroadcast, at_most_a_bucket(counts.parameters), DataType::kFloat32,
         ReduceOp::kSum});
  }
  return ops;
}

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
      nccl.warm_up = WarmUpOperationsFor(a.spec(), world_size);
      // fsdp gathers its parameters beside the reduce-scatters, not behind them.
      nccl.side_channel = TraitsOf(StrategyOf(a.spec())).shards_parameters;
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
