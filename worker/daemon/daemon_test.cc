// WorkerDaemon against a gMock CoordinatorClient, with fake_rank_for_test as the rank binary: a
// real child process per assignment whose behaviour the assignment's spec.name picks.
#include "worker/daemon/daemon.h"

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/coordinator_client/mock_coordinator_client.h"

namespace ringleader {
namespace {

namespace fs = std::filesystem;
using ::testing::_;
using ::testing::HasSubstr;
using ::testing::Invoke;
using ::testing::NiceMock;

// Every wait on the daemon is bounded by this, so a bug fails the test instead of hanging it.
constexpr absl::Duration kTestTimeout = absl::Seconds(20);

// What the coordinator "is" for the mock: assignments to hand out, abort orders to give, and
// what the daemon reported. Guarded by one mutex; tests wait on conditions over it.
struct CoordinatorState {
  absl::Mutex mu;
  std::deque<v1::Assignment> pending ABSL_GUARDED_BY(mu);
  std::vector<v1::RegisterWorkerRequest> registrations ABSL_GUARDED_BY(mu);
  std::vector<v1::HeartbeatRequest> heartbeats ABSL_GUARDED_BY(mu);
  std::vector<v1::FinishRankRequest> finished ABSL_GUARDED_BY(mu);
  int polls ABSL_GUARDED_BY(mu) = 0;
  uint64_t last_poll_incarnation ABSL_GUARDED_BY(mu) = 0;
  bool cancelled ABSL_GUARDED_BY(mu) = false;
  // Heartbeats of this worker id answer NOT_FOUND (once), once `lose_lease_when_file` exists
  // ("" = at once).
  std::string lose_lease_of ABSL_GUARDED_BY(mu);
  std::string lose_lease_when_file ABSL_GUARDED_BY(mu);
  // The next WaitAssignment of this worker id answers NOT_FOUND.
  std::string forget_in_poll ABSL_GUARDED_BY(mu);
  // Heartbeats answer with this abort order once `abort_when_file` exists ("" = at once).
  std::vector<v1::JobAttempt> aborts ABSL_GUARDED_BY(mu);
  std::string abort_when_file ABSL_GUARDED_BY(mu);
  // Registrations after the first answer running_kept with this value.
  bool keep_running ABSL_GUARDED_BY(mu) = false;
  // Registrations answer coordinator_grace_ms with this (0 = leave it unset).
  uint32_t grace_ms ABSL_GUARDED_BY(mu) = 0;
  // Once this file exists ("" = never), the next `unreachable_heartbeats` heartbeats answer
  // UNAVAILABLE, each advancing `clock` by a second (when set).
  std::string unreachable_when_file ABSL_GUARDED_BY(mu);
  int unreachable_heartbeats ABSL_GUARDED_BY(mu) = 0;
  FakeClock* clock ABSL_GUARDED_BY(mu) = nullptr;
  // The next FinishRank calls answer UNAVAILABLE this many times.
  int finish_unavailable ABSL_GUARDED_BY(mu) = 0;
  std::vector<v1::WaitAssignmentRequest> polled ABSL_GUARDED_BY(mu);
  // The output shipped (AppendLogs), by "job/generation/rank", and what had been shipped of the
  // job when each FinishRank arrived.
  std::map<std::string, std::string> shipped ABSL_GUARDED_BY(mu);
  std::vector<std::string> shipped_at_finish ABSL_GUARDED_BY(mu);
};

std::string LogKey(const std::string& job, uint64_t generation, uint32_t rank) {
  return absl::StrCat(job, "/", generation, "/", rank);
}

v1::Assignment MakeAssignment(const std::string& job, const std::string& mode,
                              const std::string& ready_file = "") {
  v1::Assignment a;
  a.set_job_id(job);
  a.set_generation(3);
  a.set_rank(1);
  a.set_world_size(2);
  a.mutable_spec()->set_name(mode);
  a.mutable_spec()->mutable_data()->set_path(ready_file);
  return a;
}

class WorkerDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* srcdir = std::getenv("TEST_SRCDIR");
    const char* tmpdir = std::getenv("TEST_TMPDIR");
    ASSERT_NE(srcdir, nullptr);
    ASSERT_NE(tmpdir, nullptr);
    options_.name = "host-cpu0";
    options_.host = "host";
    v1::Device cpu;
    cpu.set_kind("cpu");
    options_.devices = {cpu};
    options_.incarnation = 77;
    options_.coordinator_address = "coordinator:7070";
    options_.work_dir =
        (fs::path(tmpdir) / ::testing::UnitTest::GetInstance()->current_test_info()->name())
            .string();
    options_.rank_binary =
        (fs::path(srcdir) / "ringleader" / "worker" / "daemon" / "fake_rank_for_test").string();
    options_.rank_extra_args = {"--extra=1"};
    options_.wait_assignment_timeout = absl::Milliseconds(20);
    options_.kill_grace = absl::Seconds(10);
    options_.retry_interval = absl::Milliseconds(5);

