// End to end, failures the cluster must catch and name within seconds, never hanging: a rank
// process that crashes, a rank whose spec was mutated (fingerprint mismatch), and a parameter
// unused on one rank without find_unused_parameters. After each failure the daemons live on and
// take the next job.
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/cluster_test.h"

namespace ringleader {
namespace e2e {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr absl::Duration kJobTimeout = absl::Seconds(60);
// The rank-process test hook the daemons pass on: rank 1 of jobs named like this mutates its spec.
constexpr char kMutatedJobName[] = "fingerprint-mismatch-e2e";

class FailuresE2eTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.worker_flags = {
        absl::StrCat("--rank_args=--test_only_mutate_spec=", kMutatedJobName, ":1")};
    StartCluster(options);
  }

  JobHistory Run(const v1::JobSpec& spec) { return RunJob(spec, kJobTimeout); }

  // Milliseconds between the job's RUNNING and terminal transitions (-1 if either is missing).
  static int64_t RunningToEndMs(const v1::JobStatus& job) {
    int64_t running = -1;
    for (const v1::StateTransition& t : job.transitions()) {
      if (t.state() == v1::JOB_STATE_RUNNING) running = t.time_unix_ms();
    }
    if (running < 0 || job.transitions().empty()) return -1;
    return job.transitions().rbegin()->time_unix_ms() - running;
  }
};

TEST_F(FailuresE2eTest, CrashedRankFailsTheJobNamingRankAndSignalAndTheDaemonsCarryOn) {
  v1::JobSpec spec = SmallSyntheticSpec("crash-e2e");
  spec.mutable_model()->mutable_faults()->set_crash_rank(1);
  spec.mutable_model()->mutable_faults()->set_crash_at_step(3);
  const JobHistory crashed = Run(spec);
  ASSERT_EQ(crashed.final.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(LastReason(crashed.final),
              AllOf(HasSubstr("rank 1"), HasSubstr("signal 6 (SIGABRT)")));
  const int64_t to_failure = RunningToEndMs(crashed.final);
  EXPECT_GE(to_failure, 0);
  EXPECT_LT(to_failure, 5000) << "the crash must fail the job within seconds";

  // Both daemons survived their ranks and run the next job to success.
  EXPECT_TRUE(cluster_->WorkerRunning(0));
  EXPECT_TRUE(cluster_->WorkerRunning(1));
  ASSERT_TRUE(cluster_->WaitForIdleWorkers(2, absl::Seconds(30)).ok());
  const JobHistory next = Run(SmallSyntheticSpec("after-crash-e2e"));
  EXPECT_EQ(next.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(next.final);
  EXPECT_EQ(next.final.ranks(0).last_step().drift(), 0.0);
}

TEST_F(FailuresE2eTest, RankWithAMutatedSpecFailsTheJobNamingTheRank) {
  const JobHistory history = Run(SmallSyntheticSpec(kMutatedJobName));
  ASSERT_EQ(history.final.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(LastReason(history.final), AllOf(HasSubstr("rank 1"), HasSubstr("fingerprint")));
  EXPECT_TRUE(cluster_->WorkerRunning(0));
  EXPECT_TRUE(cluster_->WorkerRunning(1));
}

TEST_F(FailuresE2eTest, ParameterUnusedOnOneRankFailsTheJobNamingItInsteadOfHanging) {
  v1::JobSpec spec = SmallSyntheticSpec("unused-parameter-e2e");
  spec.mutable_model()->mutable_faults()->set_unused_parameter_rank(1);
  spec.mutable_model()->mutable_faults()->add_unused_parameters_on_rank("fc2.bias");
  const JobHistory history = Run(spec);
  ASSERT_EQ(history.final.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(LastReason(history.final), HasSubstr("fc2.bias"));
  const int64_t to_failure = RunningToEndMs(history.final);
  EXPECT_GE(to_failure, 0);
  EXPECT_LT(to_failure, 5000) << "no hang: the reducer names the parameter at the first step";
}

}  // namespace
}  // namespace e2e
}  // namespace ringleader
