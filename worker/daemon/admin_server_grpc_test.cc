// The worker daemon's admin port as a generic health client sees it.
#include "worker/daemon/admin_server.h"

#include <chrono>
#include <string>

#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"

namespace ringleader {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

HealthCheckResponse::ServingStatus Check(const std::string& address, const std::string& service,
                                         grpc::StatusCode* code) {
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  *code = health->Check(&context, request, &response).error_code();
  return response.status();
}

TEST(AdminServerTest, NotServingUntilRegisteredThenServingThenNotAgain) {
  absl::StatusOr<std::unique_ptr<AdminServer>> server = AdminServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  grpc::StatusCode code;
  for (const std::string service : {"", kWorkerDaemonServiceName}) {
    EXPECT_EQ(Check((*server)->address(), service, &code), HealthCheckResponse::NOT_SERVING);
    EXPECT_EQ(code, grpc::StatusCode::OK);
  }
  (*server)->SetServing(true);
  for (const std::string service : {"", kWorkerDaemonServiceName}) {
    EXPECT_EQ(Check((*server)->address(), service, &code), HealthCheckResponse::SERVING);
  }
  (*server)->SetServing(false);
  EXPECT_EQ(Check((*server)->address(), "", &code), HealthCheckResponse::NOT_SERVING);
  Check((*server)->address(), "ringleader.v1.NoSuchService", &code);
  EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND);
}

TEST(AdminServerTest, APerGpuPortIsTheBasePlusTheGpuIndex) {
  EXPECT_EQ(*OffsetListenPort("127.0.0.1:7170", 0), "127.0.0.1:7170");
  EXPECT_EQ(*OffsetListenPort("127.0.0.1:7170", 12), "127.0.0.1:7182");
  EXPECT_EQ(*OffsetListenPort("[::1]:7170", 3), "[::1]:7173");
  EXPECT_EQ(*OffsetListenPort("127.0.0.1:0", 5), "127.0.0.1:0");
  const absl::StatusOr<std::string> past = OffsetListenPort("127.0.0.1:65530", 9);
  EXPECT_EQ(past.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(past.status().message()).find("--admin_listen"), std::string::npos);
  EXPECT_FALSE(OffsetListenPort("nonsense", 1).ok());
}

TEST(AdminServerTest, BadAddressesAreNamed) {
  absl::StatusOr<std::unique_ptr<AdminServer>> bad = AdminServer::Start("no-port");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("--admin_listen"), std::string::npos);
  absl::StatusOr<std::unique_ptr<AdminServer>> first = AdminServer::Start("127.0.0.1:0");
  ASSERT_TRUE(first.ok());
  absl::StatusOr<std::unique_ptr<AdminServer>> taken = AdminServer::Start((*first)->address());
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ringleader
