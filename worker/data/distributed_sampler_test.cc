#include "worker/data/distributed_sampler.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace ringleader {
namespace {

// Every rank's indices for one epoch, concatenated in the padded-list order (position k belongs
// to rank k % world).
std::vector<size_t> Interleave(size_t n, uint32_t world, uint64_t seed, uint32_t epoch) {
  std::vector<std::vector<size_t>> per_rank;
  for (uint32_t r = 0; r < world; ++r) {
    per_rank.push_back(DistributedSampler(n, world, r, seed).Indices(epoch));
  }
  std::vector<size_t> out;
  for (size_t k = 0; k < per_rank[0].size(); ++k) {
    for (uint32_t r = 0; r < world; ++r) out.push_back(per_rank[r][k]);
  }
  return out;
}

TEST(DistributedSamplerTest, RanksCoverTheEpochDisjointlyWhenNDivides) {
  const size_t n = 120;
  const uint32_t world = 4;
  std::multiset<size_t> all;
  for (uint32_t r = 0; r < world; ++r) {
    DistributedSampler s(n, world, r, 5);
    EXPECT_EQ(s.num_samples(), 30u);
    for (size_t i : s.Indices(0)) all.insert(i);
  }
  ASSERT_EQ(all.size(), n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(all.count(i), 1u) << i;
}

TEST(DistributedSamplerTest, PaddingRepeatsFromTheStartOfThePermutation) {
  const size_t n = 10;
  const uint32_t world = 4;  // 3 per rank, 12 in all: 2 padded
  DistributedSampler rank0(n, world, 0, 9);
  EXPECT_EQ(rank0.num_samples(), 3u);
  EXPECT_EQ(rank0.total_size(), 12u);
  const std::vector<size_t> perm = rank0.EpochPermutation(2);
  std::vector<size_t> expected = perm;
  expected.push_back(perm[0]);
  expected.push_back(perm[1]);
  EXPECT_EQ(Interleave(n, world, 9, 2), expected);
  // Every example is seen; exactly the first two of the permutation twice.
  std::map<size_t, int> seen;
  for (size_t i : expected) ++seen[i];
  EXPECT_EQ(seen.size(), n);
  EXPECT_EQ(seen[perm[0]], 2);
  EXPECT_EQ(seen[perm[1]], 2);
}

TEST(DistributedSamplerTest, PaddingWrapsWhenWorldExceedsDataset) {
  // torch repeats the permutation as often as needed: n = 3, world = 8.
  const std::vector<size_t> all = Interleave(3, 8, 1, 0);
  const std::vector<size_t> perm = DistributedSampler(3, 8, 0, 1).EpochPermutation(0);
  ASSERT_EQ(all.size(), 8u);
  for (size_t k = 0; k < all.size(); ++k) EXPECT_EQ(all[k], perm[k % 3]) << k;
}

TEST(DistributedSamplerTest, SamePermutationOnEveryRankDifferentAcrossEpochs) {
  const size_t n = 1000;
  const std::vector<size_t> p0 = DistributedSampler(n, 3, 0, 17).EpochPermutation(4);
  const std::vector<size_t> p2 = DistributedSampler(n, 3, 2, 17).EpochPermutation(4);
  EXPECT_EQ(p0, p2);
  std::vector<size_t> sorted = p0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<size_t> identity(n);
  std::iota(identity.begin(), identity.end(), size_t{0});
  EXPECT_EQ(sorted, identity) << "a permutation of [0, n)";
  EXPECT_NE(p0, identity) << "shuffled";
  EXPECT_NE(p0, DistributedSampler(n, 3, 0, 17).EpochPermutation(5));
  EXPECT_NE(p0, DistributedSampler(n, 3, 0, 18).EpochPermutation(4));
  // Repeatable: the same (seed, epoch) always gives the same order.
  EXPECT_EQ(DistributedSampler(n, 3, 1, 17).Indices(4), DistributedSampler(n, 3, 1, 17).Indices(4));
}

TEST(DistributedSamplerTest, ShuffleOffKeepsDatasetOrder) {
  DistributedSampler s(7, 2, 1, 3, /*shuffle=*/false);
  EXPECT_EQ(s.Indices(0), (std::vector<size_t>{1, 3, 5, 0}));
}

TEST(DistributedSamplerTest, EmptyDataset) {
  DistributedSampler s(0, 2, 1, 3);
  EXPECT_EQ(s.num_samples(), 0u);
  EXPECT_TRUE(s.Indices(0).empty());
}

TEST(DistributedSamplerTest, FisherYatesIsUniformEnough) {
  // Each of the 6 orders of 3 elements should appear about 1/6 of the time over many epochs.
  std::map<std::vector<size_t>, int> counts;
  for (uint32_t epoch = 0; epoch < 6000; ++epoch) {
    ++counts[DistributedSampler(3, 1, 0, 0).EpochPermutation(epoch)];
  }
  ASSERT_EQ(counts.size(), 6u);
  for (const auto& [order, count] : counts) {
    EXPECT_GT(count, 850);
    EXPECT_LT(count, 1150);
  }
}

}  // namespace
}  // namespace ringleader
