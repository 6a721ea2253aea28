#include "plan/zero2_plan.h"

#include <vector>

#include "gtest/gtest.h"

namespace ringleader {
namespace {

using Ranges = std::vector<ElementRange>;

BucketLayoutOptions Bytes(size_t first, size_t cap) {
  BucketLayoutOptions o;
  o.first_bucket_bytes = first;
  o.bucket_cap_bytes = cap;
  return o;
}

TEST(Zero2PlanTest, TheDocumentedExample) {
  // b0 = [p3 p2] (8 + 3 = 11 elements), b1 = [p1 p0] (2 + 6 = 8), N = 3.
  absl::StatusOr<Zero2Plan> plan = PlanZero2({6, 2, 3, 8}, 3, Bytes(44, 32));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->layout.buckets.size(), 2u);
  EXPECT_EQ(plan->slice, (std::vector<size_t>{4, 3}));
  EXPECT_EQ(plan->shard_offset, (std::vector<size_t>{0, 4}));
  EXPECT_EQ(plan->shard_elements, 7u);
  EXPECT_EQ(plan->pool_buffer_elements, 12u);
  EXPECT_EQ(plan->pool_buffers, 2u);
  EXPECT_EQ(plan->shards.owned[0], (Ranges{{0, 1}, {0, 2}, {}, {0, 4}}));
  EXPECT_EQ(plan->shards.owned[1], (Ranges{{1, 4}, {}, {}, {4, 8}}));
  EXPECT_EQ(plan->shards.owned[2], (Ranges{{4, 6}, {}, {0, 3}, {}}));
  EXPECT_EQ(plan->shards.capacity, 7u);
  EXPECT_EQ(plan->ShardPosition(0, 0), 6u);  // p0[0] is element 2 of b1's slice 0
  EXPECT_EQ(plan->ShardPosition(1, 0), 4u);  // p0[1] starts rank 1's slice of b1
  EXPECT_EQ(plan->ShardPosition(2, 2), 0u);  // p2 starts rank 2's slice of b0
}

TEST(Zero2PlanTest, FrozenParametersOwnNothingAndTrainableIndicesMapBack) {
  absl::StatusOr<Zero2Plan> plan = PlanZero2({5, 0, 7}, 2, Bytes(1 << 20, 1 << 20));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->trainable, (std::vector<size_t>{0, 2}));
  ASSERT_EQ(plan->layout.buckets.size(), 1u);  // [p2 p0] = 12 elements, s = 6
  EXPECT_EQ(plan->pool_buffers, 1u) << "one bucket needs one buffer";
  EXPECT_EQ(plan->shards.owned[0], (Ranges{{}, {}, {0, 6}}));
  EXPECT_EQ(plan->shards.owned[1], (Ranges{{0, 5}, {}, {6, 7}}));
}

TEST(Zero2PlanTest, RefusesEveryParameterFrozenAndWorldZero) {
  EXPECT_FALSE(PlanZero2({0, 0}, 2, Bytes(4, 4)).ok());
  EXPECT_FALSE(PlanZero2({3}, 0, Bytes(4, 4)).ok());
}

// Every element of every trainable parameter is owned by exactly one rank, inside the slice
// that rank receives from its bucket's reduce-scatter.
TEST(Zero2PlanTest, OwnershipPartitionsEveryBucketBySlice) {
  const std::vector<size_t> counts = {17, 0, 3, 64, 1, 9, 250, 2, 0, 31};
  for (size_t world = 1; world <= 5; ++world) {
    for (size_t cap : {4u, 40u, 400u, 4000u}) {
      absl::StatusOr<Zero2Plan> plan = PlanZero2(counts, world, Bytes(cap / 2 + 4, cap));
      ASSERT_TRUE(plan.ok()) << plan.status();
      size_t capacity = 0;
      for (size_t r = 0; r < world; ++r) capacity = std::max(capacity, plan->shards.owned_count(r));
      EXPECT_EQ(plan->shards.capacity, capacity);
      for (size_t t = 0; t < plan->trainable.size(); ++t) {
        const size_t i = plan->trainable[t];
        const size_t b = plan->layout.param_bucket[t];
        const size_t in_bucket = plan->layout.param_offset[t] - plan->layout.buckets[b].offset;
        std::vector<int> owners(counts[i], 0);
        for (size_t r = 0; r < world; ++r) {
          const ElementRange& range = plan->shards.owned[r][i];
          for (size_t k = range.begin; k < range.end; ++k) {
            ++owners[k];
            const size_t e = in_bucket + k;  // element of the bucket
            EXPECT_EQ(e / plan->slice[b], r) << "world " << world << " param " << i;
            EXPECT_EQ(plan->ShardPosition(r, t) + (k - range.begin),
                      plan->shard_offset[b] + e - r * plan->slice[b]);
          }
        }
        for (size_t k = 0; k < counts[i]; ++k) {
          EXPECT_EQ(owners[k], 1) << "world " << world << " param " << i << " element " << k;
        }
      }
      for (size_t r = 0; r < world; ++r) {
        EXPECT_TRUE(plan->shards.owned[r][1].empty());
        EXPECT_TRUE(plan->shards.owned[r][8].empty());
      }
    }
  }
}

}  // namespace
}  // namespace ringleader
