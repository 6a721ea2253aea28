// Test fixture for the coordinator core: a FakeClock, an in-memory job store, a captured event
// log, and helpers that drive workers and ranks through the Coordinator's plain C++ API.
#ifndef RINGLEADER_COORDINATOR_CORE_COORDINATOR_TEST_UTIL_H_
#define RINGLEADER_COORDINATOR_CORE_COORDINATOR_TEST_UTIL_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/store/job_store.h"
#include "gtest/gtest.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// Records what an async completion was called with, and how often.
template <typename T>
class Captured {
 public:
  std::function<void(T)> Callback() {
    return [this](T value) {
      ++calls_;
      value_ = std::move(value);
    };
  }
  int calls() const { return calls_; }
  const T& value() const { return *value_; }

 private:
  int calls_ = 0;
  std::optional<T> value_;
};

using CapturedAssignment = Captured<absl::StatusOr<std::optional<v1::Assignment>>>;
using CapturedValue = Captured<absl::StatusOr<std::string>>;
using CapturedJob = Captured<absl::StatusOr<v1::JobStatus>>;

class CoordinatorTest : public ::testing::Test {
 protected:
  CoordinatorTest() : CoordinatorTest(Options()) {}
  // A fixture whose coordinator runs with `options` (e.g. Options() with one limit lowered).
  explicit CoordinatorTest(CoordinatorOptions options)
      : coordinator_(std::move(options), &clock_, &store_,
                     [this](absl::Time, const std::string& line) { log_.push_back(line); }) {}

  static CoordinatorOptions Options() {
    CoordinatorOptions options;
    options.heartbeat_timeout = absl::Seconds(10);
    options.max_wait = absl::Seconds(30);
    options.rendezvous_timeout = absl::Seconds(120);
    return options;
  }

  // Registers worker `name` on host "host-<name>" with one device of `kind`.
  WorkerId Register(const std::string& name, const std::string& kind = "cpu",
                    uint64_t incarnation = 1) {
    v1::Device device;
    device.set_kind(kind);
    absl::StatusOr<Coordinator::Registration> registration =
        coordinator_.RegisterWorker(name, "host-" + name, {device}, incarnation);
    EXPECT_TRUE(registration.ok()) << registration.status();
    return registration.ok() ? registration->id : WorkerId();
  }

  // A job without restarts unless `max_restarts` says otherwise: most tests look at what one
  // attempt's failure does (coordinator_restart_test.cc covers restarts).
  JobId Submit(uint32_t world_size, const std::string& backend = "gloo",
               uint32_t max_restarts = 0) {
    v1::JobSpec spec;
    spec.set_name("test");
    spec.set_world_size(world_size);
    spec.set_backend(backend);
    spec.set_max_restarts(max_restarts);
    absl::StatusOr<Coordinator::Submitted> submitted = coordinator_.SubmitJob(spec);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    return submitted.ok() ? submitted->id : JobId();
  }

  // The worker's assignment if one is ready now (a poll that does not wait).
  std::optional<v1::Assignment> TakeAssignment(const WorkerId& worker) {
    CapturedAssignment captured;
    coordinator_.WaitAssignmentAsync(worker, clock_.Now(), captured.Callback());
    EXPECT_EQ(captured.calls(), 1);
    EXPECT_TRUE(captured.value().ok()) << captured.value().status();
    return captured.value().ok() ? *captured.value() : std::nullopt;
  }

  static AttemptId AttemptOf(const v1::Assignment& assignment) {
    return AttemptId{JobId(assignment.job_id()), Generation(assignment.generation())};
  }

  // Takes each worker's assignment and joins its rank; returns the assignments by rank.
  std::vector<v1::Assignment> TakeAndJoin(const std::vector<WorkerId>& workers) {
    std::vector<v1::Assignment> assignments(workers.size());
    for (const WorkerId& worker : workers) {
      std::optional<v1::Assignment> assignment = TakeAssignment(worker);
      EXPECT_TRUE(assignment.has_value()) << worker;
      if (!assignment.has_value()) continue;
      EXPECT_TRUE(coordinator_
                      .JoinJob(AttemptOf(*assignment), Rank(assignment->rank()), worker,
                               assignment->spec_fingerprint())
                      .ok());
      assignments[assignment->rank()] = *assignment;
    }
    return assignments;
  }

  v1::JobStatus Job(const JobId& id) {
    absl::StatusOr<v1::JobStatus> job = coordinator_.GetJob(id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : v1::JobStatus();
  }

  v1::WorkerStatus Worker(const WorkerId& id) {
    for (const v1::WorkerStatus& worker : coordinator_.ListWorkers()) {
      if (worker.worker_id() == id.value()) return worker;
    }
    ADD_FAILURE() << "no worker " << id;
    return v1::WorkerStatus();
  }

  // Advances the fake clock and lets the coordinator notice.
  void Advance(absl::Duration d) {
    clock_.Advance(d);
    coordinator_.CheckStaleness();
  }

  FakeClock clock_;
  InMemoryJobStore store_;
  std::vector<std::string> log_;
  Coordinator coordinator_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_COORDINATOR_TEST_UTIL_H_
