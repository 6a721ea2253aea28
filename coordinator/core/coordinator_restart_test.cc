// Restarts: a failed attempt goes back to the queue and is placed again as the next
// generation, at once for a first fault, after its backoff for a crash loop; faults of the job
// itself and exhausted restarts fail it. (The restart policy in detail:
// coordinator_restart_policy_test.cc.)
#include <string>
#include <vector>

#include "coordinator/core/coordinator_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

std::string LastReasonOf(const v1::JobStatus& job) { return job.transitions().rbegin()->reason(); }

// The job as the store last saved it.
v1::JobStatus Saved(const JobStore& store, const JobId& job) {
  const absl::StatusOr<std::vector<v1::JobStatus>> all = store.LoadAll();
  EXPECT_TRUE(all.ok()) << all.status();
  for (const v1::JobStatus& saved : all.value_or(std::vector<v1::JobStatus>{})) {
    if (saved.job_id() == job.value()) return saved;
  }
  ADD_FAILURE() << "job " << job << " was never saved";
  return v1::JobStatus();
}

class RestartTest : public CoordinatorTest {
 protected:
  // Rank `rank` of the job's current attempt reports a failure.
  void FailRank(const v1::Assignment& assignment, const std::string& error,
                bool job_error = false) {
    Coordinator::RankOutcome outcome;
    outcome.error = error;
    if (job_error) outcome.failure.set_kind(v1::RankFailure::JOB_ERROR);
    ASSERT_TRUE(
        coordinator_.FinishRank(AttemptOf(assignment), Rank(assignment.rank()), outcome).ok());
  }
};

