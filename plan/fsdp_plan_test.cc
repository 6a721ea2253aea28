#include "plan/fsdp_plan.h"

#include <vector>

#include "gtest/gtest.h"

namespace ringleader {
namespace {

// Layers [2, 3, 2]: fc1.weight 6, fc1.bias 3, fc2.weight 6, fc2.bias 2. First bucket 2
// elements, cap 4: b0 = [fc2.bias] (2), b1 = [fc2.weight] (6), b2 = [fc1.bias fc1.weight] (9):
// layer 1's bias and weight lie in two buckets.
BucketLayoutOptions SmallBuckets() {
  BucketLayoutOptions o;
  o.first_bucket_bytes = 8;
  o.bucket_cap_bytes = 16;
  return o;
}

TEST(FsdpPlanTest, LayersGatherTheBucketsHoldingTheirParameters) {
  absl::StatusOr<FsdpPlan> plan = PlanFsdp({6, 3, 6, 2}, MlpLayerParameters(2), 2, SmallBuckets());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->zero2.layout.buckets.size(), 3u);
  EXPECT_EQ(plan->layer_buckets[0], (std::vector<size_t>{2}));
  EXPECT_EQ(plan->layer_buckets[1], (std::vector<size_t>{0, 1}));
  // Slices 1, 3, 5: padded buckets 2, 6, 10; layer 1 holds 2 + 6, layer 0 holds 10.
  EXPECT_EQ(plan->staging_elements, 10u);
  EXPECT_EQ(plan->shard_elements(), 9u);
  EXPECT_EQ(plan->zero2.shards.owned_count(0) + plan->zero2.shards.owned_count(1), 17u);
}

TEST(FsdpPlanTest, OneBucketPerLayer) {
  BucketLayoutOptions o;
  o.first_bucket_bytes = 4 * 4;
  o.bucket_cap_bytes = 4 * 4;
  // b0 = [fc2.bias fc2.weight] (8), b1 = [fc1.bias fc1.weight] (9); N = 4: slices 2, 3.
  absl::StatusOr<FsdpPlan> plan = PlanFsdp({6, 3, 6, 2}, MlpLayerParameters(2), 4, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->layer_buckets[0], (std::vector<size_t>{1}));
  EXPECT_EQ(plan->layer_buckets[1], (std::vector<size_t>{0}));
  EXPECT_EQ(plan->staging_elements, 12u);
  EXPECT_EQ(plan->shard_elements(), 5u);
}

TEST(FsdpPlanTest, RefusesFrozenParametersAndBadLayers) {
  absl::StatusOr<FsdpPlan> frozen = PlanFsdp({6, 0, 6, 2}, MlpLayerParameters(2), 2, {});
  EXPECT_EQ(frozen.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(frozen.status().message().find("model.frozen_parameters"), absl::string_view::npos);
  EXPECT_FALSE(PlanFsdp({6, 3, 6, 2}, {{0, 1}, {2}}, 2, {}).ok()) << "parameter 3 in no layer";
  EXPECT_FALSE(PlanFsdp({6, 3, 6, 2}, {{0, 1}, {1, 2, 3}}, 2, {}).ok()) << "parameter 1 twice";
  EXPECT_FALSE(PlanFsdp({6, 3, 6, 2}, {{0, 1}, {2, 7}}, 2, {}).ok()) << "out of range";
  EXPECT_FALSE(PlanFsdp({6, 3, 6, 2}, MlpLayerParameters(2), 0, {}).ok()) << "world 0";
}

}  // namespace
}  // namespace ringleader
