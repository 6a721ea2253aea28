// End to end, coordinators sharing a three-member etcd (--store=etcd): two coordinator
// processes (one leads, one stands by), two worker daemons following the leader, real ranks.
//   - The leader SIGKILLed mid-job: the standby leads within seconds, the running job carries
//     on as generation 1 (its ranks re-attach; no restart), finished and queued jobs are all
//     there, and ids continue.
//   - The leader SIGSTOPped past its lease, then resumed: the other one leads; the resumed one
//     changes nothing (its term is fenced), steps down and answers as a standby; the job ends
//     under the new leader.
//   - One etcd member of three killed mid-job: nothing visible to the job.
//   - etcd without quorum for 5 s: a submit is refused naming etcd (never a false success); the
//     job trains on through it and SUCCEEDS once quorum is back.
//   - Moving in: a SQLite state dir imported with --import_state_dir; its jobs are there and ids
//     continue.
// Every job has max_restarts 0: a lost attempt would fail the job, not hide in a restart.
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/store/etcd/etcd_test_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/cluster_test.h"

namespace ringleader {
namespace e2e {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kJobTimeout = absl::Seconds(120);

// ~20 ms a step on rank 0 (a straggler on purpose), 24 epochs of 32 steps: ~15 s of training,
// long enough for a failover in the middle.
v1::JobSpec LongSpec(const std::string& name) {
  v1::JobSpec spec = SmallSyntheticSpec(name);
  spec.set_epochs(24);
  spec.mutable_model()->mutable_faults()->set_slow_rank(0);
  spec.mutable_model()->mutable_faults()->set_slow_ms(20);
  return spec;
}

class FailoverE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name =
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    absl::StatusOr<std::unique_ptr<etcd::EtcdTestCluster>> started =
        etcd::EtcdTestCluster::Start(name.substr(0, 12), 3);
    ASSERT_TRUE(started.ok()) << started.status();
    etcd_ = std::move(*started);
    ClusterOptions options;
    options.coordinators = 2;
    options.coordinator_flags = {"--store=etcd",
                                 "--etcd_endpoints=" + absl::StrJoin(etcd_->endpoints(), ","),
                                 "--etcd_prefix=/" + name + "/", "--leader_lease_ttl=3s"};
    absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
  }
  void TearDown() override {
    if (HasFailure() && cluster_ != nullptr) std::cerr << cluster_->LogTails(25) << std::endl;
  }

  // Submits `spec` and waits until its ranks have reported step `step`.
  std::string SubmitAndReach(const v1::JobSpec& spec, uint64_t step) {
    absl::StatusOr<std::string> id = cluster_->Submit(spec);
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return "";
    const absl::Status reached = WaitUntil(
        [&] {
          absl::StatusOr<v1::JobStatus> job = cluster_->GetJob(*id);
          if (!job.ok() || job->ranks_size() == 0) return false;
          for (const v1::RankStatus& rank : job->ranks()) {
            if (rank.last_step().step() < step) return false;
          }
          return true;
        },
        absl::Seconds(60), absl::StrCat("step ", step));
    EXPECT_TRUE(reached.ok()) << reached << cluster_->LogTails();
    return *id;
  }

