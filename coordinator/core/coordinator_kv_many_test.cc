// Coordinator core: KvGetMany, the multi-key read of an attempt's key-value store (a rank's
// whole rendezvous address book in one call).
#include <string>
#include <vector>

#include "coordinator/core/coordinator_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using CapturedValues = Captured<absl::StatusOr<std::vector<std::string>>>;

class KvManyTest : public CoordinatorTest {
 protected:
  // Two workers "a" and "b" running one job of world size 2, joined.
  void SetUp() override {
    a_ = Register("a");
    b_ = Register("b");
    job_ = Submit(2);
    attempt_ = AttemptId{job_, Generation(1)};
    TakeAndJoin({a_, b_});
  }

  absl::Time In(absl::Duration d) { return clock_.Now() + d; }

  WorkerId a_, b_;
  JobId job_;
  AttemptId attempt_;
};

TEST_F(KvManyTest, CompletesWhenTheLastKeyArrivesWithValuesInKeyOrder) {
  CapturedValues got;
  coordinator_.KvGetManyAsync(attempt_, {"g/0", "g/1", "g/2"}, KvParts{}, In(absl::Seconds(20)),
                              got.Callback());
  ASSERT_TRUE(coordinator_.KvSet(attempt_, "g/2", "two").ok());
  ASSERT_TRUE(coordinator_.KvSet(attempt_, "g/0", "zero").ok());
  EXPECT_EQ(got.calls(), 0) << "g/1 is still missing";
  ASSERT_TRUE(coordinator_.KvSet(attempt_, "other", "x").ok());
  EXPECT_EQ(got.calls(), 0);
  ASSERT_TRUE(coordinator_.KvSet(attempt_, "g/1", "one").ok());
  ASSERT_EQ(got.calls(), 1);
  ASSERT_TRUE(got.value().ok()) << got.value().status();
  EXPECT_THAT(*got.value(), ElementsAre("zero", "one", "two"));
  // Later Sets do not answer it again.
  ASSERT_TRUE(coordinator_.KvSet(attempt_, "g/1", "again").ok());
  EXPECT_EQ(got.calls(), 1);
}

TEST_F(KvManyTest, KeysThatExistAreAnsweredAtOnceAndNoKeysWithNone) {
  ASSERT_TRUE(coordinator_.KvSet(attempt_, "k", std::string("\0v", 2)).ok());
  CapturedValues got;
  coordinator_.KvGetManyAsync(attempt_, {"k", "k"}, KvParts{}, clock_.Now(), got.Callback());
  ASSERT_EQ(got.calls(), 1);
  ASSERT_TRUE(got.value().ok()) << got.value().status();
  EXPECT_THAT(*got.value(), ElementsAre(std::string("\0v", 2), std::string("\0v", 2)));

  CapturedValues none;
  coordinator_.KvGetManyAsync(attempt_, {}, KvParts{}, In(absl::Seconds(20)), none.Callback());
  ASSERT_EQ(none.calls(), 1);
  ASSERT_TRUE(none.value().ok());
  EXPECT_TRUE(none.value()->empty());
}

// gloo's blob of rank j holds one address per other rank; a rank asks for its own.
TEST_F(KvManyTest, PartsCutEachValueIntoEqualPieces) {
  ASSERT_TRUE(coordinator_.KvSet(attempt_, "blob0", "AAAABBBBCCCC").ok());
  ASSERT_TRUE(coordinator_.KvSet(attempt_, "blob1", "DDDEEEFFFx").ok());  // 10 bytes: 3 each
  CapturedValues got;
  coordinator_.KvGetManyAsync(attempt_, {"blob0", "blob1", "blob0"}, KvParts{3, {1, 2, 0}},
                              clock_.Now(), got.Callback());
  ASSERT_EQ(got.calls(), 1);
  ASSERT_TRUE(got.value().ok()) << got.value().status();
  EXPECT_THAT(*got.value(), ElementsAre("BBBB", "FFF", "AAAA"));
}

