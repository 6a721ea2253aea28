#include "plan/zero2_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringleader {

size_t Zero2Plan::ShardPosition(size_t rank, size_t t) const {
  const size_t b = layout.param_bucket[t];
  const size_t in_bucket = layout.param_offset[t] - layout.buckets[b].offset;
  const size_t slice_begin = rank * slice[b];
  return shard_offset[b] + std::max(in_bucket, slice_begin) - slice_begin;
}

BucketLayoutOptions Zero2LayoutOptions(double first_bucket_mb, double bucket_cap_mb) {
  constexpr double kMiB = 1024.0 * 1024.0;
  BucketLayoutOptions l;
  l.first_bucket_bytes = static_cast<size_t>(std::max(1.0, first_bucket_mb * kMiB));
  l.bucket_cap_bytes = static_cast<size_t>(std::max(1.0, bucket_cap_mb * kMiB));
  l.element_bytes = sizeof(float);
  l.extra_tail = 0;
  return l;
}

absl::StatusOr<Zero2Plan> PlanZero2(const std::vector<size_t>& counts, size_t world_size,
                                    const BucketLayoutOptions& options) {
  if (world_size == 0) return absl::InvalidArgumentError("zero2 plan: world_size is 0");
  Zero2Plan plan;
  plan.world_size = world_size;
  std::vector<size_t> trainable_counts;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    plan.trainable.push_back(i);
    trainable_counts.push_back(counts[i]);
  }
  if (plan.trainable.empty()) {
    return absl::InvalidArgumentError("zero2 plan: every parameter is frozen");
  }
  BucketLayoutOptions layout_options = options;
  layout_options.extra_tail = 0;
  auto layout = ComputeBucketLayout(trainable_counts,
                                    ReverseRegistrationOrder(trainable_counts.size()),
                                    layout_options);
  if (!layout.ok()) return layout.status();
  plan.layout = *std::move(layout);

  const size_t n = world_size;
  const size_t nb = plan.layout.buckets.size();
  for (size_t b = 0; b < nb; ++b) {
    const size_t s = (plan.layout.buckets[b].count + n - 1) / n;
    plan.slice.push_back(s);
    plan.shard_offset.push_back(plan.shard_elements);
    plan.shard_elements += s;
    plan.pool_buffer_elements = std::max(plan.pool_buffer_elements, s * n);
  }
  plan.pool_buffers = std::min(kZero2PoolBuffers, nb);

  ShardPlan& shards = plan.shards;
  shards.world_size = n;
  shards.counts = counts;
  for (size_t c : counts) shards.total += c;
  shards.owned.assign(n, std::vector<ElementRange>(counts.size()));
  for (size_t r = 0; r < n; ++r) {
    for (size_t t = 0; t < plan.trainable.size(); ++t) {
      const size_t b = plan.layout.param_bucket[t];
      const size_t begin = plan.layout.param_offset[t] - plan.layout.buckets[b].offset;
      const size_t end = begin + plan.layout.param_count[t];
      const size_t lo = std::max(begin, r * plan.slice[b]);
      const size_t hi = std::min(end, (r + 1) * plan.slice[b]);
      if (lo < hi) shards.owned[r][plan.trainable[t]] = ElementRange{lo - begin, hi - begin};
    }
    shards.capacity = std::max(shards.capacity, shards.owned_count(r));
  }
  return plan;
}

}  // namespace ringleader
