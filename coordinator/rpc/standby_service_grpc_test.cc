// StandbyService alone on a real server (127.0.0.1, port 0), called through ringleader.v1 stubs.
#include "coordinator/rpc/standby_service_grpc.h"

#include <chrono>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/coordinator_addresses.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"
#include "proto/ringleader.grpc.pb.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

class StandbyServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterCallbackGenericService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }
  void SetLeader(const std::string& leader) {
    absl::MutexLock lock(&mu_);
    leader_ = leader;
  }
  static void SetDeadline(grpc::ClientContext* context) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  }
  static std::string LeaderOf(const grpc::ClientContext& context) {
    const auto& trailers = context.GetServerTrailingMetadata();
    auto it = trailers.find(kLeaderMetadataKey);
    if (it == trailers.end()) return "<absent>";
    return std::string(it->second.data(), it->second.size());
  }

  absl::Mutex mu_;
  std::string leader_ ABSL_GUARDED_BY(mu_) = "10.0.0.1:7070";
  StandbyService service_{"10.0.0.2:7070", [this] {
                            absl::MutexLock lock(&mu_);
                            return leader_;
                          }};
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(StandbyServiceTest, UnaryWorkerCallNamesTheLeader) {
  auto stub = v1::WorkerService::NewStub(channel_);
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::ReportProgressResponse response;
  const grpc::Status status =
      stub->ReportProgress(&context, v1::ReportProgressRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(),
            "coordinator 10.0.0.2:7070 is a standby; the leader is 10.0.0.1:7070 (retry there)");
  EXPECT_EQ(LeaderOf(context), "10.0.0.1:7070");
}

TEST_F(StandbyServiceTest, JobServiceCallNamesTheLeader) {
  auto stub = v1::JobService::NewStub(channel_);
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::SubmitJobResponse response;
  const grpc::Status status = stub->SubmitJob(&context, v1::SubmitJobRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("the leader is 10.0.0.1:7070"));
  EXPECT_EQ(LeaderOf(context), "10.0.0.1:7070");
}

TEST_F(StandbyServiceTest, WithoutLeaderNoMetadata) {
  SetLeader("");
  auto stub = v1::JobService::NewStub(channel_);
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::GetJobResponse response;
  const grpc::Status status = stub->GetJob(&context, v1::GetJobRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(),
              HasSubstr("coordinator 10.0.0.2:7070 is a standby; no leader is elected yet"));
  EXPECT_EQ(LeaderOf(context), "<absent>");
}

TEST_F(StandbyServiceTest, HeartbeatStreamIsRefusedToo) {
  auto stub = v1::WorkerService::NewStub(channel_);
  grpc::ClientContext context;
  SetDeadline(&context);
  auto stream = stub->HeartbeatStream(&context);
  v1::HeartbeatStreamRequest request;
  request.mutable_beat()->set_worker_id("w");
  stream->Write(request);  // may fail: the call is over already
  v1::HeartbeatStreamResponse response;
  EXPECT_FALSE(stream->Read(&response));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("the leader is 10.0.0.1:7070"));
  EXPECT_EQ(LeaderOf(context), "10.0.0.1:7070");
}

TEST_F(StandbyServiceTest, LeaderIsAskedAtEveryCall) {
  auto stub = v1::WorkerService::NewStub(channel_);
  SetLeader("10.0.0.3:7070");
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::KvGetResponse response;
  EXPECT_EQ(stub->KvGet(&context, v1::KvGetRequest(), &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(LeaderOf(context), "10.0.0.3:7070");
}

TEST_F(StandbyServiceTest, OtherServicesAreUnimplemented) {
  auto stub = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  SetDeadline(&context);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status =
      stub->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(LeaderOf(context), "<absent>");
}

TEST(StandbyRefusalTest, WithoutLeaderTheReasonIsGiven) {
  StandbyService standby(
      "10.0.0.2:7070", [] { return std::string(); },
      [] { return std::string("etcd at http://10.0.0.9:2379: no endpoint answered"); });
  const grpc::Status status = standby.Refusal("/ringleader.v1.JobService/GetJob", nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(),
              HasSubstr("no leader is elected yet (retry shortly, or another coordinator of the "
                        "list): etcd at http://10.0.0.9:2379: no endpoint answered"));
}

}  // namespace
}  // namespace ringleader
