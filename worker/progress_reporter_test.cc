#include "worker/progress_reporter.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/mock_coordinator_client.h"

namespace ringleader {
namespace {

using ::testing::_;
using ::testing::HasSubstr;
using ::testing::Invoke;
using ::testing::Return;

v1::StepReport Step(uint64_t n) {
  v1::StepReport report;
  report.set_step(n);
  return report;
}

class ProgressReporterTest : public ::testing::Test {
 protected:
  ProgressReporterTest() {
    options_.max_interval = absl::Milliseconds(200);
    options_.max_steps = 3;
    options_.max_pending_steps = 4;
    options_.clock = &clock_;
    ON_CALL(client_, ReportProgress(_))
        .WillByDefault(Invoke([this](const v1::ReportProgressRequest& r) {
          sent_.push_back(r);
          return absl::StatusOr<v1::ReportProgressResponse>(v1::ReportProgressResponse());
        }));
  }
  std::vector<uint64_t> StepsOf(const v1::ReportProgressRequest& r) {
    std::vector<uint64_t> steps;
    for (const auto& s : r.steps()) steps.push_back(s.step());
    return steps;
  }

  FakeClock clock_;
  ProgressReporterOptions options_;
  ::testing::NiceMock<MockCoordinatorClient> client_;
  std::vector<v1::ReportProgressRequest> sent_;
};

TEST_F(ProgressReporterTest, SendsABatchEveryMaxSteps) {
  ProgressReporter reporter(&client_, "job", 2, 1, options_);
  for (uint64_t s = 1; s <= 7; ++s) ASSERT_TRUE(reporter.AddStep(Step(s)).ok());
  ASSERT_EQ(sent_.size(), 2u);
  EXPECT_THAT(StepsOf(sent_[0]), ::testing::ElementsAre(1, 2, 3));
  EXPECT_THAT(StepsOf(sent_[1]), ::testing::ElementsAre(4, 5, 6));
  EXPECT_EQ(sent_[0].job_id(), "job");
  EXPECT_EQ(sent_[0].generation(), 2u);
  EXPECT_EQ(sent_[0].rank(), 1u);
  ASSERT_TRUE(reporter.Flush().ok());
  EXPECT_THAT(StepsOf(sent_[2]), ::testing::ElementsAre(7));
  ASSERT_TRUE(reporter.Flush().ok());
  EXPECT_EQ(sent_.size(), 3u) << "an empty batch is not sent";
}

TEST_F(ProgressReporterTest, SendsABatchOnceItIsMaxIntervalOld) {
  ProgressReporter reporter(&client_, "job", 2, 1, options_);
  ASSERT_TRUE(reporter.AddStep(Step(1)).ok());
  EXPECT_TRUE(sent_.empty());
  clock_.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(reporter.AddStep(Step(2)).ok());
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_THAT(StepsOf(sent_[0]), ::testing::ElementsAre(1, 2));
}

TEST_F(ProgressReporterTest, EpochReportsGoOutAtOnceWithQueuedSteps) {
  ProgressReporter reporter(&client_, "job", 2, 0, options_);
  ASSERT_TRUE(reporter.AddStep(Step(1)).ok());
  v1::EpochReport epoch;
  epoch.set_epoch(0);
  epoch.set_test_accuracy(0.8);
  ASSERT_TRUE(reporter.AddEpoch(epoch).ok());
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_THAT(StepsOf(sent_[0]), ::testing::ElementsAre(1));
  ASSERT_EQ(sent_[0].epochs_size(), 1);
  EXPECT_EQ(sent_[0].epochs(0).test_accuracy(), 0.8);
}

TEST_F(ProgressReporterTest, StopAnswerBecomesAborted) {
  EXPECT_CALL(client_, ReportProgress(_)).WillOnce(Invoke([](const auto&) {
    v1::ReportProgressResponse response;
    response.set_stop(true);
    response.set_stop_reason("job job is FAILED: rank 0 failed");
    return absl::StatusOr<v1::ReportProgressResponse>(response);
  }));
  ProgressReporter reporter(&client_, "job", 2, 1, options_);
  ASSERT_TRUE(reporter.AddStep(Step(1)).ok());
  const absl::Status stopped = reporter.Flush();
  EXPECT_EQ(stopped.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(stopped.message()),
              HasSubstr("stopped by the coordinator: job job is FAILED: rank 0 failed"));
}

TEST_F(ProgressReporterTest, UnavailableKeepsTheBatchRetriesAtTheIntervalAndDropsTheOldest) {
  int calls = 0;
  EXPECT_CALL(client_, ReportProgress(_))
      .WillOnce(Invoke([&](const auto&) -> absl::StatusOr<v1::ReportProgressResponse> {
        ++calls;
        return absl::UnavailableError("down");
      }))
      .WillRepeatedly(Invoke([&](const v1::ReportProgressRequest& r) {
        ++calls;
        sent_.push_back(r);
        return absl::StatusOr<v1::ReportProgressResponse>(v1::ReportProgressResponse());
      }));
  ProgressReporter reporter(&client_, "job", 2, 1, options_);
  for (uint64_t s = 1; s <= 3; ++s) ASSERT_TRUE(reporter.AddStep(Step(s)).ok());  // fails, kept
  EXPECT_EQ(calls, 1);
  for (uint64_t s = 4; s <= 5; ++s) ASSERT_TRUE(reporter.AddStep(Step(s)).ok());
  EXPECT_EQ(calls, 1) << "no retry at every step while the coordinator is down";
  clock_.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(reporter.AddStep(Step(6)).ok());
  EXPECT_EQ(calls, 2);
  ASSERT_EQ(sent_.size(), 1u);
  // At most 4 pending: steps 1 and 2 were dropped.
  EXPECT_THAT(StepsOf(sent_[0]), ::testing::ElementsAre(3, 4, 5, 6));
  // Back to the step pace after a success.
  for (uint64_t s = 7; s <= 9; ++s) ASSERT_TRUE(reporter.AddStep(Step(s)).ok());
  EXPECT_EQ(calls, 3);
}

TEST_F(ProgressReporterTest, FlushReportsUnavailable) {
  EXPECT_CALL(client_, ReportProgress(_)).WillOnce(Return(absl::UnavailableError("down")));
  ProgressReporter reporter(&client_, "job", 2, 1, options_);
  ASSERT_TRUE(reporter.AddStep(Step(1)).ok());
  EXPECT_EQ(reporter.Flush().code(), absl::StatusCode::kUnavailable);
}

TEST_F(ProgressReporterTest, OtherErrorsAreReturned) {
  EXPECT_CALL(client_, ReportProgress(_))
      .WillOnce(Return(absl::FailedPreconditionError("stale generation")));
  ProgressReporter reporter(&client_, "job", 2, 1, options_);
  ASSERT_TRUE(reporter.AddStep(Step(1)).ok());
  EXPECT_EQ(reporter.Flush().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ringleader
