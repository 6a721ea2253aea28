#include "worker/sync/drift.h"

#include <cmath>

#include "gtest/gtest.h"
#include "worker/sync/reducer.h"
#include "worker/sync/sync_test_util.h"

namespace ringleader {
namespace {

using sync_test::TestGradient;

const std::vector<ParameterInfo>& Params() {
  static const auto* params = new std::vector<ParameterInfo>(sync_test::MixedParams(6, 100, 5));
  return *params;
}

std::vector<std::vector<float>> InitialWeights() {
  std::vector<std::vector<float>> w;
  for (size_t p = 0; p < Params().size(); ++p) {
    w.emplace_back(Params()[p].count);
    for (size_t e = 0; e < w.back().size(); ++e) w.back()[e] = TestGradient(99, 0, p, e);
  }
  return w;
}

std::vector<const float*> Pointers(const std::vector<std::vector<float>>& w) {
  std::vector<const float*> out;
  for (const auto& t : w) out.push_back(t.data());
  return out;
}

// Ranks start equal and compute different gradients. With the reducer the SGD step keeps them
// bit-identical (drift exactly 0); without it ("bypass sync") they drift apart.
TEST(DriftTest, ZeroAfterSyncPositiveWithoutIt) {
  constexpr int kWorld = 3;
  constexpr float kLr = 0.1f;
  auto ranks = sync_test::MakeGlooRanks(kWorld);
  std::vector<absl::StatusOr<DriftResult>> synced(kWorld), bypassed(kWorld);
  sync_test::RunRanks(kWorld, [&](int r) {
    auto synced_w = InitialWeights();
    auto bypass_w = InitialWeights();
    ReducerOptions o;
    o.first_bucket_mb = 0.0005;
    o.bucket_cap_mb = 0.001;
    auto red = Reducer::Create(ranks[r].get(), Params(), o);
    ASSERT_TRUE(red.ok());
    for (int step = 1; step <= 3; ++step) {
      (*red)->ZeroGradients();
      (*red)->BeginMicroBatch(0);
      auto slots = (*red)->gradient_slots();
      for (size_t p : ReverseRegistrationOrder(Params().size())) {
        for (size_t e = 0; e < Params()[p].count; ++e) {
          const float g = TestGradient(r, step, p, e);
          slots[p][e] += g;
          bypass_w[p][e] -= kLr * g;  // local gradient only: what an unsynced rank does
        }
        (*red)->MarkReady(p);
      }
      ASSERT_TRUE((*red)->FinishStep(nullptr).ok());
      for (size_t p = 0; p < Params().size(); ++p) {
        for (size_t e = 0; e < Params()[p].count; ++e) synced_w[p][e] -= kLr * slots[p][e];
      }
    }
    synced[r] = MeasureDrift(ranks[r].get(), Params(), Pointers(synced_w));
    bypassed[r] = MeasureDrift(ranks[r].get(), Params(), Pointers(bypass_w));
  });
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(synced[r].ok()) << synced[r].status();
    ASSERT_TRUE(bypassed[r].ok()) << bypassed[r].status();
    EXPECT_EQ(synced[r]->max_drift, 0.0);
    EXPECT_EQ(synced[r]->local_max_drift, 0.0);
    EXPECT_GT(bypassed[r]->max_drift, 0.0);
    EXPECT_NE(bypassed[r]->worst_rank, 0);
    EXPECT_EQ(bypassed[r]->worst_parameter, bypassed[0]->worst_parameter);
    EXPECT_EQ(r == 0, bypassed[r]->local_max_drift == 0.0);
  }
}

// One element of one tensor on rank 2 is perturbed: every rank names that tensor and rank 2.
TEST(DriftTest, NamesThePerturbedTensorAndRank) {
  constexpr int kWorld = 3;
  constexpr size_t kTensor = 4;
  auto ranks = sync_test::MakeGlooRanks(kWorld);
  std::vector<absl::StatusOr<DriftResult>> results(kWorld);
  std::vector<float> expected(kWorld);
  sync_test::RunRanks(kWorld, [&](int r) {
    auto w = InitialWeights();
    if (r == 2) w[kTensor][1] += 0.5f;
    results[r] = MeasureDrift(ranks[r].get(), Params(), Pointers(w));
  });
  const auto w = InitialWeights();
  const double want = std::fabs((w[kTensor][1] + 0.5f) - w[kTensor][1]);
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].status();
    EXPECT_EQ(results[r]->max_drift, want);
    EXPECT_EQ(results[r]->worst_parameter, Params()[kTensor].name);
    EXPECT_EQ(results[r]->worst_rank, 2);
    EXPECT_EQ(results[r]->local_max_drift, r == 2 ? want : 0.0);
    for (size_t p = 0; p < Params().size(); ++p) {
      EXPECT_EQ(results[r]->per_parameter[p], p == kTensor ? want : 0.0);
    }
  }
}

TEST(DriftTest, RejectsMismatchedInput) {
  sync_test::FakeCollective comm;
  std::vector<const float*> none;
  EXPECT_EQ(MeasureDrift(&comm, Params(), none).status().code(),
            absl::StatusCode::kInvalidArgument);
  sync_test::FakeCollective device("nccl", MemoryKind::kDevice);
  auto w = InitialWeights();
  EXPECT_EQ(MeasureDrift(&device, Params(), Pointers(w)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringleader
