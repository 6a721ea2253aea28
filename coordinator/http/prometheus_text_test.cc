// The Prometheus text format: HELP/TYPE lines, escaping, numbers, counters, histograms, refusals,
// and the coordinator's page built from snapshots.
#include "coordinator/http/prometheus_text.h"

#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(PrometheusTextTest, GaugeWithHelpTypeAndEscapedLabels) {
  PrometheusTextWriter writer;
  ASSERT_TRUE(writer
                  .Gauge("ringleader_test", "A help text with \\ and\na newline.",
                         {{{{"job", "a\"b\\c\nd"}, {"rank", "0"}}, 1.5}, {{}, 2}})
                  .ok());
  EXPECT_EQ(writer.text(),
            "# HELP ringleader_test A help text with \\\\ and\\na newline.\n"
            "# TYPE ringleader_test gauge\n"
            "ringleader_test{job=\"a\\\"b\\\\c\\nd\",rank=\"0\"} 1.5\n"
            "ringleader_test 2\n");
}

TEST(PrometheusTextTest, NumbersAreShortestExactAndSpecialValuesSpelledAsGoParsesThem) {
  EXPECT_EQ(FormatPrometheusValue(1), "1");
  EXPECT_EQ(FormatPrometheusValue(0.1), "0.1");
  EXPECT_EQ(FormatPrometheusValue(1e-6), "1e-06");
  EXPECT_EQ(FormatPrometheusValue(123456789012), "123456789012");
  EXPECT_EQ(FormatPrometheusValue(-2.5), "-2.5");
  const double third = 1.0 / 3;
  EXPECT_EQ(std::stod(FormatPrometheusValue(third)), third);
  EXPECT_EQ(FormatPrometheusValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatPrometheusValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatPrometheusValue(-std::numeric_limits<double>::infinity()), "-Inf");
}

