// End to end, processes that die or freeze in the middle of a job, and a job cancelled from the
// CLI: real signals (SIGKILL, SIGSTOP/SIGCONT) sent to real worker daemons and rank processes.
// Each fault must fail the job within seconds with a reason naming the rank that was hit (not
// the surviving rank that noticed it first), leave no rank process behind, and leave a cluster
// that runs the next job.
//
// The coordinator runs with a short heartbeat timeout so a silent daemon is declared lost within
// about a second. Every wait polls a condition against a deadline; each test has its own
// cluster, so a failure cannot leak into the next test.
#include <errno.h>
#include <signal.h>
#include <string.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace ringleader {
namespace e2e {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

constexpr absl::Duration kHeartbeatInterval = absl::Milliseconds(200);
constexpr absl::Duration kHeartbeatTimeout = absl::Seconds(1);
constexpr absl::Duration kKillGrace = absl::Seconds(2);
// Allowance for a loaded machine on top of every timing the product promises.
constexpr absl::Duration kSlack = absl::Seconds(3);
// Hard limits of the waits for things that are not under test.
constexpr absl::Duration kTrainingStartTimeout = absl::Seconds(30);
constexpr absl::Duration kJobTimeout = absl::Seconds(30);
// A fault must end the job this soon (the heartbeat timeout, the coordinator's 100 ms health
// tick, the slack).
const absl::Duration kFailureBound = kHeartbeatTimeout + kSlack;
// Steps every rank must have reported before a fault is injected ("mid-job").
constexpr uint64_t kStepsBeforeFault = 3;

// A job that trains far longer than any test waits: a fault always lands in the middle of it.
v1::JobSpec LongSyntheticSpec(const std::string& name) {
  v1::JobSpec spec = UntilCancelledSpec(name);
  // A peer that stops answering fails a collective after 5 s (the heartbeat timeout catches a
  // silent daemon long before).
  spec.set_collective_timeout_ms(5000);
  return spec;
}

std::string DescribeProcesses(const std::vector<ProcessRef>& processes) {
  std::vector<std::string> pids;
  for (const ProcessRef& p : processes) pids.push_back(absl::StrCat(p.pid));
  return absl::StrCat("[", absl::StrJoin(pids, ", "), "]");
}

class KillE2eTest : public ::testing::Test {
 protected:
  // The job, once every rank reported training steps, with the processes running it.
  struct TrainingJob {
    std::string id;
    v1::JobStatus status;
    std::vector<int> worker_of_rank;      // cluster index of the daemon running each rank
    std::vector<ProcessRef> rank_process;  // each rank's process
  };

  void SetUp() override {
    ClusterOptions options;
    options.heartbeat_interval = kHeartbeatInterval;
    options.heartbeat_timeout = kHeartbeatTimeout;
    options.kill_grace = kKillGrace;
    absl::StatusOr<std::unique_ptr<Cluster>> started = Cluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = std::move(*started);
  }
  void TearDown() override {
    if (HasFailure() && cluster_ != nullptr) std::cerr << cluster_->LogTails(25) << std::endl;
    cluster_.reset();  // stops (continues, terminates, kills) every process
  }

  // Submits a long job and waits until every rank has reported kStepsBeforeFault steps.
  void StartTraining(const std::string& name, TrainingJob* job) {
    absl::StatusOr<std::string> id = cluster_->Submit(LongSyntheticSpec(name));
    ASSERT_TRUE(id.ok()) << id.status();
    job->id = *id;
    absl::Status last = absl::OkStatus();
    const absl::Status trained = WaitUntil(
        [&] {
          absl::StatusOr<v1::JobStatus> status = cluster_->GetJob(job->id);
          if (!status.ok()) {
            last = status.status();
            return false;
          }
          job->status = *status;
          if (status->state() != v1::JOB_STATE_RUNNING) return IsTerminal(status->state());
          for (const v1::RankStatus& rank : status->ranks()) {
            if (rank.last_step().step() < kStepsBeforeFault) return false;
          }
          return true;
        },
        kTrainingStartTimeout, absl::StrCat("job ", job->id, " training"));
    ASSERT_TRUE(trained.ok()) << trained << " " << last << "; state "
                              << v1::JobState_Name(job->status.state());
    ASSERT_EQ(job->status.state(), v1::JOB_STATE_RUNNING) << LastReason(job->status);
    ASSERT_EQ(job->status.ranks_size(), 2);
    for (const v1::RankStatus& rank : job->status.ranks()) {
      const int worker = cluster_->WorkerIndex(rank.worker_name());
      ASSERT_GE(worker, 0) << rank.worker_name();
      const std::vector<ProcessRef> children = cluster_->WorkerChildren(worker);
      ASSERT_THAT(children, SizeIs(1)) << "rank " << rank.rank() << " on " << rank.worker_name()
                                       << ": " << DescribeProcesses(children);
      job->worker_of_rank.push_back(worker);
      job->rank_process.push_back(children[0]);
    }
  }

