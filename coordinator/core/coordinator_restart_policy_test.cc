// The restart policy: a first fault of a rank or worker restarts the job at once; the same rank
// or worker failing the job again within the crash-loop window is a crash loop, restarted after
// restart_backoff, doubling per repeat. Failures of unknown cause count as repeats of each other
// only.
#include <algorithm>
#include <string>
#include <vector>

#include "coordinator/core/coordinator_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;

class RestartPolicyTest : public CoordinatorTest {
 protected:
  RestartPolicyTest() : CoordinatorTest(PolicyOptions()) {}

  static CoordinatorOptions PolicyOptions() {
    CoordinatorOptions options = Options();
    options.crash_loop_window = absl::Minutes(1);
    options.rendezvous_timeout = absl::Seconds(5);  // below heartbeat_timeout (10 s)
    return options;
  }

  void SetUp() override {
    a_ = Register("a");
    b_ = Register("b");
    job_ = Submit(2, "gloo", /*max_restarts=*/10);
  }

  void FailRank(const v1::Assignment& assignment) {
    Coordinator::RankOutcome outcome;
    outcome.error = "killed by signal 9";
    ASSERT_TRUE(
        coordinator_.FinishRank(AttemptOf(assignment), Rank(assignment.rank()), outcome).ok());
  }

  // The reason of the job's last restart (its last transition to QUEUED).
  std::string RestartReason() {
    const v1::JobStatus job = Job(job_);
    for (int i = job.transitions_size() - 1; i >= 0; --i) {
      if (job.transitions(i).state() == v1::JOB_STATE_QUEUED) return job.transitions(i).reason();
    }
    ADD_FAILURE() << "the job never went back to the queue";
    return "";
  }

  // Lets `d` pass with the workers heartbeating (they are lost after 10 s of silence).
  void AdvanceAlive(absl::Duration d) {
    while (d > absl::ZeroDuration()) {
      const absl::Duration step = std::min(d, absl::Seconds(5));
      Advance(step);
      ASSERT_TRUE(coordinator_.Heartbeat(a_, 1).ok());
      ASSERT_TRUE(coordinator_.Heartbeat(b_, 1).ok());
      d -= step;
    }
  }

  WorkerId a_;
  WorkerId b_;
  JobId job_;
};

TEST_F(RestartPolicyTest, AFirstFaultIsImmediateAndTheSameRankAgainBacksOffDoubling) {
  FailRank(TakeAndJoin({a_, b_})[1]);
  EXPECT_THAT(RestartReason(),
              EndsWith("; restart 1 of 10 at once, from the last checkpoint (a first fault of "
                       "rank 1 on worker b)"));
  EXPECT_EQ(Job(job_).state(), v1::JOB_STATE_RENDEZVOUS);  // placed again without waiting
  EXPECT_EQ(Job(job_).generation(), 2u);

  FailRank(TakeAndJoin({a_, b_})[1]);
  EXPECT_THAT(RestartReason(),
              EndsWith("; restart 2 of 10 in 1s, from the last checkpoint (rank 1 failed 2 "
                       "times within 1m: a crash loop)"));
  Advance(absl::Milliseconds(999));
  EXPECT_EQ(Job(job_).state(), v1::JOB_STATE_QUEUED);
  Advance(absl::Milliseconds(1));
  EXPECT_EQ(Job(job_).state(), v1::JOB_STATE_RENDEZVOUS);

  FailRank(TakeAndJoin({a_, b_})[1]);
  EXPECT_THAT(RestartReason(), HasSubstr("restart 3 of 10 in 2s, from the last checkpoint "
                                         "(rank 1 failed 3 times within 1m: a crash loop)"));
  Advance(absl::Milliseconds(1999));
  EXPECT_EQ(Job(job_).state(), v1::JOB_STATE_QUEUED);
  Advance(absl::Milliseconds(1));
  FailRank(TakeAndJoin({a_, b_})[1]);
  EXPECT_THAT(RestartReason(), HasSubstr("restart 4 of 10 in 4s"));

  // Each failed attempt names its culprit, durably.
  const v1::JobStatus job = Job(job_);
  ASSERT_GE(job.attempts_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(job.attempts(i).failed()) << i;
    EXPECT_EQ(job.attempts(i).failed_rank(), 1u) << i;
    EXPECT_EQ(job.attempts(i).failed_worker(), "b") << i;
  }
}