  // The job carried on through the fault as the same attempt and SUCCEEDED.
  void ExpectSucceededAsOneAttempt(const std::string& id) {
    const JobHistory end = cluster_->WaitForEnd(id, kJobTimeout);
    ASSERT_TRUE(end.ended) << cluster_->LogTails(25);
    EXPECT_EQ(end.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(end.final);
    EXPECT_EQ(end.final.generation(), 1u);
    EXPECT_EQ(end.final.restarts(), 0u);
    for (const v1::Alarm& alarm : end.final.alarms()) {
      EXPECT_EQ(alarm.kind(), v1::Alarm::STRAGGLER) << alarm.message();
    }
  }

  std::unique_ptr<etcd::EtcdTestCluster> etcd_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(FailoverE2eTest, ALeaderKilledMidJobIsReplacedAndTheJobGoesOnAsGenerationOne) {
  const JobHistory done = cluster_->WaitForEnd(
      *cluster_->Submit(SmallSyntheticSpec("before")), kJobTimeout);
  ASSERT_EQ(done.final.state(), v1::JOB_STATE_SUCCEEDED) << cluster_->LogTails();
  const std::string running = SubmitAndReach(LongSpec("running"), 40);
  ASSERT_FALSE(running.empty());
  // Both workers are busy: this one waits in the queue.
  absl::StatusOr<std::string> queued = cluster_->Submit(SmallSyntheticSpec("queued"));
  ASSERT_TRUE(queued.ok()) << queued.status();

  absl::StatusOr<int> leader = cluster_->LeaderIndex(absl::Seconds(10));
  ASSERT_TRUE(leader.ok()) << leader.status();
  const absl::Time killed = absl::Now();
  ASSERT_TRUE(cluster_->SignalCoordinator(*leader, SIGKILL).ok());
  absl::StatusOr<int> next = cluster_->LeaderIndex(absl::Seconds(15), *leader);
  ASSERT_TRUE(next.ok()) << next.status() << cluster_->LogTails();
  std::cout << "a standby led " << absl::FormatDuration(absl::Now() - killed)
            << " after the leader was killed" << std::endl;

  // The new leader has every job: the finished one, the queued one (still queued while the
  // running one holds the workers), the running one.
  const CliResult listed = cluster_->RunCli({"list"}, absl::Seconds(30));
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_THAT(listed.output, HasSubstr(done.final.job_id()));
  EXPECT_THAT(listed.output, HasSubstr(*queued));
  absl::StatusOr<v1::JobStatus> still_queued = cluster_->GetJob(*queued);
  ASSERT_TRUE(still_queued.ok()) << still_queued.status();
  EXPECT_EQ(still_queued->state(), v1::JOB_STATE_QUEUED);
  ExpectSucceededAsOneAttempt(running);
  // Then the queued one runs.
  const JobHistory queued_end = cluster_->WaitForEnd(*queued, kJobTimeout);
  EXPECT_EQ(queued_end.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(queued_end.final);
  absl::StatusOr<v1::JobStatus> before = cluster_->GetJob(done.final.job_id());
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->state(), v1::JOB_STATE_SUCCEEDED);
  // Ids continue after the three jobs the first leader handed out.
  absl::StatusOr<std::string> after = cluster_->Submit(SmallSyntheticSpec("after"));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*after, "job-000004");
}

TEST_F(FailoverE2eTest, ALeaderPausedPastItsLeaseChangesNothingAndStepsDown) {
  const std::string running = SubmitAndReach(LongSpec("paused-leader"), 40);
  ASSERT_FALSE(running.empty());
  absl::StatusOr<int> leader = cluster_->LeaderIndex(absl::Seconds(10));
  ASSERT_TRUE(leader.ok()) << leader.status();
  ASSERT_TRUE(cluster_->SignalCoordinator(*leader, SIGSTOP).ok());
  absl::StatusOr<int> next = cluster_->LeaderIndex(absl::Seconds(15), *leader);
  ASSERT_TRUE(next.ok()) << next.status() << cluster_->LogTails();
  // The ranks re-attach to the new leader while the old one is still stopped ...
  ASSERT_TRUE(WaitUntil(
                  [&] {
                    absl::StatusOr<v1::JobStatus> job = cluster_->GetJob(running);
                    if (!job.ok()) return false;
                    for (const v1::JobEvent& event : job->events()) {
                      if (absl::StrContains(event.message(), "is back")) return true;
                    }
                    return IsTerminal(job->state());
                  },
                  absl::Seconds(30), "the ranks re-attached")
                  .ok())
      << cluster_->LogTails();
  // ... then it resumes, believing it leads, with workers it has not heard from for seconds.
  ASSERT_TRUE(cluster_->SignalCoordinator(*leader, SIGCONT).ok());
  ExpectSucceededAsOneAttempt(running);
  // It answers as a standby now, and only the new leader leads.
  absl::StatusOr<int> leads = cluster_->LeaderIndex(absl::Seconds(10));
  ASSERT_TRUE(leads.ok());
  EXPECT_EQ(*leads, *next);
  EXPECT_THAT(cluster_->LogTails(200), HasSubstr("stepping down"));
}

TEST_F(FailoverE2eTest, OneEtcdMemberOfThreeLostMidJobIsNotVisible) {
  const std::string running = SubmitAndReach(LongSpec("member-lost"), 40);
  ASSERT_FALSE(running.empty());
  ASSERT_TRUE(etcd_->Kill(0).ok());
  // A submit still commits.
  absl::StatusOr<std::string> later = cluster_->Submit(SmallSyntheticSpec("later"));
  ASSERT_TRUE(later.ok()) << later.status();
  ExpectSucceededAsOneAttempt(running);
  const JobHistory next = cluster_->WaitForEnd(*later, kJobTimeout);
  EXPECT_EQ(next.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(next.final);
}

TEST_F(FailoverE2eTest, EtcdWithoutQuorumRefusesWritesAndTheJobResumesAfter) {
  const std::string running = SubmitAndReach(LongSpec("quorum-lost"), 40);
  ASSERT_FALSE(running.empty());
  ASSERT_TRUE(etcd_->Kill(1).ok());
  ASSERT_TRUE(etcd_->Kill(2).ok());
  const absl::Time lost = absl::Now();
  // Never a false success: the submit is refused, naming etcd.
  const CliResult refused = cluster_->RunCli(
      {"submit", "--name", "refused", "--world_size", "2"}, absl::Seconds(30));
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("etcd")) << refused.output;
  // The outage itself lasts 5 s; nothing to wait for.
  absl::SleepFor(absl::Seconds(5) - (absl::Now() - lost));
  ASSERT_TRUE(etcd_->Restart(1).ok());
  ASSERT_TRUE(etcd_->Restart(2).ok());
  ASSERT_TRUE(etcd_->AwaitWritable(absl::Seconds(30)).ok());
  ExpectSucceededAsOneAttempt(running);
  const CliResult listed = cluster_->RunCli({"list"}, absl::Seconds(30));
  EXPECT_THAT(listed.output, ::testing::Not(HasSubstr("refused")));
}

TEST(ImportE2eTest, ASqliteStateDirMovesIntoEtcdWithItsJobs) {
  const std::string state_dir =
      (std::filesystem::path(std::getenv("TEST_TMPDIR")) / "import-state").string();
  std::string done_id;
  {
    ClusterOptions sqlite;
    sqlite.coordinator_flags = {"--state_dir=" + state_dir};
    absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Start(sqlite);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    absl::StatusOr<std::string> id = (*cluster)->Submit(SmallSyntheticSpec("on-sqlite"));
    ASSERT_TRUE(id.ok()) << id.status();
    const JobHistory done = (*cluster)->WaitForEnd(*id, kJobTimeout);
    ASSERT_EQ(done.final.state(), v1::JOB_STATE_SUCCEEDED) << (*cluster)->LogTails();
    done_id = *id;
  }  // the coordinator stops: its state dir is free
  absl::StatusOr<std::unique_ptr<etcd::EtcdTestCluster>> etcd =
      etcd::EtcdTestCluster::Start("import", 1);
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  ClusterOptions moved;
  moved.coordinator_flags = {"--store=etcd",
                             "--etcd_endpoints=" + absl::StrJoin((*etcd)->endpoints(), ","),
                             "--import_state_dir=" + state_dir};
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Start(moved);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<v1::JobStatus> job = (*cluster)->GetJob(done_id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED);
  absl::StatusOr<std::string> next = (*cluster)->Submit(SmallSyntheticSpec("on-etcd"));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, "job-000002");
  EXPECT_THAT((*cluster)->LogTails(200), HasSubstr("imported 1 job(s)"));
}

}  // namespace
}  // namespace e2e
}  // namespace ringleader
