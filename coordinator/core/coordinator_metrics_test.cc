// Coordinator::Metrics (the /metrics snapshot) driven through the core's plain C++ API, and the
// RPC handler's counts and latencies on the fake clock.
#include <optional>
#include <string>
#include <vector>

#include "coordinator/core/coordinator_test_util.h"
#include "coordinator/http/prometheus_text.h"
#include "coordinator/rpc/rpc_handler.h"
#include "coordinator/rpc/rpc_stats.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;

class CoordinatorMetricsTest : public CoordinatorTest {
 protected:
  static v1::StepReport Step(uint64_t step, double compute_ms, double comm_ms) {
    v1::StepReport r;
    r.set_step(step);
    r.set_loss(2.0 / static_cast<double>(step));
    r.set_local_grad_norm(1.0 + static_cast<double>(step));
    r.set_synced_grad_norm(0.5);
    r.set_collectives(2);
    r.set_collective_digest(7);
    r.set_compute_ms(compute_ms);
    r.set_comm_ms(comm_ms);
    r.set_step_ms(compute_ms + comm_ms);
    return r;
  }
};

TEST_F(CoordinatorMetricsTest, AnIdleCoordinatorListsEveryStateAndKindAtZero) {
  const Coordinator::MetricsSnapshot snapshot = coordinator_.Metrics();
  EXPECT_EQ(snapshot.workers_by_state.size(), 4u);  // idle, busy, lost, quarantined
  EXPECT_EQ(snapshot.jobs_by_state.size(), 6u);     // queued .. cancelled
  EXPECT_EQ(snapshot.alarms_by_kind.size(), 6u);    // grad_norm_mismatch .. straggler
  for (const auto& [state, count] : snapshot.workers_by_state) EXPECT_EQ(count, 0) << state;
  for (const auto& [state, count] : snapshot.jobs_by_state) EXPECT_EQ(count, 0) << state;
  for (const auto& [kind, count] : snapshot.alarms_by_kind) EXPECT_EQ(count, 0) << kind;
  EXPECT_EQ(snapshot.heartbeats_received, 0u);
  EXPECT_EQ(snapshot.restarts, 0u);
  EXPECT_TRUE(snapshot.ranks.empty());
}

