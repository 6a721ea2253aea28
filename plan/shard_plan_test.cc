#include "plan/shard_plan.h"

#include <vector>

#include "gtest/gtest.h"

namespace ringleader {
namespace {

using Ranges = std::vector<ElementRange>;

// Every element of every parameter is owned by exactly one rank, shards are contiguous in the
// concatenation and in rank order, and each fits in the capacity.
void ExpectPartition(const std::vector<size_t>& counts, size_t world) {
  const ShardPlan plan = PlanShards(counts, world);
  ASSERT_EQ(plan.owned.size(), world);
  size_t total = 0;
  for (size_t c : counts) total += c;
  EXPECT_EQ(plan.total, total);
  EXPECT_EQ(plan.capacity, (total + world - 1) / world);
  size_t next = 0;  // the next element of the concatenation to be owned
  for (size_t r = 0; r < world; ++r) {
    ASSERT_EQ(plan.owned[r].size(), counts.size());
    EXPECT_LE(plan.owned_count(r), plan.capacity) << "rank " << r;
    EXPECT_EQ(plan.owned_count(r), total * (r + 1) / world - total * r / world) << "rank " << r;
    size_t offset = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      const ElementRange& range = plan.owned[r][i];
      if (!range.empty()) {
        EXPECT_LE(range.end, counts[i]);
        EXPECT_EQ(offset + range.begin, next) << "rank " << r << " parameter " << i;
        next = offset + range.end;
      } else {
        EXPECT_EQ(range, ElementRange{}) << "an empty range is {0, 0}";
      }
      offset += counts[i];
    }
  }
  EXPECT_EQ(next, total);
}

TEST(ShardPlanTest, TheDocumentedExample) {
  const ShardPlan plan = PlanShards({6, 3, 0, 4}, 3);
  EXPECT_EQ(plan.total, 13u);
  EXPECT_EQ(plan.capacity, 5u);
  EXPECT_EQ(plan.counts, (std::vector<size_t>{6, 3, 0, 4}));
  EXPECT_EQ(plan.owned[0], (Ranges{{0, 4}, {}, {}, {}}));
  EXPECT_EQ(plan.owned[1], (Ranges{{4, 6}, {0, 2}, {}, {}}));
  EXPECT_EQ(plan.owned[2], (Ranges{{}, {2, 3}, {}, {0, 4}}));
}

TEST(ShardPlanTest, OneRankOwnsEverything) {
  const ShardPlan plan = PlanShards({5, 0, 7}, 1);
  EXPECT_EQ(plan.capacity, 12u);
  EXPECT_EQ(plan.owned[0], (Ranges{{0, 5}, {}, {0, 7}}));
}

TEST(ShardPlanTest, SizesNotDivisibleByTheWorld) {
  // 10 elements over 4 ranks: 2, 3, 2, 3 (floor(10 r / 4) boundaries 0, 2, 5, 7, 10).
  const ShardPlan plan = PlanShards({10}, 4);
  EXPECT_EQ(plan.capacity, 3u);
  EXPECT_EQ(plan.owned[0], (Ranges{{0, 2}}));
  EXPECT_EQ(plan.owned[1], (Ranges{{2, 5}}));
  EXPECT_EQ(plan.owned[2], (Ranges{{5, 7}}));
  EXPECT_EQ(plan.owned[3], (Ranges{{7, 10}}));
  ExpectPartition({10}, 4);
  ExpectPartition({7, 1, 13}, 3);
  ExpectPartition({784 * 256, 256, 256 * 128, 128, 128 * 10, 10}, 4);
  ExpectPartition({784 * 256, 256, 256 * 128, 128, 128 * 10, 10}, 7);
}

TEST(ShardPlanTest, MoreRanksThanElementsLeavesEmptyShards) {
  const ShardPlan plan = PlanShards({2, 1}, 5);
  EXPECT_EQ(plan.capacity, 1u);
  // Boundaries floor(3 r / 5): 0, 0, 1, 1, 2, 3.
  EXPECT_EQ(plan.owned[0], (Ranges{{}, {}}));
  EXPECT_EQ(plan.owned[1], (Ranges{{0, 1}, {}}));
  EXPECT_EQ(plan.owned[2], (Ranges{{}, {}}));
  EXPECT_EQ(plan.owned[3], (Ranges{{1, 2}, {}}));
  EXPECT_EQ(plan.owned[4], (Ranges{{}, {0, 1}}));
  EXPECT_EQ(plan.owned_count(0), 0u);
  ExpectPartition({2, 1}, 5);
  ExpectPartition({1}, 1024);
}

TEST(ShardPlanTest, NoElementsAtAll) {
  const ShardPlan plan = PlanShards({0, 0}, 3);
  EXPECT_EQ(plan.total, 0u);
  EXPECT_EQ(plan.capacity, 0u);
  for (const Ranges& owned : plan.owned) EXPECT_EQ(owned, (Ranges{{}, {}}));
  EXPECT_EQ(PlanShards({}, 2).owned, (std::vector<Ranges>{{}, {}}));
}

TEST(ShardPlanTest, AWorldOfZeroIsOneRank) {
  const ShardPlan plan = PlanShards({4}, 0);
  EXPECT_EQ(plan.world_size, 1u);
  EXPECT_EQ(plan.owned[0], (Ranges{{0, 4}}));
}

}  // namespace
}  // namespace ringleader
