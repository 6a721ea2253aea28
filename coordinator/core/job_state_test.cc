#include "coordinator/core/job_state.h"

#include "gtest/gtest.h"

namespace ringleader {
namespace {

TEST(JobStateTest, LegalTransitionsFollowTheDiagram) {
  using v1::JobState;
  EXPECT_TRUE(IsLegalTransition(v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED));
  EXPECT_TRUE(IsLegalTransition(v1::JOB_STATE_QUEUED, v1::JOB_STATE_RENDEZVOUS));
  EXPECT_TRUE(IsLegalTransition(v1::JOB_STATE_QUEUED, v1::JOB_STATE_CANCELLED));
  EXPECT_TRUE(IsLegalTransition(v1::JOB_STATE_RENDEZVOUS, v1::JOB_STATE_RUNNING));
  EXPECT_TRUE(IsLegalTransition(v1::JOB_STATE_RENDEZVOUS, v1::JOB_STATE_FAILED));
  EXPECT_TRUE(IsLegalTransition(v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED));
  EXPECT_TRUE(IsLegalTransition(v1::JOB_STATE_RUNNING, v1::JOB_STATE_CANCELLED));
  // Restarts go back to the queue.
  EXPECT_TRUE(IsLegalTransition(v1::JOB_STATE_RENDEZVOUS, v1::JOB_STATE_QUEUED));
  EXPECT_TRUE(IsLegalTransition(v1::JOB_STATE_RUNNING, v1::JOB_STATE_QUEUED));

  EXPECT_FALSE(IsLegalTransition(v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING));
  EXPECT_FALSE(IsLegalTransition(v1::JOB_STATE_QUEUED, v1::JOB_STATE_FAILED));
  EXPECT_FALSE(IsLegalTransition(v1::JOB_STATE_RENDEZVOUS, v1::JOB_STATE_SUCCEEDED));
  for (JobState terminal :
       {v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_FAILED, v1::JOB_STATE_CANCELLED}) {
    EXPECT_TRUE(IsTerminal(terminal));
    for (JobState to : {v1::JOB_STATE_QUEUED, v1::JOB_STATE_RENDEZVOUS, v1::JOB_STATE_RUNNING,
                        v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_FAILED,
                        v1::JOB_STATE_CANCELLED}) {
      EXPECT_FALSE(IsLegalTransition(terminal, to)) << JobStateName(terminal);
    }
  }
}

TEST(JobStateTest, RecordTransitionAppendsTimeAndReason) {
  v1::JobStatus job;
  job.set_job_id("job-000007");
  const absl::Time t = absl::FromUnixMillis(1'700'000'000'123);
  ASSERT_TRUE(RecordTransition(&job, v1::JOB_STATE_QUEUED, t, "submitted").ok());
  ASSERT_TRUE(
      RecordTransition(&job, v1::JOB_STATE_CANCELLED, t + absl::Seconds(1), "user").ok());
  EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLED);
  ASSERT_EQ(job.transitions_size(), 2);
  EXPECT_EQ(job.transitions(0).state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(job.transitions(0).time_unix_ms(), 1'700'000'000'123);
  EXPECT_EQ(job.transitions(1).time_unix_ms(), 1'700'000'001'123);
  EXPECT_EQ(LastReason(job), "user");
}

TEST(JobStateTest, IllegalTransitionLeavesJobUnchanged) {
  v1::JobStatus job;
  job.set_job_id("job-000001");
  ASSERT_TRUE(RecordTransition(&job, v1::JOB_STATE_QUEUED, absl::UnixEpoch(), "submitted").ok());
  const absl::Status status =
      RecordTransition(&job, v1::JOB_STATE_SUCCEEDED, absl::UnixEpoch(), "nope");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("QUEUED to SUCCEEDED"), absl::string_view::npos) << status;
  EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(job.transitions_size(), 1);
}

}  // namespace
}  // namespace ringleader
