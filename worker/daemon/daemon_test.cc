// WorkerDaemon: registering, running assignments as supervised children, reporting their
// ends, abort orders and Stop (fixture: daemon_test_util.h).
#include "worker/daemon/daemon.h"

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/daemon/daemon_test_util.h"

namespace ringleader {
namespace daemon_test {
namespace {

TEST_F(WorkerDaemonTest, RegistersThenPollsForAssignmentsUnderItsWorkerId) {
  options_.topology = "rack1/host";
  StartDaemon();
  ASSERT_TRUE(WaitFor([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return state_.polls >= 2; }));
  EXPECT_EQ(daemon_->worker_id(), "w-1");
  StopDaemon();
  absl::MutexLock lock(&state_.mu);
  ASSERT_EQ(state_.registrations.size(), 1u);
  const v1::RegisterWorkerRequest& r = state_.registrations[0];
  EXPECT_EQ(r.name(), "host-cpu0");
  EXPECT_EQ(r.host(), "host");
  EXPECT_EQ(r.topology(), "rack1/host");
  EXPECT_EQ(r.incarnation(), 77u);
  EXPECT_EQ(state_.last_poll_incarnation, 77u) << "polls carry the incarnation too";
  ASSERT_EQ(r.devices_size(), 1);
  EXPECT_EQ(r.devices(0).kind(), "cpu");
  EXPECT_TRUE(state_.cancelled) << "Stop() must cut the long poll short";
}

TEST_F(WorkerDaemonTest, RandomIncarnationWhenNoneGiven) {
  options_.incarnation = 0;
  WorkerDaemon a(&client_, options_);
  WorkerDaemon b(&client_, options_);
  EXPECT_NE(a.incarnation(), 0u);
  EXPECT_NE(a.incarnation(), b.incarnation());
}

TEST_F(WorkerDaemonTest, RejectsOptionsWithoutRankBinary) {
  options_.rank_binary.clear();
  WorkerDaemon daemon(&client_, options_);
  const absl::Status status = daemon.Run();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("rank_binary"));
}


TEST_F(WorkerDaemonTest, PollsAcknowledgeTheLastAttemptStarted) {
  StartDaemon();
  Assign(MakeAssignment("job-ack", "exit:3"));
  Finished(0);
  ASSERT_TRUE(WaitFor([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !state_.polled.empty() && state_.polled.back().has_last_started();
  }));
  absl::MutexLock lock(&state_.mu);
  EXPECT_FALSE(state_.polled.front().has_last_started());
  EXPECT_EQ(state_.polled.back().last_started().job_id(), "job-ack");
  EXPECT_EQ(state_.polled.back().last_started().generation(), 3u);
}

TEST_F(WorkerDaemonTest, AFailureReportIsRetriedWhileTheCoordinatorIsUnreachable) {
  {
    absl::MutexLock lock(&state_.mu);
    state_.finish_unavailable = 3;
  }
  StartDaemon();
  Assign(MakeAssignment("job-retry", "exit:6"));
  const v1::FinishRankRequest report = Finished(0);
  EXPECT_EQ(report.job_id(), "job-retry");
  EXPECT_THAT(report.error(), HasSubstr("exited with code 6"));
}

TEST_F(WorkerDaemonTest, AbortedChildIsReportedWithTheSignalNameAndTheDaemonCarriesOn) {
  StartDaemon();
  const v1::Assignment crash = MakeAssignment("job-a", "abort");
  Assign(crash);
  const v1::FinishRankRequest report = Finished(0);
  EXPECT_EQ(report.job_id(), "job-a");
  EXPECT_EQ(report.generation(), 3u);
  EXPECT_EQ(report.rank(), 1u);
  EXPECT_FALSE(report.ok());
  EXPECT_THAT(report.error(), HasSubstr("rank process killed by signal 6 (SIGABRT)"));
  EXPECT_THAT(report.error(), HasSubstr("aborting on purpose"));  // the child's last output
  EXPECT_EQ(report.failure().kind(), v1::RankFailure::SIGNAL);
  EXPECT_EQ(report.failure().signal(), SIGABRT);

  // Still alive: the next assignment runs too.
  Assign(MakeAssignment("job-b", "exit:3"));
  const v1::FinishRankRequest second = Finished(1);
  EXPECT_EQ(second.job_id(), "job-b");
  EXPECT_THAT(second.error(), HasSubstr("rank process exited with code 3"));
  EXPECT_EQ(second.failure().kind(), v1::RankFailure::EXITED);
  EXPECT_EQ(second.failure().signal(), 0);
  EXPECT_EQ(daemon_->attempts_started(), 2);
}

TEST_F(WorkerDaemonTest, AChildKilledBySigkillIsReportedAsSignal9) {
  StartDaemon();
  Assign(MakeAssignment("job-killed", "sigkill"));
  const v1::FinishRankRequest report = Finished(0);
  EXPECT_EQ(report.job_id(), "job-killed");
  EXPECT_FALSE(report.ok());
  EXPECT_THAT(report.error(), HasSubstr("rank process killed by signal 9 (SIGKILL)"));
  EXPECT_EQ(report.failure().kind(), v1::RankFailure::SIGNAL);
  EXPECT_EQ(report.failure().signal(), SIGKILL);
}

// Confinement: a spec naming a path outside the allowed roots starts no child and is reported
// as the job's error (not restartable); one inside starts as usual.
TEST_F(WorkerDaemonTest, AnAssignmentNamingAPathOutsideTheAllowedRootsIsRefusedAsAJobError) {
  fs::create_directories(options_.work_dir);
  options_.work_dir = fs::canonical(options_.work_dir).string();
  options_.allowed_roots = {options_.work_dir};
  StartDaemon();
  v1::Assignment outside = MakeAssignment("job-outside", "exit:0");
  outside.mutable_spec()->mutable_data()->set_dataset("synthetic");
  outside.mutable_spec()->set_checkpoint_dir("/etc");
  Assign(outside);
  const v1::FinishRankRequest refused = Finished(0);
  EXPECT_EQ(refused.job_id(), "job-outside");
  EXPECT_EQ(refused.generation(), 3u);
  EXPECT_EQ(refused.rank(), 1u);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.failure().kind(), v1::RankFailure::JOB_ERROR);
  EXPECT_EQ(refused.error(),
            absl::StrCat("checkpoint_dir: /etc is outside the worker's allowed roots (",
                         options_.work_dir, "): set checkpoint_dir under one of them, or add a "
                         "root with ringleader-worker --allowed_roots"));
  EXPECT_EQ(daemon_->attempts_started(), 0);

