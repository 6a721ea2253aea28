// Coordinator core: the per-rank limit on ReportProgress calls (a token bucket per job,
// generation and rank on the injected clock), its refusal, and its count in the RPC stats.
#include <string>
#include <vector>

#include "coordinator/core/coordinator_test_util.h"
#include "coordinator/core/report_rate_limiter.h"
#include "coordinator/rpc/rpc_handler.h"
#include "coordinator/rpc/rpc_stats.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kLimit = 5;

v1::StepReport Step(uint64_t step) {
  v1::StepReport report;
  report.set_step(step);
  report.set_loss(1.0);
  return report;
}

class ReportLimitTest : public CoordinatorTest {
 protected:
  ReportLimitTest() : CoordinatorTest(LimitedOptions()) {}

  static CoordinatorOptions LimitedOptions() {
    CoordinatorOptions options = Options();
    options.max_reports_per_second_per_rank = kLimit;
    options.restart_backoff = absl::Milliseconds(1);  // a restart refills (almost) nothing
    return options;
  }

  // Two workers and a job of world size 2 with one restart, both ranks joined.
  void SetUp() override {
    a_ = Register("a");
    b_ = Register("b");
    job_ = Submit(2, "gloo", /*max_restarts=*/1);
    ranks_ = TakeAndJoin({a_, b_});
    ASSERT_EQ(Job(job_).state(), v1::JOB_STATE_RUNNING);
  }

  absl::StatusOr<Coordinator::StopSignal> Report(const v1::Assignment& rank,
                                                 std::vector<v1::StepReport> steps = {}) {
    return coordinator_.ReportProgress(AttemptOf(rank), Rank(rank.rank()), steps, {});
  }

  WorkerId a_, b_;
  JobId job_;
  std::vector<v1::Assignment> ranks_;
};

