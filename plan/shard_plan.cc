#include "plan/shard_plan.h"

#include <algorithm>

namespace ringleader {

size_t ShardPlan::owned_count(size_t rank) const {
  size_t n = 0;
  for (const ElementRange& range : owned[rank]) n += range.size();
  return n;
}

ShardPlan PlanShards(const std::vector<size_t>& counts, size_t world_size) {
  ShardPlan plan;
  plan.world_size = std::max<size_t>(world_size, 1);
  const size_t n = plan.world_size;
  plan.counts = counts;
  for (size_t c : counts) plan.total += c;
  plan.capacity = (plan.total + n - 1) / n;
  plan.owned.assign(n, std::vector<ElementRange>(counts.size()));
  // P * r fits in 64 bits for any model that fits in memory (P < 2^44 with r < 2^20).
  for (size_t r = 0; r < n; ++r) {
    const size_t lo = plan.total * r / n;
    const size_t hi = plan.total * (r + 1) / n;
    size_t offset = 0;  // where parameter i starts in the concatenation
    for (size_t i = 0; i < counts.size(); ++i) {
      const size_t begin = std::max(lo, offset);
      const size_t end = std::min(hi, offset + counts[i]);
      if (begin < end) plan.owned[r][i] = ElementRange{begin - offset, end - offset};
      offset += counts[i];
    }
  }
  return plan;
}

}  // namespace ringleader