  // Follows the job to its end; returns how long after `fault` the coordinator ended it
  // (from its transition time), or a negative duration if it did not end in time.
  absl::Duration WaitForEndAfter(const std::string& job_id, absl::Time fault,
                                 v1::JobStatus* final) {
    const JobHistory history = cluster_->WaitForEnd(job_id, kJobTimeout);
    *final = history.final;
    if (!history.ended || final->transitions().empty()) return -absl::Seconds(1);
    return absl::FromUnixMillis(final->transitions().rbegin()->time_unix_ms()) - fault;
  }

  // The reason's expected start when rank `rank` of `job` is to blame.
  static std::string Blames(const TrainingJob& job, int rank) {
    return absl::StrCat("rank ", rank, " (worker ", job.status.ranks(rank).worker_name(), " on ");
  }

  // Waits until daemon `worker` has no child process left (its rank process exited and was
  // reaped by the daemon).
  ::testing::AssertionResult NoRankProcessLeft(int worker, absl::Duration timeout) {
    const absl::Status gone = WaitUntil([&] { return cluster_->WorkerChildren(worker).empty(); },
                                        timeout, absl::StrCat("daemon ", worker, " rank exits"));
    if (gone.ok()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << gone << ": children " << DescribeProcesses(cluster_->WorkerChildren(worker));
  }

  static ::testing::AssertionResult Exits(const ProcessRef& process, absl::Duration timeout) {
    const absl::Status gone = WaitUntil([&] { return !ProcessRunning(process); }, timeout,
                                        absl::StrCat("process ", process.pid, " exit"));
    if (gone.ok()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << gone;
  }

  // The coordinator's view of worker `name` (an empty status, state UNSPECIFIED, if it is not
  // registered).
  v1::WorkerStatus Worker(const std::string& name) {
    absl::StatusOr<std::vector<v1::WorkerStatus>> workers = cluster_->ListWorkers();
    EXPECT_TRUE(workers.ok()) << workers.status();
    if (workers.ok()) {
      for (const v1::WorkerStatus& worker : *workers) {
        if (worker.name() == name) return worker;
      }
    }
    return v1::WorkerStatus();
  }

  // Runs a short job on both workers and expects it to succeed.
  void ExpectNextJobSucceeds(const std::string& name) {
    ASSERT_TRUE(cluster_->WaitForIdleWorkers(2, kJobTimeout).ok()) << "workers never idle";
    absl::StatusOr<std::string> id = cluster_->Submit(SmallSyntheticSpec(name));
    ASSERT_TRUE(id.ok()) << id.status();
    const JobHistory next = cluster_->WaitForEnd(*id, kJobTimeout);
    ASSERT_TRUE(next.ended) << "job " << *id << " did not end";
    EXPECT_EQ(next.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(next.final);
    std::vector<std::string> names;
    for (const v1::RankStatus& rank : next.final.ranks()) names.push_back(rank.worker_name());
    EXPECT_THAT(names, ::testing::UnorderedElementsAre(Cluster::WorkerName(0),
                                                       Cluster::WorkerName(1)));
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(NoRankProcessLeft(i, kKillGrace + kSlack));
  }

  static void Report(const std::string& scenario, const std::string& what, absl::Duration d) {
    std::cout << scenario << ": " << what << " " << absl::ToInt64Milliseconds(d) << " ms"
              << std::endl;
  }

  std::unique_ptr<Cluster> cluster_;
};

TEST_F(KillE2eTest, KilledDaemonAndRankFailTheJobAsLostAndTheSurvivorCarriesOn) {
  TrainingJob job;
  ASSERT_NO_FATAL_FAILURE(StartTraining("kill-daemon-e2e", &job));
  constexpr int kVictimRank = 1;
  const int victim = job.worker_of_rank[kVictimRank];
  const int survivor = job.worker_of_rank[1 - kVictimRank];

  const absl::Time fault = absl::Now();
  ASSERT_TRUE(cluster_->SignalWorker(victim, SIGKILL).ok());
  // The rank may already be gone: it dies with its daemon (PR_SET_PDEATHSIG).
  const int rank_killed = kill(job.rank_process[kVictimRank].pid, SIGKILL);
  ASSERT_TRUE(rank_killed == 0 || errno == ESRCH) << strerror(errno);

  v1::JobStatus final;
  const absl::Duration to_failure = WaitForEndAfter(job.id, fault, &final);
  Report("kill daemon+rank", "fault -> FAILED", to_failure);
  ASSERT_EQ(final.state(), v1::JOB_STATE_FAILED) << LastReason(final);
  // The killed rank is blamed, not the surviving rank whose collective broke first.
  EXPECT_THAT(LastReason(final),
              AllOf(StartsWith(Blames(job, kVictimRank)), HasSubstr("lost: no heartbeat")));
  EXPECT_LT(to_failure, kFailureBound);

  // Nothing of the victim is left; the survivor daemon lives, without its rank process.
  EXPECT_TRUE(Exits(job.rank_process[kVictimRank], kSlack));
  EXPECT_FALSE(cluster_->WorkerRunning(victim));
  EXPECT_EQ(Worker(Cluster::WorkerName(victim)).state(), v1::WORKER_STATE_LOST);
  EXPECT_TRUE(NoRankProcessLeft(survivor, kKillGrace + kSlack));
  EXPECT_FALSE(ProcessRunning(job.rank_process[1 - kVictimRank]));
  EXPECT_TRUE(cluster_->WorkerRunning(survivor));

  // A replacement daemon (same name, new incarnation) takes the victim's place.
  const std::string lost_id = Worker(Cluster::WorkerName(victim)).worker_id();
  ASSERT_TRUE(cluster_->RestartWorker(victim).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectNextJobSucceeds("after-kill-daemon-e2e"));
  EXPECT_NE(Worker(Cluster::WorkerName(victim)).worker_id(), lost_id);
  EXPECT_TRUE(cluster_->WorkerRunning(survivor));
}

TEST_F(KillE2eTest, KilledRankProcessFailsTheJobNamingRankAndSignal) {
  TrainingJob job;
  ASSERT_NO_FATAL_FAILURE(StartTraining("kill-rank-e2e", &job));
  constexpr int kVictimRank = 0;
  const int victim = job.worker_of_rank[kVictimRank];
  const int survivor = job.worker_of_rank[1 - kVictimRank];

  const absl::Time fault = absl::Now();
  ASSERT_EQ(kill(job.rank_process[kVictimRank].pid, SIGKILL), 0);

  v1::JobStatus final;
  const absl::Duration to_failure = WaitForEndAfter(job.id, fault, &final);
  Report("kill rank", "fault -> FAILED", to_failure);
  ASSERT_EQ(final.state(), v1::JOB_STATE_FAILED) << LastReason(final);
  EXPECT_THAT(LastReason(final), AllOf(StartsWith(Blames(job, kVictimRank)),
                                       HasSubstr("killed by signal 9 (SIGKILL)")));
  EXPECT_LT(to_failure, kFailureBound);

  // Both daemons live on; neither keeps a rank process.
  EXPECT_TRUE(cluster_->WorkerRunning(victim));
  EXPECT_TRUE(cluster_->WorkerRunning(survivor));
  EXPECT_TRUE(NoRankProcessLeft(victim, kSlack));
  EXPECT_TRUE(NoRankProcessLeft(survivor, kKillGrace + kSlack));
  ASSERT_NO_FATAL_FAILURE(ExpectNextJobSucceeds("after-kill-rank-e2e"));
}

TEST_F(KillE2eTest, FrozenRankProcessIsNamedAsTheSuspectWhileItsDaemonStaysHealthy) {
  // Only the rank process freezes: its daemon keeps heartbeating, so the worker is never lost.
  // The peer's collective times out; the job's reason must still point at the frozen rank,
  // the one whose process went silent (the healthy peer keeps sending keepalives while it
  // waits in the collective).
  TrainingJob job;
  ASSERT_NO_FATAL_FAILURE(StartTraining("freeze-rank-e2e", &job));
  constexpr int kFrozenRank = 1;
  const int frozen = job.worker_of_rank[kFrozenRank];
  const int peer = job.worker_of_rank[1 - kFrozenRank];

  const absl::Time fault = absl::Now();
  ASSERT_EQ(kill(job.rank_process[kFrozenRank].pid, SIGSTOP), 0);

  v1::JobStatus final;
  const absl::Duration to_failure = WaitForEndAfter(job.id, fault, &final);
  Report("freeze rank", "fault -> FAILED", to_failure);
  ASSERT_EQ(final.state(), v1::JOB_STATE_FAILED) << LastReason(final);
  EXPECT_THAT(LastReason(final),
              AllOf(HasSubstr(absl::StrCat("suspect: ", Blames(job, kFrozenRank))),
                    HasSubstr("stopped or frozen"), HasSubstr("process state stopped")));
  // The collective timeout (5 s), the peer's head start for a culprit's report, the slack.
  EXPECT_LT(to_failure, absl::Seconds(5) + kHeartbeatTimeout + kHeartbeatInterval +
                            absl::Milliseconds(500) + kSlack);
  EXPECT_NE(Worker(Cluster::WorkerName(frozen)).state(), v1::WORKER_STATE_LOST);

  // The frozen rank's daemon kills it (SIGTERM stays pending in a stopped process: SIGKILL
  // after the grace), and both workers run the next job.
  EXPECT_TRUE(Exits(job.rank_process[kFrozenRank], kHeartbeatInterval + kKillGrace + kSlack));
  EXPECT_TRUE(NoRankProcessLeft(peer, kKillGrace + kSlack));
  ASSERT_NO_FATAL_FAILURE(ExpectNextJobSucceeds("after-freeze-rank-e2e"));
}

TEST_F(KillE2eTest, StoppedDaemonIsLostThenComesBackKillsItsStaleRankAndWorksAgain) {
  TrainingJob job;
  ASSERT_NO_FATAL_FAILURE(StartTraining("stop-daemon-e2e", &job));
  constexpr int kVictimRank = 1;
  const int victim = job.worker_of_rank[kVictimRank];
  const int survivor = job.worker_of_rank[1 - kVictimRank];
  const ProcessRef stale_rank = job.rank_process[kVictimRank];
  const std::string victim_id = Worker(Cluster::WorkerName(victim)).worker_id();

  // Freeze the daemon and its rank (two process groups) as a hung host would.
  const absl::Time fault = absl::Now();
  ASSERT_TRUE(cluster_->SignalWorker(victim, SIGSTOP).ok());
  ASSERT_EQ(kill(-stale_rank.pid, SIGSTOP), 0);

  v1::JobStatus final;
  const absl::Duration to_failure = WaitForEndAfter(job.id, fault, &final);
  Report("stop daemon+rank", "fault -> FAILED", to_failure);
  ASSERT_EQ(final.state(), v1::JOB_STATE_FAILED) << LastReason(final);
  EXPECT_THAT(LastReason(final),
              AllOf(StartsWith(Blames(job, kVictimRank)), HasSubstr("lost: no heartbeat")));
  EXPECT_LT(to_failure, kFailureBound);
  // The survivor's rank is aborted (it was stuck in a collective with the frozen peer).
  EXPECT_TRUE(NoRankProcessLeft(survivor, kHeartbeatInterval + kKillGrace + kSlack));
  EXPECT_EQ(Worker(Cluster::WorkerName(victim)).state(), v1::WORKER_STATE_LOST);
  EXPECT_TRUE(ProcessRunning(stale_rank)) << "a stopped process still exists";

  // Thawed, the daemon hears NOT_FOUND on its heartbeat, registers again (same incarnation:
  // same id), kills the rank of the failed attempt and is IDLE again. The rank stays stopped,
  // so only the daemon's SIGKILL (after the grace: a stopped process ignores SIGTERM until
  // continued) can end it.
  const absl::Time thaw = absl::Now();
  ASSERT_TRUE(cluster_->SignalWorker(victim, SIGCONT).ok());
  absl::Time idle_at = absl::InfinitePast();
  absl::Time reaped_at = absl::InfinitePast();
  const absl::Status recovered = WaitUntil(
      [&] {
        if (idle_at == absl::InfinitePast() &&
            Worker(Cluster::WorkerName(victim)).state() == v1::WORKER_STATE_IDLE) {
          idle_at = absl::Now();
        }
        if (reaped_at == absl::InfinitePast() && cluster_->WorkerChildren(victim).empty()) {
          reaped_at = absl::Now();
        }
        return idle_at != absl::InfinitePast() && reaped_at != absl::InfinitePast();
      },
      kHeartbeatInterval + kKillGrace + kSlack, "the thawed worker IDLE, its stale rank reaped");
  EXPECT_TRUE(recovered.ok()) << recovered << "; children "
                              << DescribeProcesses(cluster_->WorkerChildren(victim));
  Report("stop daemon+rank", "SIGCONT -> worker IDLE", idle_at - thaw);
  Report("stop daemon+rank", "SIGCONT -> stale rank reaped", reaped_at - thaw);
  EXPECT_FALSE(ProcessRunning(stale_rank));
  EXPECT_EQ(Worker(Cluster::WorkerName(victim)).worker_id(), victim_id);
  EXPECT_TRUE(cluster_->WorkerRunning(victim));
  EXPECT_TRUE(cluster_->WorkerRunning(survivor));
  ASSERT_NO_FATAL_FAILURE(ExpectNextJobSucceeds("after-stop-daemon-e2e"));
}

// A daemon frozen while idle hears NOT_FOUND on both its threads once thawed (the parked
// WaitAssignment and the next heartbeat). The queued job it is then given must run: the second
// NOT_FOUND must not register again and kill the rank just started.
TEST_F(KillE2eTest, StoppedIdleDaemonComesBackAndRunsTheJobQueuedMeanwhile) {
  constexpr int kVictim = 1;
  const std::string victim_id = Worker(Cluster::WorkerName(kVictim)).worker_id();
  ASSERT_TRUE(cluster_->SignalWorker(kVictim, SIGSTOP).ok());
  const absl::Status lost = WaitUntil(
      [&] { return Worker(Cluster::WorkerName(kVictim)).state() == v1::WORKER_STATE_LOST; },
      kHeartbeatTimeout + kSlack, "the stopped worker LOST");
  ASSERT_TRUE(lost.ok()) << lost;

  // Two ranks, one idle worker: the job waits for the lost one.
  absl::StatusOr<std::string> id = cluster_->Submit(SmallSyntheticSpec("after-thaw-e2e"));
  ASSERT_TRUE(id.ok()) << id.status();
  absl::StatusOr<v1::JobStatus> queued = cluster_->GetJob(*id);
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(queued->state(), v1::JOB_STATE_QUEUED);

  ASSERT_TRUE(cluster_->SignalWorker(kVictim, SIGCONT).ok());
  const JobHistory history = cluster_->WaitForEnd(*id, kJobTimeout);
  ASSERT_TRUE(history.ended) << "job " << *id << " did not end";
  EXPECT_EQ(history.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(history.final);
  EXPECT_EQ(Worker(Cluster::WorkerName(kVictim)).worker_id(), victim_id);
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(cluster_->WorkerRunning(i));
}

TEST_F(KillE2eTest, JobCancelledWithTheCliStopsBothRanksWithinTheKillGrace) {
  TrainingJob job;
  ASSERT_NO_FATAL_FAILURE(StartTraining("cancel-e2e", &job));

  const absl::Time cancel = absl::Now();
  const CliResult cancelled = cluster_->RunCli({"cancel", job.id}, kJobTimeout);
  ASSERT_EQ(cancelled.exit_code, 0) << cancelled.output;
  EXPECT_THAT(cancelled.output, HasSubstr("cancelled job " + job.id));

  // The abort reaches each daemon with its next heartbeat; SIGTERM, SIGKILL after the grace.
  for (const ProcessRef& rank : job.rank_process) {
    EXPECT_TRUE(Exits(rank, kHeartbeatInterval + kKillGrace + kSlack)) << "rank pid " << rank.pid;
  }
  Report("cancel", "cancel -> both rank processes gone", absl::Now() - cancel);
  for (int worker : job.worker_of_rank) {
    EXPECT_TRUE(NoRankProcessLeft(worker, kSlack));
    EXPECT_TRUE(cluster_->WorkerRunning(worker));
  }

  absl::StatusOr<v1::JobStatus> status = cluster_->GetJob(job.id);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(LastReason(*status), "cancelled from the command line");

  // `ringleader workers` shows both daemons IDLE, running no job.
  const CliResult workers = cluster_->RunCli({"workers"}, kJobTimeout);
  ASSERT_EQ(workers.exit_code, 0) << workers.output;
  for (int i = 0; i < 2; ++i) {
    bool listed = false;
    for (absl::string_view line : absl::StrSplit(workers.output, '\n')) {
      const std::vector<absl::string_view> columns =
          absl::StrSplit(line, ' ', absl::SkipWhitespace());
      // WORKER NAME HOST STATE ... (the later columns may hold spaces).
      if (columns.size() < 4 || columns[1] != Cluster::WorkerName(i)) continue;
      listed = true;
      EXPECT_EQ(columns[3], "IDLE") << line;
    }
    EXPECT_TRUE(listed) << Cluster::WorkerName(i) << " not in:\n" << workers.output;
  }
  EXPECT_THAT(workers.output, Not(HasSubstr(job.id)));
}

}  // namespace
}  // namespace e2e
}  // namespace ringleader
