#include "common/coordinator_addresses.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseCoordinatorAddressesTest, OneAddress) {
  auto parsed = ParseCoordinatorAddresses("coordinator-host:7070");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(*parsed, ElementsAre("coordinator-host:7070"));
}

TEST(ParseCoordinatorAddressesTest, ListInOrderTrimmed) {
  auto parsed = ParseCoordinatorAddresses(" 10.0.0.2:7070 ,10.0.0.1:7070, [::1]:7071 ");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(*parsed, ElementsAre("10.0.0.2:7070", "10.0.0.1:7070", "[::1]:7071"));
}

TEST(ParseCoordinatorAddressesTest, RefusesWhatIsNotAList) {
  struct Case {
    const char* list;
    const char* names;
  };
  for (const Case& c :
       {Case{"", "no address"}, Case{"  ", "no address"}, Case{"a:1,,b:2", "empty entry"},
        Case{"a:1,", "empty entry"}, Case{"a:1,b", "'b' has no port"},
        Case{"a:", "'a:' has no port"}, Case{":7070", "':7070' has no port"},
        Case{"::1:7070", "'::1:7070' has no port"}, Case{"a:http", "'a:http' has no numeric port"},
        Case{"a:1, a:1", "'a:1' is given twice"}}) {
    auto parsed = ParseCoordinatorAddresses(c.list);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << c.list;
    EXPECT_THAT(std::string(parsed.status().message()),
                AllOf(HasSubstr(c.names), HasSubstr("host:port[,host:port...]")))
        << c.list;
  }
}

TEST(LeaderTrackerTest, SingleAddressStaysCurrent) {
  LeaderTracker tracker({"a:1"});
  EXPECT_EQ(tracker.current(), "a:1");
  EXPECT_EQ(tracker.OnRefused("a:1", ""), "a:1");
  EXPECT_EQ(tracker.current(), "a:1");
}

TEST(LeaderTrackerTest, WithoutHintRotates) {
  LeaderTracker tracker({"a:1", "b:2", "c:3"});
  EXPECT_EQ(tracker.OnRefused("a:1", ""), "b:2");
  EXPECT_EQ(tracker.OnRefused("b:2", ""), "c:3");
  EXPECT_EQ(tracker.OnRefused("c:3", ""), "a:1");
}

TEST(LeaderTrackerTest, ARefusalByAnAddressNoLongerCurrentDoesNotRotate) {
  LeaderTracker tracker({"a:1", "b:2", "c:3"});
  EXPECT_EQ(tracker.OnRefused("a:1", ""), "b:2");
  EXPECT_EQ(tracker.OnRefused("a:1", ""), "b:2");  // a second call that went to a:1 too
}

TEST(LeaderTrackerTest, HintSwitchesToTheLeaderAddingItWhenNew) {
  LeaderTracker tracker({"a:1", "b:2"});
  EXPECT_EQ(tracker.OnRefused("a:1", "b:2"), "b:2");
  EXPECT_THAT(tracker.addresses(), ElementsAre("a:1", "b:2"));
  EXPECT_EQ(tracker.OnRefused("b:2", "c:3"), "c:3");
  EXPECT_THAT(tracker.addresses(), ElementsAre("a:1", "b:2", "c:3"));
  EXPECT_EQ(tracker.size(), 3u);
  // A hint is followed even when another call moved on already.
  EXPECT_EQ(tracker.OnRefused("a:1", "a:1"), "a:1");
}

TEST(LeaderTrackerTest, ConcurrentUse) {
  LeaderTracker tracker({"a:1", "b:2"});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&tracker] {
      for (int i = 0; i < 1000; ++i) tracker.OnRefused(tracker.current(), "");
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(tracker.current(), ::testing::AnyOf("a:1", "b:2"));
}

}  // namespace
}  // namespace ringleader