TEST(PrometheusTextTest, CounterNamesEndInTotal) {
  PrometheusTextWriter writer;
  EXPECT_EQ(writer.Counter("ringleader_heartbeats", "h", {{{}, 1}}).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(writer.Counter("ringleader_heartbeats_total", "h", {{{}, 3}}).ok());
  EXPECT_EQ(writer.text(),
            "# HELP ringleader_heartbeats_total h\n"
            "# TYPE ringleader_heartbeats_total counter\n"
            "ringleader_heartbeats_total 3\n");
}

TEST(PrometheusTextTest, HistogramWritesCumulativeBucketsInfSumAndCount) {
  PrometheusTextWriter writer;
  ASSERT_TRUE(writer
                  .Histogram("ringleader_rpc_duration_seconds", "Latency.",
                             {{{{"method", "Heartbeat"}, {"code", "OK"}},
                               {0.005, 0.5},
                               {1, 3},
                               4,
                               2.25}})
                  .ok());
  EXPECT_EQ(writer.text(),
            "# HELP ringleader_rpc_duration_seconds Latency.\n"
            "# TYPE ringleader_rpc_duration_seconds histogram\n"
            "ringleader_rpc_duration_seconds_bucket{method=\"Heartbeat\",code=\"OK\",le=\"0.005\"} "
            "1\n"
            "ringleader_rpc_duration_seconds_bucket{method=\"Heartbeat\",code=\"OK\",le=\"0.5\"} "
            "3\n"
            "ringleader_rpc_duration_seconds_bucket{method=\"Heartbeat\",code=\"OK\",le=\"+Inf\"} "
            "4\n"
            "ringleader_rpc_duration_seconds_sum{method=\"Heartbeat\",code=\"OK\"} 2.25\n"
            "ringleader_rpc_duration_seconds_count{method=\"Heartbeat\",code=\"OK\"} 4\n");
}

TEST(PrometheusTextTest, RefusesBadNamesRepeatsAndHistogramsThatDoNotAddUp) {
  PrometheusTextWriter writer;
  EXPECT_EQ(writer.Gauge("9lives", "h", {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer.Gauge("has-dash", "h", {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer.Gauge("ok", "h", {{{{"bad-label", "x"}}, 1}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer.Gauge("ok", "h", {{{{"__reserved", "x"}}, 1}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer.Gauge("ok", "h", {{{{"a", "x"}, {"a", "y"}}, 1}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer.Histogram("h", "h", {{{{"le", "1"}}, {1}, {1}, 1, 1}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer.Histogram("h", "h", {{{}, {1, 0.5}, {1, 1}, 1, 1}}).code(),
            absl::StatusCode::kInvalidArgument);  // bounds not ascending
  EXPECT_EQ(writer.Histogram("h", "h", {{{}, {0.5, 1}, {2, 1}, 2, 1}}).code(),
            absl::StatusCode::kInvalidArgument);  // not cumulative
  EXPECT_EQ(writer.Histogram("h", "h", {{{}, {0.5}, {3}, 2, 1}}).code(),
            absl::StatusCode::kInvalidArgument);  // a bucket above the count
  EXPECT_EQ(writer.Histogram("h", "h", {{{}, {0.5}, {}, 2, 1}}).code(),
            absl::StatusCode::kInvalidArgument);  // counts missing
  EXPECT_EQ(writer.text(), "");  // nothing written by a refused family
  ASSERT_TRUE(writer.Gauge("ok", "h", {}).ok());
  EXPECT_EQ(writer.Gauge("ok", "again", {}).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(writer.text(), "# HELP ok h\n# TYPE ok gauge\n");
}

TEST(PrometheusTextTest, CoordinatorPageHasEverySeriesWithItsLabels) {
  Coordinator::MetricsSnapshot snapshot;
  snapshot.workers_by_state = {{v1::WORKER_STATE_IDLE, 1}, {v1::WORKER_STATE_BUSY, 2}};
  snapshot.jobs_by_state = {{v1::JOB_STATE_RUNNING, 1}, {v1::JOB_STATE_FAILED, 0}};
  snapshot.alarms_by_kind = {{v1::Alarm::NOT_SYNCHRONIZED, 3}};
  snapshot.heartbeats_received = 42;
  snapshot.restarts = 2;
  snapshot.jobs_archived = 5;
  Coordinator::RankMetrics rank;
  rank.job = "job-000001";
  rank.rank = 1;
  rank.step = 17;
  rank.loss = 0.5;
  rank.samples_per_second = 3200;
  rank.local_grad_norm = 1.25;
  rank.synced_grad_norm = 1.5;
  rank.drift = 0;
  rank.step_seconds = 0.01;
  rank.comm_seconds = 0.002;
  rank.straggler_score = 1;
  rank.straggler_flagged = true;
  Coordinator::RankMetrics quiet;  // no samples/s, drift or straggler score yet
  quiet.job = "job-000001";
  quiet.rank = 0;
  quiet.loss = std::nan("");
  snapshot.ranks = {quiet, rank};
  RpcStats stats({0.1, 1});
  stats.Record("Heartbeat", absl::StatusCode::kOk, absl::Milliseconds(50));
  stats.Record("GetJob", absl::StatusCode::kNotFound, absl::Seconds(2));

  const std::string page = CoordinatorMetricsText(snapshot, stats.Take());
  for (const char* line : {
           "# TYPE ringleader_workers gauge\n",
           "ringleader_workers{state=\"idle\"} 1\n",
           "ringleader_workers{state=\"busy\"} 2\n",
           "ringleader_jobs{state=\"running\"} 1\n",
           "ringleader_jobs{state=\"failed\"} 0\n",
           "ringleader_alarms{kind=\"not_synchronized\"} 3\n",
           "# TYPE ringleader_heartbeats_received_total counter\n",
           "ringleader_heartbeats_received_total 42\n",
           "ringleader_job_restarts_total 2\n",
           "# TYPE ringleader_jobs_archived_total counter\n",
           "ringleader_jobs_archived_total 5\n",
           "ringleader_rank_step{job_id=\"job-000001\",rank=\"1\"} 17\n",
           "ringleader_rank_loss{job_id=\"job-000001\",rank=\"1\"} 0.5\n",
           "ringleader_rank_loss{job_id=\"job-000001\",rank=\"0\"} NaN\n",
           "ringleader_rank_samples_per_second{job_id=\"job-000001\",rank=\"1\"} 3200\n",
           "ringleader_rank_local_grad_norm{job_id=\"job-000001\",rank=\"1\"} 1.25\n",
           "ringleader_rank_synced_grad_norm{job_id=\"job-000001\",rank=\"1\"} 1.5\n",
           "ringleader_rank_drift{job_id=\"job-000001\",rank=\"1\"} 0\n",
           "ringleader_rank_step_seconds{job_id=\"job-000001\",rank=\"1\"} 0.01\n",
           "ringleader_rank_comm_seconds{job_id=\"job-000001\",rank=\"1\"} 0.002\n",
           "ringleader_rank_straggler_score{job_id=\"job-000001\",rank=\"1\"} 1\n",
           "ringleader_rank_straggler_flagged{job_id=\"job-000001\",rank=\"1\"} 1\n",
           "# TYPE ringleader_rpcs_total counter\n",
           "ringleader_rpcs_total{method=\"Heartbeat\",code=\"OK\"} 1\n",
           "ringleader_rpcs_total{method=\"GetJob\",code=\"NOT_FOUND\"} 1\n",
           "# TYPE ringleader_rpc_duration_seconds histogram\n",
           "ringleader_rpc_duration_seconds_bucket{method=\"Heartbeat\",code=\"OK\","
           "le=\"0.1\"} 1\n",
           "ringleader_rpc_duration_seconds_bucket{method=\"GetJob\",code=\"NOT_FOUND\","
           "le=\"1\"} 0\n",
           "ringleader_rpc_duration_seconds_bucket{method=\"GetJob\",code=\"NOT_FOUND\","
           "le=\"+Inf\"} 1\n",
           "ringleader_rpc_duration_seconds_sum{method=\"GetJob\",code=\"NOT_FOUND\"} 2\n",
       }) {
    EXPECT_THAT(page, HasSubstr(line));
  }
  // Figures a rank does not have yet are left out, not written as 0.
  EXPECT_THAT(page, Not(HasSubstr("ringleader_rank_samples_per_second{job_id=\"job-000001\","
                                  "rank=\"0\"}")));
  EXPECT_THAT(page, Not(HasSubstr("ringleader_rank_drift{job_id=\"job-000001\",rank=\"0\"}")));
  EXPECT_THAT(page, Not(HasSubstr("ringleader_rank_straggler_flagged{job_id=\"job-000001\","
                                  "rank=\"0\"}")));
  EXPECT_THAT(page, Not(HasSubstr("# error")));
}

}  // namespace
}  // namespace ringleader
