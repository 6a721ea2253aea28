// WorkerDaemon's lease: registering again after NOT_FOUND, a lost lease's rank (taken back or
// abandoned), an unreachable coordinator and its grace (fixture: daemon_test_util.h).
#include "worker/daemon/daemon.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/daemon/daemon_test_util.h"

namespace ringleader {
namespace daemon_test {
namespace {

TEST_F(WorkerDaemonTest, HeartbeatNotFoundRegistersAgainWithTheSameIncarnation) {
  {
    absl::MutexLock lock(&state_.mu);
    state_.lose_lease_of = "w-1";
  }
  StartDaemon();
  ASSERT_TRUE(WaitFor([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (const auto& h : state_.heartbeats) {
      if (h.worker_id() == "w-2") return true;
    }
    return false;
  })) << "no heartbeat under the new registration";
  EXPECT_EQ(daemon_->worker_id(), "w-2");
  absl::MutexLock lock(&state_.mu);
  ASSERT_GE(state_.registrations.size(), 2u);
  EXPECT_EQ(state_.registrations[1].incarnation(), state_.registrations[0].incarnation());
  EXPECT_EQ(state_.registrations[1].name(), "host-cpu0");
  for (const auto& h : state_.heartbeats) EXPECT_EQ(h.incarnation(), 77u);
}

TEST_F(WorkerDaemonTest, LeaseChangesAreToldForTheAdminPortsHealth) {
  absl::Mutex mu;
  std::vector<bool> changes;
  options_.on_lease_change = [&](bool registered) {
    absl::MutexLock lock(&mu);
    changes.push_back(registered);
  };
  {
    absl::MutexLock lock(&state_.mu);
    state_.lose_lease_of = "w-1";
  }
  StartDaemon();
  {
    absl::MutexLock lock(&mu);
    auto three = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return changes.size() >= 3; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&three), kTestTimeout));
  }
  StopDaemon();
  absl::MutexLock lock(&mu);
  // registered, lease lost, registered again, ..., stopped.
  ASSERT_GE(changes.size(), 4u);
  EXPECT_TRUE(changes[0]);
  EXPECT_FALSE(changes[1]);
  EXPECT_TRUE(changes[2]);
  EXPECT_FALSE(changes.back());
}

TEST_F(WorkerDaemonTest, WaitAssignmentNotFoundRegistersAgain) {
  {
    absl::MutexLock lock(&state_.mu);
    state_.forget_in_poll = "w-1";
  }
  StartDaemon();
  ASSERT_TRUE(WaitFor([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return state_.registrations.size() == 2 && state_.polls >= 3;
  }));
  EXPECT_EQ(daemon_->worker_id(), "w-2");
}

// The real coordinator gives a daemon that registers again with its incarnation the SAME worker
// id. When both threads hear NOT_FOUND for one lost lease, the second to handle it must see
// that the lease was renewed since its call: registering once more would kill the rank the
// renewed lease may already be running (a job assigned right after the renewal).
TEST_F(WorkerDaemonTest, LateNotFoundForALeaseAlreadyRenewedDoesNotRegisterAgain) {
  ON_CALL(client_, RegisterWorker(_)).WillByDefault(Invoke([this](const auto& request) {
    absl::MutexLock lock(&state_.mu);
    state_.registrations.push_back(request);
    v1::RegisterWorkerResponse response;
    response.set_worker_id("w-1");  // same incarnation, same id
    response.set_heartbeat_interval_ms(2);
    return absl::StatusOr<v1::RegisterWorkerResponse>(response);
  }));
  // Heartbeat #1 is in flight while the lease is lost: it is answered NOT_FOUND only after the
  // assignment thread has registered again and polled under the renewed lease.
  ON_CALL(client_, Heartbeat(_)).WillByDefault(Invoke([this](const auto& request) {
    absl::MutexLock lock(&state_.mu);
    state_.heartbeats.push_back(request);
    if (state_.heartbeats.size() > 1) {
      return absl::StatusOr<v1::HeartbeatResponse>(v1::HeartbeatResponse());
    }
    auto renewed = [this]() ABSL_SHARED_LOCKS_REQUIRED(state_.mu) {
      return (state_.registrations.size() >= 2 && state_.polls >= 2) || state_.cancelled;
    };
    state_.mu.AwaitWithTimeout(absl::Condition(&renewed), kTestTimeout);
    return absl::StatusOr<v1::HeartbeatResponse>(absl::NotFoundError("worker w-1 was lost"));
  }));
  // WaitAssignment #1 answers NOT_FOUND once heartbeat #1 is in flight.
  ON_CALL(client_, WaitAssignment(_)).WillByDefault(Invoke([this](const auto& request) {
    absl::MutexLock lock(&state_.mu);
    ++state_.polls;
    if (state_.polls == 1) {
      auto in_flight = [this]() ABSL_SHARED_LOCKS_REQUIRED(state_.mu) {
        return !state_.heartbeats.empty() || state_.cancelled;
      };
      state_.mu.AwaitWithTimeout(absl::Condition(&in_flight), kTestTimeout);
      return absl::StatusOr<v1::WaitAssignmentResponse>(absl::NotFoundError("worker w-1 lost"));
    }
    auto cancelled = [this]() ABSL_SHARED_LOCKS_REQUIRED(state_.mu) { return state_.cancelled; };
    state_.mu.AwaitWithTimeout(absl::Condition(&cancelled),
                               absl::Milliseconds(request.wait_timeout_ms()));
    if (state_.cancelled) {
      return absl::StatusOr<v1::WaitAssignmentResponse>(absl::CancelledError("cancelled"));
    }
    return absl::StatusOr<v1::WaitAssignmentResponse>(v1::WaitAssignmentResponse());
  }));
  StartDaemon();
  // Heartbeat #2 comes after the daemon handled #1's NOT_FOUND.
  ASSERT_TRUE(WaitFor([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return state_.heartbeats.size() >= 2;
  }));
  absl::MutexLock lock(&state_.mu);
  EXPECT_EQ(state_.registrations.size(), 2u)
      << "the late NOT_FOUND registered again although the lease was renewed";
  EXPECT_EQ(state_.heartbeats.back().worker_id(), "w-1");
}

