#include "worker/coordinator_client/coordinator_key_value_store.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/coordinator_client/mock_coordinator_client.h"

namespace ringleader {
namespace {

using ::testing::_;
using ::testing::HasSubstr;
using ::testing::Invoke;
using ::testing::Return;

class CoordinatorKeyValueStoreTest : public ::testing::Test {
 protected:
  CoordinatorKeyValueStoreTest()
      : store_(&client_, "job-7", 4, CoordinatorKeyValueStoreOptions{absl::Seconds(5), &clock_}) {}

  MockCoordinatorClient client_;
  FakeClock clock_;
  CoordinatorKeyValueStore store_;
};

TEST_F(CoordinatorKeyValueStoreTest, SetSendsTheAttemptKeyAndValue) {
  v1::KvSetRequest seen;
  EXPECT_CALL(client_, KvSet(_)).WillOnce(Invoke([&](const v1::KvSetRequest& r) {
    seen = r;
    return absl::StatusOr<v1::KvSetResponse>(v1::KvSetResponse());
  }));
  ASSERT_TRUE(store_.Set("job-7/4/rank_0", std::string("a\0b", 3)).ok());
  EXPECT_EQ(seen.job_id(), "job-7");
  EXPECT_EQ(seen.generation(), 4u);
  EXPECT_EQ(seen.key(), "job-7/4/rank_0");
  EXPECT_EQ(seen.value(), std::string("a\0b", 3));
}

TEST_F(CoordinatorKeyValueStoreTest, SetPassesErrorsThrough) {
  EXPECT_CALL(client_, KvSet(_))
      .WillOnce(Return(absl::FailedPreconditionError("stale generation")));
  EXPECT_EQ(store_.Set("k", "v").code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(CoordinatorKeyValueStoreTest, GetPollsUntilTheKeyAppears) {
  std::vector<uint32_t> waits;
  EXPECT_CALL(client_, KvGet(_))
      .Times(3)
      .WillRepeatedly(Invoke([&](const v1::KvGetRequest& r) -> absl::StatusOr<v1::KvGetResponse> {
        EXPECT_EQ(r.job_id(), "job-7");
        EXPECT_EQ(r.generation(), 4u);
        EXPECT_EQ(r.key(), "peer");
        waits.push_back(r.wait_timeout_ms());
        clock_.Advance(absl::Milliseconds(r.wait_timeout_ms()));  // the server waited it out
        if (waits.size() < 3) return absl::DeadlineExceededError("not yet");
        v1::KvGetResponse response;
        response.set_value("addr");
        return response;
      }));
  absl::StatusOr<std::string> value = store_.Get("peer", absl::Seconds(60));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "addr");
  // Each poll is capped at poll_interval.
  EXPECT_THAT(waits, ::testing::ElementsAre(5000, 5000, 5000));
}

TEST_F(CoordinatorKeyValueStoreTest, GetGivesUpAtItsTimeoutNamingTheKey) {
  std::vector<uint32_t> waits;
  EXPECT_CALL(client_, KvGet(_))
      .WillRepeatedly(Invoke([&](const v1::KvGetRequest& r) -> absl::StatusOr<v1::KvGetResponse> {
        waits.push_back(r.wait_timeout_ms());
        clock_.Advance(absl::Milliseconds(r.wait_timeout_ms()));
        return absl::DeadlineExceededError("not yet");
      }));
  absl::StatusOr<std::string> value = store_.Get("rank_1", absl::Seconds(12));
  EXPECT_EQ(value.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(value.status().message()), HasSubstr("'rank_1'"));
  // 5 s + 5 s + the remaining 2 s: the last poll never outlasts the caller's timeout.
  EXPECT_THAT(waits, ::testing::ElementsAre(5000, 5000, 2000));
}

TEST_F(CoordinatorKeyValueStoreTest, GetStopsAtOtherErrors) {
  EXPECT_CALL(client_, KvGet(_))
      .WillOnce(Return(absl::FailedPreconditionError("job ended while waiting")));
  absl::StatusOr<std::string> value = store_.Get("k", absl::Seconds(60));
  EXPECT_EQ(value.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ringleader
