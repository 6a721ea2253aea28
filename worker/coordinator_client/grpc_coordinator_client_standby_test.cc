// GrpcCoordinatorClient over a list of coordinators, on real servers (127.0.0.1, port 0): a
// standby (coordinator/rpc/standby_service_grpc.h) that names the leader, a leader that serves
// the calls from a FakeCoordinator, and a port nobody listens on.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/rpc/loopback_servers_test_util.h"
#include "coordinator/rpc/standby_service_grpc.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/ringleader.grpc.pb.h"
#include "worker/coordinator_client/fake_coordinator.h"
#include "worker/coordinator_client/grpc_coordinator_client.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(status.code())),
                      std::string(status.message()));
}

// The leader: JoinJob and ReportProgress go to a FakeCoordinator (which records them); unary and
// streamed heartbeats are counted and answered.
class LeaderService : public v1::WorkerService::Service {
 public:
  grpc::Status JoinJob(grpc::ServerContext*, const v1::JoinJobRequest* request,
                       v1::JoinJobResponse* response) override {
    absl::StatusOr<v1::JoinJobResponse> answer = fake.JoinJob(*request);
    if (!answer.ok()) return ToGrpc(answer.status());
    *response = *answer;
    return grpc::Status::OK;
  }
  grpc::Status ReportProgress(grpc::ServerContext*, const v1::ReportProgressRequest* request,
                              v1::ReportProgressResponse* response) override {
    ++report_calls;
    absl::StatusOr<v1::ReportProgressResponse> answer = fake.ReportProgress(*request);
    if (!answer.ok()) return ToGrpc(answer.status());
    *response = *answer;
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse*) override {
    ++unary_beats;
    return grpc::Status::OK;
  }
  grpc::Status HeartbeatStream(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::HeartbeatStreamResponse, v1::HeartbeatStreamRequest>* stream)
      override {
    ++streams;
    v1::HeartbeatStreamRequest request;
    while (stream->Read(&request)) {
      ++stream_beats;
      stream->Write(v1::HeartbeatStreamResponse());
    }
    return grpc::Status::OK;
  }

  FakeCoordinator fake{"fp"};
  std::atomic<int> report_calls{0};
  std::atomic<int> unary_beats{0};
  std::atomic<int> streams{0};
  std::atomic<int> stream_beats{0};
};




v1::ReportProgressRequest Report(uint64_t step) {
  v1::ReportProgressRequest request;
  request.set_job_id("j");
  request.set_generation(1);
  request.set_rank(0);
  request.add_steps()->set_step(step);
  return request;
}

class StandbyFollowingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    leader_server_ = ServeOnLoopback(&leader_, nullptr, &leader_address_);
    ASSERT_NE(leader_server_, nullptr);
    standby_server_ = ServeOnLoopback(nullptr, &standby_, &standby_address_);
    ASSERT_NE(standby_server_, nullptr);
    options_.retry.jitter = 0;
    options_.retry.max_attempts = 4;
    options_.backoff_wait = [this](absl::Duration d) { waits_.push_back(d); };
    options_.call_timeout = absl::Seconds(10);
  }
  void TearDown() override {
    const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(5);
    standby_server_->Shutdown(deadline);
    leader_server_->Shutdown(deadline);
  }
  std::string LeaderOrNone() {
    absl::MutexLock lock(&mu_);
    return leader_known_ ? leader_address_ : "";
  }

  LeaderService leader_;
  std::string leader_address_;
  std::unique_ptr<grpc::Server> leader_server_;
  absl::Mutex mu_;
  bool leader_known_ ABSL_GUARDED_BY(mu_) = true;
  StandbyService standby_{"standby", [this] { return LeaderOrNone(); }};
  std::string standby_address_;
  std::unique_ptr<grpc::Server> standby_server_;
  GrpcCoordinatorClientOptions options_;
  std::vector<absl::Duration> waits_;
};

TEST_F(StandbyFollowingTest, ANonIdempotentCallRefusedByAStandbyLandsOnTheLeaderOnce) {
  auto client =
      GrpcCoordinatorClient::Create(absl::StrCat(standby_address_, ",", leader_address_), options_);
  ASSERT_EQ(client->current_address(), standby_address_);
  absl::StatusOr<v1::ReportProgressResponse> response = client->ReportProgress(Report(7));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(leader_.report_calls, 1);
  ASSERT_THAT(leader_.fake.steps(0), SizeIs(1));
  EXPECT_EQ(leader_.fake.steps(0)[0].step(), 7u);
  EXPECT_TRUE(waits_.empty());  // at once, no backoff
  EXPECT_EQ(client->current_address(), leader_address_);
  // Later calls go straight to the leader.
  ASSERT_TRUE(client->ReportProgress(Report(8)).ok());
  EXPECT_EQ(leader_.report_calls, 2);
  EXPECT_THAT(leader_.fake.steps(0), SizeIs(2));
}