  v1::Assignment inside = MakeAssignment("job-inside", "exit:4");
  inside.mutable_spec()->mutable_data()->set_dataset("synthetic");
  inside.mutable_spec()->set_checkpoint_dir(options_.work_dir + "/checkpoints");
  Assign(inside);
  const v1::FinishRankRequest ran = Finished(1);
  EXPECT_EQ(ran.job_id(), "job-inside");
  EXPECT_THAT(ran.error(), HasSubstr("rank process exited with code 4"));
  EXPECT_EQ(ran.failure().kind(), v1::RankFailure::EXITED);
  EXPECT_EQ(daemon_->attempts_started(), 1);
}

TEST_F(WorkerDaemonTest, RejectsARelativeAllowedRoot) {
  options_.allowed_roots = {"relative/dir"};
  WorkerDaemon daemon(&client_, options_);
  const absl::Status status = daemon.Run();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("'relative/dir' is not an absolute path"));
}

// The coordinator holds the rank's last words before the daemon reports its death: with no
// shipping tick during the child's short life, the final drain sends them.
TEST_F(WorkerDaemonTest, TheChildsLastOutputIsShippedBeforeItsFailureIsReported) {
  options_.log_ship_interval = absl::Hours(1);
  StartDaemon();
  Assign(MakeAssignment("job-words", "abort"));
  const v1::FinishRankRequest report = Finished(0);
  EXPECT_THAT(report.error(), HasSubstr("aborting on purpose"));
  absl::MutexLock lock(&state_.mu);
  ASSERT_EQ(state_.shipped_at_finish.size(), 1u);
  EXPECT_EQ(state_.shipped_at_finish[0], "fake rank: aborting on purpose\n");
}

TEST_F(WorkerDaemonTest, RankCommandLineCarriesAssignmentCoordinatorWorkerIdAndExtraArgs) {
  StartDaemon();
  const v1::Assignment a = MakeAssignment("job/with space", "succeed");
  Assign(a);
  const v1::FinishRankRequest report = Finished(0);
  EXPECT_THAT(report.error(), HasSubstr("exited with code 0 without reporting its result"));
  std::ifstream args(AttemptFile(a, "args.txt"));
  std::stringstream text;
  text << args.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("--assignment=" + AttemptFile(a, "assignment.pb")));
  EXPECT_THAT(text.str(), HasSubstr("--coordinator=coordinator:7070"));
  EXPECT_THAT(text.str(), HasSubstr("--worker_id=w-1"));
  EXPECT_THAT(text.str(), HasSubstr("--report_marker=" + AttemptFile(a, "finish_reported")));
  EXPECT_THAT(text.str(), HasSubstr("--extra=1"));
  // Heartbeat timeout 10 s + interval 2 ms + 500 ms slack.
  EXPECT_THAT(text.str(), HasSubstr("--victim_report_delay=10.502s"));
  // The registration named no grace: the daemon's default.
  EXPECT_THAT(text.str(), HasSubstr("--coordinator_grace=1m"));
  EXPECT_THAT(text.str(), ::testing::Not(HasSubstr("--gpu")));
  EXPECT_EQ(AttemptDirName(a), "job_with_space-g3-r1");
}

