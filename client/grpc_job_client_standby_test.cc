// NewGrpcJobClient over a list of coordinators, on real servers (127.0.0.1, port 0): a standby
// (coordinator/rpc/standby_service_grpc.h) naming the leader, the leader (a fake JobService),
// and a port nobody listens on.

#include <atomic>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/commands.h"
#include "client/grpc_job_client.h"
#include "coordinator/rpc/loopback_servers_test_util.h"
#include "coordinator/rpc/standby_service_grpc.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/ringleader.grpc.pb.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

// Counts submissions and cancellations; knows job "j-1".
class LeaderJobService final : public v1::JobService::Service {
 public:
  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest*,
                         v1::SubmitJobResponse* response) override {
    response->set_job_id(absl::StrCat("j-", ++submits));
    return grpc::Status::OK;
  }
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                      v1::GetJobResponse* response) override {
    ++gets;
    if (request->job_id() != "j-1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no job " + request->job_id());
    }
    response->mutable_job()->set_job_id("j-1");
    return grpc::Status::OK;
  }
  grpc::Status CancelJob(grpc::ServerContext*, const v1::CancelJobRequest*,
                         v1::CancelJobResponse*) override {
    ++cancels;
    return grpc::Status::OK;
  }
  std::atomic<int> submits{0};
  std::atomic<int> gets{0};
  std::atomic<int> cancels{0};
};



class JobClientStandbyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    leader_server_ = ServeOnLoopback(&leader_, nullptr, &leader_address_);
    ASSERT_NE(leader_server_, nullptr);
    standby_server_ = ServeOnLoopback(nullptr, &standby_, &standby_address_);
    ASSERT_NE(standby_server_, nullptr);
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
  void ForgetLeader() {
    absl::MutexLock lock(&mu_);
    leader_known_ = false;
  }
  static v1::JobSpec Spec() {
    v1::JobSpec spec;
    spec.set_world_size(1);
    return spec;
  }

  LeaderJobService leader_;
  std::string leader_address_;
  std::unique_ptr<grpc::Server> leader_server_;
  absl::Mutex mu_;
  bool leader_known_ ABSL_GUARDED_BY(mu_) = true;
  StandbyService standby_{"standby", [this] { return LeaderOrNone(); }};
  std::string standby_address_;
  std::unique_ptr<grpc::Server> standby_server_;
  GrpcJobClientOptions options_;
};

TEST_F(JobClientStandbyTest, ASubmissionRefusedByAStandbyLandsOnTheLeaderOnce) {
  auto client = NewGrpcJobClient(absl::StrCat(standby_address_, ",", leader_address_), options_);
  absl::StatusOr<v1::SubmitJobResponse> submitted = client->Submit(Spec());
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->job_id(), "j-1");
  EXPECT_EQ(leader_.submits, 1);
  // The client stays with the leader.
  ASSERT_TRUE(client->Cancel("j-1", "test").ok());
  EXPECT_EQ(leader_.cancels, 1);
}

TEST_F(JobClientStandbyTest, ALeaderOutsideTheListIsFollowedToo) {
  auto client = NewGrpcJobClient(standby_address_, options_);
  absl::StatusOr<v1::GetJobResponse> job = client->Get("j-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job().job_id(), "j-1");
}

TEST_F(JobClientStandbyTest, WithoutALeaderTheStandbysRefusalIsReturned) {
  ForgetLeader();
  auto client = NewGrpcJobClient(standby_address_, options_);
  absl::StatusOr<v1::CancelJobResponse> cancelled = client->Cancel("j-1", "test");
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(cancelled.status().message(),
              HasSubstr("coordinator standby is a standby; no leader is elected yet"));
  EXPECT_EQ(leader_.cancels, 0);
}

TEST_F(JobClientStandbyTest, ADeadFirstAddressPassesAReadToTheSecond) {
  auto client = NewGrpcJobClient(absl::StrCat(DeadLoopbackAddress(), ",", leader_address_), options_);
  absl::StatusOr<v1::GetJobResponse> job = client->Get("j-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(leader_.gets, 1);
}

TEST_F(JobClientStandbyTest, ADeadFirstAddressIsSkippedBeforeASubmissionIsSent) {
  auto client = NewGrpcJobClient(absl::StrCat(DeadLoopbackAddress(), ",", leader_address_), options_);
  absl::StatusOr<v1::SubmitJobResponse> submitted = client->Submit(Spec());
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(leader_.submits, 1);
}

TEST_F(JobClientStandbyTest, ASubmissionWithEveryAddressDeadSendsNothing) {
  auto client = NewGrpcJobClient(absl::StrCat(DeadLoopbackAddress(), ",", DeadLoopbackAddress()), options_);
  const absl::Status status = client->Submit(Spec()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), testing::HasSubstr("nothing was sent"));
}

TEST_F(JobClientStandbyTest, TheAnsweringLeaderIsNamedOnlyWhenThereWasAChoice) {
  auto alone = NewGrpcJobClient(leader_address_, options_);
  ASSERT_TRUE(alone->Get("j-1").ok());
  EXPECT_EQ(alone->AnsweringLeader(), "");

  auto redirected = NewGrpcJobClient(standby_address_, options_);
  EXPECT_EQ(redirected->AnsweringLeader(), "");
  ASSERT_TRUE(redirected->Get("j-1").ok());
  EXPECT_EQ(redirected->AnsweringLeader(), leader_address_);

  auto listed = NewGrpcJobClient(absl::StrCat(DeadLoopbackAddress(), ",", leader_address_), options_);
  ASSERT_TRUE(listed->Get("j-1").ok());
  EXPECT_EQ(listed->AnsweringLeader(), leader_address_);
}

TEST_F(JobClientStandbyTest, StatusNamesTheLeaderAStandbySentItTo) {
  auto client = NewGrpcJobClient(absl::StrCat(standby_address_, ",", leader_address_), options_);
  std::ostringstream out, err;
  CommandEnvironment env;
  env.out = &out;
  env.err = &err;
  EXPECT_EQ(RunStatus("j-1", *client, env), kExitOk) << err.str();
  EXPECT_THAT(out.str(), testing::EndsWith(absl::StrCat("\ncoordinator: ", leader_address_,
                                                        " (leader)\n")));
  EXPECT_EQ(leader_.gets, 1);
}

TEST_F(JobClientStandbyTest, EveryAddressDeadIsUnavailable) {
  auto client = NewGrpcJobClient(absl::StrCat(DeadLoopbackAddress(), ",", DeadLoopbackAddress()), options_);
  EXPECT_EQ(client->Get("j-1").status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ringleader