    ON_CALL(client_, RegisterWorker(_)).WillByDefault(Invoke([this](const auto& request) {
      absl::MutexLock lock(&state_.mu);
      state_.registrations.push_back(request);
      v1::RegisterWorkerResponse response;
      response.set_worker_id(absl::StrCat("w-", state_.registrations.size()));
      response.set_heartbeat_interval_ms(2);
      response.set_heartbeat_timeout_ms(10000);
      if (state_.registrations.size() > 1) response.set_running_kept(state_.keep_running);
      if (state_.grace_ms > 0) response.set_coordinator_grace_ms(state_.grace_ms);
      return absl::StatusOr<v1::RegisterWorkerResponse>(response);
    }));
    ON_CALL(client_, Heartbeat(_)).WillByDefault(Invoke([this](const auto& request) {
      absl::MutexLock lock(&state_.mu);
      state_.heartbeats.push_back(request);
      if (!state_.unreachable_when_file.empty() && fs::exists(state_.unreachable_when_file) &&
          state_.unreachable_heartbeats > 0) {
        --state_.unreachable_heartbeats;
        if (state_.clock != nullptr) state_.clock->Advance(absl::Seconds(1));
        return absl::StatusOr<v1::HeartbeatResponse>(absl::UnavailableError("connection refused"));
      }
      if (request.worker_id() == state_.lose_lease_of &&
          (state_.lose_lease_when_file.empty() || fs::exists(state_.lose_lease_when_file))) {
        state_.lose_lease_of.clear();
        return absl::StatusOr<v1::HeartbeatResponse>(absl::NotFoundError("unknown worker"));
      }
      v1::HeartbeatResponse response;
      if (state_.abort_when_file.empty() || fs::exists(state_.abort_when_file)) {
        for (const auto& attempt : state_.aborts) *response.add_abort() = attempt;
      }
      return absl::StatusOr<v1::HeartbeatResponse>(response);
    }));
    // A long poll: answers with the next pending assignment, or after the requested wait.
    ON_CALL(client_, WaitAssignment(_)).WillByDefault(Invoke([this](const auto& request) {
      absl::MutexLock lock(&state_.mu);
      ++state_.polls;
      state_.polled.push_back(request);
      state_.last_poll_incarnation = request.incarnation();
      if (request.worker_id() == state_.forget_in_poll) {
        state_.forget_in_poll.clear();
        return absl::StatusOr<v1::WaitAssignmentResponse>(absl::NotFoundError("unknown worker"));
      }
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(state_.mu) {
        return !state_.pending.empty() || state_.cancelled;
      };
      state_.mu.AwaitWithTimeout(absl::Condition(&ready),
                                 absl::Milliseconds(request.wait_timeout_ms()));
      if (state_.cancelled) {
        return absl::StatusOr<v1::WaitAssignmentResponse>(absl::CancelledError("cancelled"));
      }
      v1::WaitAssignmentResponse response;
      if (!state_.pending.empty()) {
        *response.mutable_assignment() = state_.pending.front();
        state_.pending.pop_front();
      }
      return absl::StatusOr<v1::WaitAssignmentResponse>(response);
    }));
    ON_CALL(client_, FinishRank(_)).WillByDefault(Invoke([this](const auto& request) {
      absl::MutexLock lock(&state_.mu);
      if (state_.finish_unavailable > 0) {
        --state_.finish_unavailable;
        return absl::StatusOr<v1::FinishRankResponse>(absl::UnavailableError("no coordinator"));
      }
      state_.finished.push_back(request);
      state_.shipped_at_finish.push_back(
          state_.shipped[LogKey(request.job_id(), request.generation(), request.rank())]);
      return absl::StatusOr<v1::FinishRankResponse>(v1::FinishRankResponse());
    }));
    ON_CALL(client_, AppendLogs(_)).WillByDefault(Invoke([this](const auto& request) {
      absl::MutexLock lock(&state_.mu);
      std::string& shipped =
          state_.shipped[LogKey(request.job_id(), request.generation(), request.rank())];
      if (request.offset() != shipped.size()) {
        return absl::StatusOr<v1::AppendLogsResponse>(
            absl::InvalidArgumentError(absl::StrCat("offset ", request.offset(), " after ",
                                                    shipped.size(), " bytes (test)")));
      }
      shipped += request.data();
      return absl::StatusOr<v1::AppendLogsResponse>(v1::AppendLogsResponse());
    }));
    ON_CALL(client_, CancelAll()).WillByDefault(Invoke([this] {
      absl::MutexLock lock(&state_.mu);
      state_.cancelled = true;
    }));
  }

