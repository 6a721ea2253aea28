// Where each rank of an attempt sits, as torchrun numbers it (LOCAL_RANK, LOCAL_WORLD_SIZE,
// GROUP_RANK, GROUP_WORLD_SIZE): hosts are numbered in order of their lowest rank, and the ranks
// of one host in rank order. Plain function, no state.
#ifndef RINGLEADER_COORDINATOR_CORE_PLACEMENT_H_
#define RINGLEADER_COORDINATOR_CORE_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ringleader {

struct RankPlacement {
  uint32_t local_rank = 0;
  uint32_t local_world_size = 0;
  uint32_t group_rank = 0;
  uint32_t group_world_size = 0;
  // The GPU of each rank on this rank's host, in local-rank order (local_world_size entries;
  // local_gpus[local_rank] is this rank's): Assignment.local_gpus.
  std::vector<int32_t> local_gpus;
};

// One placement per rank; `hosts[r]` is the host of rank r and `gpus[r]` its GPU index (-1: a
// CPU worker). `gpus` has one entry per rank, or none (every rank on the CPU).
std::vector<RankPlacement> PlaceRanks(const std::vector<std::string>& hosts,
                                      const std::vector<int32_t>& gpus = {});

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_PLACEMENT_H_
