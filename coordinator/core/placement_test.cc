#include "coordinator/core/placement.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;

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

TEST(PlaceRanksTest, ListsTheGpusOfEachHostsRanksInLocalRankOrder) {
  // host b: ranks 0 (GPU 5), 2 (GPU 3); host a: ranks 1 (GPU 0), 3 (a CPU worker).
  const std::vector<RankPlacement> p = PlaceRanks({"b", "a", "b", "a"}, {5, 0, 3, -1});
  ASSERT_EQ(p.size(), 4u);
  EXPECT_THAT(p[0].local_gpus, ElementsAre(5, 3));
  EXPECT_THAT(p[2].local_gpus, ElementsAre(5, 3));
  EXPECT_EQ(p[2].local_gpus[p[2].local_rank], 3);
  EXPECT_THAT(p[1].local_gpus, ElementsAre(0, -1));
  EXPECT_THAT(p[3].local_gpus, ElementsAre(0, -1));
  for (const RankPlacement& one : p) EXPECT_EQ(one.local_gpus.size(), one.local_world_size);
  // Without GPU indices every rank is on the CPU.
  EXPECT_THAT(PlaceRanks({"h", "h"})[0].local_gpus, ElementsAre(-1, -1));
}

}  // namespace
}  // namespace ringleader
