#include "worker/collective/kv_gloo_store.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo_test_util.h"
#include "worker/collective/in_memory_key_value_store.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::ringleader::testing_util::Watchdog;

std::vector<char> Bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

TEST(KvGlooStoreTest, SetAndGetUseThePrefix) {
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  KvGlooStore store(backing, "job/2/gloo/", absl::Seconds(5));
  store.set("rank_0", Bytes(std::string("ad\0dr", 5)));
  EXPECT_THAT(backing->Keys(), ElementsAre("job/2/gloo/rank_0"));
  EXPECT_EQ(store.get("rank_0"), Bytes(std::string("ad\0dr", 5)));
  EXPECT_TRUE(store.first_error().ok());
}

TEST(KvGlooStoreTest, PrefixesIsolateAttempts) {
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  KvGlooStore old_attempt(backing, "job/1/gloo/", absl::Seconds(5));
  KvGlooStore new_attempt(backing, "job/2/gloo/", absl::Milliseconds(20));
  old_attempt.set("0", Bytes("stale address"));
  EXPECT_THROW(new_attempt.get("0"), gloo::IoException);
}

TEST(KvGlooStoreTest, GetBlocksUntilTheKeyIsSet) {
  Watchdog watchdog(absl::Seconds(30), "blocking get");
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  KvGlooStore store(backing, "p/", absl::Seconds(20));
  absl::Notification started;
  std::vector<char> got;
  std::thread getter([&] {
    started.Notify();
    got = store.get("1");
  });
  started.WaitForNotification();
  ASSERT_TRUE(backing->Set("p/1", "peer").ok());
  getter.join();
  EXPECT_EQ(got, Bytes("peer"));
}

TEST(KvGlooStoreTest, WaitTimesOutWithIoExceptionAndKeepsTheStoreError) {
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  KvGlooStore store(backing, "p/", absl::Seconds(20));
  ASSERT_TRUE(backing->Set("p/0", "x").ok());
  try {
    store.wait({"0", "3"}, std::chrono::milliseconds(20));
    FAIL() << "wait on a missing key must throw";
  } catch (const gloo::IoException& e) {
    EXPECT_THAT(e.what(), HasSubstr("p/3"));
  }
  EXPECT_EQ(store.first_error().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(store.first_error().message(), HasSubstr("p/3"));
}

TEST(KvGlooStoreTest, WaitForExistingKeysReturns) {
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  KvGlooStore store(backing, "p/", absl::Milliseconds(20));
  ASSERT_TRUE(backing->Set("p/0", "x").ok());
  ASSERT_TRUE(backing->Set("p/1", "y").ok());
  EXPECT_NO_THROW(store.wait({"0", "1"}));
  EXPECT_NO_THROW(store.wait({"0", "1"}, std::chrono::milliseconds(0)));
}

TEST(KvGlooStoreTest, StoreErrorsMapToGlooExceptionKinds) {
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  KvGlooStore store(backing, "p/", absl::Seconds(1));
  backing->InjectError(absl::FailedPreconditionError("attempt is over"));
  EXPECT_THROW(store.set("0", Bytes("x")), gloo::IoException);
  EXPECT_EQ(store.first_error().code(), absl::StatusCode::kFailedPrecondition);

  KvGlooStore store2(backing, "p/", absl::Seconds(1));
  backing->InjectError(absl::InternalError("store bug"));
  EXPECT_THROW(store2.get("0"), gloo::EnforceNotMet);
  EXPECT_EQ(store2.first_error().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(store2.first_error().message(), HasSubstr("store bug"));
}

}  // namespace
}  // namespace ringleader
