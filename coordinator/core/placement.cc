#include "coordinator/core/placement.h"

#include <map>

namespace ringleader {

std::vector<RankPlacement> PlaceRanks(const std::vector<std::string>& hosts,
                                      const std::vector<int32_t>& gpus) {
  struct Group {
    uint32_t index = 0;
    std::vector<int32_t> gpus;  // in local-rank order
  };
  std::map<std::string, Group> groups;
  std::vector<RankPlacement> placements(hosts.size());
  for (size_t r = 0; r < hosts.size(); ++r) {
    auto [it, inserted] = groups.emplace(hosts[r], Group{});
    if (inserted) it->second.index = static_cast<uint32_t>(groups.size() - 1);
    placements[r].group_rank = it->second.index;
    placements[r].local_rank = static_cast<uint32_t>(it->second.gpus.size());
    it->second.gpus.push_back(r < gpus.size() ? gpus[r] : -1);
  }
  for (size_t r = 0; r < hosts.size(); ++r) {
    const Group& group = groups.at(hosts[r]);
    placements[r].local_world_size = static_cast<uint32_t>(group.gpus.size());
    placements[r].group_world_size = static_cast<uint32_t>(groups.size());
    placements[r].local_gpus = group.gpus;
  }
  return placements;
}

}  // namespace ringleader
