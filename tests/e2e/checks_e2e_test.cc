// End to end, the coordinator judging every step: real coordinator, worker daemons and rank
// processes on 127.0.0.1. Each fault is detected with the right alarm kind, rank(s) and step,
// and under checks.on_desync "fail" the job is stopped; a clean job raises nothing. (Crashed,
// frozen and lost ranks, unused parameters and mutated configs: failures_e2e_test and
// kill_e2e_test.)
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/cluster_test.h"

namespace ringleader {
namespace e2e {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kJobTimeout = absl::Seconds(90);

class ChecksE2eTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() { StartCluster(ClusterOptions()); }

  // Submits `spec` and waits for the end; fails the test if it does not end.
  v1::JobStatus Run(const v1::JobSpec& spec) { return RunJob(spec, kJobTimeout).final; }

  // The job's alarms of `kind`.
  static std::vector<v1::Alarm> AlarmsOf(const v1::JobStatus& job, v1::Alarm::Kind kind) {
    std::vector<v1::Alarm> out;
    for (const v1::Alarm& a : job.alarms()) {
      if (a.kind() == kind) out.push_back(a);
    }
    return out;
  }

  static std::string LastReason(const v1::JobStatus& job) {
    return job.transitions_size() == 0 ? "" : job.transitions().rbegin()->reason();
  }
};

TEST_F(ChecksE2eTest, ACleanJobPassesEveryStepWithoutAnAlarm) {
  v1::JobSpec spec = SmallSyntheticSpec("clean-checks");
  spec.set_epochs(2);
  const v1::JobStatus job = Run(spec);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(job);
  EXPECT_EQ(job.alarms_size(), 0) << job.alarms(0).message();
  EXPECT_EQ(job.verdict().result(), v1::Verdict::PASS);
  EXPECT_EQ(job.verdict().steps_judged(), 32u);  // 2 epochs x 16 steps, every one judged
  EXPECT_GT(job.verdict().samples_per_second(), 0);
}

TEST_F(ChecksE2eTest, ARankThatBypassesSyncFailsTheJobAtStepOneNamingIt) {
  v1::JobSpec spec = SmallSyntheticSpec("bypass-one");
  spec.mutable_model()->mutable_faults()->set_bypass_sync(true);
  spec.mutable_model()->mutable_faults()->set_bypass_sync_rank(1);
  const v1::JobStatus job = Run(spec);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(LastReason(job), HasSubstr("check failed: NOT_SYNCHRONIZED: step 1: rank 1"));
  const std::vector<v1::Alarm> alarms = AlarmsOf(job, v1::Alarm::NOT_SYNCHRONIZED);
  ASSERT_EQ(alarms.size(), 1u);
  EXPECT_EQ(alarms[0].step(), 1u);  // detected within one step of the fault
  EXPECT_THAT(alarms[0].ranks(), ElementsAre(1u));
  EXPECT_TRUE(alarms[0].failed_job());
  EXPECT_EQ(job.verdict().result(), v1::Verdict::FAIL);
  EXPECT_EQ(job.verdict().first_bad_step(), 1u);
  EXPECT_EQ(job.verdict().first_bad_size(), 2);
}

TEST_F(ChecksE2eTest, EveryRankBypassingSyncIsCaughtAtStepOne) {
  v1::JobSpec spec = SmallSyntheticSpec("bypass-all");
  spec.mutable_model()->mutable_faults()->set_bypass_sync_all_ranks(true);
  const v1::JobStatus job = Run(spec);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  const std::vector<v1::Alarm> alarms = AlarmsOf(job, v1::Alarm::NOT_SYNCHRONIZED);
  ASSERT_EQ(alarms.size(), 1u) << LastReason(job);
  EXPECT_EQ(alarms[0].step(), 1u);
  EXPECT_THAT(alarms[0].ranks(), ElementsAre(0u, 1u));
  EXPECT_THAT(alarms[0].message(), HasSubstr("no rank synchronised its gradients"));
  EXPECT_THAT(alarms[0].message(), HasSubstr("issued no collective"));
}

// Under "warn" the job runs to the end; the first drift measurement after the fault names the
// tensor that drifted.
TEST_F(ChecksE2eTest, UnderWarnABypassIsReportedWithDriftAndTheJobRunsOn) {
  v1::JobSpec spec = SmallSyntheticSpec("bypass-warn");
  spec.mutable_model()->mutable_faults()->set_bypass_sync(true);
  spec.mutable_model()->mutable_faults()->set_bypass_sync_rank(1);
  spec.mutable_checks()->set_on_desync("warn");
  const v1::JobStatus job = Run(spec);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(job);
  EXPECT_EQ(job.verdict().result(), v1::Verdict::WARN);
  const std::vector<v1::Alarm> unsynced = AlarmsOf(job, v1::Alarm::NOT_SYNCHRONIZED);
  ASSERT_EQ(unsynced.size(), 1u);
  EXPECT_EQ(unsynced[0].step(), 1u);
  EXPECT_EQ(unsynced[0].repeats(), 15u);  // every one of the 16 steps, one alarm
  EXPECT_FALSE(unsynced[0].failed_job());
  const std::vector<v1::Alarm> drift = AlarmsOf(job, v1::Alarm::DRIFT);
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0].step(), 4u);  // the first drift check (drift_interval_steps 4)
  EXPECT_THAT(drift[0].tensor(), ::testing::MatchesRegex("fc[0-9]+\\.(weight|bias)"));
  // Every rank measures the same global max|W_r - W_0|.
  EXPECT_THAT(drift[0].ranks(), ElementsAre(0u, 1u));
}

