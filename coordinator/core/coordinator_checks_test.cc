// The Coordinator acting on its step judge: every reported step is judged, alarms appear in the
// job's status with the verdict, "fail" stops the job and tells the ranks, "warn" does not, each
// attempt is judged afresh, and fault injection needs the coordinator's consent. Fake clock.
#include <string>
#include <vector>

#include "coordinator/core/coordinator_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CoordinatorChecksTest : public CoordinatorTest {
 protected:
  // A job of world size 2 on workers "a" and "b", joined, with `checks` applied to its spec.
  AttemptId StartJob(const std::string& on_desync) {
    a_ = Register("a");
    b_ = Register("b");
    v1::JobSpec spec;
    spec.set_name("checked");
    spec.set_world_size(2);
    spec.mutable_checks()->set_on_desync(on_desync);
    absl::StatusOr<Coordinator::Submitted> submitted = coordinator_.SubmitJob(spec);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    job_ = submitted->id;
    TakeAndJoin({a_, b_});
    return AttemptId{job_, Generation(1)};
  }

  static v1::StepReport Step(uint64_t step, double local, double synced) {
    v1::StepReport r;
    r.set_step(step);
    r.set_loss(1.0);
    r.set_local_grad_norm(local);
    r.set_synced_grad_norm(synced);
    r.set_collectives(2);
    r.set_collective_digest(7);
    return r;
  }

  WorkerId a_, b_;
  JobId job_;
};

TEST_F(CoordinatorChecksTest, BatchedCleanStepsAreAllJudgedAndPass) {
  const AttemptId attempt = StartJob("fail");
  std::vector<v1::StepReport> batch0, batch1;
  for (uint64_t s = 1; s <= 5; ++s) {
    batch0.push_back(Step(s, 1.0, 2.0));
    batch1.push_back(Step(s, 3.0, 2.0));
  }
  ASSERT_TRUE(coordinator_.ReportProgress(attempt, Rank(0), batch0, {}).ok());
  ASSERT_FALSE(coordinator_.ReportProgress(attempt, Rank(1), batch1, {})->stop);
  const v1::JobStatus job = Job(job_);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job.alarms_size(), 0);
  EXPECT_EQ(job.verdict().result(), v1::Verdict::PASS);
  EXPECT_EQ(job.verdict().steps_judged(), 5u);
}

// A rank that reported a suspicious step can wait for the verdict on it: every answer says how
// far the judge got, which is as far as the slowest rank reported.
TEST_F(CoordinatorChecksTest, ProgressAnswersSayHowManyStepsWereJudged) {
  const AttemptId attempt = StartJob("fail");
  absl::StatusOr<Coordinator::StopSignal> ahead =
      coordinator_.ReportProgress(attempt, Rank(0), {Step(1, 1.0, 2.0), Step(2, 1.0, 2.0)}, {});
  ASSERT_TRUE(ahead.ok()) << ahead.status();
  EXPECT_EQ(ahead->steps_judged, 0u) << "rank 1 has reported no step yet";
  absl::StatusOr<Coordinator::StopSignal> behind =
      coordinator_.ReportProgress(attempt, Rank(1), {Step(1, 3.0, 2.0)}, {});
  ASSERT_TRUE(behind.ok()) << behind.status();
  EXPECT_EQ(behind->steps_judged, 1u);
  absl::StatusOr<Coordinator::StopSignal> keepalive =
      coordinator_.ReportProgress(attempt, Rank(0), {}, {});
  ASSERT_TRUE(keepalive.ok());
  EXPECT_FALSE(keepalive->stop);
  EXPECT_EQ(keepalive->steps_judged, 1u);
}