TEST_F(RestartTest, AFailedRankRestartsTheJobAsTheNextGenerationAfterItsBackoff) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  const JobId job = Submit(2, "gloo", /*max_restarts=*/2);
  std::vector<v1::Assignment> first = TakeAndJoin({a, b});
  ASSERT_EQ(Job(job).state(), v1::JOB_STATE_RUNNING);

  // A first fault: placed again at once, as generation 2.
  FailRank(first[1], "killed by signal 9");
  v1::JobStatus status = Job(job);
  EXPECT_EQ(status.state(), v1::JOB_STATE_RENDEZVOUS);
  EXPECT_EQ(status.generation(), 2u);
  EXPECT_EQ(status.restarts(), 1u);
  EXPECT_EQ(status.transitions(status.transitions_size() - 2).reason(),
            "generation 1 failed: rank 1 (worker b on host-b) failed: killed by signal 9; "
            "restart 1 of 2 at once, from the last checkpoint (a first fault of rank 1 on "
            "worker b)");
  std::vector<v1::Assignment> second = TakeAndJoin({a, b});
  EXPECT_EQ(second[0].generation(), 2u);
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_RUNNING);
  // Messages of generation 1 are stale now.
  EXPECT_EQ(coordinator_.KvSet(AttemptOf(first[0]), "k", "v").code(),
            absl::StatusCode::kFailedPrecondition);

  // The same rank again: a crash loop, placed again after the backoff.
  FailRank(second[1], "killed by signal 9");
  status = Job(job);
  EXPECT_EQ(status.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(status.restarts(), 2u);
  EXPECT_EQ(LastReasonOf(status),
            "generation 2 failed: rank 1 (worker b on host-b) failed: killed by signal 9; "
            "restart 2 of 2 in 1s, from the last checkpoint (rank 1 failed 2 times within 5m: "
            "a crash loop)");
  EXPECT_THAT(status.queued_reason(),
              HasSubstr("restart 2 of 2: placed again in 1s (crash-loop backoff after "
                        "generation 2 failed)"));
  // The attempt is over: the surviving rank is told to abort, and its messages are refused.
  absl::StatusOr<std::vector<v1::JobAttempt>> aborts = coordinator_.Heartbeat(a, 1);
  ASSERT_TRUE(aborts.ok());
  ASSERT_THAT(*aborts, SizeIs(2));  // both attempts' (no heartbeat since the first)
  EXPECT_EQ((*aborts)[0].generation(), 1u);
  EXPECT_EQ((*aborts)[1].generation(), 2u);
  absl::StatusOr<Coordinator::StopSignal> stop =
      coordinator_.ReportProgress(AttemptOf(second[0]), Rank(0), {}, {});
  ASSERT_TRUE(stop.ok()) << stop.status();
  EXPECT_TRUE(stop->stop);
  EXPECT_THAT(stop->reason, HasSubstr("generation 2 of job job-000001 ended"));
  Coordinator::RankOutcome late;
  late.error = "collective aborted";
  ASSERT_TRUE(coordinator_.FinishRank(AttemptOf(second[0]), Rank(0), late).ok());
  EXPECT_EQ(Job(job).restarts(), 2u);  // a late failure of the old attempt restarts nothing

  // Not placed during the backoff, even with both workers idle.
  Advance(absl::Milliseconds(900));
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_QUEUED);
  Advance(absl::Milliseconds(100));
  status = Job(job);
  EXPECT_EQ(status.state(), v1::JOB_STATE_RENDEZVOUS);
  EXPECT_EQ(status.generation(), 3u);
  std::vector<v1::Assignment> third = TakeAndJoin({a, b});
  EXPECT_EQ(third[0].generation(), 3u);

  for (const v1::Assignment& rank : third) {
    Coordinator::RankOutcome ok;
    ok.ok = true;
    ASSERT_TRUE(coordinator_.FinishRank(AttemptOf(rank), Rank(rank.rank()), ok).ok());
  }
  status = Job(job);
  EXPECT_EQ(status.state(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_THAT(status.attempts(), SizeIs(3));
  EXPECT_EQ(status.attempts(0).generation(), 1u);
  EXPECT_THAT(status.attempts(0).end_reason(), HasSubstr("killed by signal 9"));
  EXPECT_EQ(status.attempts(0).workers(1), "b on host-b");
  EXPECT_TRUE(status.attempts(0).failed());
  EXPECT_EQ(status.attempts(0).failed_rank(), 1u);
  EXPECT_EQ(status.attempts(0).failed_worker(), "b");
  EXPECT_EQ(status.attempts(2).generation(), 3u);
  EXPECT_EQ(status.attempts(2).end_reason(), "all 2 ranks finished");
  EXPECT_FALSE(status.attempts(2).failed());
  EXPECT_FALSE(status.attempts(2).has_failed_rank());
  EXPECT_GT(status.attempts(2).start_time_unix_ms(), status.attempts(0).start_time_unix_ms());
}

TEST_F(RestartTest, BackoffDoublesAndExhaustedRestartsFailTheJob) {
  const WorkerId a = Register("a");
  const JobId job = Submit(1, "gloo", /*max_restarts=*/3);
  FailRank(TakeAndJoin({a})[0], "crash one");
  const v1::JobStatus after_one = Job(job);
  EXPECT_THAT(after_one.transitions(after_one.transitions_size() - 2).reason(),
              HasSubstr("restart 1 of 3 at once"));
  FailRank(TakeAndJoin({a})[0], "crash two");
  EXPECT_THAT(LastReasonOf(Job(job)), HasSubstr("restart 2 of 3 in 1s"));
  Advance(absl::Seconds(1));
  FailRank(TakeAndJoin({a})[0], "crash three");
  EXPECT_THAT(LastReasonOf(Job(job)), HasSubstr("restart 3 of 3 in 2s"));
  Advance(absl::Seconds(1));
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_QUEUED);  // 2 s this time
  Advance(absl::Seconds(1));
  // Unclassified failures say nothing about the machine: worker a is not quarantined, and the
  // third attempt is placed on it.
  EXPECT_NE(Worker(a).state(), v1::WORKER_STATE_QUARANTINED);
  FailRank(TakeAndJoin({a})[0], "crash four");
  const v1::JobStatus status = Job(job);
  EXPECT_EQ(status.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(LastReasonOf(status),
            "rank 0 (worker a on host-a) failed: crash four (no restart left: 3 of 3 used; "
            "every attempt is listed in the job's attempts)");
  ASSERT_THAT(status.attempts(), SizeIs(4));
  EXPECT_THAT(status.attempts(0).end_reason(), HasSubstr("crash one"));
  EXPECT_THAT(status.attempts(1).end_reason(), HasSubstr("crash two"));
  EXPECT_THAT(status.attempts(2).end_reason(), HasSubstr("crash three"));
  EXPECT_THAT(status.attempts(3).end_reason(), HasSubstr("crash four"));
  EXPECT_EQ(Saved(store_, job).state(), v1::JOB_STATE_FAILED);
}

TEST_F(RestartTest, AFaultOfTheJobItselfIsNeverRestarted) {
  const WorkerId a = Register("a");
  const JobId job = Submit(1, "gloo", /*max_restarts=*/3);
  FailRank(TakeAndJoin({a})[0], "parameters without a gradient: fc2.bias", /*job_error=*/true);
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(Job(job).restarts(), 0u);
}

TEST_F(RestartTest, ALostWorkerRestartsOnTheWorkersLeftAndARestartKeepsItsPlaceInTheQueue) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  const JobId job = Submit(1, "gloo", /*max_restarts=*/1);
  TakeAndJoin({a});
  const JobId behind = Submit(1);  // runs on b
  std::optional<v1::Assignment> on_b = TakeAssignment(b);
  ASSERT_TRUE(on_b.has_value());
  EXPECT_EQ(on_b->job_id(), behind.value());
  const JobId third = Submit(1);  // waits

  Advance(absl::Seconds(6));
  ASSERT_TRUE(coordinator_.Heartbeat(b, 1).ok());
  Advance(absl::Seconds(5));  // a is lost
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_QUEUED);
  Coordinator::RankOutcome ok;
  ok.ok = true;
  EXPECT_THAT(Job(third).queued_reason(), HasSubstr("behind job-000001"));
  ASSERT_TRUE(coordinator_.FinishRank(AttemptOf(*on_b), Rank(0), ok).ok());
  // b is idle: the restarting job (a first fault: no backoff) is placed on it, ahead of the
  // third job.
  EXPECT_EQ(Job(third).state(), v1::JOB_STATE_QUEUED);
  const v1::JobStatus restarted = Job(job);
  EXPECT_EQ(restarted.state(), v1::JOB_STATE_RENDEZVOUS);
  EXPECT_EQ(restarted.generation(), 2u);
  EXPECT_EQ(restarted.ranks(0).worker_name(), "b");
}

