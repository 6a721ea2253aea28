// A coordinator restarted on its job store while a job runs: the job keeps its attempt and its
// ranks come back with their daemons (no restart, no lost step) within coordinator_grace, or the
// attempt fails and the job restarts from its checkpoint. Also the hand-off of an assignment
// whose answer was lost.
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/core/coordinator_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

std::string LastReasonOf(const v1::JobStatus& job) { return job.transitions().rbegin()->reason(); }

bool HasEvent(const v1::JobStatus& job, const std::string& text) {
  for (const v1::JobEvent& event : job.events()) {
    if (event.message().find(text) != std::string::npos) return true;
  }
  return false;
}

class ReattachTest : public CoordinatorTest {
 protected:
  // Runs a 2-rank job (restarts allowed; correctness alarms warn) on workers "a" and "b" until
  // RUNNING.
  void StartRunningJob() {
    a_ = Register("a");
    b_ = Register("b");
    v1::JobSpec spec;
    spec.set_name("test");
    spec.set_world_size(2);
    spec.set_backend("gloo");
    spec.set_max_restarts(2);
    spec.mutable_checks()->set_on_desync("warn");
    absl::StatusOr<Coordinator::Submitted> submitted = coordinator_.SubmitJob(spec);
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    job_ = submitted->id;
    assignments_ = TakeAndJoin({a_, b_});
    ASSERT_EQ(Job(job_).state(), v1::JOB_STATE_RUNNING);
  }

  // A second coordinator on the same store (the first one "crashed": it is simply no longer
  // used), restored from what the first one saved.
  Coordinator& Restart(absl::Duration grace = absl::Seconds(60)) {
    CoordinatorOptions options = Options();
    options.coordinator_grace = grace;
    restarted_ = std::make_unique<Coordinator>(
        options, &clock_, &store_,
        [this](absl::Time, const std::string& line) { log_.push_back(line); });
    absl::StatusOr<std::vector<v1::JobStatus>> saved = store_.LoadAll();
    EXPECT_TRUE(saved.ok()) << saved.status();
    EXPECT_TRUE(restarted_->Restore(std::move(*saved)).ok());
    return *restarted_;
  }

  // Daemon `name` (incarnation 1) registers with the restarted coordinator, naming `rank` of
  // the job's generation `generation` as running (nullopt: runs nothing).
  Coordinator::Registration Reregister(const std::string& name, std::optional<uint32_t> rank,
                                       uint64_t generation = 1) {
    v1::Device cpu;
    cpu.set_kind("cpu");
    std::optional<Coordinator::RunningRank> running;
    if (rank.has_value()) {
      running = Coordinator::RunningRank{AttemptId{job_, Generation(generation)}, Rank(*rank)};
    }
    absl::StatusOr<Coordinator::Registration> registration =
        restarted_->RegisterWorker(name, "host-" + name, {cpu}, 1, running);
    EXPECT_TRUE(registration.ok()) << registration.status();
    return registration.value_or(Coordinator::Registration{});
  }

  v1::JobStatus RestartedJob() {
    absl::StatusOr<v1::JobStatus> job = restarted_->GetJob(job_);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.value_or(v1::JobStatus());
  }

  absl::Status Finish(Coordinator& coordinator, uint32_t rank, bool ok = true) {
    Coordinator::RankOutcome outcome;
    outcome.ok = ok;
    if (!ok) outcome.error = "boom";
    return coordinator.FinishRank(AttemptId{job_, Generation(1)}, Rank(rank), outcome);
  }

  WorkerId a_, b_;
  JobId job_;
  std::vector<v1::Assignment> assignments_;
  std::unique_ptr<Coordinator> restarted_;
};

v1::StepReport Step(uint64_t step, double norm) {
  v1::StepReport report;
  report.set_step(step);
  report.set_loss(1.0);
  report.set_local_grad_norm(norm * 2);
  report.set_synced_grad_norm(norm);
  report.set_collectives(2);
  report.set_collective_digest(7);
  return report;
}

TEST_F(ReattachTest, ARunningJobGoesOnWhenItsDaemonsComeBackWithTheirRanks) {
  StartRunningJob();
  Coordinator& restarted = Restart(absl::Seconds(5));
  EXPECT_EQ(RestartedJob().state(), v1::JOB_STATE_RUNNING);
  EXPECT_TRUE(HasEvent(RestartedJob(), "waiting up to 5s for its ranks' workers"));
  // The ranks report before their daemons are back: accepted, the attempt is the same.
  ASSERT_TRUE(restarted.ReportProgress(AttemptId{job_, Generation(1)}, Rank(0), {Step(7, 1.0)}, {})
                  .ok());

  const Coordinator::Registration a = Reregister("a", 0);
  EXPECT_TRUE(a.running_kept) << a.running_refused;
  EXPECT_EQ(a.coordinator_grace, absl::Seconds(5));
  EXPECT_FALSE(HasEvent(RestartedJob(), "every rank of generation 1 is back"));
  const Coordinator::Registration b = Reregister("b", 1);
  EXPECT_TRUE(b.running_kept) << b.running_refused;
  EXPECT_TRUE(HasEvent(RestartedJob(), "every rank of generation 1 is back"));
  for (const v1::WorkerStatus& worker : restarted.ListWorkers()) {
    EXPECT_EQ(worker.state(), v1::WORKER_STATE_BUSY) << worker.name();
  }
  EXPECT_EQ(RestartedJob().ranks(1).worker_id(), b.id.value());

  // Past the grace nothing fails: every rank is back.
  clock_.Advance(absl::Seconds(6));
  restarted.CheckStaleness();
  ASSERT_TRUE(Finish(restarted, 0).ok());
  ASSERT_TRUE(Finish(restarted, 1).ok());
  const v1::JobStatus job = RestartedJob();
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << LastReasonOf(job);
  EXPECT_EQ(job.generation(), 1u);
  EXPECT_EQ(job.restarts(), 0u);
  for (const v1::WorkerStatus& worker : restarted.ListWorkers()) {
    EXPECT_EQ(worker.state(), v1::WORKER_STATE_IDLE) << worker.name();
  }
}

