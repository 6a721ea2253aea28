// GrpcCoordinatorClient's heartbeats over WorkerService.HeartbeatStream, against in-process
// services whose stream the test scripts by worker id: answered beats share one stream, a
// refused beat keeps its code, a broken stream sends the beat unary, a silent one times out,
// and a coordinator without the stream gets unary heartbeats.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/ringleader.grpc.pb.h"
#include "worker/coordinator_client/grpc_coordinator_client.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

// Answers unary heartbeats with an abort of job "unary".
class UnaryOnlyService : public v1::WorkerService::Service {
 public:
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse* response) override {
    ++unary_beats;
    response->add_abort()->set_job_id("unary");
    return grpc::Status::OK;
  }
  std::atomic<int> unary_beats{0};
};

// The stream, scripted by the beat's worker id: "lost" is refused (NOT_FOUND), "broken" breaks
// the stream (UNAVAILABLE), "silent" is never answered; any other id is answered with an abort
// of job "stream:<id>".
class StreamingService : public UnaryOnlyService {
 public:
  grpc::Status HeartbeatStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::HeartbeatStreamResponse, v1::HeartbeatStreamRequest>* stream)
      override {
    ++streams;
    v1::HeartbeatStreamRequest request;
    while (stream->Read(&request)) {
      ++stream_beats;
      const std::string& worker = request.beat().worker_id();
      if (worker == "lost") return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown worker lost");
      if (worker == "broken") return grpc::Status(grpc::StatusCode::UNAVAILABLE, "reset");
      if (worker == "silent") {
        silent_entered.Notify();
        while (!context->IsCancelled() && !release.HasBeenNotified()) {
          release.WaitForNotificationWithTimeout(absl::Milliseconds(5));
        }
        return grpc::Status(grpc::StatusCode::CANCELLED, "gone");
      }
      v1::HeartbeatStreamResponse response;
      response.mutable_beat()->add_abort()->set_job_id("stream:" + worker);
      stream->Write(response);
    }
    return grpc::Status::OK;
  }
  std::atomic<int> streams{0};
  std::atomic<int> stream_beats{0};
  absl::Notification silent_entered;
  absl::Notification release;
};

template <typename Service>
class ClientFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    options_.retry.jitter = 0;
    options_.backoff_wait = [this](absl::Duration) { ++backoff_waits_; };
  }
  void TearDown() override {
    Release();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }
  virtual void Release() {}
  std::unique_ptr<GrpcCoordinatorClient> NewClient() {
    return std::make_unique<GrpcCoordinatorClient>(
        server_->InProcessChannel(grpc::ChannelArguments()), options_);
  }
  static v1::HeartbeatRequest Beat(const std::string& worker) {
    v1::HeartbeatRequest request;
    request.set_worker_id(worker);
    return request;
  }
  static std::string AbortedJob(const absl::StatusOr<v1::HeartbeatResponse>& response) {
    if (!response.ok() || response->abort_size() != 1) return "<none>";
    return response->abort(0).job_id();
  }

  Service service_;
  std::unique_ptr<grpc::Server> server_;
  GrpcCoordinatorClientOptions options_;
  std::atomic<int> backoff_waits_{0};
};

class HeartbeatStreamTest : public ClientFixture<StreamingService> {
 protected:
  void Release() override {
    if (!service_.release.HasBeenNotified()) service_.release.Notify();
  }
};
using UnaryHeartbeatTest = ClientFixture<UnaryOnlyService>;

TEST_F(HeartbeatStreamTest, AnsweredBeatsShareOneStream) {
  auto client = NewClient();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(AbortedJob(client->Heartbeat(Beat("w1"))), "stream:w1");
  }
  EXPECT_EQ(service_.streams, 1);
  EXPECT_EQ(service_.stream_beats, 5);
  EXPECT_EQ(service_.unary_beats, 0);
}

TEST_F(HeartbeatStreamTest, ARefusedBeatKeepsItsCodeAndTheNextBeatOpensANewStream) {
  auto client = NewClient();
  absl::StatusOr<v1::HeartbeatResponse> refused = client->Heartbeat(Beat("lost"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(refused.status().message(), HasSubstr("Heartbeat: unknown worker lost"));
  EXPECT_EQ(service_.unary_beats, 0);  // the coordinator's answer is not asked again
  EXPECT_EQ(AbortedJob(client->Heartbeat(Beat("w1"))), "stream:w1");
  EXPECT_EQ(service_.streams, 2);
}

TEST_F(HeartbeatStreamTest, ABrokenStreamSendsTheBeatUnaryAndTheNextOneStreamsAgain) {
  auto client = NewClient();
  EXPECT_EQ(AbortedJob(client->Heartbeat(Beat("broken"))), "unary");
  EXPECT_EQ(service_.unary_beats, 1);
  EXPECT_EQ(backoff_waits_, 0);
  EXPECT_EQ(AbortedJob(client->Heartbeat(Beat("w1"))), "stream:w1");
  EXPECT_EQ(service_.streams, 2);
}

TEST_F(HeartbeatStreamTest, ABeatWithoutAnAnswerInTimeIsDeadlineExceeded) {
  options_.call_timeout = absl::Milliseconds(200);
  auto client = NewClient();
  absl::StatusOr<v1::HeartbeatResponse> silent = client->Heartbeat(Beat("silent"));
  EXPECT_EQ(silent.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(silent.status().message(), HasSubstr("no answer on the heartbeat stream"));
  EXPECT_EQ(service_.unary_beats, 0);
  EXPECT_EQ(AbortedJob(client->Heartbeat(Beat("w1"))), "stream:w1");
  EXPECT_EQ(service_.streams, 2);
}

TEST_F(HeartbeatStreamTest, CancelAllInterruptsAWaitingBeatAndLaterOnes) {
  options_.call_timeout = absl::Hours(1);  // only the cancel can end the silent beat
  auto client = NewClient();
  absl::StatusOr<v1::HeartbeatResponse> silent;
  std::thread beating([&] { silent = client->Heartbeat(Beat("silent")); });
  service_.silent_entered.WaitForNotification();
  client->CancelAll();
  beating.join();
  EXPECT_EQ(silent.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(client->Heartbeat(Beat("w1")).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(service_.unary_beats, 0);
}

TEST_F(HeartbeatStreamTest, StreamingCanBeTurnedOff) {
  options_.heartbeat_stream = false;
  auto client = NewClient();
  EXPECT_EQ(AbortedJob(client->Heartbeat(Beat("w1"))), "unary");
  EXPECT_EQ(service_.streams, 0);
}

TEST_F(UnaryHeartbeatTest, ACoordinatorWithoutTheStreamGetsUnaryHeartbeats) {
  auto client = NewClient();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(AbortedJob(client->Heartbeat(Beat("w1"))), "unary");
  EXPECT_EQ(service_.unary_beats, 3);
  EXPECT_EQ(backoff_waits_, 0);
}

}  // namespace
}  // namespace ringleader