  void TearDown() override { StopDaemon(); }

  void StartDaemon() {
    daemon_ = std::make_unique<WorkerDaemon>(&client_, options_);
    runner_ = std::thread([this] { run_status_ = daemon_->Run(); });
  }

  void StopDaemon() {
    if (!daemon_) return;
    daemon_->Stop();
    runner_.join();
    EXPECT_TRUE(run_status_.ok()) << run_status_;
    daemon_.reset();
  }

  void Assign(const v1::Assignment& assignment) {
    absl::MutexLock lock(&state_.mu);
    state_.pending.push_back(assignment);
  }

  // Waits (bounded) until `predicate` holds over the state.
  template <typename Predicate>
  bool WaitFor(Predicate predicate) {
    absl::MutexLock lock(&state_.mu);
    auto holds = [&]() ABSL_SHARED_LOCKS_REQUIRED(state_.mu) { return predicate(); };
    return state_.mu.AwaitWithTimeout(absl::Condition(&holds), kTestTimeout);
  }

  // The n-th FinishRank request (waits for it).
  v1::FinishRankRequest Finished(size_t n) {
    const bool arrived =
        WaitFor([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return state_.finished.size() > n; });
    EXPECT_TRUE(arrived) << "no FinishRank #" << n;
    absl::MutexLock lock(&state_.mu);
    return state_.finished.size() > n ? state_.finished[n] : v1::FinishRankRequest();
  }

  std::string AttemptFile(const v1::Assignment& a, const std::string& file) {
    return (fs::path(options_.work_dir) / AttemptDirName(a) / file).string();
  }

  NiceMock<MockCoordinatorClient> client_;
  CoordinatorState state_;
  WorkerDaemonOptions options_;
  std::unique_ptr<WorkerDaemon> daemon_;
  std::thread runner_;
  absl::Status run_status_;
};

TEST_F(WorkerDaemonTest, RegistersThenPollsForAssignmentsUnderItsWorkerId) {
  StartDaemon();
  ASSERT_TRUE(WaitFor([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return state_.polls >= 2; }));
  EXPECT_EQ(daemon_->worker_id(), "w-1");
  StopDaemon();
  absl::MutexLock lock(&state_.mu);
  ASSERT_EQ(state_.registrations.size(), 1u);
  const v1::RegisterWorkerRequest& r = state_.registrations[0];
  EXPECT_EQ(r.name(), "host-cpu0");
  EXPECT_EQ(r.host(), "host");
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
  FakeClock clock;
  options_.clock = &clock;
  const std::string ready = (fs::path(std::getenv("TEST_TMPDIR")) / "outage.ready").string();
  {
    absl::MutexLock lock(&state_.mu);
    state_.grace_ms = 5000;
    state_.unreachable_when_file = ready;
    state_.unreachable_heartbeats = 6;  // 1 s each: the 6th is 6 s after the last answer
    state_.clock = &clock;
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

  // Still alive: the next assignment runs too.
  Assign(MakeAssignment("job-b", "exit:3"));
  const v1::FinishRankRequest second = Finished(1);
  EXPECT_EQ(second.job_id(), "job-b");
  EXPECT_THAT(second.error(), HasSubstr("rank process exited with code 3"));
  EXPECT_EQ(daemon_->attempts_started(), 2);
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
}  // namespace ringleader