TEST_F(ReattachTest, ARankWhoseDaemonDoesNotComeBackInTimeRestartsTheJob) {
  StartRunningJob();
  Coordinator& restarted = Restart(absl::Seconds(5));
  const Coordinator::Registration a = Reregister("a", 0);
  EXPECT_TRUE(a.running_kept);
  clock_.Advance(absl::Seconds(4));
  restarted.CheckStaleness();
  EXPECT_EQ(RestartedJob().state(), v1::JOB_STATE_RUNNING);
  clock_.Advance(absl::Seconds(2));
  restarted.CheckStaleness();
  const v1::JobStatus job = RestartedJob();
  EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(job.restarts(), 1u);
  EXPECT_THAT(LastReasonOf(job),
              HasSubstr("rank 1 (worker b on host-b) did not come back within 5s "
                        "(coordinator_grace) of the coordinator's restart"));
  // Worker "a" is free again and was told to stop its rank.
  absl::StatusOr<std::vector<v1::JobAttempt>> aborts = restarted.Heartbeat(a.id, 1);
  ASSERT_TRUE(aborts.ok()) << aborts.status();
  ASSERT_EQ(aborts->size(), 1u);
  EXPECT_EQ((*aborts)[0].generation(), 1u);
}

TEST_F(ReattachTest, ADaemonComingBackWithoutItsRankFailsTheAttemptAtOnce) {
  StartRunningJob();
  Restart();
  EXPECT_TRUE(Reregister("a", 0).running_kept);
  const Coordinator::Registration b = Reregister("b", std::nullopt);
  EXPECT_FALSE(b.running_kept);
  const v1::JobStatus job = RestartedJob();
  // A first fault of rank 1: placed again at once, on a and b.
  EXPECT_EQ(job.state(), v1::JOB_STATE_RENDEZVOUS);
  EXPECT_EQ(job.generation(), 2u);
  EXPECT_EQ(job.restarts(), 1u);
  EXPECT_THAT(job.transitions(job.transitions_size() - 2).reason(),
              HasSubstr("rank 1 (worker b on host-b) came back without its rank process"));
}

TEST_F(ReattachTest, TheCrashLoopHistorySurvivesACoordinatorRestart) {
  StartRunningJob();
  Coordinator::RankOutcome failed;
  failed.error = "killed by signal 9";
  ASSERT_TRUE(coordinator_.FinishRank(AttemptOf(assignments_[1]), Rank(1), failed).ok());
  ASSERT_EQ(Job(job_).generation(), 2u);  // a first fault: placed again at once
  TakeAndJoin({a_, b_});
  Restart();
  ASSERT_TRUE(Reregister("a", 0, /*generation=*/2).running_kept);
  ASSERT_TRUE(Reregister("b", 1, /*generation=*/2).running_kept);
  // The restarted coordinator knows rank 1 failed generation 1 (from the saved attempts).
  ASSERT_TRUE(restarted_->FinishRank({job_, Generation(2)}, Rank(1), failed).ok());
  EXPECT_THAT(LastReasonOf(RestartedJob()),
              HasSubstr("restart 2 of 2 in 1s, from the last checkpoint (rank 1 failed 2 times "
                        "within 5m: a crash loop)"));
}

TEST_F(ReattachTest, ARankOfAnAttemptThatIsOverIsRefusedWithTheReason) {
  StartRunningJob();
  Restart();
  const Coordinator::Registration wrong = Reregister("b", 0);
  EXPECT_FALSE(wrong.running_kept);
  EXPECT_THAT(wrong.running_refused, HasSubstr("it runs on worker a, not b"));
  // Without rank 1, which it runs, "b" is back without its rank: the attempt failed.
  EXPECT_EQ(RestartedJob().state(), v1::JOB_STATE_QUEUED);
  const Coordinator::Registration stale = Reregister("a", 0, /*generation=*/7);
  EXPECT_FALSE(stale.running_kept);
  EXPECT_THAT(stale.running_refused, HasSubstr("that attempt is over"));
}