TEST_F(RestartTest, ARestartingJobCanBeCancelled) {
  const WorkerId a = Register("a");
  const JobId job = Submit(1, "gloo", /*max_restarts=*/2);
  FailRank(TakeAndJoin({a})[0], "boom");
  FailRank(TakeAndJoin({a})[0], "boom");  // a crash loop: in its backoff
  ASSERT_EQ(Job(job).state(), v1::JOB_STATE_QUEUED);
  ASSERT_TRUE(coordinator_.CancelJob(job, "").ok());
  Advance(absl::Seconds(5));
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(Job(job).generation(), 2u);
}

TEST_F(RestartTest, RecoveryReportsBecomeJobEventsAndTheLastCheckpoint) {
  const WorkerId a = Register("a");
  const JobId job = Submit(1, "gloo", /*max_restarts=*/1);
  const v1::Assignment assignment = TakeAndJoin({a})[0];
  v1::StepReport first;
  first.set_step(41);
  first.set_resumed_from_step(40);
  first.set_resumed_from("/ckpt/job-000001/step-000000000040.ckpt");
  first.add_skipped_checkpoints("/ckpt/job-000001/step-000000000050.ckpt: checksum mismatch");
  v1::StepReport later;
  later.set_step(60);
  later.set_checkpoint_written("/ckpt/job-000001/step-000000000060.ckpt");
  ASSERT_TRUE(coordinator_.ReportProgress(AttemptOf(assignment), Rank(0), {first, later}, {}).ok());
  const v1::JobStatus status = Job(job);
  ASSERT_THAT(status.events(), SizeIs(2));
  EXPECT_EQ(status.events(0).message(),
            "generation 1 did not resume from /ckpt/job-000001/step-000000000050.ckpt: checksum "
            "mismatch");
  EXPECT_EQ(status.events(1).message(),
            "generation 1 resumed from /ckpt/job-000001/step-000000000040.ckpt (step 40)");
  EXPECT_EQ(status.last_checkpoint_step(), 60u);
  EXPECT_EQ(status.last_checkpoint(), "/ckpt/job-000001/step-000000000060.ckpt");
  EXPECT_EQ(status.attempts(0).resumed_from_step(), 40u);
  EXPECT_EQ(status.attempts(0).last_step(), 60u);
  EXPECT_THAT(Saved(store_, job).events(), SizeIs(2));  // events are durable
}

}  // namespace
}  // namespace ringleader
