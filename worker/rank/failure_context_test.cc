#include "worker/rank/failure_context.h"

#include "gtest/gtest.h"

namespace ringleader {
namespace {

TraceRecord Record(uint64_t sequence, int bucket, TraceRecord::State state) {
  TraceRecord record;
  record.sequence = sequence;
  record.bucket = bucket;
  record.state = state;
  return record;
}

TEST(FailureContextTest, NamesTheStepAndTheFirstFailedCollective) {
  const v1::RankFailure context =
      FailureContext({Record(40, 1, TraceRecord::State::kCompleted),
                      Record(41, 2, TraceRecord::State::kFailed),
                      Record(42, 3, TraceRecord::State::kFailed)},
                     12);
  EXPECT_EQ(context.step(), 12u);
  EXPECT_TRUE(context.has_collective());
  EXPECT_EQ(context.collective_sequence(), 41u);
  EXPECT_EQ(context.bucket(), 2);
  EXPECT_EQ(context.kind(), v1::RankFailure::KIND_UNSPECIFIED);  // the detection site's to say
}

TEST(FailureContextTest, NoFailedCollectiveMeansNoCollective) {
  const v1::RankFailure context = FailureContext(
      {Record(0, -1, TraceRecord::State::kCompleted), Record(1, 0, TraceRecord::State::kStarted)},
      3);
  EXPECT_EQ(context.step(), 3u);
  EXPECT_FALSE(context.has_collective());
}

}  // namespace
}  // namespace ringleader