TEST_F(CoordinatorMetricsTest, RunningJobRanksStatesAlarmsAndHeartbeats) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  Register("c");
  const JobId job = Submit(2);
  TakeAndJoin({a, b});
  Submit(5);  // more ranks than workers: stays QUEUED
  ASSERT_TRUE(coordinator_.Heartbeat(a, 1).ok());
  ASSERT_TRUE(coordinator_.Heartbeat(b, 1).ok());
  EXPECT_FALSE(coordinator_.Heartbeat(WorkerId("w-99"), 1).ok());  // received, refused

  // 40 steps (two straggler windows of 20 steps and 500 ms in a row): rank 1 computes 20x
  // longer; both measure drift at step 8 only (within tolerance: no DRIFT alarm).
  const AttemptId attempt{job, Generation(1)};
  for (uint32_t rank : {0u, 1u}) {
    std::vector<v1::StepReport> steps;
    for (uint64_t s = 1; s <= 40; ++s) {
      steps.push_back(rank == 0 ? Step(s, 2, 8) : Step(s, 40, 10));
      if (s == 8) {
        steps.back().set_has_drift(true);
        steps.back().set_drift(rank == 0 ? 0 : 1e-9);
      }
    }
    absl::StatusOr<Coordinator::StopSignal> answer =
        coordinator_.ReportProgress(attempt, Rank(rank), steps, {});
    ASSERT_TRUE(answer.ok()) << answer.status();
    ASSERT_FALSE(answer->stop) << answer->reason;
  }
  const v1::JobStatus status = Job(job);
  ASSERT_EQ(status.state(), v1::JOB_STATE_RUNNING);

  const Coordinator::MetricsSnapshot snapshot = coordinator_.Metrics();
  EXPECT_EQ(snapshot.workers_by_state.at(v1::WORKER_STATE_IDLE), 1);
  EXPECT_EQ(snapshot.workers_by_state.at(v1::WORKER_STATE_BUSY), 2);
  EXPECT_EQ(snapshot.workers_by_state.at(v1::WORKER_STATE_LOST), 0);
  EXPECT_EQ(snapshot.jobs_by_state.at(v1::JOB_STATE_RUNNING), 1);
  EXPECT_EQ(snapshot.jobs_by_state.at(v1::JOB_STATE_QUEUED), 1);
  EXPECT_EQ(snapshot.jobs_by_state.at(v1::JOB_STATE_SUCCEEDED), 0);
  EXPECT_EQ(snapshot.alarms_by_kind.at(v1::Alarm::STRAGGLER), 1);
  EXPECT_EQ(snapshot.alarms_by_kind.at(v1::Alarm::DRIFT), 0);
  EXPECT_EQ(snapshot.heartbeats_received, 3u);

  ASSERT_EQ(snapshot.ranks.size(), 2u);
  const double samples_per_step = static_cast<double>(status.spec().batch_size());
  ASSERT_GT(samples_per_step, 0);
  const Coordinator::RankMetrics& fast = snapshot.ranks[0];
  EXPECT_EQ(fast.job, job.value());
  EXPECT_EQ(fast.rank, 0u);
  EXPECT_EQ(fast.step, 40u);
  EXPECT_DOUBLE_EQ(fast.loss, 0.05);
  EXPECT_DOUBLE_EQ(fast.local_grad_norm, 41);
  EXPECT_DOUBLE_EQ(fast.synced_grad_norm, 0.5);
  EXPECT_THAT(fast.samples_per_second, Optional(samples_per_step / 0.01));
  EXPECT_THAT(fast.drift, Optional(0.0)) << "step 8's drift is the last one measured";
  EXPECT_DOUBLE_EQ(fast.step_seconds, 0.01);
  EXPECT_DOUBLE_EQ(fast.comm_seconds, 0.008);
  EXPECT_THAT(fast.straggler_score, Optional(0.0));
  EXPECT_FALSE(fast.straggler_flagged);
  const Coordinator::RankMetrics& slow = snapshot.ranks[1];
  EXPECT_EQ(slow.rank, 1u);
  EXPECT_THAT(slow.drift, Optional(1e-9));
  EXPECT_DOUBLE_EQ(slow.comm_seconds, 0.01);
  EXPECT_THAT(slow.straggler_score, Optional(1.0));
  EXPECT_TRUE(slow.straggler_flagged);

  const std::string page = CoordinatorMetricsText(snapshot, RpcStats().Take());
  EXPECT_THAT(page, HasSubstr("ringleader_jobs{state=\"running\"} 1\n"));
  EXPECT_THAT(page, HasSubstr("ringleader_rank_straggler_flagged{job_id=\"" + job.value() +
                              "\",rank=\"1\"} 1\n"));
  EXPECT_THAT(page, Not(HasSubstr("# error")));
}

TEST_F(CoordinatorMetricsTest, RanksBeforeTheirFirstStepAndEndedJobsShowNoFigures) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  const JobId job = Submit(2);
  TakeAndJoin({a, b});
  ASSERT_TRUE(coordinator_.ReportProgress({job, Generation(1)}, Rank(1), {Step(1, 2, 1)}, {})
                  .ok());
  Coordinator::MetricsSnapshot snapshot = coordinator_.Metrics();
  ASSERT_EQ(snapshot.ranks.size(), 1u);
  EXPECT_EQ(snapshot.ranks[0].rank, 1u);
  EXPECT_EQ(snapshot.ranks[0].drift, std::nullopt);
  EXPECT_EQ(snapshot.ranks[0].straggler_score, std::nullopt);

  ASSERT_TRUE(coordinator_.CancelJob(job, "enough").ok());
  snapshot = coordinator_.Metrics();
  EXPECT_TRUE(snapshot.ranks.empty());
  EXPECT_EQ(snapshot.jobs_by_state.at(v1::JOB_STATE_CANCELLED), 1);
  EXPECT_EQ(snapshot.jobs_by_state.at(v1::JOB_STATE_RUNNING), 0);
}

