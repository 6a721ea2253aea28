// Test helper: the ranks of a job as threads of this process, training over gloo on loopback
// (one in-memory rendezvous store) or over shared memory, each through the real RunRank.
#ifndef RINGLEADER_WORKER_RANK_GLOO_RANKS_TEST_UTIL_H_
#define RINGLEADER_WORKER_RANK_GLOO_RANKS_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "proto/ringleader.pb.h"
#include "worker/coordinator_client/coordinator_client.h"
#include "worker/rank/training_loop.h"

namespace ringleader {

// Runs `ranks` of `spec` (empty = every rank; `spec` has its defaults applied) concurrently as
// job "job-1", generation 1, reporting to `client`; `tweak` (optional) adjusts each rank's
// options. Returns each rank's RunRank result, indexed by rank.
std::vector<RankRunResult> RunRanksOverGloo(
    const v1::JobSpec& spec, CoordinatorClient* client, std::vector<uint32_t> ranks = {},
    const std::function<void(uint32_t, TrainingLoopOptions*)>& tweak = nullptr);

// A `tweak` for RunRanksOverGloo that puts every rank on the shared-memory backend instead of
// gloo's TCP (one store for the job, prefix "job-1/1/").
std::function<void(uint32_t, TrainingLoopOptions*)> OnSharedMemory();

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_GLOO_RANKS_TEST_UTIL_H_