TEST_F(StandbyFollowingTest, ALeaderOutsideTheListIsFollowedToo) {
  auto client = GrpcCoordinatorClient::Create(standby_address_, options_);
  ASSERT_TRUE(client->ReportProgress(Report(1)).ok());
  EXPECT_EQ(leader_.report_calls, 1);
  EXPECT_EQ(client->current_address(), leader_address_);
}

TEST_F(StandbyFollowingTest, WithoutALeaderTheStandbysRefusalIsReturned) {
  {
    absl::MutexLock lock(&mu_);
    leader_known_ = false;
  }
  auto client = GrpcCoordinatorClient::Create(standby_address_, options_);
  absl::StatusOr<v1::ReportProgressResponse> response = client->ReportProgress(Report(1));
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(response.status().message(),
              HasSubstr("ReportProgress: coordinator standby is a standby; no leader is elected"));
  EXPECT_EQ(leader_.report_calls, 0);
  EXPECT_TRUE(waits_.empty());  // not retried: not idempotent
}

TEST_F(StandbyFollowingTest, ADeadFirstAddressPassesAnIdempotentCallToTheSecond) {
  auto client =
      GrpcCoordinatorClient::Create(absl::StrCat(DeadLoopbackAddress(), ",", leader_address_), options_);
  v1::JoinJobRequest request;
  request.set_job_id("j");
  request.set_rank(3);
  request.set_spec_fingerprint("fp");
  absl::StatusOr<v1::JoinJobResponse> response = client->JoinJob(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(leader_.fake.join(3).spec_fingerprint(), "fp");
  EXPECT_EQ(waits_.size(), 1u);  // the usual backoff before the second attempt
  EXPECT_EQ(client->current_address(), leader_address_);
}

TEST_F(StandbyFollowingTest, ADeadFirstAddressFailsANonIdempotentCallButTheNextOneMovesOn) {
  auto client =
      GrpcCoordinatorClient::Create(absl::StrCat(DeadLoopbackAddress(), ",", leader_address_), options_);
  EXPECT_EQ(client->ReportProgress(Report(1)).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(leader_.report_calls, 0);
  EXPECT_TRUE(waits_.empty());
  ASSERT_TRUE(client->ReportProgress(Report(2)).ok());
  EXPECT_EQ(leader_.report_calls, 1);
}

TEST_F(StandbyFollowingTest, TheHeartbeatStreamReopensOnTheLeader) {
  auto client =
      GrpcCoordinatorClient::Create(absl::StrCat(standby_address_, ",", leader_address_), options_);
  v1::HeartbeatRequest beat;
  beat.set_worker_id("w");
  // The standby refuses the stream: this beat goes unary, to the leader it named ...
  ASSERT_TRUE(client->Heartbeat(beat).ok());
  EXPECT_EQ(leader_.unary_beats, 1);
  EXPECT_EQ(leader_.streams, 0);
  // ... and the next ones stream to the leader.
  ASSERT_TRUE(client->Heartbeat(beat).ok());
  ASSERT_TRUE(client->Heartbeat(beat).ok());
  EXPECT_EQ(leader_.streams, 1);
  EXPECT_EQ(leader_.stream_beats, 2);
  EXPECT_EQ(leader_.unary_beats, 1);
  EXPECT_TRUE(waits_.empty());
}

TEST_F(StandbyFollowingTest, ACoordinatorThatDoesNotAnswerInTimeIsLeftForTheNextAddress) {
  std::unique_ptr<LoopbackPort> hung = BindLoopbackPort(/*listening=*/true);
  ASSERT_NE(hung, nullptr);
  options_.call_timeout = absl::Milliseconds(300);
  auto client =
      GrpcCoordinatorClient::Create(absl::StrCat(hung->address, ",", leader_address_), options_);
  v1::JoinJobRequest request;
  request.set_job_id("j");
  request.set_rank(3);
  request.set_spec_fingerprint("fp");
  EXPECT_EQ(client->JoinJob(request).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(client->current_address(), leader_address_);
  absl::StatusOr<v1::JoinJobResponse> joined = client->JoinJob(request);
  ASSERT_TRUE(joined.ok()) << joined.status();
  // The heartbeat stream too.
  auto beating =
      GrpcCoordinatorClient::Create(absl::StrCat(hung->address, ",", leader_address_), options_);
  v1::HeartbeatRequest beat;
  beat.set_worker_id("w");
  EXPECT_EQ(beating->Heartbeat(beat).status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(beating->Heartbeat(beat).ok());
  EXPECT_EQ(leader_.streams, 1);
}

}  // namespace
}  // namespace ringleader