// The lost lease's coordinator already failed the attempt, or (restarted, in memory) forgot it
// and numbers its jobs from job-000001 generation 1 again: a report for the terminated child
// could only fail an unrelated new job that reuses the id. The daemon stays silent about it.
TEST_F(WorkerDaemonTest, LostLeaseTerminatesTheRunningChildWithoutReportingIt) {
  const std::string ready = (fs::path(std::getenv("TEST_TMPDIR")) / "lease.ready").string();
  {
    absl::MutexLock lock(&state_.mu);
    state_.lose_lease_of = "w-1";
    state_.lose_lease_when_file = ready;
  }
  StartDaemon();
  Assign(MakeAssignment("job-lease", "hang", ready));
  // Runs only once the hanging child was terminated and reaped.
  Assign(MakeAssignment("job-next", "exit:5"));
  const v1::FinishRankRequest report = Finished(0);
  EXPECT_EQ(report.job_id(), "job-next")
      << "the child of the lost lease was reported: " << report.error();
  EXPECT_EQ(daemon_->attempts_started(), 2);
  EXPECT_EQ(daemon_->worker_id(), "w-2");
}

// A restarted coordinator whose job goes on takes the rank back: the child keeps running under
// the renewed lease (an abort order for it is then obeyed and reported like any other).
TEST_F(WorkerDaemonTest, LostLeaseWithItsRankTakenBackLeavesTheChildRunning) {
  const std::string ready = (fs::path(std::getenv("TEST_TMPDIR")) / "kept.ready").string();
  const v1::Assignment hang = MakeAssignment("job-kept", "hang", ready);
  {
    absl::MutexLock lock(&state_.mu);
    state_.lose_lease_of = "w-1";
    state_.lose_lease_when_file = ready;
    state_.keep_running = true;
  }
  StartDaemon();
  Assign(hang);
  ASSERT_TRUE(WaitFor([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (const auto& h : state_.heartbeats) {
      if (h.worker_id() == "w-2") return true;
    }
    return false;
  })) << "no heartbeat under the renewed lease";
  {
    absl::MutexLock lock(&state_.mu);
    ASSERT_EQ(state_.registrations.size(), 2u);
    const v1::RegisterWorkerRequest& again = state_.registrations[1];
    EXPECT_EQ(again.running().job_id(), "job-kept");
    EXPECT_EQ(again.running().generation(), 3u);
    EXPECT_EQ(again.running_rank(), 1u);
    EXPECT_FALSE(state_.registrations[0].has_running());
    v1::JobAttempt abort;
    abort.set_job_id("job-kept");
    abort.set_generation(3);
    state_.aborts = {abort};
  }
  // Reported: the child was not abandoned with the lost lease.
  const v1::FinishRankRequest report = Finished(0);
  EXPECT_EQ(report.job_id(), "job-kept");
  EXPECT_THAT(report.error(), HasSubstr("after the worker was told to stop it"));
  EXPECT_EQ(daemon_->attempts_started(), 1);
}

// Heartbeats fail (the coordinator is down): the rank runs on for the coordinator's grace, then
// is stopped and not reported; the daemon carries on.
TEST_F(WorkerDaemonTest, UnreachableCoordinatorPastTheGraceStopsTheChildWithoutReportingIt) {
  options_.clock = &clock_;  // a fixture member: it outlives the daemon stopped in TearDown
  const std::string ready = (fs::path(std::getenv("TEST_TMPDIR")) / "outage.ready").string();
  {
    absl::MutexLock lock(&state_.mu);
    state_.grace_ms = 5000;
    state_.unreachable_when_file = ready;
    state_.unreachable_heartbeats = 6;  // 1 s each: the 6th is 6 s after the last answer
    state_.clock = &clock_;
  }
  StartDaemon();
  Assign(MakeAssignment("job-outage", "hang", ready));
  Assign(MakeAssignment("job-next", "exit:5"));  // runs once the hanging child was reaped
  const v1::FinishRankRequest report = Finished(0);
  EXPECT_EQ(report.job_id(), "job-next")
      << "the child stopped for the outage was reported: " << report.error();
  std::ifstream args(AttemptFile(MakeAssignment("job-outage", "hang"), "args.txt"));
  std::stringstream text;
  text << args.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("--coordinator_grace=5s"));
}

}  // namespace
}  // namespace daemon_test
}  // namespace ringleader
