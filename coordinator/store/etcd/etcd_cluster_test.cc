// A three-member etcd cluster (Debian's etcd-server, started by this test) through EtcdKvGrpc
// given every member's endpoint: a write survives one member's crash, is refused as UNAVAILABLE
// once a second one is gone (no quorum), and writes resume with the earlier keys intact when a
// member comes back. Fails (never skips) without /usr/bin/etcd.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/store/etcd/etcd_kv_grpc.h"
#include "coordinator/store/etcd/etcd_test_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader::etcd {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kCallTimeout = absl::Seconds(1);
constexpr absl::Duration kRecovery = absl::Seconds(20);

std::unique_ptr<EtcdKvGrpc> Client(const EtcdTestCluster& cluster) {
  EtcdKvGrpcOptions options;
  options.endpoints = cluster.endpoints();
  options.call_timeout = kCallTimeout;
  absl::StatusOr<std::unique_ptr<EtcdKvGrpc>> kv = EtcdKvGrpc::Create(options);
  EXPECT_TRUE(kv.ok()) << kv.status();
  return kv.ok() ? std::move(*kv) : nullptr;
}

std::string Get(EtcdKv& kv, const std::string& key) {
  RangeRequest request;
  request.key = key;
  absl::StatusOr<RangeResult> found = kv.Range(request);
  EXPECT_TRUE(found.ok()) << found.status();
  if (!found.ok() || found->kvs.empty()) return "<absent>";
  return found->kvs[0].value;
}

TEST(EtcdClusterTest, WritesNeedAQuorumAndResumeWhenAMemberReturns) {
  absl::StatusOr<std::unique_ptr<EtcdTestCluster>> started = EtcdTestCluster::Start("quorum", 3);
  ASSERT_TRUE(started.ok()) << started.status();
  EtcdTestCluster& cluster = **started;
  ASSERT_EQ(cluster.endpoints().size(), 3u);
  std::unique_ptr<EtcdKvGrpc> kv = Client(cluster);
  ASSERT_NE(kv, nullptr);

  ASSERT_TRUE(kv->Put("/cluster/before", "three members").ok());

  // One member crashes: two of three are a quorum. (If it led, the others elect a leader
  // first: AwaitWritable waits for that, bounded.)
  ASSERT_TRUE(cluster.Kill(0).ok());
  EXPECT_FALSE(cluster.running(0));
  ASSERT_TRUE(cluster.AwaitWritable(kRecovery).ok());
  absl::StatusOr<int64_t> put = kv->Put("/cluster/one-down", "two members");
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(Get(*kv, "/cluster/before"), "three members");

  // A second one crashes: one of three commits nothing, and the client says so in time
  // (each endpoint gets its own call timeout; the dead ones refuse at once).
  ASSERT_TRUE(cluster.Kill(1).ok());
  const absl::Time start = absl::Now();
  put = kv->Put("/cluster/no-quorum", "one member");
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.status().code(), absl::StatusCode::kUnavailable) << put.status();
  EXPECT_THAT(std::string(put.status().message()), HasSubstr(cluster.endpoint(2)));
  EXPECT_LT(took, cluster.size() * kCallTimeout + absl::Seconds(1)) << took;
  EXPECT_EQ(cluster.AwaitWritable(absl::Seconds(1)).code(), absl::StatusCode::kUnavailable);

  // One member comes back on its data directory: a quorum again, the earlier keys intact.
  ASSERT_TRUE(cluster.Restart(1).ok());
  EXPECT_TRUE(cluster.running(1));
  absl::Status writable = cluster.AwaitWritable(kRecovery);
  ASSERT_TRUE(writable.ok()) << writable;
  put = kv->Put("/cluster/back", "two members again");
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(Get(*kv, "/cluster/before"), "three members");
  EXPECT_EQ(Get(*kv, "/cluster/one-down"), "two members");
  EXPECT_EQ(Get(*kv, "/cluster/back"), "two members again");

  // The restarted member has the writes it missed: read through it alone.
  EtcdKvGrpcOptions only;
  only.endpoints = {cluster.endpoint(1)};
  only.call_timeout = absl::Seconds(5);
  absl::StatusOr<std::unique_ptr<EtcdKvGrpc>> member = EtcdKvGrpc::Create(only);
  ASSERT_TRUE(member.ok()) << member.status();
  EXPECT_EQ(Get(**member, "/cluster/one-down"), "two members");
}

TEST(EtcdClusterTest, KillAndRestartRefuseTheWrongState) {
  absl::StatusOr<std::unique_ptr<EtcdTestCluster>> started = EtcdTestCluster::Start("states", 1);
  ASSERT_TRUE(started.ok()) << started.status();
  EtcdTestCluster& cluster = **started;
  EXPECT_EQ(cluster.Restart(0).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(cluster.Kill(0).ok());
  EXPECT_EQ(cluster.Kill(0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cluster.AwaitWritable(absl::Seconds(1)).code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(cluster.Restart(0).ok());
  absl::Status writable = cluster.AwaitWritable(kRecovery);
  EXPECT_TRUE(writable.ok()) << writable;
}

}  // namespace
}  // namespace ringleader::etcd

