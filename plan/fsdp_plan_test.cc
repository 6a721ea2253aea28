#include "plan/fsdp_plan.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

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
  // Slices 1, 3, 5: padded buckets 2, 6, 10. The pass asks for layers 0, 1, 1: request 0 holds
  // both layers (b2, then b0 and b1 prefetched), so all three are placed side by side in the
  // order of their gathers.
  EXPECT_EQ(plan->access_order, (std::vector<size_t>{0, 1, 1}));
  ASSERT_EQ(plan->pass.size(), 3u);
  EXPECT_EQ(plan->pass[0].gather, (std::vector<size_t>{2, 0, 1}));
  EXPECT_EQ(plan->pass[0].prefetched, 2u);
  EXPECT_EQ(plan->pass[1].release, (std::vector<size_t>{2}));
  EXPECT_EQ(plan->staging_offset, (std::vector<size_t>{16, 10, 0}));
  EXPECT_EQ(plan->staging_elements, 18u);
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
  // Padded 8 and 12, held together (layer 0 computes while layer 1 arrives).
  EXPECT_EQ(plan->staging_offset, (std::vector<size_t>{12, 0}));
  EXPECT_EQ(plan->staging_elements, 20u);
  EXPECT_EQ(plan->shard_elements(), 5u);
}

// The header's example: three layers, one bucket each (b0 = fc3, b1 = fc2, b2 = fc1). Forward
// gathers each layer while the one before computes; at the turn fc2 is still held, so backward
// gathers nothing: 3 gathers a pass, 2 layers held at most.
TEST(FsdpPlanTest, EachRequestPrefetchesTheNextLayerAndTheTurnKeepsIt) {
  BucketLayoutOptions o;
  o.first_bucket_bytes = 32;
  o.bucket_cap_bytes = 32;
  // fc1 4x3 + 3, fc2 3x3 + 3, fc3 3x2 + 2 floats; 8-float buckets close after each layer.
  absl::StatusOr<FsdpPlan> plan = PlanFsdp({12, 3, 9, 3, 6, 2}, MlpLayerParameters(3), 1, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->layer_buckets,
            (std::vector<std::vector<size_t>>{{2}, {1}, {0}}));
  EXPECT_EQ(plan->access_order, (std::vector<size_t>{0, 1, 2, 2, 1}));
  ASSERT_EQ(plan->pass.size(), 5u);
  const std::vector<std::vector<size_t>> gather = {{2, 1}, {0}, {}, {}, {}};
  const std::vector<std::vector<size_t>> release = {{}, {2}, {}, {}, {0}};
  const std::vector<std::vector<size_t>> held = {{1, 2}, {0, 1}, {0, 1}, {0, 1}, {1}};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(plan->pass[i].layer, plan->access_order[i]);
    EXPECT_EQ(plan->pass[i].gather, gather[i]) << "request " << i;
    EXPECT_EQ(plan->pass[i].release, release[i]) << "request " << i;
    EXPECT_EQ(plan->pass[i].held, held[i]) << "request " << i;
  }
  EXPECT_EQ(plan->pass[0].prefetched, 1u);
  // fc1 (15) at 0, fc2 (12) beside it, fc3 (8) back at 0: never held with fc1.
  EXPECT_EQ(plan->staging_offset, (std::vector<size_t>{0, 15, 0}));
  EXPECT_EQ(plan->staging_elements, 27u);
}

std::vector<size_t> UnionOf(const std::vector<size_t>& a, const std::vector<size_t>& b) {
  std::vector<size_t> out = a;
  for (size_t x : b) {
    if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Over many shapes, bucket sizes and world sizes: every request holds exactly its layer's
// buckets and the next other layer's (never more than two layers), gathers only what it does
// not hold, each bucket is gathered before any request uses it, and buckets held together
// never share staging.
TEST(FsdpPlanTest, ThePassHoldsTwoLayersAtMostAndCoHeldBucketsNeverOverlap) {
  for (size_t layers = 1; layers <= 6; ++layers) {
    for (size_t cap : {4u, 16u, 40u, 64u, 1000u}) {
      for (size_t world : {1u, 2u, 3u, 4u}) {
        std::vector<size_t> counts;
        for (size_t k = 0; k < layers; ++k) {
          counts.push_back(3 + (k * 7 + world) % 11);  // weight
          counts.push_back(1 + k % 3);                 // bias
        }
        BucketLayoutOptions o;
        o.first_bucket_bytes = cap / 2 + 4;
        o.bucket_cap_bytes = cap;
        absl::StatusOr<FsdpPlan> plan = PlanFsdp(counts, MlpLayerParameters(layers), world, o);
        ASSERT_TRUE(plan.ok()) << plan.status();
        const std::string what = absl::StrCat(layers, " layers, cap ", cap, ", world ", world);
        const std::vector<size_t> order = MlpLayerAccessOrder(layers);
        ASSERT_EQ(plan->access_order, order) << what;
        ASSERT_EQ(plan->pass.size(), order.size()) << what;
        std::vector<size_t> held;
        size_t most = 0;
        for (size_t i = 0; i < order.size(); ++i) {
          const FsdpRequest& r = plan->pass[i];
          std::vector<size_t> next;
          for (size_t j = i + 1; j < order.size(); ++j) {
            if (order[j] != order[i]) {
              next = plan->layer_buckets[order[j]];
              break;
            }
          }
          const std::vector<size_t> expected = UnionOf(plan->layer_buckets[order[i]], next);
          EXPECT_EQ(r.held, expected) << what << ", request " << i;
          std::vector<size_t> after;
          for (size_t b : held) {
            if (std::find(r.release.begin(), r.release.end(), b) == r.release.end()) {
              after.push_back(b);
            }
          }
          for (size_t b : r.gather) {
            EXPECT_EQ(std::find(after.begin(), after.end(), b), after.end())
                << what << ": bucket " << b << " gathered while held";
            after.push_back(b);
          }
          std::sort(after.begin(), after.end());
          EXPECT_EQ(after, r.held) << what << ", request " << i;
          held = r.held;
          for (size_t a : r.held) {
            for (size_t b : r.held) {
              if (a == b) continue;
              const size_t a0 = plan->staging_offset[a], a1 = a0 + plan->gathered_elements(a);
              const size_t b0 = plan->staging_offset[b], b1 = b0 + plan->gathered_elements(b);
              EXPECT_TRUE(a1 <= b0 || b1 <= a0) << what << ": buckets " << a << ", " << b;
            }
          }
          size_t staged = 0;
          for (size_t b : r.held) staged += plan->gathered_elements(b);
          EXPECT_LE(staged, plan->staging_elements) << what;
          most = std::max(most, staged);
        }
        // The two-ended placement needs no more than the most any request holds.
        EXPECT_EQ(plan->staging_elements, most) << what;
        for (size_t b = 0; b < plan->zero2.layout.buckets.size(); ++b) {
          EXPECT_LE(plan->staging_offset[b] + plan->gathered_elements(b), plan->staging_elements);
        }
      }
    }
  }
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
