#include "client/run_verdict.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

v1::JobStatus Job(v1::JobState state, uint64_t generation = 1) {
  v1::JobStatus job;
  job.set_state(state);
  job.set_generation(generation);
  job.mutable_spec()->set_world_size(2);
  return job;
}

void AddRank(v1::JobStatus* job, uint32_t rank, uint64_t step, double synced_norm,
             double drift = -1) {
  v1::RankStatus* status = job->add_ranks();
  status->set_rank(rank);
  status->mutable_last_step()->set_step(step);
  status->mutable_last_step()->set_synced_grad_norm(synced_norm);
  if (drift >= 0) {
    status->mutable_last_step()->set_has_drift(true);
    status->mutable_last_step()->set_drift(drift);
    status->mutable_last_step()->set_drift_parameter("fc2.weight");
  }
}

TEST(RunVerdictTest, EqualNormsZeroDriftSucceededPasses) {
  RunObserver observer;
  v1::JobStatus final_job = Job(v1::JOB_STATE_SUCCEEDED);
  AddRank(&final_job, 0, 100, 1.25, 0);
  AddRank(&final_job, 1, 100, 1.25 * (1 + 1e-7), 0);
  v1::EpochReport* epoch = final_job.add_epochs();
  epoch->set_epoch(3);
  epoch->set_test_accuracy(0.85);
  const RunVerdict verdict = observer.Conclude(final_job);
  EXPECT_TRUE(verdict.passed);
  EXPECT_TRUE(verdict.grad_norms.checked);
  EXPECT_EQ(verdict.grad_norms.step, 100u);
  EXPECT_NEAR(verdict.grad_norms.relative_difference, 1e-7, 1e-9);
  EXPECT_TRUE(verdict.drift.checked);
  EXPECT_EQ(verdict.drift.measurements, 2);
  EXPECT_DOUBLE_EQ(verdict.final_accuracy, 0.85);
  const std::string text = FormatVerdict(verdict);
  EXPECT_THAT(text, HasSubstr("final accuracy  0.8500 (epoch 3)"));
  EXPECT_THAT(text, HasSubstr("equal across 2 ranks at step 100"));
  EXPECT_THAT(text, HasSubstr("result: PASS"));
}

TEST(RunVerdictTest, UnequalNormsFailEvenWhenSucceeded) {
  RunObserver observer;
  v1::JobStatus final_job = Job(v1::JOB_STATE_SUCCEEDED);
  AddRank(&final_job, 0, 50, 1.0);
  AddRank(&final_job, 1, 50, 1.1);
  const RunVerdict verdict = observer.Conclude(final_job);
  EXPECT_FALSE(verdict.passed);
  EXPECT_FALSE(verdict.grad_norms.passed);
  EXPECT_NEAR(verdict.grad_norms.relative_difference, 0.1 / 1.1, 1e-12);
  const std::string text = FormatVerdict(verdict);
  EXPECT_THAT(text, HasSubstr("DIFFER at step 50: rank 0 1, rank 1 1.1"));
  EXPECT_THAT(text, HasSubstr("result: FAIL"));
}

TEST(RunVerdictTest, UsesTheLastStepEveryRankReported) {
  RunObserver observer;
  v1::JobStatus running = Job(v1::JOB_STATE_RUNNING);
  AddRank(&running, 0, 10, 2.0);
  AddRank(&running, 1, 10, 2.0);
  observer.Observe(running);
  v1::JobStatus later = Job(v1::JOB_STATE_RUNNING);
  AddRank(&later, 0, 11, 3.0);  // rank 1 still at 10
  AddRank(&later, 1, 10, 2.0);
  observer.Observe(later);
  v1::JobStatus final_job = Job(v1::JOB_STATE_FAILED);
  AddRank(&final_job, 0, 12, 4.0);
  AddRank(&final_job, 1, 10, 2.0);
  const RunVerdict verdict = observer.Conclude(final_job);
  EXPECT_EQ(verdict.grad_norms.step, 10u);
  EXPECT_TRUE(verdict.grad_norms.passed);
  EXPECT_FALSE(verdict.passed);  // FAILED
  EXPECT_THAT(FormatVerdict(verdict), HasSubstr("state           FAILED  [FAIL]"));
}

TEST(RunVerdictTest, NonZeroDriftFails) {
  RunObserver observer;
  v1::JobStatus running = Job(v1::JOB_STATE_RUNNING);
  AddRank(&running, 0, 50, 1.0, 0);
  AddRank(&running, 1, 50, 1.0, 3e-7);
  observer.Observe(running);
  v1::JobStatus final_job = Job(v1::JOB_STATE_SUCCEEDED);
  AddRank(&final_job, 0, 60, 1.0);
  AddRank(&final_job, 1, 60, 1.0);
  const RunVerdict verdict = observer.Conclude(final_job);
  EXPECT_FALSE(verdict.drift.passed);
  EXPECT_DOUBLE_EQ(verdict.drift.max_drift, 3e-7);
  EXPECT_EQ(verdict.drift.rank, 1u);
  EXPECT_FALSE(verdict.passed);
  EXPECT_THAT(FormatVerdict(verdict), HasSubstr("max drift       3e-07 on rank 1 at step 50 in "
                                                "fc2.weight (expected exactly 0)  [FAIL]"));
}

TEST(RunVerdictTest, NewGenerationForgetsTheOldAttempt) {
  RunObserver observer;
  v1::JobStatus first = Job(v1::JOB_STATE_RUNNING, 1);
  AddRank(&first, 0, 5, 1.0, 0.5);
  AddRank(&first, 1, 5, 9.0);
  observer.Observe(first);
  v1::JobStatus final_job = Job(v1::JOB_STATE_SUCCEEDED, 2);
  AddRank(&final_job, 0, 5, 1.0);
  AddRank(&final_job, 1, 5, 1.0);
  const RunVerdict verdict = observer.Conclude(final_job);
  EXPECT_TRUE(verdict.grad_norms.passed);
  EXPECT_FALSE(verdict.drift.checked);
  EXPECT_TRUE(verdict.passed);
  EXPECT_THAT(FormatVerdict(verdict), HasSubstr("max drift       not checked"));
}

TEST(RunVerdictTest, NoCommonStepIsNotChecked) {
  RunObserver observer;
  v1::JobStatus final_job = Job(v1::JOB_STATE_CANCELLED);
  AddRank(&final_job, 0, 3, 1.0);
  final_job.add_ranks()->set_rank(1);  // never stepped
  const RunVerdict verdict = observer.Conclude(final_job);
  EXPECT_FALSE(verdict.grad_norms.checked);
  EXPECT_FALSE(verdict.passed);
  EXPECT_THAT(FormatVerdict(verdict), HasSubstr("grad norms      not checked"));
}

}  // namespace
}  // namespace ringleader
