// The zero2 reducer over real ranks (gloo over loopback, and the shared-memory backend): the
// bucket pool is reused and never grows when gradients come in bucket order, every rank's shard
// holds the average of its owned elements, the reported norm is the global one on every rank,
// the ledger records the reduce-scatters, and a parameter without gradient on ONE rank fails the
// step on EVERY rank instead of hanging (collective timeout 10 s, watchdog 25 s).
#include <cmath>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plan/zero2_plan.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/collective/shm/shm_collective.h"
#include "worker/sync/sync_test_util.h"
#include "worker/sync/zero2_reducer.h"

namespace ringleader {
namespace {

using sync_test::MakeGlooRanks;
using sync_test::RunRanks;
using sync_test::TestGradient;
using ::testing::HasSubstr;

const std::vector<ParameterInfo>& Params() {
  static const auto* params = new std::vector<ParameterInfo>(sync_test::MixedParams(12, 300, 3));
  return *params;
}

Zero2Plan Plan(int world) {
  std::vector<size_t> counts;
  for (const ParameterInfo& p : Params()) counts.push_back(p.count);
  absl::StatusOr<Zero2Plan> plan = PlanZero2(counts, world, Zero2LayoutOptions(0.001, 0.001));
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

Zero2ReducerOptions Options() {
  Zero2ReducerOptions o;
  o.timeout = absl::Seconds(10);
  return o;
}

std::vector<std::unique_ptr<Collective>> MakeShmRanks(int world) {
  auto store = std::make_shared<InMemoryKeyValueStore>();
  std::vector<std::unique_ptr<Collective>> ranks(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      ShmOptions o;
      o.collective_timeout = absl::Seconds(10);
      absl::StatusOr<ShmRendezvous> made = CreateShmCollective(store, "job/1/", r, world, o);
      if (made.ok()) ranks[r] = std::move(made->collective);
    });
  }
  for (std::thread& t : threads) t.join();
  return ranks;
}

// Backward in bucket order (reverse registration, as the Mlp), skipping `skip`: each gradient
// is written into the slot SlotFor gives, then marked ready.
void Backward(Zero2Reducer* red, int rank, int64_t step, const std::set<size_t>& skip) {
  for (size_t p : ReverseRegistrationOrder(Params().size())) {
    if (skip.count(p)) continue;
    float* slot = red->SlotFor(p);
    for (size_t e = 0; e < Params()[p].count; ++e) slot[e] += TestGradient(rank, step, p, e);
    red->MarkReady(p);
  }
}

void ExpectShardsHoldTheAverage(std::vector<std::unique_ptr<Collective>> ranks, int world) {
  ASSERT_EQ(ranks.size(), static_cast<size_t>(world));
  for (auto& r : ranks) ASSERT_NE(r, nullptr) << "rendezvous failed";
  const Zero2Plan plan = Plan(world);
  ASSERT_GE(plan.layout.buckets.size(), 4u) << "enough buckets to cycle the pool";
  constexpr int kSteps = 3;
  std::vector<std::vector<double>> norms(world);
  RunRanks(world, [&](int r) {
    auto created = Zero2Reducer::Create(ranks[r].get(), Params(), plan, Options());
    ASSERT_TRUE(created.ok()) << created.status();
    Zero2Reducer* red = created->get();
    EXPECT_EQ(red->gradient_bytes(),
              (plan.shard_elements + 2 * plan.pool_buffer_elements) * sizeof(float));
    for (int64_t step = 1; step <= kSteps; ++step) {
      red->BeginStep();
      Backward(red, r, step, {});
      StepSyncStats stats;
      double norm = -1;
      absl::Status s = red->FinishStep(&stats, &norm);
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(stats.buckets, static_cast<int>(plan.layout.buckets.size()));
      EXPECT_EQ(stats.collectives, stats.buckets + 1) << "reduce-scatters + the stats all-reduce";
      EXPECT_TRUE(stats.ledger_checked) << "interval 1: every step";
      EXPECT_GT(stats.buckets_launched_in_backward, 0);
      norms[r].push_back(norm);
      double squares = 0;
      for (size_t p = 0; p < Params().size(); ++p) {
        const ElementRange& owned = plan.shards.owned[r][p];
        const float* got = red->owned_gradient(p);
        ASSERT_EQ(got == nullptr, owned.empty());
        for (size_t k = owned.begin; k < owned.end; ++k) {
          double sum = 0;
          for (int q = 0; q < world; ++q) sum += TestGradient(q, step, p, k);
          const double want = sum / world;
          EXPECT_NEAR(got[k - owned.begin], want, 1e-5 * (1 + std::abs(want)))
              << "rank " << r << " step " << step << " param " << p << " element " << k;
        }
        for (size_t k = 0; k < Params()[p].count; ++k) {
          double sum = 0;
          for (int q = 0; q < world; ++q) sum += TestGradient(q, step, p, k);
          squares += (sum / world) * (sum / world);
        }
      }
      EXPECT_NEAR(norm, std::sqrt(squares), 1e-5 * std::sqrt(squares)) << "the global norm";
    }
    // Bucket order: a new bucket needs a buffer only once an older bucket was launched, so the
    // pool never grows; every bucket of every step took a buffer from it.
    EXPECT_EQ(red->pool_buffers_allocated(), 2u);
    EXPECT_EQ(red->pool_takes(), kSteps * plan.layout.buckets.size());
    EXPECT_EQ(red->gradient_bytes(),
              (plan.shard_elements + 2 * plan.pool_buffer_elements) * sizeof(float));
  });
  for (int r = 1; r < world; ++r) EXPECT_EQ(norms[r], norms[0]) << "same norm on every rank";
}

TEST(Zero2ReducerTest, GlooShardsHoldTheAverageWithATwoBufferPool) {
  ExpectShardsHoldTheAverage(MakeGlooRanks(3), 3);
}

TEST(Zero2ReducerTest, SharedMemoryShardsHoldTheAverageWithATwoBufferPool) {
  ExpectShardsHoldTheAverage(MakeShmRanks(4), 4);
}

TEST(Zero2ReducerTest, TheLedgerRecordsTheReduceScatters) {
  constexpr int kWorld = 2;
  auto ranks = MakeGlooRanks(kWorld);
  const Zero2Plan plan = Plan(kWorld);
  RunRanks(kWorld, [&](int r) {
    Zero2ReducerOptions o = Options();
    o.ledger_check_interval_steps = 10;  // step 1 checked (takes its window), step 2 not
    auto red = Zero2Reducer::Create(ranks[r].get(), Params(), plan, o);
    ASSERT_TRUE(red.ok());
    for (int64_t step = 1; step <= 2; ++step) {
      (*red)->BeginStep();
      Backward(red->get(), r, step, {});
      ASSERT_TRUE((*red)->FinishStep(nullptr, nullptr).ok());
    }
    const std::vector<CollectiveRecord> window = (*red)->ledger()->TakeWindow();
    ASSERT_EQ(window.size(), plan.layout.buckets.size() + 1);
    for (size_t b = 0; b < plan.layout.buckets.size(); ++b) {
      EXPECT_EQ(window[b].kind, CollectiveKind::kReduceScatter);
      EXPECT_EQ(window[b].bucket, static_cast<int32_t>(b));
      EXPECT_EQ(window[b].count, plan.slice[b] * kWorld);
    }
    EXPECT_EQ(window.back().kind, CollectiveKind::kAllReduce);
    EXPECT_EQ(window.back().bucket, kTagZero2Stats);
  });
}

TEST(Zero2ReducerTest, AParameterWithoutGradientOnOneRankFailsTheStepOnEveryRank) {
  constexpr int kWorld = 3;
  // A parameter of bucket 0: on rank 1 no bucket can launch during backward, so the pool must
  // grow instead of deadlocking.
  auto ranks = MakeGlooRanks(kWorld);
  const Zero2Plan plan = Plan(kWorld);
  const size_t kUnused = plan.layout.buckets[0].params.back();
  ASSERT_GE(plan.layout.buckets.size(), 3u);
  std::vector<absl::Status> status(kWorld);
  RunRanks(kWorld, [&](int r) {
    auto red = Zero2Reducer::Create(ranks[r].get(), Params(), plan, Options());
    ASSERT_TRUE(red.ok());
    (*red)->BeginStep();
    Backward(red->get(), r, 1, r == 1 ? std::set<size_t>{kUnused} : std::set<size_t>{});
    status[r] = (*red)->FinishStep(nullptr, nullptr);
    if (r == 1) EXPECT_GT((*red)->pool_buffers_allocated(), 2u) << "grew rather than hang";
    // Sticky: the next call returns the same error without any collective.
    EXPECT_EQ((*red)->FinishStep(nullptr, nullptr), status[r]);
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(status[r].code(), absl::StatusCode::kFailedPrecondition) << status[r];
    EXPECT_THAT(std::string(status[r].message()),
                HasSubstr(absl::StrCat("rank 1: ", Params()[kUnused].name)));
    EXPECT_THAT(std::string(status[r].message()), HasSubstr("model.frozen_parameters"));
  }
}

TEST(Zero2ReducerTest, RefusesAPlanForAnotherWorld) {
  auto ranks = MakeGlooRanks(2);
  RunRanks(2, [&](int r) {
    auto red = Zero2Reducer::Create(ranks[r].get(), Params(), Plan(3), Options());
    EXPECT_EQ(red.status().code(), absl::StatusCode::kInvalidArgument);
  });
}

}  // namespace
}  // namespace ringleader
