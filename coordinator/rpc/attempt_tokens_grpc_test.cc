// The ranks' per-attempt tokens at the real gRPC edge: a rank of job A holding A's token cannot
// read or write job B's key-value store (nor report for B); B's own token can.
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "coordinator/core/attempt_tokens.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/server/coordinator_server.h"
#include "coordinator/server/coordinator_server_test_util.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "proto/ringleader.grpc.pb.h"

namespace ringleader {
namespace {

class AttemptTokensGrpcTest : public CoordinatorServerTest {
 protected:
  void SetUp() override {
    CoordinatorServerOptions options;
    options.instance.attempt_tokens = true;
    options.instance.attempt_secret = kSecret;
    ASSERT_NO_FATAL_FAILURE(StartServer(std::move(options)));
    workers_ = v1::WorkerService::NewStub(channel_);
    a_ = AssignOneRankJob("a");
    b_ = AssignOneRankJob("b");
  }

  Coordinator& coordinator() { return server_->coordinator(); }

  // Registers worker `name`, submits a 1-rank job and returns the worker's assignment.
  v1::Assignment AssignOneRankJob(const std::string& name) {
    v1::Device cpu;
    cpu.set_kind("cpu");
    absl::StatusOr<Coordinator::Registration> worker =
        coordinator().RegisterWorker(name, "host-" + name, {cpu}, 1);
    EXPECT_TRUE(worker.ok()) << worker.status();
    v1::JobSpec spec;
    spec.set_name(name);
    spec.set_world_size(1);
    EXPECT_TRUE(coordinator().SubmitJob(spec).ok());
    std::optional<v1::Assignment> assignment;
    coordinator().WaitAssignmentAsync(
        worker->id, Clock::Real()->Now(),
        [&](absl::StatusOr<std::optional<v1::Assignment>> answer) {
          if (answer.ok() && answer->has_value()) assignment = **answer;
        });
    EXPECT_TRUE(assignment.has_value());
    return assignment.value_or(v1::Assignment());
  }

  // KvSet on `target`'s attempt, presenting `token` ("" = none).
  grpc::Status KvSet(const v1::Assignment& target, const std::string& token) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) context.AddMetadata(kAttemptTokenMetadata, token);
    v1::KvSetRequest request;
    request.set_job_id(target.job_id());
    request.set_generation(target.generation());
    request.set_key("gloo/0");
    request.set_value("address");
    v1::KvSetResponse response;
    return workers_->KvSet(&context, request, &response);
  }

  grpc::Status KvGet(const v1::Assignment& target, const std::string& token) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) context.AddMetadata(kAttemptTokenMetadata, token);
    v1::KvGetRequest request;
    request.set_job_id(target.job_id());
    request.set_generation(target.generation());
    request.set_key("gloo/0");
    v1::KvGetResponse response;
    return workers_->KvGet(&context, request, &response);
  }

  static constexpr char kSecret[] = "the coordinator's secret, 32 b..";
  const AttemptTokens tokens_{kSecret};  // the server's, computed apart
  std::unique_ptr<v1::WorkerService::Stub> workers_;
  v1::Assignment a_, b_;
};

TEST_F(AttemptTokensGrpcTest, EachAssignmentCarriesItsAttemptsToken) {
  EXPECT_EQ(a_.attempt_token(), tokens_.For(a_.job_id(), a_.generation()));
  EXPECT_EQ(b_.attempt_token(), tokens_.For(b_.job_id(), b_.generation()));
  EXPECT_NE(a_.attempt_token(), b_.attempt_token());
}

TEST_F(AttemptTokensGrpcTest, JobAsTokenCannotReadOrWriteJobBsKeys) {
  EXPECT_EQ(KvSet(b_, a_.attempt_token()).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(KvSet(b_, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_TRUE(KvSet(b_, b_.attempt_token()).ok());
  const grpc::Status read = KvGet(b_, a_.attempt_token());
  EXPECT_EQ(read.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(read.error_message().find(b_.job_id()), std::string::npos) << read.error_message();
  EXPECT_TRUE(KvGet(b_, b_.attempt_token()).ok());
  // A's own store, with A's token.
  EXPECT_TRUE(KvSet(a_, a_.attempt_token()).ok());
}

TEST_F(AttemptTokensGrpcTest, JobAsTokenCannotReportOrFinishForJobB) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  context.AddMetadata(kAttemptTokenMetadata, a_.attempt_token());
  v1::FinishRankRequest request;
  request.set_job_id(b_.job_id());
  request.set_generation(b_.generation());
  request.set_rank(0);
  request.set_ok(false);
  request.set_error("forged");
  v1::FinishRankResponse response;
  EXPECT_EQ(workers_->FinishRank(&context, request, &response).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  absl::StatusOr<v1::JobStatus> job = coordinator().GetJob(JobId(b_.job_id()));
  ASSERT_TRUE(job.ok());
  EXPECT_NE(job->state(), v1::JOB_STATE_FAILED);
}

}  // namespace
}  // namespace ringleader
