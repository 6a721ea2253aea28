// The core over a job store that refuses writes for a while: a submit the store did not commit
// is refused and leaves nothing queued; a cancel answers UNAVAILABLE until it is committed; the
// jobs whose saves failed are saved again (RetryUnsavedSaves) once the store answers.
#include <atomic>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/clock.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/store/job_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

class RefusingStore : public InMemoryJobStore {
 public:
  std::atomic<bool> refuse{false};
  absl::Status Save(const v1::JobStatus& job) override {
    if (refuse) return absl::UnavailableError("etcd at http://10.0.0.9:2379: no endpoint answered");
    return InMemoryJobStore::Save(job);
  }
};

class StoreFailureTest : public ::testing::Test {
 protected:
  StoreFailureTest()
      : coordinator_(CoordinatorOptions(), &clock_, &store_,
                     [this](absl::Time, const std::string& line) { log_.push_back(line); }) {}

  static v1::JobSpec Spec() {
    v1::JobSpec spec;
    spec.set_name("test");
    spec.set_world_size(2);
    spec.set_backend("gloo");
    return spec;
  }
  // The stored record of `id` (nullopt: none).
  std::optional<v1::JobStatus> Stored(const JobId& id) {
    absl::StatusOr<std::vector<v1::JobStatus>> all = store_.LoadAll();
    EXPECT_TRUE(all.ok());
    for (const v1::JobStatus& job : *all) {
      if (job.job_id() == id.value()) return job;
    }
    return std::nullopt;
  }

  FakeClock clock_;
  RefusingStore store_;
  std::vector<std::string> log_;
  Coordinator coordinator_;
};

TEST_F(StoreFailureTest, ASubmitTheStoreDidNotCommitIsRefusedAndLeavesNothingQueued) {
  store_.refuse = true;
  absl::StatusOr<Coordinator::Submitted> refused = coordinator_.SubmitJob(Spec());
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("not submitted"));
  EXPECT_THAT(refused.status().message(), HasSubstr("etcd at http://10.0.0.9:2379"));
  EXPECT_TRUE(coordinator_.ListJobs().empty());

  store_.refuse = false;
  absl::StatusOr<Coordinator::Submitted> accepted = coordinator_.SubmitJob(Spec());
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  // Committed before it answered, and queued.
  std::optional<v1::JobStatus> stored = Stored(accepted->id);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->state(), v1::JOB_STATE_QUEUED);
  ASSERT_EQ(coordinator_.ListJobs().size(), 1u);
  EXPECT_EQ(coordinator_.ListJobs()[0].state(), v1::JOB_STATE_QUEUED);
  // The refused submit's id is not reused.
  EXPECT_NE(accepted->id.value(), "job-000001");
}

TEST_F(StoreFailureTest, ACancelAnswersUnavailableUntilCommittedAndIsSavedAgainLater) {
  absl::StatusOr<Coordinator::Submitted> job = coordinator_.SubmitJob(Spec());
  ASSERT_TRUE(job.ok()) << job.status();
  store_.refuse = true;
  const absl::Status cancelled = coordinator_.CancelJob(job->id, "");
  EXPECT_TRUE(absl::IsUnavailable(cancelled)) << cancelled;
  EXPECT_THAT(cancelled.message(), HasSubstr("did not commit"));
  EXPECT_EQ(Stored(job->id)->state(), v1::JOB_STATE_QUEUED);
  // Still refusing: the retry keeps it unsaved.
  EXPECT_EQ(coordinator_.RetryUnsavedSaves(), 0u);
  EXPECT_EQ(Stored(job->id)->state(), v1::JOB_STATE_QUEUED);

  store_.refuse = false;
  EXPECT_EQ(coordinator_.RetryUnsavedSaves(), 1u);
  EXPECT_EQ(Stored(job->id)->state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(coordinator_.RetryUnsavedSaves(), 0u);  // nothing left
  // A second cancel finds it ended.
  EXPECT_TRUE(absl::IsFailedPrecondition(coordinator_.CancelJob(job->id, "")));
}

}  // namespace
}  // namespace ringleader
