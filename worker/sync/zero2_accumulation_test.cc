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
#include "plan/zero2_plan.h"
#include "worker/sync/sync_test_util.h"
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

// bf16 on the wire: each bucket rounded to bf16, reduced in bf16, cast back into the fp32 shard.
TEST(Zero2AccumulationTest, Bf16WireHalvesTheBytesAndRoundsLikeBf16) {
  constexpr int kWorld = 2;
  const Zero2Plan plan = Plan(kWorld);
  std::vector<StepSyncStats> fp32(kWorld), bf16(kWorld);
  for (bool wire : {false, true}) {
    auto ranks = MakeGlooRanks(kWorld);
    RunRanks(kWorld, [&](int r) {
      Zero2ReducerOptions o;
      o.timeout = absl::Seconds(10);
      o.bf16_wire = wire;
      o.accumulation_steps = 2;
      auto red = Zero2Reducer::Create(ranks[r].get(), Params(), plan, o);
      ASSERT_TRUE(red.ok()) << red.status();
      EXPECT_EQ((*red)->wire_buffer_bytes(),
                wire ? (plan.shard_elements + 2 * plan.pool_buffer_elements) * 2 : 0u);
      (*red)->BeginStep();
      Backward(red->get(), r, 1, 0, 0.5f);
      ASSERT_TRUE((*red)->FinishMicroBatch().ok());
      Backward(red->get(), r, 1, 1, 0.5f);
      StepSyncStats stats;
      ASSERT_TRUE((*red)->FinishStep(&stats, nullptr).ok());
      (wire ? bf16 : fp32)[r] = stats;
      size_t close = 0, total = 0;
      for (size_t p = 0; p < Params().size(); ++p) {
        const ElementRange& owned = plan.shards.owned[r][p];
        for (size_t e = owned.begin; e < owned.end; ++e) {
          double want = 0, magnitude = 0;
          for (int k = 0; k < 2; ++k) {
            double sum = 0;
            for (int q = 0; q < kWorld; ++q) {
              sum += MicroGradient(q, 1, k, p, e, 0.5f);
              magnitude += std::abs(MicroGradient(q, 1, k, p, e, 0.5f)) / kWorld;
            }
            want += sum / kWorld;
          }
          const double got = (*red)->owned_gradient(p)[e - owned.begin];
          // bf16 keeps 8 significant bits: each of the few roundings (the cast, the sum, the
          // division) errs by at most 2^-8 of the terms' magnitude, whatever cancels after.
          EXPECT_NEAR(got, want, (wire ? 4.0 / 256 : 1e-5) * (magnitude + 1e-6))
              << "parameter " << p << " element " << e;
          close += got == static_cast<float>(want);
          ++total;
        }
      }
      if (wire) EXPECT_LT(close, total) << "rounded to bf16 on the way";
    });
  }
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(bf16[r].bytes_communicated * 2, fp32[r].bytes_communicated) << "half the bytes";
    EXPECT_NE(bf16[r].collective_digest, fp32[r].collective_digest) << "the dtype is recorded";
  }
}

}  // namespace
}  // namespace ringleader
