// End to end, the durable job store: a coordinator with --state_dir is killed with SIGKILL and
// started again on the same directory. Finished jobs are all there; a job that was running goes
// on through the outage (its ranks never stop; their daemons register again with them) and ends
// SUCCEEDED as generation 1; new jobs run, and ids never repeat. A coordinator down for longer
// than its grace: the ranks stop and the job resumes from its last checkpoint as generation 2.
// A second coordinator on the same directory refuses to start.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/cluster_test.h"
#include "worker/daemon/child_process.h"

namespace ringleader {
namespace e2e {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr absl::Duration kJobTimeout = absl::Seconds(90);

std::string StateDir() { return (fs::path(std::getenv("TEST_TMPDIR")) / "state").string(); }

class DurabilityE2eTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.coordinator_flags = {"--state_dir=" + StateDir()};
    StartCluster(options);
  }
};

TEST_F(DurabilityE2eTest, JobsAndIdsSurviveAKilledCoordinator) {
  const JobHistory done = RunJob(SmallSyntheticSpec("before-crash"), kJobTimeout);
  ASSERT_EQ(done.final.state(), v1::JOB_STATE_SUCCEEDED);
  const std::string done_id = done.final.job_id();

  // A longer job, checkpointing every 8 steps, that is running when the coordinator dies.
  v1::JobSpec long_spec = SmallSyntheticSpec("running-at-crash");
  long_spec.set_epochs(12);
  long_spec.set_max_restarts(1);
  long_spec.set_checkpoint_dir((fs::path(std::getenv("TEST_TMPDIR")) / "ckpt").string());
  long_spec.set_checkpoint_interval_steps(8);
  long_spec.mutable_model()->mutable_faults()->set_slow_rank(0);  // 20 ms a step: ~4 s in all
  long_spec.mutable_model()->mutable_faults()->set_slow_ms(20);
  absl::StatusOr<std::string> running_id = cluster_->Submit(long_spec);
  ASSERT_TRUE(running_id.ok()) << running_id.status();
  ASSERT_TRUE(WaitUntil(
                  [&] {
                    absl::StatusOr<v1::JobStatus> job = cluster_->GetJob(*running_id);
                    return job.ok() && job->last_checkpoint_step() >= 16;
                  },
                  absl::Seconds(60), "two checkpoints")
                  .ok())
      << cluster_->LogTails();

  ASSERT_TRUE(cluster_->KillAndRestartCoordinator().ok()) << cluster_->LogTails();

  const CliResult listed = cluster_->RunCli({"list"}, absl::Seconds(30));
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_THAT(listed.output, HasSubstr(done_id));
  EXPECT_THAT(listed.output, HasSubstr(*running_id));
  const CliResult status = cluster_->RunCli({"status", done_id}, absl::Seconds(30));
  EXPECT_THAT(status.output, HasSubstr("SUCCEEDED"));
  // The ranks trained on through the outage and their daemons came back with them: the same
  // attempt ends the job, nothing was restarted or resumed.
  const JobHistory went_on = cluster_->WaitForEnd(*running_id, absl::Seconds(90));
  ASSERT_EQ(went_on.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(went_on.final);
  EXPECT_EQ(went_on.final.generation(), 1u);
  EXPECT_EQ(went_on.final.restarts(), 0u);
  ASSERT_EQ(went_on.final.attempts_size(), 1);
  EXPECT_EQ(went_on.final.attempts(0).resumed_from_step(), 0u);
  bool back = false;
  for (const v1::JobEvent& event : went_on.final.events()) {
    back = back || absl::StrContains(event.message(), "every rank of generation 1 is back");
  }
  EXPECT_TRUE(back) << went_on.final.DebugString();
  // No correctness alarm across the restart (rank 0 is slowed on purpose: a straggler).
  for (const v1::Alarm& alarm : went_on.final.alarms()) {
    EXPECT_EQ(alarm.kind(), v1::Alarm::STRAGGLER) << alarm.message();
  }

  // The next job runs and gets the next id.
  ASSERT_TRUE(cluster_->WaitForIdleWorkers(2, absl::Seconds(60)).ok()) << cluster_->LogTails();
  const JobHistory after = RunJob(SmallSyntheticSpec("after-crash"), kJobTimeout);
  EXPECT_EQ(after.final.state(), v1::JOB_STATE_SUCCEEDED)
      << after.final.transitions().rbegin()->reason();
  EXPECT_EQ(after.final.job_id(), "job-000003");
}

TEST_F(DurabilityE2eTest, ASecondCoordinatorOnTheSameStateDirRefusesToStart) {
  const std::string log = (fs::path(std::getenv("TEST_TMPDIR")) / "second.log").string();
  auto second = ChildProcess::Start({RunfilePath("coordinator/ringleader-coordinator"),
                                     "--listen=127.0.0.1:0", "--insecure",
                                     "--state_dir=" + StateDir()},
                                    log);
  ASSERT_TRUE(second.ok()) << second.status();
  const ExitInfo exit = (*second)->Wait();
  EXPECT_EQ(exit.exit_code, 1) << exit.Describe();
  std::ifstream in(log);
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(output, HasSubstr("is in use by another coordinator (pid "));
}

// A coordinator with a 2 s grace, down for 10 s: past the grace the daemons stop their ranks,
// and the restarted coordinator restarts the job from its last checkpoint.
class OutagePastGraceE2eTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.coordinator_flags = {
        "--state_dir=" + (fs::path(std::getenv("TEST_TMPDIR")) / "state-grace").string(),
        "--coordinator_grace=2s"};
    StartCluster(options);
  }
};

TEST_F(OutagePastGraceE2eTest, ACoordinatorBackAfterItsGraceRestartsTheJobFromItsCheckpoint) {
  v1::JobSpec spec = SmallSyntheticSpec("outage-past-grace");
  spec.set_epochs(12);
  spec.set_max_restarts(1);
  spec.set_checkpoint_dir((fs::path(std::getenv("TEST_TMPDIR")) / "ckpt-grace").string());
  spec.set_checkpoint_interval_steps(8);
  spec.mutable_model()->mutable_faults()->set_slow_rank(0);
  spec.mutable_model()->mutable_faults()->set_slow_ms(20);
  absl::StatusOr<std::string> id = cluster_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(WaitUntil(
                  [&] {
                    absl::StatusOr<v1::JobStatus> job = cluster_->GetJob(*id);
                    return job.ok() && job->last_checkpoint_step() >= 16;
                  },
                  absl::Seconds(60), "two checkpoints")
                  .ok())
      << cluster_->LogTails();

  ASSERT_TRUE(cluster_->KillAndRestartCoordinator(absl::Seconds(10)).ok()) << cluster_->LogTails();

  const JobHistory resumed = cluster_->WaitForEnd(*id, absl::Seconds(90));
  ASSERT_EQ(resumed.final.state(), v1::JOB_STATE_SUCCEEDED)
      << LastReason(resumed.final) << " (ended " << resumed.ended << " after "
      << absl::FormatDuration(resumed.elapsed) << ")";
  EXPECT_EQ(resumed.final.generation(), 2u);
  ASSERT_EQ(resumed.final.attempts_size(), 2);
  EXPECT_THAT(resumed.final.attempts(0).end_reason(),
              ::testing::AnyOf(HasSubstr("came back without its rank process"),
                               HasSubstr("did not come back within 2s")));
  EXPECT_GE(resumed.final.attempts(1).resumed_from_step(), 16u);
}

}  // namespace
}  // namespace e2e
}  // namespace ringleader
