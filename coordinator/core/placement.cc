#include "coordinator/core/placement.h"

#include <map>

namespace ringleader {

std::vector<RankPlacement> PlaceRanks(const std::vector<std::string>& hosts) {
  struct Group {
    uint32_t index = 0;
    uint32_t size = 0;
  };
  std::map<std::string, Group> groups;
  std::vector<RankPlacement> placements(hosts.size());
  for (size_t r = 0; r < hosts.size(); ++r) {
    auto [it, inserted] = groups.emplace(hosts[r], Group{});
    if (inserted) it->second.index = static_cast<uint32_t>(groups.size() - 1);
    placements[r].group_rank = it->second.index;
    placements[r].local_rank = it->second.size++;
  }
  for (size_t r = 0; r < hosts.size(); ++r) {
    placements[r].local_world_size = groups.at(hosts[r]).size;
    placements[r].group_world_size = static_cast<uint32_t>(groups.size());
  }
  return placements;
}

}  // namespace ringleader