TEST_F(CoordinatorChecksTest, UnderFailAnUnsyncedRankStopsTheJobNamingItAndTheStep) {
  const AttemptId attempt = StartJob("fail");
  clock_.Advance(absl::Seconds(3));
  ASSERT_TRUE(coordinator_.ReportProgress(attempt, Rank(0), {Step(1, 1.0, 2.0)}, {}).ok());
  // Rank 1 stepped with its local gradients: its report completes step 1, which fails.
  absl::StatusOr<Coordinator::StopSignal> answer =
      coordinator_.ReportProgress(attempt, Rank(1), {Step(1, 3.0, 3.0)}, {});
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_TRUE(answer->stop);
  EXPECT_THAT(answer->reason, HasSubstr("check failed: NOT_SYNCHRONIZED: step 1: rank 1"));
  const v1::JobStatus job = Job(job_);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  ASSERT_EQ(job.alarms_size(), 1);
  EXPECT_EQ(job.alarms(0).kind(), v1::Alarm::NOT_SYNCHRONIZED);
  EXPECT_THAT(job.alarms(0).ranks(), ElementsAre(1u));
  EXPECT_TRUE(job.alarms(0).failed_job());
  EXPECT_EQ(job.alarms(0).detected_unix_ms(), absl::ToUnixMillis(clock_.Now()));
  EXPECT_EQ(job.verdict().result(), v1::Verdict::FAIL);
  EXPECT_EQ(job.verdict().first_bad_step(), 1u);
  // Rank 0's next report is answered with stop, and both workers are told to abort.
  EXPECT_TRUE(coordinator_.ReportProgress(attempt, Rank(0), {Step(2, 1.0, 2.0)}, {})->stop);
  EXPECT_EQ(coordinator_.Heartbeat(a_, 1)->size(), 1u);
  EXPECT_THAT(log_, ::testing::Contains(HasSubstr("alarm NOT_SYNCHRONIZED")));
}

TEST_F(CoordinatorChecksTest, UnderWarnTheAlarmIsShownAndTheJobRunsOn) {
  const AttemptId attempt = StartJob("warn");
  ASSERT_TRUE(coordinator_.ReportProgress(attempt, Rank(0), {Step(1, 1.0, 2.0)}, {}).ok());
  EXPECT_FALSE(coordinator_.ReportProgress(attempt, Rank(1), {Step(1, 3.0, 3.0)}, {})->stop);
  const v1::JobStatus job = Job(job_);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  ASSERT_EQ(job.alarms_size(), 1);
  EXPECT_FALSE(job.alarms(0).failed_job());
  EXPECT_EQ(job.verdict().result(), v1::Verdict::WARN);
  // The rest of the job still succeeds.
  ASSERT_TRUE(coordinator_.FinishRank(attempt, Rank(0), {true, "", ""}).ok());
  ASSERT_TRUE(coordinator_.FinishRank(attempt, Rank(1), {true, "", ""}).ok());
  EXPECT_EQ(Job(job_).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(Job(job_).verdict().result(), v1::Verdict::WARN);
}

TEST_F(CoordinatorChecksTest, EveryReportedStepOfEveryRankIsInTheMetricsHistory) {
  const AttemptId attempt = StartJob("fail");
  ASSERT_TRUE(coordinator_
                  .ReportProgress(attempt, Rank(0), {Step(1, 1.0, 2.0), Step(2, 1.5, 2.5)}, {})
                  .ok());
  ASSERT_TRUE(coordinator_.ReportProgress(attempt, Rank(1), {Step(1, 3.0, 2.0)}, {}).ok());
  absl::StatusOr<v1::GetJobMetricsResponse> metrics = coordinator_.GetJobMetrics(job_);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->generation(), 1u);
  ASSERT_EQ(metrics->points_size(), 3);
  EXPECT_EQ(metrics->points(1).step(), 1u);
  EXPECT_EQ(metrics->points(1).rank(), 1u);
  EXPECT_DOUBLE_EQ(metrics->points(1).local_grad_norm(), 3.0);
  EXPECT_EQ(metrics->points(2).step(), 2u);
  EXPECT_EQ(coordinator_.GetJobMetrics(JobId("job-999999")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CoordinatorChecksTest, FaultInjectionIsRefusedUnlessTheCoordinatorAllowsIt) {
  v1::JobSpec spec;
  spec.set_world_size(2);
  spec.mutable_model()->mutable_faults()->set_crash_rank(1);
  spec.mutable_model()->mutable_faults()->set_crash_at_step(3);
  absl::StatusOr<Coordinator::Submitted> refused = coordinator_.SubmitJob(spec);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("start the coordinator with --allow_fault_injection"));

  CoordinatorOptions options = Options();
  options.allow_fault_injection = true;
  InMemoryJobStore store;
  Coordinator permissive(options, &clock_, &store);
  EXPECT_TRUE(permissive.SubmitJob(spec).ok());
}

}  // namespace
}  // namespace ringleader
