// WorkerService.HeartbeatStream on the real gRPC server (127.0.0.1, port 0) through a raw
// stub: beats renew leases through the same handler as the unary Heartbeat, a refused beat ends
// the stream with its code, and a shutdown cancels open streams instead of waiting for them.
#include <chrono>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "coordinator/rpc/rpc_stats.h"
#include "coordinator/server/coordinator_server_test_util.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/ringleader.grpc.pb.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using Stream = grpc::ClientReaderWriter<v1::HeartbeatStreamRequest, v1::HeartbeatStreamResponse>;

class HeartbeatStreamsTest : public CoordinatorServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer());
    workers_ = v1::WorkerService::NewStub(channel_);
  }

  void SetDeadline(grpc::ClientContext* context) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  }

  std::string Register(const std::string& name, uint64_t incarnation) {
    v1::RegisterWorkerRequest request;
    request.set_name(name);
    request.set_host("node1");
    request.add_devices()->set_kind("cpu");
    request.set_incarnation(incarnation);
    v1::RegisterWorkerResponse response;
    grpc::ClientContext context;
    SetDeadline(&context);
    EXPECT_TRUE(workers_->RegisterWorker(&context, request, &response).ok());
    return response.worker_id();
  }

  static v1::HeartbeatStreamRequest Beat(const std::string& worker, uint64_t incarnation) {
    v1::HeartbeatStreamRequest request;
    request.mutable_beat()->set_worker_id(worker);
    request.mutable_beat()->set_incarnation(incarnation);
    return request;
  }

  uint64_t HeartbeatsCounted(const std::string& code) const {
    uint64_t count = 0;
    for (const RpcStats::Series& series : server_->rpc_stats().Take().series) {
      if (series.method == "Heartbeat" && series.code == code) count += series.count;
    }
    return count;
  }

  // Polls (a condition, not a timed assertion) until the server holds `n` open streams.
  bool WaitForOpenStreams(size_t n) {
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (server_->open_heartbeat_streams() != n) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return true;
  }

  std::unique_ptr<v1::WorkerService::Stub> workers_;
};

TEST_F(HeartbeatStreamsTest, EveryBeatOnOneStreamIsAnsweredInOrderAndCountedAsAHeartbeat) {
  const std::string a = Register("node1-cpu0", 7);
  const std::string b = Register("node1-cpu1", 8);
  grpc::ClientContext context;
  SetDeadline(&context);
  std::unique_ptr<Stream> stream = workers_->HeartbeatStream(&context);
  for (int i = 0; i < 5; ++i) {
    // Requests may name different workers.
    ASSERT_TRUE(stream->Write(i % 2 == 0 ? Beat(a, 7) : Beat(b, 8)));
    v1::HeartbeatStreamResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.beat().abort_size(), 0);
  }
  EXPECT_EQ(HeartbeatsCounted("OK"), 5u);
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_TRUE(WaitForOpenStreams(0));
}

TEST_F(HeartbeatStreamsTest, ARefusedBeatEndsTheStreamWithItsCode) {
  const std::string a = Register("node1-cpu0", 7);
  grpc::ClientContext context;
  SetDeadline(&context);
  std::unique_ptr<Stream> stream = workers_->HeartbeatStream(&context);
  v1::HeartbeatStreamResponse response;
  ASSERT_TRUE(stream->Write(Beat(a, 7)));
  ASSERT_TRUE(stream->Read(&response));
  // A stale incarnation is refused exactly as by the unary Heartbeat.
  stream->Write(Beat(a, 99));
  EXPECT_FALSE(stream->Read(&response));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  EXPECT_EQ(HeartbeatsCounted("NOT_FOUND"), 1u);
  EXPECT_TRUE(WaitForOpenStreams(0));
}

TEST_F(HeartbeatStreamsTest, ClosingCancelsOpenStreamsAndRefusesNewOnes) {
  const std::string a = Register("node1-cpu0", 7);
  grpc::ClientContext context;
  SetDeadline(&context);
  std::unique_ptr<Stream> stream = workers_->HeartbeatStream(&context);
  v1::HeartbeatStreamResponse response;
  ASSERT_TRUE(stream->Write(Beat(a, 7)));
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_EQ(server_->open_heartbeat_streams(), 1u);

  server_->CloseHeartbeatStreams();
  EXPECT_FALSE(stream->Read(&response));  // the stream waits for no beat: it is cancelled
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitForOpenStreams(0));

  grpc::ClientContext later;
  SetDeadline(&later);
  std::unique_ptr<Stream> refused = workers_->HeartbeatStream(&later);
  refused->Write(Beat(a, 7));
  EXPECT_FALSE(refused->Read(&response));
  const grpc::Status status = refused->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("shutting down"));

  // The unary Heartbeat still answers until the server stops.
  grpc::ClientContext unary;
  SetDeadline(&unary);
  v1::HeartbeatResponse unary_response;
  EXPECT_TRUE(workers_->Heartbeat(&unary, Beat(a, 7).beat(), &unary_response).ok());
}

TEST_F(HeartbeatStreamsTest, ShutdownDoesNotWaitForAnOpenStream) {
  const std::string a = Register("node1-cpu0", 7);
  grpc::ClientContext context;  // no deadline: only the server can end this stream
  std::unique_ptr<Stream> stream = workers_->HeartbeatStream(&context);
  v1::HeartbeatStreamResponse response;
  ASSERT_TRUE(stream->Write(Beat(a, 7)));
  ASSERT_TRUE(stream->Read(&response));
  // A deadline far beyond the test's own timeout: the shutdown (the core's first) returns only
  // because the stream is cancelled.
  server_->Shutdown(absl::Now() + absl::Hours(1));
  EXPECT_FALSE(stream->Read(&response));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

}  // namespace
}  // namespace ringleader