TEST_F(ReattachTest, ARankThatFinishedBeforeTheRestartIsNotWaitedFor) {
  StartRunningJob();
  ASSERT_TRUE(Finish(coordinator_, 0).ok());  // saved before the crash
  Coordinator& restarted = Restart(absl::Seconds(5));
  // Rank 0's daemon runs nothing any more: that is no failure.
  EXPECT_FALSE(Reregister("a", std::nullopt).running_kept);
  EXPECT_EQ(RestartedJob().state(), v1::JOB_STATE_RUNNING);
  EXPECT_TRUE(Reregister("b", 1).running_kept);
  clock_.Advance(absl::Seconds(6));
  restarted.CheckStaleness();
  ASSERT_TRUE(Finish(restarted, 1).ok());
  EXPECT_EQ(RestartedJob().state(), v1::JOB_STATE_SUCCEEDED) << LastReasonOf(RestartedJob());
}

TEST_F(ReattachTest, AlarmsRaisedBeforeTheRestartAreKept) {
  StartRunningJob();
  const AttemptId attempt{job_, Generation(1)};
  v1::StepReport bad = Step(3, 1.0);
  bad.set_loss(std::numeric_limits<double>::quiet_NaN());
  ASSERT_TRUE(coordinator_.ReportProgress(attempt, Rank(0), {bad}, {}).ok());
  // Alarms are saved as they are raised.
  ASSERT_EQ(Job(job_).alarms_size(), 1);
  ASSERT_EQ(Job(job_).state(), v1::JOB_STATE_RUNNING);  // on_desync warn

  Coordinator& restarted = Restart();
  ASSERT_TRUE(Reregister("a", 0).running_kept);
  ASSERT_TRUE(Reregister("b", 1).running_kept);
  ASSERT_TRUE(restarted.ReportProgress(attempt, Rank(0), {Step(4, 1.0)}, {}).ok());
  ASSERT_TRUE(restarted.ReportProgress(attempt, Rank(1), {Step(4, 1.0)}, {}).ok());
  const v1::JobStatus job = RestartedJob();
  ASSERT_EQ(job.alarms_size(), 1);
  EXPECT_EQ(job.alarms(0).kind(), v1::Alarm::LOSS_NOT_FINITE);
  EXPECT_EQ(job.verdict().result(), v1::Verdict::WARN);
  EXPECT_EQ(job.verdict().last_step(), 4u);  // judged by the new coordinator
}

TEST_F(ReattachTest, AJobInRendezvousRestartsAndSoDoesAnyWithoutGrace) {
  a_ = Register("a");
  b_ = Register("b");
  job_ = Submit(2, "gloo", /*max_restarts=*/2);
  ASSERT_EQ(Job(job_).state(), v1::JOB_STATE_RENDEZVOUS);
  Restart();
  EXPECT_EQ(RestartedJob().state(), v1::JOB_STATE_QUEUED);
  EXPECT_THAT(LastReasonOf(RestartedJob()),
              HasSubstr("the coordinator restarted while generation 1 was in RENDEZVOUS"));
}

TEST_F(ReattachTest, WithoutGraceARunningJobRestarts) {
  StartRunningJob();
  Restart(absl::ZeroDuration());
  EXPECT_EQ(RestartedJob().state(), v1::JOB_STATE_QUEUED);
  EXPECT_THAT(LastReasonOf(RestartedJob()),
              HasSubstr("the coordinator restarted while generation 1 was in RUNNING"));
}

// ---- Hand-off -------------------------------------------------------------------------------

TEST_F(CoordinatorTest, AnAssignmentWhoseAnswerWasLostIsHandedOutAgain) {
  const WorkerId a = Register("a");
  const JobId job = Submit(1);
  std::optional<v1::Assignment> first = TakeAssignment(a);
  ASSERT_TRUE(first.has_value());
  // The daemon never saw it (the answer was lost): its next poll acknowledges nothing.
  std::optional<v1::Assignment> again = TakeAssignment(a);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->job_id(), job.value());
  EXPECT_EQ(again->generation(), first->generation());
  EXPECT_THAT(log_, Contains(HasSubstr("did not acknowledge rank 0 of job " + job.value())));

  // Acknowledged: the next poll has nothing.
  CapturedAssignment acked;
  coordinator_.WaitAssignmentAsync(a, clock_.Now(), acked.Callback(), 0,
                                   AttemptId{job, Generation(1)});
  ASSERT_EQ(acked.calls(), 1);
  ASSERT_TRUE(acked.value().ok());
  EXPECT_FALSE(acked.value()->has_value());
  EXPECT_FALSE(TakeAssignment(a).has_value());
}

TEST_F(CoordinatorTest, AJoinedRankAcknowledgesItsAssignment) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  const JobId job = Submit(2);
  std::optional<v1::Assignment> first = TakeAssignment(a);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(coordinator_
                  .JoinJob(AttemptOf(*first), Rank(first->rank()), a, first->spec_fingerprint())
                  .ok());
  // An older daemon, which never acknowledges, polls after its rank finished early.
  EXPECT_FALSE(TakeAssignment(a).has_value());
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_RENDEZVOUS);
  EXPECT_TRUE(TakeAssignment(b).has_value());
}

}  // namespace
}  // namespace ringleader
