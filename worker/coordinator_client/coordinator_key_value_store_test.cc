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

v1::KvGetManyResponse Values(const std::vector<std::string>& values) {
  v1::KvGetManyResponse response;
  for (const std::string& value : values) response.add_values(value);
  return response;
}

TEST_F(CoordinatorKeyValueStoreTest, GetManyAsksForEveryKeyAndPartInOneCall) {
  v1::KvGetManyRequest seen;
  EXPECT_CALL(client_, KvGetMany(_)).WillOnce(Invoke([&](const v1::KvGetManyRequest& r) {
    seen = r;
    return absl::StatusOr<v1::KvGetManyResponse>(Values({"a1", "b1"}));
  }));
  EXPECT_CALL(client_, KvGet(_)).Times(0);
  absl::StatusOr<std::vector<std::string>> values =
      store_.GetMany({"p/0", "p/2"}, ValueParts{2, {1, 1}}, absl::Seconds(60));
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_THAT(*values, ::testing::ElementsAre("a1", "b1"));
  EXPECT_EQ(seen.job_id(), "job-7");
  EXPECT_EQ(seen.generation(), 4u);
  EXPECT_THAT(seen.keys(), ::testing::ElementsAre("p/0", "p/2"));
  EXPECT_EQ(seen.parts(), 2u);
  EXPECT_THAT(seen.part_index(), ::testing::ElementsAre(1u, 1u));
  EXPECT_EQ(seen.wait_timeout_ms(), 5000u);
}

TEST_F(CoordinatorKeyValueStoreTest, GetManyPollsAndGivesUpNamingTheMissingKey) {
  std::vector<uint32_t> waits;
  EXPECT_CALL(client_, KvGetMany(_))
      .WillRepeatedly(
          Invoke([&](const v1::KvGetManyRequest& r) -> absl::StatusOr<v1::KvGetManyResponse> {
            waits.push_back(r.wait_timeout_ms());
            clock_.Advance(absl::Milliseconds(r.wait_timeout_ms()));
            return absl::DeadlineExceededError("KvGetMany: key 'p/3' of job job-7 generation 4 "
                                               "was not set before the wait ran out");
          }));
  absl::StatusOr<std::vector<std::string>> values =
      store_.GetMany({"p/0", "p/3"}, ValueParts{}, absl::Seconds(12));
  EXPECT_EQ(values.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(values.status().message()), HasSubstr("'p/3'"));
  EXPECT_THAT(std::string(values.status().message()), HasSubstr("within 12s"));
  EXPECT_THAT(waits, ::testing::ElementsAre(5000, 5000, 2000));
}

TEST_F(CoordinatorKeyValueStoreTest, GetManyStopsAtOtherErrors) {
  EXPECT_CALL(client_, KvGetMany(_))
      .WillOnce(Return(absl::FailedPreconditionError("stale generation")));
  EXPECT_EQ(store_.GetMany({"k"}, ValueParts{}, absl::Seconds(60)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A coordinator older than KvGetMany answers UNIMPLEMENTED: key by key with KvGet, from then on.
TEST_F(CoordinatorKeyValueStoreTest, GetManyFallsBackToKvGetOnUnimplemented) {
  EXPECT_CALL(client_, KvGetMany(_))
      .WillOnce(Return(absl::UnimplementedError("unknown method KvGetMany")));
  EXPECT_CALL(client_, KvGet(_))
      .Times(4)
      .WillRepeatedly(Invoke([](const v1::KvGetRequest& r) {
        v1::KvGetResponse response;
        response.set_value(r.key() + "-AB");  // cut in 2 below: "p/0-AB" -> "p/0", "-AB"
        return absl::StatusOr<v1::KvGetResponse>(response);
      }));
  absl::StatusOr<std::vector<std::string>> values =
      store_.GetMany({"p/0", "p/1"}, ValueParts{2, {0, 1}}, absl::Seconds(60));
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_THAT(*values, ::testing::ElementsAre("p/0", "-AB"));
  // Remembered: the next GetMany does not ask KvGetMany again.
  values = store_.GetMany({"x", "y"}, ValueParts{}, absl::Seconds(60));
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_THAT(*values, ::testing::ElementsAre("x-AB", "y-AB"));
}

}  // namespace
}  // namespace ringleader
