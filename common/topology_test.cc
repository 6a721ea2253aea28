#include "common/topology.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

TEST(TopologyTest, RackAndHost) {
  absl::StatusOr<Topology> topology = ParseTopology("rack-1/node7.example");
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_EQ(topology->rack, "rack-1");
  EXPECT_EQ(topology->host, "node7.example");
  EXPECT_EQ(FormatTopology(*topology), "rack-1/node7.example");
}

TEST(TopologyTest, HostAlone) {
  absl::StatusOr<Topology> topology = ParseTopology("node_7");
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_EQ(topology->rack, "");
  EXPECT_EQ(topology->host, "node_7");
  EXPECT_EQ(FormatTopology(*topology), "node_7");
}

TEST(TopologyTest, RejectsWhatIsNotRackSlashHost) {
  for (const char* bad : {"", "/node", "rack/", "a/b/c", "rack 1/node", "rack/nöde", "r:1/n"}) {
    absl::StatusOr<Topology> topology = ParseTopology(bad);
    EXPECT_EQ(topology.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(topology.status().message(), HasSubstr("RACK/HOST")) << bad;
  }
  EXPECT_THAT(ParseTopology("a/b/c").status().message(), HasSubstr("has 3 parts"));
  EXPECT_THAT(ParseTopology("rack 1/n").status().message(), HasSubstr("the rack holds ' '"));
  EXPECT_FALSE(ParseTopology(std::string(129, 'h')).ok());
  EXPECT_TRUE(ParseTopology(std::string(128, 'h')).ok());
}

}  // namespace
}  // namespace ringleader