TEST_F(RestartPolicyTest, ADifferentRanksFaultIsImmediate) {
  FailRank(TakeAndJoin({a_, b_})[1]);
  FailRank(TakeAndJoin({a_, b_})[0]);
  EXPECT_THAT(RestartReason(), HasSubstr("restart 2 of 10 at once, from the last checkpoint "
                                         "(a first fault of rank 0 on worker a)"));
  EXPECT_EQ(Job(job_).state(), v1::JOB_STATE_RENDEZVOUS);
  // Rank 1 again: its earlier fault counts, the other rank's does not.
  FailRank(TakeAndJoin({a_, b_})[1]);
  EXPECT_THAT(RestartReason(), HasSubstr("restart 3 of 10 in 1s, from the last checkpoint "
                                         "(rank 1 failed 2 times within 1m: a crash loop)"));
}

TEST_F(RestartPolicyTest, AFaultOutsideTheWindowIsForgiven) {
  FailRank(TakeAndJoin({a_, b_})[1]);  // at t0: at once
  std::vector<v1::Assignment> second = TakeAndJoin({a_, b_});
  AdvanceAlive(absl::Seconds(55));
  FailRank(second[1]);  // t0 + 55 s: inside the window
  EXPECT_THAT(RestartReason(), HasSubstr("restart 2 of 10 in 1s"));
  AdvanceAlive(absl::Seconds(5));
  std::vector<v1::Assignment> third = TakeAndJoin({a_, b_});
  AdvanceAlive(absl::Seconds(50));
  FailRank(third[1]);  // t0 + 110 s: the first fault is out of the window, the second is not
  EXPECT_THAT(RestartReason(), HasSubstr("restart 3 of 10 in 1s, from the last checkpoint "
                                         "(rank 1 failed 2 times within 1m: a crash loop)"));
  AdvanceAlive(absl::Seconds(1));
  std::vector<v1::Assignment> fourth = TakeAndJoin({a_, b_});
  AdvanceAlive(absl::Seconds(59));
  FailRank(fourth[1]);  // exactly 1m after the last one: out of the window too
  EXPECT_THAT(RestartReason(), HasSubstr("restart 4 of 10 at once, from the last checkpoint "
                                         "(a first fault of rank 1 on worker b)"));
}

TEST_F(RestartPolicyTest, UnknownCulpritsRepeatOnlyEachOther) {
  // Neither rank joins: a rendezvous timeout naming both ranks has no one culprit.
  TakeAssignment(a_);
  TakeAssignment(b_);
  AdvanceAlive(absl::Seconds(5));
  EXPECT_THAT(RestartReason(), HasSubstr("rendezvous timeout: 2 ranks did not join"));
  EXPECT_THAT(RestartReason(), EndsWith("restart 1 of 10 at once, from the last checkpoint (a "
                                        "first failure of unknown cause)"));
  const v1::JobStatus first = Job(job_);
  EXPECT_TRUE(first.attempts(0).failed());
  EXPECT_FALSE(first.attempts(0).has_failed_rank());
  EXPECT_EQ(first.attempts(0).failed_worker(), "");

  TakeAssignment(a_);
  TakeAssignment(b_);
  AdvanceAlive(absl::Seconds(5));
  EXPECT_THAT(RestartReason(), EndsWith("restart 2 of 10 in 1s, from the last checkpoint (2 "
                                        "failures of unknown cause within 1m: a crash loop)"));
  AdvanceAlive(absl::Seconds(1));
  // A known culprit is not a repeat of unknown ones.
  FailRank(TakeAndJoin({a_, b_})[0]);
  EXPECT_THAT(RestartReason(), HasSubstr("restart 3 of 10 at once, from the last checkpoint "
                                         "(a first fault of rank 0 on worker a)"));
}

TEST_F(RestartPolicyTest, ARendezvousTimeoutOfOneRankIsThatRanksFault) {
  FailRank(TakeAndJoin({a_, b_})[1]);  // a first fault of rank 1
  TakeAndJoin({a_});                   // rank 0 joins, rank 1 never does
  TakeAssignment(b_);
  AdvanceAlive(absl::Seconds(5));
  EXPECT_THAT(RestartReason(), HasSubstr("rendezvous timeout: 1 rank did not join"));
  EXPECT_THAT(RestartReason(), HasSubstr("restart 2 of 10 in 1s, from the last checkpoint "
                                         "(rank 1 failed 2 times within 1m: a crash loop)"));
}

}  // namespace
}  // namespace ringleader
