// The zero2 reducer's gradient accumulation and find_unused_parameters over real gloo ranks:
// K micro-batches each reduce-scattered, the shard holding the sum of their averages; a
// parameter without gradient on one rank reducing as zeros on every rank (and named in that
// rank's stats) instead of failing; Finish calls out of turn failing the step.
#include <cmath>
#include <memory>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/sync/sync_test_util.h"
#include "worker/sync/zero2_plan.h"
#include "worker/sync/zero2_reducer.h"

namespace ringleader {
namespace {

using sync_test::MakeGlooRanks;
using sync_test::RunRanks;
using sync_test::TestGradient;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::vector<ParameterInfo>& Params() {
  static const auto* params = new std::vector<ParameterInfo>(sync_test::MixedParams(9, 200, 11));
  return *params;
}

Zero2Plan Plan(int world) {
  std::vector<size_t> counts;
  for (const ParameterInfo& p : Params()) counts.push_back(p.count);
  absl::StatusOr<Zero2Plan> plan = PlanZero2(counts, world, Zero2LayoutOptions(0.001, 0.001));
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

// Micro-batch k of `step` on `rank`: TestGradient of a seed per (step, k), scaled by `scale`.
float MicroGradient(int rank, int64_t step, int k, size_t p, size_t e, float scale) {
  return scale * TestGradient(rank, step * 10 + k, p, e);
}

// Backward of one micro-batch in bucket order, skipping `skip`.
void Backward(Zero2Reducer* red, int rank, int64_t step, int k, float scale,
              const std::set<size_t>& skip = {}) {
  for (size_t p : ReverseRegistrationOrder(Params().size())) {
    if (skip.count(p)) continue;
    float* slot = red->SlotFor(p);
    for (size_t e = 0; e < Params()[p].count; ++e) {
      slot[e] += MicroGradient(rank, step, k, p, e, scale);
    }
    red->MarkReady(p);
  }
}

TEST(Zero2AccumulationTest, TheShardHoldsTheSumOfTheMicroBatchAverages) {
  constexpr int kWorld = 3;
  constexpr int kMicro = 3;
  const float scale = 1.0f / kMicro;
  auto ranks = MakeGlooRanks(kWorld);
  const Zero2Plan plan = Plan(kWorld);
  std::vector<double> norms(kWorld);
  RunRanks(kWorld, [&](int r) {
    Zero2ReducerOptions o;
    o.timeout = absl::Seconds(10);
    o.accumulation_steps = kMicro;
    auto created = Zero2Reducer::Create(ranks[r].get(), Params(), plan, o);
    ASSERT_TRUE(created.ok()) << created.status();
    Zero2Reducer* red = created->get();
    EXPECT_EQ(red->gradient_bytes(),
              (2 * plan.shard_elements + 2 * plan.pool_buffer_elements) * sizeof(float))
        << "a second shard receives the later micro-batches";
    for (int64_t step = 1; step <= 2; ++step) {
      red->BeginStep();
      for (int k = 0; k < kMicro; ++k) {
        Backward(red, r, step, k, scale);
        if (k + 1 < kMicro) ASSERT_TRUE(red->FinishMicroBatch().ok());
      }
      StepSyncStats stats;
      double norm = -1;
      ASSERT_TRUE(red->FinishStep(&stats, &norm).ok());
      EXPECT_EQ(stats.collectives, kMicro * static_cast<int>(plan.layout.buckets.size()) + 1)
          << "every micro-batch's reduce-scatters, then the stats";
      EXPECT_EQ(stats.step, step);
      double squares = 0;
      for (size_t p = 0; p < Params().size(); ++p) {
        const ElementRange& owned = plan.shards.owned[r][p];
        const float* got = red->owned_gradient(p);
        for (size_t e = 0; e < Params()[p].count; ++e) {
          double want = 0;
          for (int k = 0; k < kMicro; ++k) {
            double sum = 0;
            for (int q = 0; q < kWorld; ++q) sum += MicroGradient(q, step, k, p, e, scale);
            want += sum / kWorld;
          }
          squares += want * want;
          if (e >= owned.begin && e < owned.end) {
            EXPECT_NEAR(got[e - owned.begin], want, 1e-5 * (1 + std::abs(want)))
                << "rank " << r << " step " << step << " parameter " << p << " element " << e;
          }
        }
      }
      EXPECT_NEAR(norm, std::sqrt(squares), 1e-5 * std::sqrt(squares));
      if (step == 2) norms[r] = norm;
    }
    EXPECT_EQ(red->pool_buffers_allocated(), 2u) << "the pool is reused by every micro-batch";
  });
  EXPECT_EQ(norms[1], norms[0]);
  EXPECT_EQ(norms[2], norms[0]);
}

TEST(Zero2AccumulationTest, FinishCallsOutOfTurnFailTheStep) {
  constexpr int kWorld = 2;
  auto ranks = MakeGlooRanks(kWorld);
  const Zero2Plan plan = Plan(kWorld);
  RunRanks(kWorld, [&](int r) {
    Zero2ReducerOptions o;
    o.timeout = absl::Seconds(10);
    o.accumulation_steps = 2;
    auto early = Zero2Reducer::Create(ranks[r].get(), Params(), plan, o);
    ASSERT_TRUE(early.ok());
    (*early)->BeginStep();
    Backward(early->get(), r, 1, 0, 0.5f);
    const absl::Status s = (*early)->FinishStep(nullptr, nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("after micro-batch 1 of 2 of step 1"));
  });
  auto single = MakeGlooRanks(1);
  Zero2ReducerOptions o;
  o.accumulation_steps = 1;
  auto red = Zero2Reducer::Create(single[0].get(), Params(), Plan(1), o);
  ASSERT_TRUE(red.ok());
  (*red)->BeginStep();
  const absl::Status s = (*red)->FinishMicroBatch();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("the last one ends with FinishStep"));
  o.accumulation_steps = 0;
  EXPECT_EQ(Zero2Reducer::Create(single[0].get(), Params(), Plan(1), o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Zero2AccumulationTest, FindUnusedParametersReduceAsZerosOnEveryRank) {
  constexpr int kWorld = 3;
  auto ranks = MakeGlooRanks(kWorld);
  const Zero2Plan plan = Plan(kWorld);
  const size_t kUnused = plan.layout.buckets[0].params.back();
  std::vector<std::vector<std::string>> unused(kWorld);
  RunRanks(kWorld, [&](int r) {
    Zero2ReducerOptions o;
    o.timeout = absl::Seconds(10);
    o.find_unused_parameters = true;
    auto red = Zero2Reducer::Create(ranks[r].get(), Params(), plan, o);
    ASSERT_TRUE(red.ok());
    for (int64_t step = 1; step <= 2; ++step) {
      (*red)->BeginStep();
      Backward(red->get(), r, step, 0, 1.0f, r == 1 ? std::set<size_t>{kUnused} : std::set<size_t>{});
      StepSyncStats stats;
      const absl::Status s = (*red)->FinishStep(&stats, nullptr);
      ASSERT_TRUE(s.ok()) << "rank " << r << " step " << step << ": " << s;
      unused[r] = stats.unused_parameters;
      const ElementRange& owned = plan.shards.owned[r][kUnused];
      for (size_t e = owned.begin; e < owned.end; ++e) {
        double sum = 0;
        for (int q = 0; q < kWorld; ++q) {
          if (q != 1) sum += MicroGradient(q, step, 0, kUnused, e, 1.0f);
        }
        EXPECT_NEAR((*red)->owned_gradient(kUnused)[e - owned.begin], sum / kWorld,
                    1e-5 * (1 + std::abs(sum)))
            << "rank 1's share counts as zeros";
      }
    }
  });
  EXPECT_THAT(unused[0], IsEmpty());
  EXPECT_THAT(unused[1], ElementsAre(Params()[kUnused].name));
  EXPECT_THAT(unused[2], IsEmpty());
}

}  // namespace
}  // namespace ringleader
