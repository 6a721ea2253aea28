#include "worker/rank/gloo_ranks_test_util.h"

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/collective/shm/shm_collective.h"

namespace ringleader {

std::vector<RankRunResult> RunRanksOverGloo(
    const v1::JobSpec& spec, CoordinatorClient* client, std::vector<uint32_t> ranks,
    const std::function<void(uint32_t, TrainingLoopOptions*)>& tweak) {
  if (ranks.empty()) {
    for (uint32_t r = 0; r < spec.world_size(); ++r) ranks.push_back(r);
  }
  auto store = std::make_shared<InMemoryKeyValueStore>();
  std::vector<RankRunResult> results(spec.world_size());
  std::vector<std::thread> threads;
  for (uint32_t rank : ranks) {
    threads.emplace_back([&, rank] {
      v1::Assignment assignment;
      assignment.set_job_id("job-1");
      assignment.set_generation(1);
      assignment.set_rank(rank);
      assignment.set_world_size(spec.world_size());
      *assignment.mutable_spec() = spec;
      assignment.set_spec_fingerprint(JobSpecFingerprint(spec));
      TrainingLoopOptions options;
      options.worker_id = absl::StrCat("w", rank);
      options.log = [](const std::string&) {};
      options.make_collective = [store](const v1::Assignment& a, const ComputePlacement&,
                                        const RendezvousProgress& progress) {
        GlooOptions gloo;
        gloo.on_progress = progress;
        gloo.rendezvous_timeout = absl::Seconds(20);
        gloo.collective_timeout = absl::Milliseconds(a.spec().collective_timeout_ms());
        return CreateGlooCollective(store, "job-1/1/", static_cast<int>(a.rank()),
                                    static_cast<int>(a.world_size()), gloo);
      };
      if (tweak) tweak(rank, &options);
      results[rank] = RunRank(assignment, client, options);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

std::function<void(uint32_t, TrainingLoopOptions*)> OnSharedMemory() {
  auto store = std::make_shared<InMemoryKeyValueStore>();
  return [store](uint32_t, TrainingLoopOptions* options) {
    options->make_collective =
        [store](const v1::Assignment& a, const ComputePlacement&,
                const RendezvousProgress& progress) -> absl::StatusOr<std::unique_ptr<Collective>> {
      ShmOptions shm;
      shm.collective_timeout = absl::Milliseconds(a.spec().collective_timeout_ms());
      shm.on_progress = progress;
      absl::StatusOr<ShmRendezvous> made = CreateShmCollective(
          store, "job-1/1/", static_cast<int>(a.rank()), static_cast<int>(a.world_size()), shm);
      if (!made.ok()) return made.status();
      if (made->collective == nullptr) return absl::UnavailableError(made->unavailable);
      return std::move(made->collective);
    };
  };
}

}  // namespace ringleader
