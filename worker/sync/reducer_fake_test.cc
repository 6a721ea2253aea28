// The reducer against a recording single-rank fake collective and a fake clock: option
// validation, the collective sequence it issues, no_sync micro-batches, and the overlap stats.
#include <algorithm>
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/sync/reducer.h"
#include "worker/sync/sync_test_util.h"

namespace ringleader {
namespace {

using sync_test::FakeCollective;
using ::testing::HasSubstr;

std::vector<ParameterInfo> Params() { return sync_test::MixedParams(10, 200, 11); }

ReducerOptions Small() {
  ReducerOptions o;
  o.first_bucket_mb = 0.0005;
  o.bucket_cap_mb = 0.001;
  return o;
}

TEST(ReducerFakeTest, CreateRejectsBadOptionsNamingTheField) {
  FakeCollective comm;
  auto bad = [&](auto mutate) {
    ReducerOptions o;
    mutate(o);
    return Reducer::Create(&comm, Params(), o).status();
  };
  EXPECT_THAT(bad([](ReducerOptions& o) { o.bucket_cap_mb = 0; }).message(),
              HasSubstr("bucket_cap_mb"));
  EXPECT_THAT(bad([](ReducerOptions& o) { o.first_bucket_mb = -1; }).message(),
              HasSubstr("first_bucket_mb"));
  EXPECT_THAT(bad([](ReducerOptions& o) { o.gradient_accumulation_steps = 0; }).message(),
              HasSubstr("gradient_accumulation_steps"));
  EXPECT_EQ(bad([](ReducerOptions& o) { o.comm_dtype = DataType::kUInt8; }).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](ReducerOptions& o) { o.timeout = absl::ZeroDuration(); }).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](ReducerOptions& o) { o.ledger_check_interval_steps = -1; }).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Reducer::Create(nullptr, Params(), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Reducer::Create(&comm, {}, {}).status().code(), absl::StatusCode::kInvalidArgument);
  auto zero = Params();
  zero[3].count = 0;
  EXPECT_THAT(Reducer::Create(&comm, zero, {}).status().message(), HasSubstr(zero[3].name));
  FakeCollective device("nccl", MemoryKind::kDevice);
  EXPECT_EQ(Reducer::Create(&device, Params(), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(comm.calls().empty()) << "Create issues no collective";
}

TEST(ReducerFakeTest, IssuesCheckThenBucketsInOrderAndNothingInNoSyncMicroBatches) {
  FakeCollective comm;
  ReducerOptions o = Small();
  o.gradient_accumulation_steps = 2;
  auto red = Reducer::Create(&comm, Params(), o);
  ASSERT_TRUE(red.ok());
  const BucketLayout& layout = (*red)->layout();
  ASSERT_GT(layout.buckets.size(), 2u);
  for (int step = 0; step < 2; ++step) {
    (*red)->ZeroGradients();
    for (int k = 0; k < 2; ++k) {
      (*red)->BeginMicroBatch(k);
      for (size_t p : ReverseRegistrationOrder(Params().size())) (*red)->MarkReady(p);
      ASSERT_TRUE((*red)->FinishStep(nullptr).ok());
      if (k == 0 && step == 0) {
        EXPECT_TRUE(comm.calls().empty());
      }
    }
  }
  const auto calls = comm.calls();
  const size_t per_step = 1 + layout.buckets.size();  // ledger summary + buckets
  ASSERT_EQ(calls.size(), 2 * per_step);
  for (int step = 0; step < 2; ++step) {
    EXPECT_EQ(calls[step * per_step].kind, "allgather");
    EXPECT_EQ(calls[step * per_step].dtype, DataType::kUInt8);
    for (size_t b = 0; b < layout.buckets.size(); ++b) {
      const auto& c = calls[step * per_step + 1 + b];
      EXPECT_EQ(c.kind, "allreduce");
      EXPECT_EQ(c.bucket, static_cast<int>(b));
      EXPECT_EQ(c.count, layout.collective_count(b));
    }
  }
  // The sentinel rides with the last bucket.
  EXPECT_EQ(calls.back().count, layout.buckets.back().count + 1);
}

TEST(ReducerFakeTest, LedgerCheckIntervalSkipsSteps) {
  FakeCollective comm;
  ReducerOptions o = Small();
  o.ledger_check_interval_steps = 3;
  auto red = Reducer::Create(&comm, Params(), o);
  ASSERT_TRUE(red.ok());
  std::vector<bool> checked;
  for (int step = 0; step < 7; ++step) {
    (*red)->BeginMicroBatch(0);
    for (size_t p = 0; p < Params().size(); ++p) (*red)->MarkReady(p);
    StepSyncStats st;
    ASSERT_TRUE((*red)->FinishStep(&st).ok());
    checked.push_back(st.ledger_checked);
  }
  EXPECT_EQ(checked, (std::vector<bool>{true, false, false, true, false, false, true}));
  size_t allgathers = 0;
  for (const auto& c : comm.calls()) allgathers += c.kind == "allgather";
  EXPECT_EQ(allgathers, 3u);
}

// Every fake all-reduce takes 5 ms and is done as soon as it is issued: buckets launched during
// backward are fully hidden, the ones FinishStep launches are not.
TEST(ReducerFakeTest, StatsSplitHiddenAndExposedCommunication) {
  FakeClock clock;
  FakeCollective comm("fake", MemoryKind::kHost, absl::Milliseconds(5));
  for (bool overlap : {true, false}) {
    ReducerOptions o = Small();
    o.overlap = overlap;
    o.clock = &clock;
    auto red = Reducer::Create(&comm, Params(), o);
    ASSERT_TRUE(red.ok());
    const int nb = static_cast<int>((*red)->layout().buckets.size());
    (*red)->BeginMicroBatch(0);
    for (size_t p : ReverseRegistrationOrder(Params().size())) (*red)->MarkReady(p);
    clock.Advance(absl::Milliseconds(100));
    StepSyncStats st;
    ASSERT_TRUE((*red)->FinishStep(&st).ok());
    EXPECT_EQ(st.buckets, nb);
    EXPECT_EQ(st.comm_time, nb * absl::Milliseconds(5));
    EXPECT_EQ(st.hidden_comm_time, overlap ? nb * absl::Milliseconds(5) : absl::ZeroDuration());
    EXPECT_EQ(st.buckets_launched_in_backward, overlap ? nb : 0);
    EXPECT_EQ(st.exposed_wait_time, absl::ZeroDuration());  // the fake clock did not move
    EXPECT_EQ(st.step, 1);
    EXPECT_EQ(st.collectives, nb);
  }
}

// Gradients arriving out of bucket order launch nothing until bucket 0 is complete.
TEST(ReducerFakeTest, BucketsLaunchOnlyInOrder) {
  FakeCollective comm;
  auto red = Reducer::Create(&comm, Params(), Small());
  ASSERT_TRUE(red.ok());
  const BucketLayout& layout = (*red)->layout();
  (*red)->BeginMicroBatch(0);
  for (size_t p : layout.buckets[1].params) (*red)->MarkReady(p);
  EXPECT_EQ(comm.calls().size(), 1u) << "only the ledger check: bucket 1 waits for bucket 0";
  for (size_t p : layout.buckets[0].params) (*red)->MarkReady(p);
  EXPECT_EQ(comm.calls().size(), 3u) << "buckets 0 and 1 now";
  for (size_t p = 0; p < Params().size(); ++p) (*red)->MarkReady(p);
  EXPECT_EQ(comm.calls().size(), 1 + layout.buckets.size());
  EXPECT_TRUE((*red)->FinishStep(nullptr).ok());
}

TEST(ReducerFakeTest, FinishStepWithoutBeginIsAFailedPrecondition) {
  FakeCollective comm;
  auto red = Reducer::Create(&comm, Params(), Small());
  ASSERT_TRUE(red.ok());
  absl::Status s = (*red)->FinishStep(nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("BeginMicroBatch"));
  EXPECT_TRUE(comm.calls().empty());
}

TEST(ReducerFakeTest, MisuseAborts) {
  FakeCollective comm;
  auto red = Reducer::Create(&comm, Params(), Small());
  ASSERT_TRUE(red.ok());
  EXPECT_DEATH((*red)->MarkReady(0), "MarkReady before BeginMicroBatch");
  EXPECT_DEATH((*red)->BeginMicroBatch(1), "outside");
  (*red)->BeginMicroBatch(0);
  EXPECT_DEATH((*red)->MarkReady(Params().size()), "out of range");
}

}  // namespace
}  // namespace ringleader
