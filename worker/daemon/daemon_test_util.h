// The fixture of the worker daemon's tests (daemon_test.cc: assignments and children;
// daemon_lease_test.cc: registration, leases, outages): WorkerDaemon against a gMock
// CoordinatorClient whose answers come from a CoordinatorState, with fake_rank_for_test as the
// rank binary (a real child process per assignment; the assignment's spec.name picks its
// behaviour).
#ifndef RINGLEADER_WORKER_DAEMON_DAEMON_TEST_UTIL_H_
#define RINGLEADER_WORKER_DAEMON_DAEMON_TEST_UTIL_H_

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
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/coordinator_client/mock_coordinator_client.h"

namespace ringleader {
namespace daemon_test {

namespace fs = std::filesystem;
using ::testing::_;
using ::testing::HasSubstr;
using ::testing::Invoke;
using ::testing::NiceMock;

// Every wait on the daemon is bounded by this, so a bug fails the test instead of hanging it.
inline constexpr absl::Duration kTestTimeout = absl::Seconds(20);

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

inline std::string LogKey(const std::string& job, uint64_t generation, uint32_t rank) {
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

  // Declared before the daemon so it is destroyed after it: a daemon thread may read the clock
  // until StopDaemon() returns.
  FakeClock clock_;
  NiceMock<MockCoordinatorClient> client_;
  CoordinatorState state_;
  WorkerDaemonOptions options_;
  std::unique_ptr<WorkerDaemon> daemon_;
  std::thread runner_;
  absl::Status run_status_;
};

}  // namespace daemon_test
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_DAEMON_DAEMON_TEST_UTIL_H_