TEST_F(ChecksE2eTest, ANanLossIsNamedWithItsRankAndStep) {
  v1::JobSpec spec = SmallSyntheticSpec("nan-loss");
  spec.mutable_model()->mutable_faults()->set_nan_loss_rank(1);
  spec.mutable_model()->mutable_faults()->set_nan_loss_at_step(3);
  const v1::JobStatus job = Run(spec);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  const std::vector<v1::Alarm> alarms = AlarmsOf(job, v1::Alarm::LOSS_NOT_FINITE);
  ASSERT_EQ(alarms.size(), 1u) << LastReason(job);
  EXPECT_EQ(alarms[0].step(), 3u);
  EXPECT_THAT(alarms[0].ranks(), ElementsAre(1u));
  EXPECT_THAT(LastReason(job), HasSubstr("rank 1"));
  EXPECT_THAT(LastReason(job), HasSubstr("step 3"));
}

TEST_F(ChecksE2eTest, ASlowRankIsFlaggedAsAStragglerAndTheJobSucceeds) {
  v1::JobSpec spec = SmallSyntheticSpec("slow-rank");
  spec.set_epochs(3);  // 48 steps: two straggler windows of 20 steps (600 ms) in a row
  spec.mutable_model()->mutable_faults()->set_slow_rank(1);
  spec.mutable_model()->mutable_faults()->set_slow_ms(30);
  const v1::JobStatus job = Run(spec);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(job);
  const std::vector<v1::Alarm> alarms = AlarmsOf(job, v1::Alarm::STRAGGLER);
  ASSERT_EQ(alarms.size(), 1u);
  EXPECT_THAT(alarms[0].ranks(), ElementsAre(1u));
  EXPECT_FALSE(alarms[0].failed_job());
  EXPECT_THAT(alarms[0].message(), HasSubstr("suspected cause: compute"));
  EXPECT_THAT(alarms[0].message(), HasSubstr("the other ranks waited"));  // arrival evidence
  EXPECT_EQ(job.verdict().result(), v1::Verdict::WARN);
  ASSERT_EQ(job.stragglers_size(), 2);
  EXPECT_TRUE(job.stragglers(1).flagged());
  EXPECT_GT(job.stragglers(1).score(), 0.75);
  EXPECT_GT(job.stragglers(1).mean_wait_caused_ms(), 15);  // 30 ms late, less its compute
  EXPECT_FALSE(job.stragglers(0).flagged());
}

}  // namespace
}  // namespace e2e
}  // namespace ringleader