TEST_F(WorkerDaemonTest, EachJobsRanksGetTheirSnapshotDirectoryAndOtherJobsAreRemoved) {
  const fs::path root = fs::path(options_.work_dir) / "snapshots";
  fs::create_directories(root / "left-by-an-earlier-daemon");
  options_.snapshot_dir = root.string();
  StartDaemon();
  const v1::Assignment first = MakeAssignment("job/one", "succeed");
  Assign(first);
  Finished(0);
  EXPECT_FALSE(fs::exists(root / "left-by-an-earlier-daemon"));  // emptied at start
  std::stringstream text;
  text << std::ifstream(AttemptFile(first, "args.txt")).rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("--snapshot_dir=" + (root / "job_one").string()));
  // The first job's rank left snapshots; the second job's rank start removes them.
  fs::create_directories(root / "job_one");
  Assign(MakeAssignment("job-two", "succeed"));
  Finished(1);
  EXPECT_FALSE(fs::exists(root / "job_one"));
  StopDaemon();
  EXPECT_FALSE(fs::exists(root));  // a clean stop leaves nothing in memory
}

TEST_F(WorkerDaemonTest, RankThatReportedItselfIsNotReportedAgain) {
  StartDaemon();
  Assign(MakeAssignment("job-self", "report"));
  Assign(MakeAssignment("job-next", "exit:4"));
  const v1::FinishRankRequest report = Finished(0);
  // The first report the daemon made is the second job's: the first rank spoke for itself.
  EXPECT_EQ(report.job_id(), "job-next");
  EXPECT_EQ(daemon_->attempts_started(), 2);
}

TEST_F(WorkerDaemonTest, AbortOrderTerminatesTheChildWithSigterm) {
  const std::string ready = (fs::path(std::getenv("TEST_TMPDIR")) / "hang.ready").string();
  {
    absl::MutexLock lock(&state_.mu);
    v1::JobAttempt other;  // an order for another attempt must not touch this child
    other.set_job_id("job-other");
    other.set_generation(3);
    v1::JobAttempt mine;
    mine.set_job_id("job-hang");
    mine.set_generation(3);
    state_.aborts = {other, mine};
    state_.abort_when_file = ready;
  }
  StartDaemon();
  Assign(MakeAssignment("job-hang", "hang", ready));
  const v1::FinishRankRequest report = Finished(0);
  EXPECT_EQ(report.job_id(), "job-hang");
  EXPECT_THAT(report.error(), HasSubstr("killed by signal 15 (SIGTERM)"));
  EXPECT_THAT(report.error(), HasSubstr("after the worker was told to stop it"));
  EXPECT_EQ(report.failure().kind(), v1::RankFailure::STOPPED);
  EXPECT_EQ(report.failure().signal(), SIGTERM);
}

TEST_F(WorkerDaemonTest, AbortOrderEscalatesToSigkillAfterTheGrace) {
  options_.kill_grace = absl::Milliseconds(50);
  const std::string ready = (fs::path(std::getenv("TEST_TMPDIR")) / "stubborn.ready").string();
  {
    absl::MutexLock lock(&state_.mu);
    v1::JobAttempt mine;
    mine.set_job_id("job-stubborn");
    mine.set_generation(3);
    state_.aborts = {mine};
    state_.abort_when_file = ready;
  }
  StartDaemon();
  Assign(MakeAssignment("job-stubborn", "hang_ignore_term", ready));
  const v1::FinishRankRequest report = Finished(0);
  EXPECT_THAT(report.error(), HasSubstr("killed by signal 9 (SIGKILL)"));
}

TEST_F(WorkerDaemonTest, StopTerminatesTheRunningChildAndReturns) {
  const std::string ready = (fs::path(std::getenv("TEST_TMPDIR")) / "stop.ready").string();
  StartDaemon();
  Assign(MakeAssignment("job-stop", "hang", ready));
  ASSERT_TRUE(WaitFor([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return daemon_->attempts_started() == 1 && fs::exists(ready);
  }));
  StopDaemon();  // joins Run(): fails the test by timeout if the child were not terminated
  absl::MutexLock lock(&state_.mu);
  EXPECT_TRUE(state_.cancelled);
}

}  // namespace
}  // namespace daemon_test
}  // namespace ringleader
