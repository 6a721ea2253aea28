#include "coordinator/http/ha_metrics_text.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(HaMetricsTextTest, ALeaderWithEtcdCalls) {
  RpcStats stats({0.001, 0.01});
  stats.Record("Txn", absl::StatusCode::kOk, absl::Microseconds(500));
  stats.Record("Txn", absl::StatusCode::kOk, absl::Milliseconds(5));
  stats.Record("LeaseKeepAlive", absl::StatusCode::kUnavailable, absl::Seconds(2));
  HaMetrics metrics;
  metrics.leading = true;
  metrics.leader_changes = 3;
  metrics.terms_won = 2;
  metrics.etcd_calls = stats.Take();
  const std::string text = HaMetricsText(metrics);
  EXPECT_THAT(text, HasSubstr("\nringleader_leader 1\n"));
  EXPECT_THAT(text, HasSubstr("\nringleader_leader_changes_total 3\n"));
  EXPECT_THAT(text, HasSubstr("\nringleader_leader_terms_total 2\n"));
  EXPECT_THAT(text, HasSubstr("ringleader_etcd_calls_total{call=\"Txn\",code=\"OK\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("ringleader_etcd_call_duration_seconds_bucket{call=\"Txn\","
                              "code=\"OK\",le=\"0.001\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("ringleader_etcd_calls_total{call=\"LeaseKeepAlive\","
                              "code=\"UNAVAILABLE\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("# error")));
}

TEST(HaMetricsTextTest, AStandbyWithoutCallsYet) {
  const std::string text = HaMetricsText(HaMetrics{});
  EXPECT_THAT(text, HasSubstr("\nringleader_leader 0\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE ringleader_etcd_call_duration_seconds histogram"));
  EXPECT_THAT(text, Not(HasSubstr("# error")));
}

}  // namespace
}  // namespace ringleader