TEST_F(CoordinatorMetricsTest, RestartsAreCounted) {
  const WorkerId a = Register("a");
  const JobId job = Submit(1, "gloo", /*max_restarts=*/2);
  TakeAndJoin({a});
  ASSERT_TRUE(coordinator_
                  .FinishRank({job, Generation(1)}, Rank(0),
                              Coordinator::RankOutcome{false, "crashed", ""})
                  .ok());
  ASSERT_EQ(Job(job).restarts(), 1u);
  const Coordinator::MetricsSnapshot snapshot = coordinator_.Metrics();
  EXPECT_EQ(snapshot.restarts, 1u);
  // A first fault: placed again at once, waiting for its ranks to join.
  EXPECT_EQ(snapshot.jobs_by_state.at(v1::JOB_STATE_RENDEZVOUS), 1);
  EXPECT_EQ(snapshot.jobs_by_state.at(v1::JOB_STATE_QUEUED), 0);
  EXPECT_EQ(snapshot.jobs_by_state.at(v1::JOB_STATE_RUNNING), 0);
}

TEST_F(CoordinatorMetricsTest, LostWorkersAreCounted) {
  Register("a");
  Register("b");
  Advance(absl::Seconds(11));  // no heartbeat for longer than heartbeat_timeout (10 s)
  const Coordinator::MetricsSnapshot snapshot = coordinator_.Metrics();
  EXPECT_EQ(snapshot.workers_by_state.at(v1::WORKER_STATE_LOST), 2);
  EXPECT_EQ(snapshot.workers_by_state.at(v1::WORKER_STATE_IDLE), 0);
}

// The handler measures on the coordinator's clock: a unary call that does not advance it takes
// 0 s; a long poll lasts from the call until its answer.
TEST_F(CoordinatorMetricsTest, HandlerCountsCallsByMethodAndCodeWithTheirLatency) {
  RpcStats stats({1, 2});
  RpcHandler handler(&coordinator_, &stats);
  const WorkerId worker = Register("a");

  v1::HeartbeatRequest beat;
  beat.set_worker_id("w-99");
  v1::HeartbeatResponse beat_response;
  EXPECT_EQ(handler.Heartbeat(beat, &beat_response).code(), absl::StatusCode::kNotFound);

  v1::WaitAssignmentRequest wait;
  wait.set_worker_id(worker.value());
  wait.set_wait_timeout_ms(1500);
  v1::WaitAssignmentResponse wait_response;
  std::optional<uint64_t> counted_when_done;
  handler.WaitAssignment(wait, &wait_response, [&](absl::Status status) {
    EXPECT_TRUE(status.ok()) << status;
    for (const RpcStats::Series& series : stats.Take().series) {
      if (series.method == "WaitAssignment") counted_when_done = series.count;
    }
  });
  Advance(absl::Milliseconds(1500));
  EXPECT_THAT(counted_when_done, Optional(1u)) << "recorded before the answer is delivered";

  const RpcStats::Snapshot snapshot = stats.Take();
  ASSERT_EQ(snapshot.series.size(), 2u);
  const RpcStats::Series& heartbeat = snapshot.series[0];
  EXPECT_EQ(heartbeat.method, "Heartbeat");
  EXPECT_EQ(heartbeat.code, "NOT_FOUND");
  EXPECT_EQ(heartbeat.count, 1u);
  EXPECT_EQ(heartbeat.sum_seconds, 0);
  const RpcStats::Series& poll = snapshot.series[1];
  EXPECT_EQ(poll.method, "WaitAssignment");
  EXPECT_EQ(poll.code, "OK");
  EXPECT_DOUBLE_EQ(poll.sum_seconds, 1.5);
  EXPECT_THAT(poll.cumulative, ::testing::ElementsAre(0u, 1u));  // le=1: 0, le=2: 1
}

}  // namespace
}  // namespace ringleader
