// The rank's pre-flight check with 3 ranks as threads over gloo on loopback (one in-memory
// rendezvous store): every pair meets once, figures are filled, a rank whose partner never
// comes reports that pair failed and goes on.
#include "worker/rank/preflight_check.h"

#include <algorithm>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/in_memory_key_value_store.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

PreflightCheckOptions Quick() {
  PreflightCheckOptions options;
  options.matmul_n = 64;
  options.matmul_time = absl::Milliseconds(10);
  options.matmul_windows = 2;
  options.bandwidth_bytes = 64 << 10;
  options.bandwidth_repeats = 2;
  options.latency_repeats = 3;
  options.timeout = absl::Seconds(5);
  return options;
}

PairCollectiveFactory OverGloo(std::shared_ptr<InMemoryKeyValueStore> store,
                               absl::Duration rendezvous = absl::Seconds(10)) {
  return [store, rendezvous](const std::string& prefix,
                             int rank) -> absl::StatusOr<std::unique_ptr<Collective>> {
    GlooOptions options;
    options.rendezvous_timeout = rendezvous;
    options.collective_timeout = absl::Seconds(5);
    options.comm_threads = 1;
    return CreateGlooCollective(store, "job-1/1/" + prefix, rank, 2, options);
  };
}

TEST(RoundPairsTest, EveryPairMeetsOnceAndNoRankTwiceARound) {
  for (int world : {2, 3, 4, 5, 8}) {
    std::set<std::pair<int, int>> met;
    for (int round = 0; round < RoundCount(world); ++round) {
      std::set<int> busy;
      for (const auto& [a, b] : RoundPairs(world, round)) {
        EXPECT_LT(a, b);
        EXPECT_TRUE(busy.insert(a).second) << world << " round " << round;
        EXPECT_TRUE(busy.insert(b).second) << world << " round " << round;
        EXPECT_TRUE(met.insert({a, b}).second) << world << ": " << a << "-" << b << " twice";
      }
    }
    EXPECT_EQ(met.size(), static_cast<size_t>(world * (world - 1) / 2)) << world;
  }
  EXPECT_EQ(RoundCount(1), 0);
  EXPECT_EQ(RoundCount(3), 3);
  EXPECT_EQ(RoundCount(4), 3);
}

TEST(RunPreflightCheckTest, ThreeRanksOverGlooMeasureEveryPair) {
  auto store = std::make_shared<InMemoryKeyValueStore>();
  std::vector<absl::StatusOr<v1::PreflightReport>> reports(3, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 3; ++rank) {
    threads.emplace_back([&, rank] {
      reports[rank] = RunPreflightCheck(rank, 3, OverGloo(store), Quick());
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(reports[rank].ok()) << reports[rank].status();
    const v1::PreflightReport& report = *reports[rank];
    EXPECT_GT(report.gflops(), 0);
    EXPECT_EQ(report.matmul_n(), 64u);
    ASSERT_EQ(report.pairs_size(), 2) << "rank " << rank;  // one bye among 3 rounds
    for (const v1::PreflightPairReport& pair : report.pairs()) {
      EXPECT_TRUE(pair.ok()) << pair.error();
      EXPECT_TRUE(pair.rank_a() == static_cast<uint32_t>(rank) ||
                  pair.rank_b() == static_cast<uint32_t>(rank));
      EXPECT_GT(pair.bandwidth_mb_per_s(), 0);
      EXPECT_GT(pair.latency_us(), 0);
      EXPECT_EQ(pair.bandwidth_bytes(), 64u << 10);
    }
  }
}

TEST(RunPreflightCheckTest, APartnerThatNeverComesFailsItsPairOnly) {
  // Rank 1 of 2 never runs: rank 0's only pair fails, and the check still reports.
  auto store = std::make_shared<InMemoryKeyValueStore>();
  absl::StatusOr<v1::PreflightReport> report =
      RunPreflightCheck(0, 2, OverGloo(store, absl::Milliseconds(300)), Quick());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GT(report->gflops(), 0);
  ASSERT_EQ(report->pairs_size(), 1);
  EXPECT_FALSE(report->pairs(0).ok());
  EXPECT_THAT(report->pairs(0).error(), HasSubstr("preflight/0-1/"));
  EXPECT_EQ(report->pairs(0).bandwidth_mb_per_s(), 0);
}

TEST(RunPreflightCheckTest, RefusesARankOutsideTheWorld) {
  auto store = std::make_shared<InMemoryKeyValueStore>();
  EXPECT_EQ(RunPreflightCheck(3, 3, OverGloo(store), Quick()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringleader
