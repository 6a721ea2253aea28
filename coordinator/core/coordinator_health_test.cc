// Coordinator core: leases, rendezvous timeout, restarts, cancellation, watches, callbacks.
#include <vector>

#include "coordinator/core/coordinator_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string LastReasonOf(const v1::JobStatus& job) {
  return job.transitions(job.transitions_size() - 1).reason();
}

TEST_F(CoordinatorTest, LostWorkerFailsItsJobNamingTheRank) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  const JobId job = Submit(2);
  TakeAndJoin({a, b});
  CapturedAssignment b_waiting;  // b polls for its next assignment while its rank runs
  coordinator_.WaitAssignmentAsync(b, clock_.Now() + absl::Seconds(30), b_waiting.Callback());

  Advance(absl::Seconds(6));
  ASSERT_TRUE(coordinator_.Heartbeat(a, 1).ok());
  Advance(absl::Seconds(4));  // b's heartbeat is exactly 10 s old: not yet lost
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_RUNNING);
  Advance(absl::Milliseconds(1));

  EXPECT_EQ(Worker(b).state(), v1::WORKER_STATE_LOST);
  const v1::JobStatus status = Job(job);
  EXPECT_EQ(status.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(LastReasonOf(status),
            "rank 1 (worker b on host-b) lost: no heartbeat for 10s; its rank process was last "
            "heard from 10s ago");
  EXPECT_THAT(log_, testing::Contains(HasSubstr("worker w-2 (b on host-b) lost: no heartbeat for 10s")));
  // The lost worker's poll and heartbeat are refused: it must register again.
  ASSERT_EQ(b_waiting.calls(), 1);
  EXPECT_EQ(b_waiting.value().status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(coordinator_.Heartbeat(b, 1).status().code(), absl::StatusCode::kNotFound);
  // The surviving worker is told to abort and is free again.
  absl::StatusOr<std::vector<v1::JobAttempt>> aborts = coordinator_.Heartbeat(a, 1);
  ASSERT_TRUE(aborts.ok());
  ASSERT_EQ(aborts->size(), 1u);
  EXPECT_EQ((*aborts)[0].generation(), 1u);
  EXPECT_EQ(Worker(a).state(), v1::WORKER_STATE_IDLE);

  // The same daemon (same incarnation) registering again gets its id back, IDLE.
  EXPECT_EQ(Register("b"), b);
  EXPECT_EQ(Worker(b).state(), v1::WORKER_STATE_IDLE);
  EXPECT_TRUE(coordinator_.Heartbeat(b, 1).ok());
}

TEST_F(CoordinatorTest, RendezvousTimeoutFailsTheJobNamingRanksThatNeverJoined) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  const WorkerId c = Register("c");
  const JobId job = Submit(3);
  std::optional<v1::Assignment> first = TakeAssignment(a);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(
      coordinator_.JoinJob(CoordinatorTest::AttemptOf(*first), Rank(0), a,
                           first->spec_fingerprint())
          .ok());
  // Rank 0 waits for its peers' addresses, sending keepalives; b's rank process was stopped
  // before it joined (its daemon says so); c never started one.
  const AttemptId attempt = CoordinatorTest::AttemptOf(*first);
  v1::RankActivity waiting;
  waiting.set_phase(v1::RANK_PHASE_RENDEZVOUS);
  waiting.set_detail("waiting for 2 peers' addresses");
  auto tick = [&](int second) {
    waiting.set_phase_elapsed_ms(static_cast<uint64_t>(second) * 1000);
    ASSERT_TRUE(coordinator_.ReportProgress(attempt, Rank(0), {}, {}, waiting).ok());
    ASSERT_TRUE(coordinator_.Heartbeat(a, 1, "sleeping").ok());
    ASSERT_TRUE(coordinator_.Heartbeat(b, 1, "stopped").ok());
    ASSERT_TRUE(coordinator_.Heartbeat(c, 1).ok());
    Advance(absl::Seconds(1));
  };
  for (int second = 0; second < 119; ++second) ASSERT_NO_FATAL_FAILURE(tick(second));
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_RENDEZVOUS);
  ASSERT_NO_FATAL_FAILURE(tick(119));

  const v1::JobStatus status = Job(job);
  EXPECT_EQ(status.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(LastReasonOf(status),
            "rendezvous timeout: 2 ranks did not join within 2m: rank 1 (worker b on host-b): "
            "its daemon's last heartbeat 1s ago, rank process stopped; rank 2 (worker c on "
            "host-c): its daemon's last heartbeat 1s ago; other ranks: rank 0 (worker a on "
            "host-a) alive, in the rendezvous (waiting for 2 peers' addresses) for 2m");
  EXPECT_THAT(LastReasonOf(status), Not(HasSubstr("suspect")));
}

TEST_F(CoordinatorTest, RestartedWorkerReplacesItsRegistrationAndFailsItsAttempt) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  const JobId job = Submit(2);
  TakeAndJoin({a, b});

  // A retried registration of the same daemon changes nothing.
  EXPECT_EQ(Register("a", "cpu", /*incarnation=*/1), a);
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_RUNNING);

  const WorkerId restarted = Register("a", "cpu", /*incarnation=*/2);
  EXPECT_NE(restarted, a);
  const v1::JobStatus status = Job(job);
  EXPECT_EQ(status.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(LastReasonOf(status), "rank 0 (worker a on host-a) restarted (incarnation changed)");
  EXPECT_EQ(coordinator_.Heartbeat(a, 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Worker(restarted).state(), v1::WORKER_STATE_IDLE);
  EXPECT_EQ(Worker(restarted).incarnation(), 2u);
  EXPECT_EQ(coordinator_.ListWorkers().size(), 2u);
}

TEST_F(CoordinatorTest, AssignmentWaitWithAnotherIncarnationIsRefused) {
  // After a coordinator restart ids are handed out again: a daemon still holding "w-1" from
  // before must not take the assignment of the daemon that now owns "w-1".
  const WorkerId owner = Register("c", "cpu", /*incarnation=*/7);
  Submit(1);
  CapturedAssignment stale;
  coordinator_.WaitAssignmentAsync(owner, clock_.Now(), stale.Callback(), /*incarnation=*/3);
  ASSERT_EQ(stale.calls(), 1);
  EXPECT_EQ(stale.value().status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(stale.value().status().message()), HasSubstr("register again"));
  // The owner still gets its assignment.
  CapturedAssignment own;
  coordinator_.WaitAssignmentAsync(owner, clock_.Now(), own.Callback(), /*incarnation=*/7);
  ASSERT_EQ(own.calls(), 1);
  ASSERT_TRUE(own.value().ok()) << own.value().status();
  EXPECT_TRUE(own.value()->has_value());
}

TEST_F(CoordinatorTest, CancelStopsTheJobAndTellsItsWorkersToAbort) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  const JobId running = Submit(2);
  const std::vector<v1::Assignment> assignments = TakeAndJoin({a, b});
  const JobId queued = Submit(1);

  ASSERT_TRUE(coordinator_.CancelJob(queued, "").ok());
  EXPECT_EQ(Job(queued).state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(LastReasonOf(Job(queued)), "cancelled");

  ASSERT_TRUE(coordinator_.CancelJob(running, "user asked").ok());
  EXPECT_EQ(Job(running).state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(LastReasonOf(Job(running)), "user asked");
  for (const WorkerId& worker : {a, b}) {
    absl::StatusOr<std::vector<v1::JobAttempt>> aborts = coordinator_.Heartbeat(worker, 1);
    ASSERT_TRUE(aborts.ok());
    ASSERT_EQ(aborts->size(), 1u) << worker;
    EXPECT_EQ((*aborts)[0].job_id(), running.value());
    EXPECT_TRUE(coordinator_.Heartbeat(worker, 1)->empty());  // told once
    EXPECT_EQ(Worker(worker).state(), v1::WORKER_STATE_IDLE);
  }
  absl::StatusOr<Coordinator::StopSignal> stop =
      coordinator_.ReportProgress(AttemptOf(assignments[0]), Rank(0), {}, {});
  ASSERT_TRUE(stop.ok());
  EXPECT_TRUE(stop->stop);
  EXPECT_THAT(stop->reason, HasSubstr("CANCELLED: user asked"));
  // The cancelled queued job is never placed, and a finished job cannot be cancelled.
  EXPECT_FALSE(TakeAssignment(a).has_value());
  EXPECT_EQ(coordinator_.CancelJob(running, "again").code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(CoordinatorTest, WatchJobWakesOnChangeAndAnswersAtItsDeadline) {
  const WorkerId a = Register("a");
  const JobId job = Submit(1);
  const uint64_t version = Job(job).version();

  CapturedJob watch;
  coordinator_.WatchJobAsync(job, version, clock_.Now() + absl::Seconds(30), watch.Callback());
  EXPECT_EQ(watch.calls(), 0);
  TakeAndJoin({a});
  ASSERT_EQ(watch.calls(), 1);
  ASSERT_TRUE(watch.value().ok());
  EXPECT_GT(watch.value()->version(), version);
  EXPECT_EQ(watch.value()->state(), v1::JOB_STATE_RUNNING);

  // Nothing changes: the watch is answered at its deadline with the current status.
  const uint64_t current = watch.value()->version();
  CapturedJob idle;
  coordinator_.WatchJobAsync(job, current, clock_.Now() + absl::Seconds(3), idle.Callback());
  ASSERT_TRUE(coordinator_.Heartbeat(a, 1).ok());
  Advance(absl::Seconds(2));
  EXPECT_EQ(idle.calls(), 0);
  Advance(absl::Seconds(1));
  ASSERT_EQ(idle.calls(), 1);
  EXPECT_EQ(idle.value()->version(), current);
}

TEST_F(CoordinatorTest, CallbacksRunAfterTheLockIsReleased) {
  // Each callback calls back into the coordinator: under the lock this would deadlock.
  const WorkerId a = Register("a");
  int reentered = 0;
  coordinator_.WaitAssignmentAsync(
      a, clock_.Now() + absl::Seconds(10),
      [&](absl::StatusOr<std::optional<v1::Assignment>> assignment) {
        ASSERT_TRUE(assignment.ok());
        ASSERT_TRUE(assignment->has_value());
        const AttemptId attempt = CoordinatorTest::AttemptOf(**assignment);
        EXPECT_TRUE(coordinator_
                        .JoinJob(attempt, Rank(0), a, (*assignment)->spec_fingerprint())
                        .ok());
        ++reentered;
      });
  const JobId job = Submit(1);
  EXPECT_EQ(reentered, 1);
  const AttemptId attempt{job, Generation(1)};
  coordinator_.KvGetAsync(attempt, "k", clock_.Now() + absl::Seconds(10),
                          [&](absl::StatusOr<std::string> value) {
                            EXPECT_TRUE(value.ok());
                            EXPECT_TRUE(coordinator_.KvSet(attempt, "k2", *value).ok());
                            ++reentered;
                          });
  coordinator_.WatchJobAsync(job, Job(job).version(), clock_.Now() + absl::Seconds(10),
                             [&](absl::StatusOr<v1::JobStatus> status) {
                               EXPECT_TRUE(status.ok());
                               EXPECT_TRUE(coordinator_.GetJob(job).ok());
                               ++reentered;
                             });
  ASSERT_TRUE(coordinator_.KvSet(attempt, "k", "v").ok());
  EXPECT_EQ(reentered, 2);
  ASSERT_TRUE(coordinator_.FinishRank(attempt, Rank(0), {true, "", ""}).ok());
  EXPECT_EQ(reentered, 3);
  EXPECT_THAT(log_, testing::Contains(HasSubstr("RUNNING -> SUCCEEDED")));
}

TEST_F(CoordinatorTest, ShutdownAnswersParkedLongPollsWithUnavailable) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  const JobId job = Submit(1);
  CapturedAssignment assignment;
  coordinator_.WaitAssignmentAsync(b, clock_.Now() + absl::Seconds(10), assignment.Callback());
  CapturedValue value;
  coordinator_.KvGetAsync(AttemptId{job, Generation(1)}, "k", clock_.Now() + absl::Seconds(10),
                          value.Callback());
  CapturedJob watch;
  coordinator_.WatchJobAsync(job, 1000, clock_.Now() + absl::Seconds(10), watch.Callback());
  coordinator_.Shutdown();
  for (const absl::Status& status :
       {assignment.value().status(), value.value().status(), watch.value().status()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  }
  // New long polls are refused at once.
  CapturedJob late;
  coordinator_.WatchJobAsync(job, 0, clock_.Now() + absl::Seconds(10), late.Callback());
  ASSERT_EQ(late.calls(), 1);
  EXPECT_EQ(late.value().status().code(), absl::StatusCode::kUnavailable);
  (void)a;
}

}  // namespace
}  // namespace ringleader