TEST_F(ReportLimitTest, TheCallPastTheBurstIsRefusedNamingTheRankTheLimitAndTheFlag) {
  // Calls count, not steps: a batch of many steps, an empty keepalive, one step each.
  ASSERT_TRUE(Report(ranks_[0], {Step(1), Step(2), Step(3), Step(4)}).ok());
  ASSERT_TRUE(Report(ranks_[0]).ok());
  for (uint64_t s = 5; s < 5 + kLimit - 2; ++s) ASSERT_TRUE(Report(ranks_[0], {Step(s)}).ok());
  const uint64_t last_accepted = 5 + kLimit - 3;

  absl::StatusOr<Coordinator::StopSignal> refused = Report(ranks_[0], {Step(100)});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string message(refused.status().message());
  EXPECT_THAT(message, HasSubstr("rank 0 of job-000001 (generation 1)"));
  EXPECT_THAT(message, HasSubstr("5 calls per second"));
  EXPECT_THAT(message, HasSubstr("--max_reports_per_second"));
  EXPECT_THAT(message, HasSubstr("max_reports_per_second_per_rank"));
  // The refused call changed nothing: its step was not recorded.
  EXPECT_EQ(Job(job_).ranks(0).last_step().step(), last_accepted);
  // A keepalive is a call too.
  EXPECT_EQ(Report(ranks_[0]).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(ReportLimitTest, TheBucketRefillsAtTheLimitsRateUpToTheBurst) {
  for (uint32_t i = 0; i < kLimit; ++i) ASSERT_TRUE(Report(ranks_[0]).ok());
  ASSERT_EQ(Report(ranks_[0]).status().code(), absl::StatusCode::kResourceExhausted);

  // 5 a second: one call every 200 ms.
  clock_.Advance(absl::Milliseconds(199));
  EXPECT_EQ(Report(ranks_[0]).status().code(), absl::StatusCode::kResourceExhausted);
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(Report(ranks_[0]).ok());
  EXPECT_EQ(Report(ranks_[0]).status().code(), absl::StatusCode::kResourceExhausted);

  // A long silence refills the burst, no more.
  clock_.Advance(absl::Minutes(10));
  for (uint32_t i = 0; i < kLimit; ++i) EXPECT_TRUE(Report(ranks_[0], {Step(i + 1)}).ok()) << i;
  EXPECT_EQ(Report(ranks_[0]).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Job(job_).ranks(0).last_step().step(), kLimit);
}

TEST_F(ReportLimitTest, AnotherRankHasItsOwnBucket) {
  for (uint32_t i = 0; i < kLimit; ++i) ASSERT_TRUE(Report(ranks_[0]).ok());
  ASSERT_EQ(Report(ranks_[0]).status().code(), absl::StatusCode::kResourceExhausted);
  for (uint32_t i = 0; i < kLimit; ++i) EXPECT_TRUE(Report(ranks_[1], {Step(i + 1)}).ok()) << i;
  EXPECT_EQ(Report(ranks_[1]).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(ReportLimitTest, ANewGenerationStartsWithFullBucketsAndTheEndedOneStillHearsStop) {
  for (uint32_t i = 0; i < kLimit; ++i) ASSERT_TRUE(Report(ranks_[0]).ok());
  ASSERT_EQ(Report(ranks_[0]).status().code(), absl::StatusCode::kResourceExhausted);

  Coordinator::RankOutcome failed;
  failed.error = "killed by signal 9";
  ASSERT_TRUE(coordinator_.FinishRank(AttemptOf(ranks_[1]), Rank(1), failed).ok());
  // Generation 1 is over (and generation 2 placed at once: a first fault): its rank is told to
  // abandon it, however many calls it made, not to slow down.
  absl::StatusOr<Coordinator::StopSignal> stop = Report(ranks_[0]);
  EXPECT_EQ(stop.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(stop.status().message(), HasSubstr("abandon this attempt"));

  std::vector<v1::Assignment> second = TakeAndJoin({a_, b_});
  ASSERT_EQ(second[0].generation(), 2u);
  for (uint32_t i = 0; i < kLimit; ++i) EXPECT_TRUE(Report(second[0]).ok()) << i;
  EXPECT_EQ(Report(second[0]).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(ReportLimitTest, RefusalsAreCountedInTheRpcStats) {
  RpcStats stats;
  RpcHandler handler(&coordinator_, &stats);
  v1::ReportProgressRequest request;
  request.set_job_id(ranks_[1].job_id());
  request.set_generation(ranks_[1].generation());
  request.set_rank(1);
  v1::ReportProgressResponse response;
  for (uint32_t i = 0; i < kLimit + 2; ++i) {
    handler.ReportProgress(request, &response).IgnoreError();
  }
  uint64_t ok = 0;
  uint64_t refused = 0;
  for (const RpcStats::Series& series : stats.Take().series) {
    if (series.method != "ReportProgress") continue;
    if (series.code == "OK") ok = series.count;
    if (series.code == "RESOURCE_EXHAUSTED") refused = series.count;
  }
  EXPECT_EQ(ok, kLimit);
  EXPECT_EQ(refused, 2u);
}

TEST(ReportRateLimiterTest, BucketsOfAnEndedAttemptAreDropped) {
  ReportRateLimiter limiter(2, 2);
  const absl::Time now = absl::FromUnixSeconds(1000);
  const AttemptId first{JobId("job-000001"), Generation(1)};
  const AttemptId other{JobId("job-000002"), Generation(1)};
  for (uint32_t rank = 0; rank < 3; ++rank) EXPECT_TRUE(limiter.Allow(first, rank, now));
  EXPECT_TRUE(limiter.Allow(other, 0, now));
  EXPECT_EQ(limiter.attempts(), 2u);
  EXPECT_EQ(limiter.buckets(), 4u);
  EXPECT_TRUE(limiter.Allow(first, 0, now));
  EXPECT_FALSE(limiter.Allow(first, 0, now));

  limiter.EndAttempt(first);
  EXPECT_EQ(limiter.attempts(), 1u);
  EXPECT_EQ(limiter.buckets(), 1u);
  EXPECT_TRUE(limiter.Allow(first, 0, now)) << "a dropped bucket starts full again";
}

TEST(ReportRateLimiterTest, ZeroIsNoLimitAndKeepsNoBucket) {
  ReportRateLimiter limiter(0, 0);
  const AttemptId attempt{JobId("job-000001"), Generation(1)};
  const absl::Time now = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(limiter.Allow(attempt, 0, now));
  EXPECT_EQ(limiter.buckets(), 0u);
}

TEST(ReportRateLimiterTest, AClockReadingFromBeforeTheLastRefillsNothing) {
  TokenBucket bucket(10, 1, absl::FromUnixSeconds(1000));
  EXPECT_TRUE(bucket.TryTake(absl::FromUnixSeconds(1000)));
  EXPECT_FALSE(bucket.TryTake(absl::FromUnixSeconds(999)));
  EXPECT_FALSE(bucket.TryTake(absl::FromUnixSeconds(1000)));
  EXPECT_TRUE(bucket.TryTake(absl::FromUnixSeconds(1000) + absl::Milliseconds(100)));
}

}  // namespace
}  // namespace ringleader