TEST_F(KvManyTest, BadPartsAreInvalidArgument) {
  for (const KvParts& parts : {KvParts{2, {0}}, KvParts{2, {0, 2}}, KvParts{0, {0, 0}}}) {
    CapturedValues got;
    coordinator_.KvGetManyAsync(attempt_, {"a", "b"}, parts, In(absl::Seconds(20)), got.Callback());
    ASSERT_EQ(got.calls(), 1);
    EXPECT_EQ(got.value().status().code(), absl::StatusCode::kInvalidArgument)
        << got.value().status();
    EXPECT_THAT(got.value().status().message(), HasSubstr("part_index"));
  }
}

TEST_F(KvManyTest, DeadlineNamesTheFirstMissingKey) {
  ASSERT_TRUE(coordinator_.KvSet(attempt_, "g/0", "zero").ok());
  CapturedValues got;
  coordinator_.KvGetManyAsync(attempt_, {"g/0", "g/1", "g/2"}, KvParts{}, In(absl::Seconds(5)),
                              got.Callback());
  ASSERT_TRUE(coordinator_.KvSet(attempt_, "g/2", "two").ok());
  Advance(absl::Seconds(4));
  EXPECT_EQ(got.calls(), 0);
  Advance(absl::Seconds(1));
  ASSERT_EQ(got.calls(), 1);
  EXPECT_EQ(got.value().status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got.value().status().message(), HasSubstr("key 'g/1' of job job-000001"));

  // A deadline already past answers at once, naming the first missing key too.
  CapturedValues now;
  coordinator_.KvGetManyAsync(attempt_, {"g/0", "g/3", "g/1"}, KvParts{}, clock_.Now(),
                              now.Callback());
  ASSERT_EQ(now.calls(), 1);
  EXPECT_EQ(now.value().status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(now.value().status().message(), HasSubstr("'g/3'"));
}

TEST_F(KvManyTest, LongDeadlinesAreClampedToMaxWait) {
  CapturedValues got;
  coordinator_.KvGetManyAsync(attempt_, {"never"}, KvParts{}, In(absl::Hours(1)), got.Callback());
  // max_wait is 30 s; the workers heartbeat meanwhile (their lease is 10 s).
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(got.calls(), 0) << "after " << 5 * i << " s";
    ASSERT_TRUE(coordinator_.Heartbeat(a_, 1).ok());
    ASSERT_TRUE(coordinator_.Heartbeat(b_, 1).ok());
    Advance(absl::Seconds(5));
  }
  ASSERT_EQ(got.calls(), 1);
  EXPECT_EQ(got.value().status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(KvManyTest, StaleGenerationAndUnknownJobAreRefused) {
  CapturedValues stale;
  coordinator_.KvGetManyAsync(AttemptId{job_, Generation(2)}, {"k"}, KvParts{},
                              In(absl::Seconds(5)), stale.Callback());
  ASSERT_EQ(stale.calls(), 1);
  EXPECT_EQ(stale.value().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(stale.value().status().message(),
            "stale generation 2 for job job-000001 (current 1): abandon this attempt");

  CapturedValues unknown;
  coordinator_.KvGetManyAsync(AttemptId{JobId("job-000042"), Generation(1)}, {"k"}, KvParts{},
                              In(absl::Seconds(5)), unknown.Callback());
  ASSERT_EQ(unknown.calls(), 1);
  EXPECT_EQ(unknown.value().status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CoordinatorTest, KvGetManyOfAJobWithoutAnAttemptIsRefused) {
  const JobId queued = Submit(2);  // no workers: stays QUEUED
  CapturedValues got;
  coordinator_.KvGetManyAsync(AttemptId{queued, Generation(0)}, {"k"}, KvParts{},
                              clock_.Now() + absl::Seconds(20), got.Callback());
  ASSERT_EQ(got.calls(), 1) << "parked on an attempt that does not exist";
  EXPECT_EQ(got.value().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(got.value().status().message(),
            "job job-000001 has no attempt yet (QUEUED): wait for an assignment");
}

TEST_F(KvManyTest, JobEndFailsWaitersAndLaterCalls) {
  ASSERT_TRUE(coordinator_.KvSet(attempt_, "g/0", "zero").ok());
  CapturedValues waiting;
  coordinator_.KvGetManyAsync(attempt_, {"g/0", "g/1"}, KvParts{}, In(absl::Seconds(20)),
                              waiting.Callback());
  ASSERT_TRUE(coordinator_.CancelJob(job_, "stop").ok());
  ASSERT_EQ(waiting.calls(), 1);
  EXPECT_EQ(waiting.value().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(waiting.value().status().message(), HasSubstr("CANCELLED: stop"));

  CapturedValues later;
  coordinator_.KvGetManyAsync(attempt_, {"g/0"}, KvParts{}, In(absl::Seconds(20)),
                              later.Callback());
  ASSERT_EQ(later.calls(), 1);
  EXPECT_EQ(later.value().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(later.value().status().message(), HasSubstr("already ended"));
}

TEST_F(KvManyTest, ShutdownAnswersWaitersAndRefusesNewOnes) {
  CapturedValues waiting;
  coordinator_.KvGetManyAsync(attempt_, {"never"}, KvParts{}, In(absl::Seconds(20)),
                              waiting.Callback());
  coordinator_.Shutdown();
  ASSERT_EQ(waiting.calls(), 1);
  EXPECT_EQ(waiting.value().status().code(), absl::StatusCode::kUnavailable);
  CapturedValues after;
  coordinator_.KvGetManyAsync(attempt_, {"never"}, KvParts{}, In(absl::Seconds(20)),
                              after.Callback());
  ASSERT_EQ(after.calls(), 1);
  EXPECT_EQ(after.value().status().code(), absl::StatusCode::kUnavailable);
}

// Several ranks' address books waiting at once, each completed by the last blob it needs.
TEST_F(KvManyTest, ManyWaitersEachCompleteWhenTheirLastKeyIsSet) {
  CapturedValues rank0, rank1;
  coordinator_.KvGetManyAsync(attempt_, {"1"}, KvParts{1, {0}}, In(absl::Seconds(20)),
                              rank0.Callback());
  coordinator_.KvGetManyAsync(attempt_, {"0"}, KvParts{1, {0}}, In(absl::Seconds(20)),
                              rank1.Callback());
  ASSERT_TRUE(coordinator_.KvSet(attempt_, "0", "addr-of-0").ok());
  EXPECT_EQ(rank0.calls(), 0);
  ASSERT_EQ(rank1.calls(), 1);
  EXPECT_THAT(*rank1.value(), ElementsAre("addr-of-0"));
  ASSERT_TRUE(coordinator_.KvSet(attempt_, "1", "addr-of-1").ok());
  ASSERT_EQ(rank0.calls(), 1);
  EXPECT_THAT(*rank0.value(), ElementsAre("addr-of-1"));
}

TEST_F(KvManyTest, KeysValuesAndTheKeyCountAreBounded) {
  const CoordinatorOptions limits = Options();
  const absl::Status big =
      coordinator_.KvSet(attempt_, "blob", std::string(limits.max_kv_value_bytes + 1, 'x'));
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(big.message()), HasSubstr("max_kv_value_bytes"));
  EXPECT_TRUE(
      coordinator_.KvSet(attempt_, "blob", std::string(limits.max_kv_value_bytes, 'x')).ok());
  EXPECT_EQ(coordinator_.KvSet(attempt_, "", "v").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(coordinator_.KvSet(attempt_, std::string(limits.max_kv_key_bytes + 1, 'k'), "v")
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Fill the attempt up to its key limit: one more key is refused, an existing key may change.
  for (size_t i = 1; i < limits.max_kv_keys_per_attempt; ++i) {
    ASSERT_TRUE(coordinator_.KvSet(attempt_, absl::StrCat("k", i), "v").ok()) << i;
  }
  const absl::Status full = coordinator_.KvSet(attempt_, "one-more", "v");
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(full.message()), HasSubstr("max_kv_keys_per_attempt"));
  EXPECT_TRUE(coordinator_.KvSet(attempt_, "k1", "changed").ok());
}

}  // namespace
}  // namespace ringleader
