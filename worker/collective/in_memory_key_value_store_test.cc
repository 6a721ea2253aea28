#include "worker/collective/in_memory_key_value_store.h"

#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo/gloo_test_util.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::ringleader::testing_util::Watchdog;

TEST(InMemoryKeyValueStoreTest, SetThenGetAndOverwrite) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.Set("a", "1").ok());
  auto v = store.Get("a", absl::ZeroDuration());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "1");
  ASSERT_TRUE(store.Set("a", std::string("2\0x", 3)).ok());
  v = store.Get("a", absl::ZeroDuration());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, std::string("2\0x", 3)) << "binary values survive";
  ASSERT_TRUE(store.Set("b", "").ok());
  EXPECT_THAT(store.Keys(), ElementsAre("a", "b"));
}

TEST(InMemoryKeyValueStoreTest, GetOfMissingKeyTimesOutNamingTheKey) {
  InMemoryKeyValueStore store;
  auto v = store.Get("job/1/gloo/rank_3", absl::Milliseconds(20));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(v.status().message(), HasSubstr("job/1/gloo/rank_3"));
}

TEST(InMemoryKeyValueStoreTest, GetBlocksUntilAnotherThreadSets) {
  Watchdog watchdog(absl::Seconds(30), "blocking get");
  InMemoryKeyValueStore store;
  absl::Notification getter_started;
  absl::StatusOr<std::string> got = absl::UnknownError("unset");
  std::thread getter([&] {
    getter_started.Notify();
    got = store.Get("k", absl::Seconds(20));
  });
  getter_started.WaitForNotification();
  ASSERT_TRUE(store.Set("k", "value").ok());
  getter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "value");
}

TEST(InMemoryKeyValueStoreTest, InjectedErrorFailsCallsAndWakesBlockedGetters) {
  Watchdog watchdog(absl::Seconds(30), "injected error");
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.Set("k", "v").ok());
  absl::Notification getter_started;
  absl::StatusOr<std::string> got = std::string("unset");
  std::thread getter([&] {
    getter_started.Notify();
    got = store.Get("missing", absl::Seconds(20));
  });
  getter_started.WaitForNotification();
  store.InjectError(absl::UnavailableError("coordinator unreachable"));
  getter.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store.Set("x", "y").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store.Get("k", absl::ZeroDuration()).status().code(), absl::StatusCode::kUnavailable);
  store.InjectError(absl::OkStatus());
  EXPECT_TRUE(store.Get("k", absl::ZeroDuration()).ok());
}

}  // namespace
}  // namespace ringleader
