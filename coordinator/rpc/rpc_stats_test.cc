// RpcStats: counts per (method, code), cumulative `le` buckets, sums, concurrent recording.
#include "coordinator/rpc/rpc_stats.h"

#include <algorithm>
#include <limits>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;

TEST(RpcStatsTest, BucketsAreCumulativeAndIncludeTheirBound) {
  RpcStats stats({0.25, 1, 4});
  stats.Record("Heartbeat", absl::StatusCode::kOk, absl::Milliseconds(100));  // <= 0.25
  stats.Record("Heartbeat", absl::StatusCode::kOk, absl::Milliseconds(250));  // == 0.25
  stats.Record("Heartbeat", absl::StatusCode::kOk, absl::Seconds(2));         // <= 4
  stats.Record("Heartbeat", absl::StatusCode::kOk, absl::Seconds(9));         // +Inf only
  const RpcStats::Snapshot snapshot = stats.Take();
  EXPECT_THAT(snapshot.bounds, ElementsAre(0.25, 1, 4));
  ASSERT_EQ(snapshot.series.size(), 1u);
  const RpcStats::Series& series = snapshot.series[0];
  EXPECT_EQ(series.method, "Heartbeat");
  EXPECT_EQ(series.code, "OK");
  EXPECT_EQ(series.count, 4u);
  EXPECT_DOUBLE_EQ(series.sum_seconds, 0.1 + 0.25 + 2 + 9);
  EXPECT_THAT(series.cumulative, ElementsAre(2u, 2u, 3u));
}

TEST(RpcStatsTest, SeriesAreKeptPerMethodAndCodeInOrder) {
  RpcStats stats;
  stats.Record("KvGet", absl::StatusCode::kDeadlineExceeded, absl::Seconds(30));
  stats.Record("Heartbeat", absl::StatusCode::kNotFound, absl::Milliseconds(1));
  stats.Record("Heartbeat", absl::StatusCode::kOk, absl::Milliseconds(1));
  stats.Record("Heartbeat", absl::StatusCode::kOk, absl::Milliseconds(2));
  const RpcStats::Snapshot snapshot = stats.Take();
  ASSERT_EQ(snapshot.series.size(), 3u);
  EXPECT_EQ(snapshot.series[0].method, "Heartbeat");
  EXPECT_EQ(snapshot.series[0].code, "NOT_FOUND");
  EXPECT_EQ(snapshot.series[0].count, 1u);
  EXPECT_EQ(snapshot.series[1].code, "OK");
  EXPECT_EQ(snapshot.series[1].count, 2u);
  EXPECT_EQ(snapshot.series[2].method, "KvGet");
  EXPECT_EQ(snapshot.series[2].code, "DEADLINE_EXCEEDED");
  // 30 s is the 30 s bucket's (le includes the bound), not 60's only.
  const std::vector<double>& bounds = snapshot.bounds;
  const size_t at_30 = static_cast<size_t>(
      std::find(bounds.begin(), bounds.end(), 30.0) - bounds.begin());
  ASSERT_LT(at_30, bounds.size());
  EXPECT_EQ(snapshot.series[2].cumulative[at_30], 1u);
  EXPECT_EQ(snapshot.series[2].cumulative[at_30 - 1], 0u);
}

TEST(RpcStatsTest, NegativeLatencyCountsAsZeroAndBadBoundsAreDropped) {
  RpcStats stats({1, -2, 0.5, 3, std::numeric_limits<double>::infinity()});
  stats.Record("GetJob", absl::StatusCode::kOk, absl::Seconds(-1));
  const RpcStats::Snapshot snapshot = stats.Take();
  EXPECT_THAT(snapshot.bounds, ElementsAre(1, 3));
  ASSERT_EQ(snapshot.series.size(), 1u);
  EXPECT_EQ(snapshot.series[0].sum_seconds, 0);
  EXPECT_THAT(snapshot.series[0].cumulative, ElementsAre(1u, 1u));
}

TEST(RpcStatsTest, ConcurrentRecordsAreAllCounted) {
  RpcStats stats;
  constexpr int kThreads = 4;
  constexpr int kCalls = 10000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&stats] {
      for (int i = 0; i < kCalls; ++i) {
        stats.Record("ReportProgress", absl::StatusCode::kOk, absl::Microseconds(300));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const RpcStats::Snapshot snapshot = stats.Take();
  ASSERT_EQ(snapshot.series.size(), 1u);
  EXPECT_EQ(snapshot.series[0].count, uint64_t{kThreads * kCalls});
  EXPECT_EQ(snapshot.series[0].cumulative.front(), uint64_t{kThreads * kCalls});  // <= 0.5 ms
}

}  // namespace
}  // namespace ringleader
