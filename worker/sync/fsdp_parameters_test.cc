#include "worker/sync/fsdp_parameters.h"

#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "plan/fsdp_plan.h"
#include "worker/collective/collective.h"
#include "worker/sync/collective_ledger.h"
#include "worker/sync/sync_test_util.h"
#include "worker/trainer/mlp.h"

namespace ringleader {
namespace {

using sync_test::MakeGlooRanks;
using sync_test::RunRanks;

// Layers [2, 3, 2] with buckets b0 = [fc2.bias], b1 = [fc2.weight], b2 = [fc1.bias fc1.weight]
// (fsdp_plan_test.cc): layer 1 straddles two buckets.
FsdpPlan SmallPlan(size_t world) {
  BucketLayoutOptions o;
  o.first_bucket_bytes = 8;
  o.bucket_cap_bytes = 16;
  absl::StatusOr<FsdpPlan> plan = PlanFsdp({6, 3, 6, 2}, MlpLayerParameters(2), world, o);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

bool SameBits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

std::unique_ptr<FsdpParameters> Load(Collective* comm, const Mlp& model, const FsdpPlan& plan,
                                     CollectiveLedger* ledger) {
  FsdpParametersOptions opts;
  opts.ledger = ledger;
  absl::StatusOr<std::unique_ptr<FsdpParameters>> made =
      FsdpParameters::Create(comm, model.parameters(), plan, opts);
  EXPECT_TRUE(made.ok()) << made.status();
  std::vector<const float*> full;
  for (size_t i = 0; i < model.parameters().size(); ++i) full.push_back(model.param(i));
  EXPECT_TRUE((*made)->LoadOwned(full).ok());
  return *std::move(made);
}

// Every rank assembles exactly the model's values, gathering only what a layer uses; the
// gathers are the same on every rank and in the ledger.
TEST(FsdpParametersTest, AcquireGathersEachLayersBucketsFromTheOwners) {
  for (int world : {2, 3}) {
    auto comms = MakeGlooRanks(world);
    RunRanks(world, [&](int rank) {
      Mlp model({2, 3, 2}, 7);
      CollectiveLedger ledger;
      auto params = Load(comms[rank].get(), model, SmallPlan(world), &ledger);
      for (size_t k : {0u, 1u, 1u, 0u}) {
        absl::StatusOr<LayerParameters> layer = params->Acquire(k);
        ASSERT_TRUE(layer.ok()) << layer.status();
        EXPECT_TRUE(SameBits(layer->weight, model.param(2 * k), model.parameters()[2 * k].count));
        EXPECT_TRUE(
            SameBits(layer->bias, model.param(2 * k + 1), model.parameters()[2 * k + 1].count));
      }
      params->Release();
      // Layer 0: b2; layer 1: b0, b1; layer 1 again: held; layer 0: b2 again.
      const std::vector<CollectiveRecord> records = ledger.TakeWindow();
      ASSERT_EQ(records.size(), 4u);
      const std::vector<int32_t> buckets = {2, 0, 1, 2};
      for (size_t j = 0; j < records.size(); ++j) {
        EXPECT_EQ(records[j].kind, CollectiveKind::kAllGather);
        EXPECT_EQ(records[j].bucket, buckets[j]);
        EXPECT_EQ(records[j].count, params->plan().zero2.slice[buckets[j]]);
      }
      EXPECT_EQ(params->gathers(), 4u);
      EXPECT_EQ(params->staging_peak_elements(), params->plan().staging_elements);
      EXPECT_EQ(params->parameter_bytes(),
                4 * (params->plan().shard_elements() + params->plan().staging_elements));

      absl::StatusOr<std::vector<std::vector<float>>> all = params->GatherAll();
      ASSERT_TRUE(all.ok()) << all.status();
      for (size_t i = 0; i < all->size(); ++i) {
        EXPECT_TRUE(SameBits((*all)[i].data(), model.param(i), model.parameters()[i].count));
      }
      absl::StatusOr<DriftResult> drift = params->MeasureGatheredDrift({});
      ASSERT_TRUE(drift.ok()) << drift.status();
      EXPECT_EQ(drift->max_drift, 0.0);
      EXPECT_EQ(drift->per_parameter.size(), 4u);
      EXPECT_FALSE(params->Acquire(2).ok()) << "no layer 2";
    });
  }
}

// A step on the owned elements only: after it, every rank gathers the owners' new values.
TEST(FsdpParametersTest, OwnedUpdatesReachEveryRankAtTheNextGather) {
  auto comms = MakeGlooRanks(2);
  RunRanks(2, [&](int rank) {
    Mlp model({2, 3, 2}, 7);
    auto params = Load(comms[rank].get(), model, SmallPlan(2), nullptr);
    for (size_t i = 0; i < 4; ++i) {
      const ElementRange owned = params->plan().zero2.shards.owned[rank][i];
      float* p = params->owned_parameter(i);
      ASSERT_EQ(p == nullptr, owned.empty());
      for (size_t e = 0; e < owned.size(); ++e) {
        p[e] = static_cast<float>(100 * i + owned.begin + e);
      }
    }
    absl::StatusOr<std::vector<std::vector<float>>> all = params->GatherAll();
    ASSERT_TRUE(all.ok()) << all.status();
    for (size_t i = 0; i < 4; ++i) {
      for (size_t e = 0; e < (*all)[i].size(); ++e) EXPECT_EQ((*all)[i][e], 100.0f * i + e);
    }
  });
}

// The Mlp through the provider: loss, gradients and evaluation bit-identical to the model with
// its own parameters, on every rank.
TEST(FsdpParametersTest, AnMlpOnGatheredParametersComputesWhatTheWholeModelDoes) {
  auto comms = MakeGlooRanks(2);
  RunRanks(2, [&](int rank) {
    Mlp whole({2, 3, 2}, 11);
    Mlp sharded({2, 3, 2}, 11);
    auto params = Load(comms[rank].get(), sharded, SmallPlan(2), nullptr);
    sharded.ReleaseParameters();
    EXPECT_EQ(sharded.param(0), nullptr);
    const float x[6] = {0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 1.5f};
    const int32_t y[3] = {1, 0, 1};
    absl::StatusOr<double> a = whole.ForwardBackward(x, y, 3, {});
    BackwardOptions opts;
    opts.params_for = [&](size_t k) { return params->Acquire(k); };
    absl::StatusOr<double> b = sharded.ForwardBackward(x, y, 3, opts);
    params->Release();
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_TRUE(SameBits(whole.grad(i), sharded.grad(i), whole.parameters()[i].count)) << i;
    }
    Dataset d;
    d.features = 2;
    d.num_classes = 2;
    d.size = 3;
    d.x.assign(x, x + 6);
    d.y.assign(y, y + 3);
    const Mlp::EvalResult expected = whole.Evaluate(d, 0);
    absl::StatusOr<Mlp::EvalResult> got = sharded.Evaluate(d, 3, opts.params_for);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->loss, expected.loss);
    EXPECT_EQ(got->accuracy, expected.accuracy);
  });
}

}  // namespace
}  // namespace ringleader
