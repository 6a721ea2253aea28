// The coordinator's gRPC server as a generic client sees it: grpc.health.v1 per service and
// server reflection listing the services.
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/rpc/grpc_server.h"
#include "coordinator/server/coordinator_server.h"
#include "coordinator/server/coordinator_server_test_util.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"

namespace ringleader {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::testing::HasSubstr;

constexpr auto kCallTimeout = std::chrono::seconds(10);

class GrpcServerTest : public CoordinatorServerTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartServer()); }

  grpc::Status Check(const std::string& service, HealthCheckResponse* response) {
    auto health = grpc::health::v1::Health::NewStub(channel_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    HealthCheckRequest request;
    request.set_service(service);
    return health->Check(&context, request, response);
  }
};

TEST_F(GrpcServerTest, HealthSaysServingPerServiceAndNotFoundForOthers) {
  for (const std::string service : {"", kWorkerServiceName, kJobServiceName}) {
    HealthCheckResponse response;
    const grpc::Status status = Check(service, &response);
    ASSERT_TRUE(status.ok()) << "'" << service << "': " << status.error_message();
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING) << "'" << service << "'";
  }
  HealthCheckResponse response;
  EXPECT_EQ(Check("ringleader.v1.NoSuchService", &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// One ServerReflectionInfo exchange over a raw bidi stream: list_services (field 7, "").
TEST_F(GrpcServerTest, ReflectionListsTheServices) {
  grpc::GenericStub stub(channel_);
  grpc::CompletionQueue queue;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  auto next = [&queue](intptr_t expected) {
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(queue.Next(&tag, &ok));
    EXPECT_EQ(reinterpret_cast<intptr_t>(tag), expected);
    return ok;
  };
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &queue);
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(next(1));
  grpc::Slice list_services(std::string("\x3a\x00", 2));
  grpc::ByteBuffer request(&list_services, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  ASSERT_TRUE(next(2));
  call->WritesDone(reinterpret_cast<void*>(3));
  ASSERT_TRUE(next(3));
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(4));
  ASSERT_TRUE(next(4)) << "no reflection answer";
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  EXPECT_THAT(bytes, HasSubstr(kWorkerServiceName));
  EXPECT_THAT(bytes, HasSubstr(kJobServiceName));
  EXPECT_THAT(bytes, HasSubstr("grpc.health.v1.Health"));
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  ASSERT_TRUE(next(5));
  EXPECT_TRUE(status.ok()) << status.error_message();
}

}  // namespace
}  // namespace ringleader

namespace ringleader {
namespace {

TEST_F(GrpcServerTest, APortInUseIsAnErrorNotASharedPort) {
  CoordinatorServerOptions options;
  options.listen = server_->address();
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> second =
      CoordinatorServer::Start(std::move(options));
  ASSERT_FALSE(second.ok()) << "a second coordinator shares the port";
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(second.status().message()).find("could not listen"), std::string::npos);
}

}  // namespace
}  // namespace ringleader
