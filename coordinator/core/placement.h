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
};

// One placement per rank; `hosts[r]` is the host of rank r.
std::vector<RankPlacement> PlaceRanks(const std::vector<std::string>& hosts);

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_PLACEMENT_H_
