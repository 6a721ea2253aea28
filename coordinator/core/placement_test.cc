#include "coordinator/core/placement.h"

#include "gtest/gtest.h"

namespace ringleader {
namespace {

TEST(PlaceRanksTest, NumbersHostsByLowestRankAndRanksWithinAHost) {
  const std::vector<RankPlacement> p = PlaceRanks({"b", "a", "b", "c", "a"});
  ASSERT_EQ(p.size(), 5u);
  // host b: ranks 0, 2; host a: ranks 1, 4; host c: rank 3.
  EXPECT_EQ(p[0].group_rank, 0u);
  EXPECT_EQ(p[1].group_rank, 1u);
  EXPECT_EQ(p[2].group_rank, 0u);
  EXPECT_EQ(p[3].group_rank, 2u);
  EXPECT_EQ(p[4].group_rank, 1u);
  EXPECT_EQ(p[2].local_rank, 1u);
  EXPECT_EQ(p[4].local_rank, 1u);
  EXPECT_EQ(p[3].local_rank, 0u);
  EXPECT_EQ(p[0].local_world_size, 2u);
  EXPECT_EQ(p[3].local_world_size, 1u);
  for (const RankPlacement& one : p) EXPECT_EQ(one.group_world_size, 3u);
}

TEST(PlaceRanksTest, OneHost) {
  const std::vector<RankPlacement> p = PlaceRanks({"h", "h"});
  EXPECT_EQ(p[1].local_rank, 1u);
  EXPECT_EQ(p[1].local_world_size, 2u);
  EXPECT_EQ(p[1].group_rank, 0u);
  EXPECT_EQ(p[1].group_world_size, 1u);
  EXPECT_TRUE(PlaceRanks({}).empty());
}

}  // namespace
}  // namespace ringleader
