// GrpcCoordinatorClient against an in-process WorkerService whose answers the test scripts.
#include "worker/coordinator_client/grpc_coordinator_client.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/ringleader.grpc.pb.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ScriptedWorkerService : public v1::WorkerService::Service {
 public:
  grpc::Status RegisterWorker(grpc::ServerContext*, const v1::RegisterWorkerRequest* request,
                              v1::RegisterWorkerResponse* response) override {
    if (register_calls++ < unavailable_registrations) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "starting up");
    }
    response->set_worker_id("w-" + request->name());
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse*) override {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown worker");
  }
  grpc::Status ReportProgress(grpc::ServerContext*, const v1::ReportProgressRequest*,
                              v1::ReportProgressResponse*) override {
    ++report_calls;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "overloaded");
  }
  grpc::Status AppendLogs(grpc::ServerContext*, const v1::AppendLogsRequest* request,
                          v1::AppendLogsResponse*) override {
    ++append_calls;
    if (request->data() == "accepted") return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "overloaded");
  }
  grpc::Status KvGet(grpc::ServerContext* context, const v1::KvGetRequest* request,
                     v1::KvGetResponse* response) override {
    deadline_left = context->deadline() - std::chrono::system_clock::now();
    if (request->key() == "block") {
      entered.Notify();
      release.WaitForNotificationWithTimeout(absl::Seconds(30));
    }
    response->set_value("v");
    return grpc::Status::OK;
  }

  grpc::Status KvGetMany(grpc::ServerContext* context, const v1::KvGetManyRequest* request,
                         v1::KvGetManyResponse* response) override {
    deadline_left = context->deadline() - std::chrono::system_clock::now();
    if (get_many_calls++ == 0) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
    for (const std::string& key : request->keys()) response->add_values(key + "=v");
    return grpc::Status::OK;
  }

  std::atomic<int> register_calls{0};
  std::atomic<int> get_many_calls{0};
  int unavailable_registrations = 0;
  std::atomic<int> report_calls{0};
  std::atomic<int> append_calls{0};
  std::chrono::system_clock::duration deadline_left{};
  absl::Notification entered;
  absl::Notification release;
};

class GrpcCoordinatorClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    options_.retry.jitter = 0;
    options_.retry.max_attempts = 4;
    options_.backoff_wait = [this](absl::Duration d) { waits_.push_back(d); };
    options_.long_poll_margin = absl::Seconds(5);
    options_.call_timeout = absl::Seconds(10);
  }
  void TearDown() override {
    service_.release.Notify();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }
  std::unique_ptr<GrpcCoordinatorClient> NewClient() {
    return std::make_unique<GrpcCoordinatorClient>(
        server_->InProcessChannel(grpc::ChannelArguments()), options_);
  }

  ScriptedWorkerService service_;
  std::unique_ptr<grpc::Server> server_;
  GrpcCoordinatorClientOptions options_;
  std::vector<absl::Duration> waits_;
};

TEST(FromGrpcStatusTest, KeepsTheCodeAndNamesTheRpc) {
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK, "KvGet").ok());
  const absl::Status s =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "stale"), "JoinJob");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "JoinJob: stale");
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, ""), "x").code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(GrpcCoordinatorClientTest, IdempotentCallRetriesUnavailableWithExponentialBackoff) {
  service_.unavailable_registrations = 2;
  auto client = NewClient();
  v1::RegisterWorkerRequest request;
  request.set_name("n");
  auto response = client->RegisterWorker(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->worker_id(), "w-n");
  EXPECT_EQ(service_.register_calls, 3);
  EXPECT_THAT(waits_, ElementsAre(absl::Milliseconds(100), absl::Milliseconds(200)));
}

TEST_F(GrpcCoordinatorClientTest, RetriesStopAfterMaxAttempts) {
  service_.unavailable_registrations = 100;
  auto client = NewClient();
  auto response = client->RegisterWorker(v1::RegisterWorkerRequest());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(response.status().message()), HasSubstr("RegisterWorker: starting up"));
  EXPECT_EQ(service_.register_calls, 4);
  EXPECT_EQ(waits_.size(), 3u);
}

TEST_F(GrpcCoordinatorClientTest, BackoffIsCapped) {
  options_.retry.max_backoff = absl::Milliseconds(250);
  service_.unavailable_registrations = 100;
  auto client = NewClient();
  (void)client->RegisterWorker(v1::RegisterWorkerRequest());
  EXPECT_THAT(waits_, ElementsAre(absl::Milliseconds(100), absl::Milliseconds(200),
                                  absl::Milliseconds(250)));
}

TEST_F(GrpcCoordinatorClientTest, ReportProgressIsNotRetried) {
  auto client = NewClient();
  auto response = client->ReportProgress(v1::ReportProgressRequest());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(service_.report_calls, 1);
  EXPECT_TRUE(waits_.empty());
}

// The log shipper sends the same offset again at its next tick itself.
TEST_F(GrpcCoordinatorClientTest, AppendLogsIsNotRetried) {
  auto client = NewClient();
  v1::AppendLogsRequest request;
  request.set_data("accepted");
  EXPECT_TRUE(client->AppendLogs(request).ok());
  request.set_data("refused");
  auto response = client->AppendLogs(request);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(response.status().message(), "AppendLogs: overloaded");
  EXPECT_EQ(service_.append_calls, 2);
  EXPECT_TRUE(waits_.empty());
}

TEST_F(GrpcCoordinatorClientTest, OtherErrorsAreNotRetried) {
  auto client = NewClient();
  auto response = client->Heartbeat(v1::HeartbeatRequest());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(response.status().message(), "Heartbeat: unknown worker");
  EXPECT_TRUE(waits_.empty());
}

TEST_F(GrpcCoordinatorClientTest, LongPollDeadlineIsWaitPlusMargin) {
  auto client = NewClient();
  v1::KvGetRequest request;
  request.set_key("k");
  request.set_wait_timeout_ms(20000);
  ASSERT_TRUE(client->KvGet(request).ok());
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(service_.deadline_left);
  EXPECT_LE(left.count(), 25000);
  EXPECT_GT(left.count(), 20000);  // more than the wait itself: the margin is there
}

TEST_F(GrpcCoordinatorClientTest, KvGetManyIsALongPollRetriedLikeKvGet) {
  auto client = NewClient();
  v1::KvGetManyRequest request;
  request.add_keys("a");
  request.add_keys("b");
  request.set_wait_timeout_ms(20000);
  auto response = client->KvGetMany(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_THAT(response->values(), ElementsAre("a=v", "b=v"));
  EXPECT_EQ(service_.get_many_calls, 2);
  EXPECT_THAT(waits_, ElementsAre(absl::Milliseconds(100)));
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(service_.deadline_left);
  EXPECT_GT(left.count(), 20000);  // the wait plus the margin
}

TEST_F(GrpcCoordinatorClientTest, CancelAllInterruptsALongPollAndLaterCalls) {
  auto client = NewClient();
  absl::Status blocked_status;
  std::thread caller([&] {
    v1::KvGetRequest request;
    request.set_key("block");
    request.set_wait_timeout_ms(60000);
    blocked_status = client->KvGet(request).status();
  });
  ASSERT_TRUE(service_.entered.WaitForNotificationWithTimeout(absl::Seconds(20)));
  client->CancelAll();
  caller.join();  // returns although the server still holds the call
  EXPECT_EQ(blocked_status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(client->JoinJob(v1::JoinJobRequest()).status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace ringleader
