// The real gRPC server on 127.0.0.1 (port 0) driven through real stubs: one job from
// registration to SUCCEEDED. Every call carries a deadline, so a bug fails instead of hanging.
#include <memory>
#include <string>
#include <thread>

#include "coordinator/core/coordinator.h"
#include "coordinator/server/coordinator_server_test_util.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/ringleader.grpc.pb.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

constexpr auto kCallTimeout = std::chrono::seconds(10);

void SetDeadline(grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() + kCallTimeout);
}

class GrpcServiceTest : public CoordinatorServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer());
    ASSERT_GT(server_->port(), 0);
    EXPECT_EQ(server_->address(), "127.0.0.1:" + std::to_string(server_->port()));
    workers_ = v1::WorkerService::NewStub(channel_);
    jobs_ = v1::JobService::NewStub(channel_);
  }

  std::unique_ptr<v1::WorkerService::Stub> workers_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
};

TEST_F(GrpcServiceTest, OneJobFromRegistrationToSucceeded) {
  // Register.
  v1::RegisterWorkerRequest register_request;
  register_request.set_name("node1-cpu0");
  register_request.set_host("node1");
  register_request.add_devices()->set_kind("cpu");
  register_request.set_incarnation(7);
  v1::RegisterWorkerResponse registered;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    ASSERT_TRUE(workers_->RegisterWorker(&context, register_request, &registered).ok());
  }
  EXPECT_EQ(registered.worker_id(), "w-1");
  EXPECT_EQ(registered.heartbeat_timeout_ms(), 10000u);

  // Nothing to do yet: a poll that does not wait comes back empty.
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::WaitAssignmentRequest request;
    request.set_worker_id(registered.worker_id());
    v1::WaitAssignmentResponse response;
    ASSERT_TRUE(workers_->WaitAssignment(&context, request, &response).ok());
    EXPECT_FALSE(response.has_assignment());
  }

  // Submit.
  v1::SubmitJobResponse submitted;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_name("grpc-test");
    request.mutable_spec()->set_world_size(1);
    ASSERT_TRUE(jobs_->SubmitJob(&context, request, &submitted).ok());
  }
  EXPECT_EQ(submitted.job_id(), "job-000001");

  // An invalid spec is refused with INVALID_ARGUMENT naming the field.
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::SubmitJobRequest request;
    v1::SubmitJobResponse response;
    const grpc::Status status = jobs_->SubmitJob(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("world_size"));
  }

  // WaitAssignment.
  v1::Assignment assignment;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::WaitAssignmentRequest request;
    request.set_worker_id(registered.worker_id());
    request.set_wait_timeout_ms(5000);
    v1::WaitAssignmentResponse response;
    ASSERT_TRUE(workers_->WaitAssignment(&context, request, &response).ok());
    ASSERT_TRUE(response.has_assignment());
    assignment = response.assignment();
  }
  EXPECT_EQ(assignment.job_id(), submitted.job_id());
  EXPECT_EQ(assignment.spec_fingerprint(), submitted.spec_fingerprint());

  // Join.
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::JoinJobRequest request;
    request.set_job_id(assignment.job_id());
    request.set_generation(assignment.generation());
    request.set_rank(assignment.rank());
    request.set_worker_id(registered.worker_id());
    request.set_spec_fingerprint(assignment.spec_fingerprint());
    v1::JoinJobResponse response;
    ASSERT_TRUE(workers_->JoinJob(&context, request, &response).ok());
  }

  // KvGet parked on the server while KvSet arrives on another call.
  v1::KvGetResponse got;
  grpc::Status get_status;
  std::thread getter([&] {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::KvGetRequest request;
    request.set_job_id(assignment.job_id());
    request.set_generation(assignment.generation());
    request.set_key("store/rank0");
    request.set_wait_timeout_ms(8000);
    get_status = workers_->KvGet(&context, request, &got);
  });
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::KvSetRequest request;
    request.set_job_id(assignment.job_id());
    request.set_generation(assignment.generation());
    request.set_key("store/rank0");
    request.set_value(std::string("\x00\x01payload", 9));
    v1::KvSetResponse response;
    ASSERT_TRUE(workers_->KvSet(&context, request, &response).ok());
  }
  getter.join();
  ASSERT_TRUE(get_status.ok()) << get_status.error_message();
  EXPECT_EQ(got.value(), std::string("\x00\x01payload", 9));

  // KvGetMany: several keys (here one, twice) in one call, each cut to the part asked for.
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::KvGetManyRequest request;
    request.set_job_id(assignment.job_id());
    request.set_generation(assignment.generation());
    request.add_keys("store/rank0");
    request.add_keys("store/rank0");
    request.set_parts(3);  // 9 bytes: 3 each
    request.add_part_index(1);
    request.add_part_index(2);
    request.set_wait_timeout_ms(8000);
    v1::KvGetManyResponse response;
    const grpc::Status status = workers_->KvGetMany(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.values_size(), 2);
    EXPECT_EQ(response.values(0), "ayl");
    EXPECT_EQ(response.values(1), "oad");
  }

  // A stale generation is refused with FAILED_PRECONDITION.
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::KvSetRequest request;
    request.set_job_id(assignment.job_id());
    request.set_generation(assignment.generation() + 1);
    request.set_key("k");
    v1::KvSetResponse response;
    const grpc::Status status = workers_->KvSet(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(), HasSubstr("stale generation 2"));
  }

  // FinishRank.
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::FinishRankRequest request;
    request.set_job_id(assignment.job_id());
    request.set_generation(assignment.generation());
    request.set_rank(assignment.rank());
    request.set_ok(true);
    v1::FinishRankResponse response;
    ASSERT_TRUE(workers_->FinishRank(&context, request, &response).ok());
  }

  // GetJob and WatchJob (already past version 0: answered at once) see SUCCEEDED.
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::GetJobRequest request;
    request.set_job_id(submitted.job_id());
    v1::GetJobResponse response;
    ASSERT_TRUE(jobs_->GetJob(&context, request, &response).ok());
    EXPECT_EQ(response.job().state(), v1::JOB_STATE_SUCCEEDED);
    EXPECT_EQ(response.job().ranks(0).worker_name(), "node1-cpu0");
  }
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::WatchJobRequest request;
    request.set_job_id(submitted.job_id());
    request.set_wait_timeout_ms(5000);
    v1::WatchJobResponse response;
    ASSERT_TRUE(jobs_->WatchJob(&context, request, &response).ok());
    EXPECT_EQ(response.job().state(), v1::JOB_STATE_SUCCEEDED);
  }
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::GetJobRequest request;
    request.set_job_id("job-999999");
    v1::GetJobResponse response;
    EXPECT_EQ(jobs_->GetJob(&context, request, &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
}

// A rank's output: AppendLogs from the worker side, GetLogs (a long poll parked on the server
// until the bytes arrive) from the CLI side.
TEST_F(GrpcServiceTest, AppendedLogsReachAParkedGetLogs) {
  v1::RegisterWorkerRequest register_request;
  register_request.set_name("logger");
  register_request.add_devices()->set_kind("cpu");
  v1::RegisterWorkerResponse registered;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    ASSERT_TRUE(workers_->RegisterWorker(&context, register_request, &registered).ok());
  }
  v1::SubmitJobResponse submitted;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_world_size(1);
    ASSERT_TRUE(jobs_->SubmitJob(&context, request, &submitted).ok());
  }
  v1::Assignment assignment;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::WaitAssignmentRequest request;
    request.set_worker_id(registered.worker_id());
    request.set_wait_timeout_ms(5000);
    v1::WaitAssignmentResponse response;
    ASSERT_TRUE(workers_->WaitAssignment(&context, request, &response).ok());
    ASSERT_TRUE(response.has_assignment());
    assignment = response.assignment();
  }
  v1::GetLogsResponse got;
  grpc::Status get_status;
  std::thread reader([&] {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::GetLogsRequest request;
    request.set_job_id(submitted.job_id());
    request.set_rank(0);
    v1::LogCursor* cursor = request.add_after();
    cursor->set_rank(0);
    cursor->set_offset(0);
    request.set_wait_timeout_ms(8000);
    get_status = jobs_->GetLogs(&context, request, &got);
  });
  v1::AppendLogsRequest append;
  append.set_job_id(assignment.job_id());
  append.set_generation(assignment.generation());
  append.set_rank(0);
  append.set_offset(0);
  append.set_data(std::string("epoch 1\n\0\xff", 10));
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::AppendLogsResponse response;
    const grpc::Status status = workers_->AppendLogs(&context, append, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  reader.join();
  ASSERT_TRUE(get_status.ok()) << get_status.error_message();
  EXPECT_EQ(got.generation(), 1u);
  ASSERT_EQ(got.chunks_size(), 1);
  EXPECT_EQ(got.chunks(0).rank(), 0u);
  EXPECT_EQ(got.chunks(0).offset(), 0u);
  EXPECT_EQ(got.chunks(0).data(), std::string("epoch 1\n\0\xff", 10));
  EXPECT_FALSE(got.attempt_over());

  append.set_generation(assignment.generation() + 1);
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::AppendLogsResponse response;
    const grpc::Status status = workers_->AppendLogs(&context, append, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(), HasSubstr("stale generation 2"));
  }
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::GetLogsRequest request;
    request.set_job_id("job-999999");
    v1::GetLogsResponse response;
    EXPECT_EQ(jobs_->GetLogs(&context, request, &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
}

TEST_F(GrpcServiceTest, ShutdownReleasesParkedLongPolls) {
  v1::RegisterWorkerRequest register_request;
  register_request.set_name("idle");
  register_request.add_devices()->set_kind("cpu");
  v1::RegisterWorkerResponse registered;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    ASSERT_TRUE(workers_->RegisterWorker(&context, register_request, &registered).ok());
  }
  grpc::Status poll_status;
  std::thread poller([&] {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::WaitAssignmentRequest request;
    request.set_worker_id(registered.worker_id());
    request.set_wait_timeout_ms(9000);
    v1::WaitAssignmentResponse response;
    poll_status = workers_->WaitAssignment(&context, request, &response);
  });
  // Whether the poll reaches the server before Shutdown (parked, then answered) or after it
  // (refused), it ends with UNAVAILABLE long before its own deadline.
  server_->coordinator().Shutdown();
  poller.join();
  EXPECT_EQ(poll_status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << poll_status.error_message();
}

}  // namespace
}  // namespace ringleader
