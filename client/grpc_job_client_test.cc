// GrpcJobClient against a real JobService on a loopback port, answered by a fake service.
#include "client/grpc_job_client.h"

#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/ringleader.grpc.pb.h"

namespace ringleader {
namespace {

// Records the requests and the deadline it saw; answers from canned values.
class FakeJobService final : public v1::JobService::Service {
 public:
  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override {
    if (request->spec().world_size() == 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "world_size: must be >= 1");
    }
    absl::MutexLock lock(&mu_);
    last_spec_ = request->spec();
    response->set_job_id("j-1");
    response->set_spec_fingerprint("00000000000000aa");
    return grpc::Status::OK;
  }
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                      v1::GetJobResponse* response) override {
    if (request->job_id() != "j-1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no job " + request->job_id());
    }
    response->mutable_job()->set_job_id("j-1");
    return grpc::Status::OK;
  }
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        v1::WatchJobResponse* response) override {
    absl::MutexLock lock(&mu_);
    watch_request_ = *request;
    watch_deadline_left_ = context->deadline() - std::chrono::system_clock::now();
    response->mutable_job()->set_version(request->after_version() + 1);
    return grpc::Status::OK;
  }
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override {
    absl::MutexLock lock(&mu_);
    list_include_archived_ = request->include_archived();
    response->add_jobs()->set_job_id("j-1");
    response->add_jobs()->set_job_id("j-2");
    return grpc::Status::OK;
  }
  grpc::Status ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest*,
                           v1::ListWorkersResponse* response) override {
    response->add_workers()->set_name("node0");
    return grpc::Status::OK;
  }
  grpc::Status CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* request,
                         v1::CancelJobResponse*) override {
    absl::MutexLock lock(&mu_);
    cancel_reason_ = request->reason();
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "already finished");
  }
  grpc::Status GetJobMetrics(grpc::ServerContext* context, const v1::GetJobMetricsRequest* request,
                             v1::GetJobMetricsResponse* response) override {
    absl::MutexLock lock(&mu_);
    metrics_deadline_left_ = context->deadline() - std::chrono::system_clock::now();
    if (request->job_id() != "j-1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no job " + request->job_id());
    }
    response->set_job_id("j-1");
    response->set_generation(2);
    response->set_full_resolution_steps(1000);
    response->set_decimation_stride(4);
    v1::MetricsPoint* point = response->add_points();
    point->set_step(8);
    point->set_rank(1);
    point->set_loss(0.1);
    point->set_has_drift(true);
    point->set_drift(1e-300);
    return grpc::Status::OK;
  }

  grpc::Status GetLogs(grpc::ServerContext* context, const v1::GetLogsRequest* request,
                       v1::GetLogsResponse* response) override {
    absl::MutexLock lock(&mu_);
    logs_request_ = *request;
    logs_deadline_left_ = context->deadline() - std::chrono::system_clock::now();
    response->set_generation(2);
    v1::LogChunk* chunk = response->add_chunks();
    chunk->set_rank(1);
    chunk->set_offset(40);
    chunk->set_data(std::string("line\n\0", 6));
    chunk->set_skipped(7);
    response->set_attempt_over(true);
    return grpc::Status::OK;
  }

  absl::Mutex mu_;
  v1::JobSpec last_spec_ ABSL_GUARDED_BY(mu_);
  v1::WatchJobRequest watch_request_ ABSL_GUARDED_BY(mu_);
  std::chrono::system_clock::duration watch_deadline_left_ ABSL_GUARDED_BY(mu_);
  std::string cancel_reason_ ABSL_GUARDED_BY(mu_);
  std::chrono::system_clock::duration metrics_deadline_left_ ABSL_GUARDED_BY(mu_);
  v1::GetLogsRequest logs_request_ ABSL_GUARDED_BY(mu_);
  bool list_include_archived_ ABSL_GUARDED_BY(mu_) = false;
  std::chrono::system_clock::duration logs_deadline_left_ ABSL_GUARDED_BY(mu_);
};

class GrpcJobClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    GrpcJobClientOptions options;
    options.call_timeout = absl::Seconds(5);  // bounds every call: a bug fails, never hangs
    client_ = NewGrpcJobClient("127.0.0.1:" + std::to_string(port), options);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  FakeJobService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<JobClient> client_;
};

TEST_F(GrpcJobClientTest, SubmitSendsTheSpecAndReturnsTheResponse) {
  v1::JobSpec spec;
  spec.set_world_size(3);
  spec.set_name("n");
  absl::StatusOr<v1::SubmitJobResponse> response = client_->Submit(spec);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->job_id(), "j-1");
  EXPECT_EQ(response->spec_fingerprint(), "00000000000000aa");
  absl::MutexLock lock(&service_.mu_);
  EXPECT_EQ(service_.last_spec_.world_size(), 3u);
  EXPECT_EQ(service_.last_spec_.name(), "n");
}

TEST_F(GrpcJobClientTest, StatusCodesAndMessagesSurvive) {
  absl::StatusOr<v1::SubmitJobResponse> rejected = client_->Submit(v1::JobSpec());
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rejected.status().message(), "world_size: must be >= 1");
  absl::StatusOr<v1::GetJobResponse> missing = client_->Get("j-9");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "no job j-9");
  absl::StatusOr<v1::CancelJobResponse> cancel = client_->Cancel("j-1", "why not");
  EXPECT_EQ(cancel.status().code(), absl::StatusCode::kFailedPrecondition);
  absl::MutexLock lock(&service_.mu_);
  EXPECT_EQ(service_.cancel_reason_, "why not");
}

TEST_F(GrpcJobClientTest, WatchSendsVersionAndWaitAndExtendsTheDeadline) {
  absl::StatusOr<v1::WatchJobResponse> response = client_->Watch("j-1", 41, absl::Seconds(20));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->job().version(), 42u);
  absl::MutexLock lock(&service_.mu_);
  EXPECT_EQ(service_.watch_request_.job_id(), "j-1");
  EXPECT_EQ(service_.watch_request_.wait_timeout_ms(), 20000u);
  // Deadline = call timeout (5 s) + wait (20 s), less the time the call took to arrive. gRPC
  // carries deadlines as a coarse timeout header and the server may see up to ~0.1 s more;
  // the bound only has to tell 25 s from a deadline without the wait or with it twice.
  EXPECT_GT(service_.watch_deadline_left_, std::chrono::seconds(20));
  EXPECT_LE(service_.watch_deadline_left_, std::chrono::milliseconds(25500));
}

TEST_F(GrpcJobClientTest, ListCalls) {
  absl::StatusOr<v1::ListJobsResponse> jobs = client_->List(false);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->jobs_size(), 2);
  {
    absl::MutexLock lock(&service_.mu_);
    EXPECT_FALSE(service_.list_include_archived_);
  }
  ASSERT_TRUE(client_->List(true).ok());
  {
    absl::MutexLock lock(&service_.mu_);
    EXPECT_TRUE(service_.list_include_archived_);
  }
  absl::StatusOr<v1::ListWorkersResponse> workers = client_->ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  EXPECT_EQ(workers->workers(0).name(), "node0");
}

TEST_F(GrpcJobClientTest, GetJobMetricsReturnsThePointsWithinTheCallTimeout) {
  absl::StatusOr<v1::GetJobMetricsResponse> metrics = client_->GetJobMetrics("j-1");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->job_id(), "j-1");
  EXPECT_EQ(metrics->generation(), 2u);
  EXPECT_EQ(metrics->full_resolution_steps(), 1000u);
  EXPECT_EQ(metrics->decimation_stride(), 4u);
  ASSERT_EQ(metrics->points_size(), 1);
  EXPECT_EQ(metrics->points(0).step(), 8u);
  EXPECT_EQ(metrics->points(0).rank(), 1u);
  EXPECT_EQ(metrics->points(0).loss(), 0.1);
  EXPECT_TRUE(metrics->points(0).has_drift());
  EXPECT_EQ(metrics->points(0).drift(), 1e-300);
  {
    // Deadline = the call timeout (5 s) with nothing added (see the Watch test for the slack).
    absl::MutexLock lock(&service_.mu_);
    EXPECT_GT(service_.metrics_deadline_left_, std::chrono::seconds(4));
    EXPECT_LE(service_.metrics_deadline_left_, std::chrono::milliseconds(5500));
  }
  absl::StatusOr<v1::GetJobMetricsResponse> missing = client_->GetJobMetrics("j-9");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "no job j-9");
}

TEST_F(GrpcJobClientTest, GetLogsSendsTheRequestAndExtendsTheDeadlineByTheWait) {
  v1::GetLogsRequest request;
  request.set_job_id("j-1");
  request.set_rank(1);
  request.set_generation(2);
  v1::LogCursor* cursor = request.add_after();
  cursor->set_rank(1);
  cursor->set_offset(40);
  request.set_wait_timeout_ms(20000);
  absl::StatusOr<v1::GetLogsResponse> logs = client_->GetLogs(request);
  ASSERT_TRUE(logs.ok()) << logs.status();
  ASSERT_EQ(logs->chunks_size(), 1);
  EXPECT_EQ(logs->chunks(0).data(), std::string("line\n\0", 6));
  EXPECT_EQ(logs->chunks(0).skipped(), 7u);
  EXPECT_TRUE(logs->attempt_over());
  absl::MutexLock lock(&service_.mu_);
  EXPECT_EQ(service_.logs_request_.SerializeAsString(), request.SerializeAsString());
  // Call timeout (5 s) + wait (20 s); see the Watch test for the slack.
  EXPECT_GT(service_.logs_deadline_left_, std::chrono::seconds(20));
  EXPECT_LE(service_.logs_deadline_left_, std::chrono::milliseconds(25500));
}

TEST(GrpcJobClientNoServerTest, UnreachableCoordinatorIsUnavailable) {
  GrpcJobClientOptions options;
  options.call_timeout = absl::Seconds(5);
  // Port 1 on loopback: nothing listens there, so the connection is refused at once.
  std::unique_ptr<JobClient> client = NewGrpcJobClient("127.0.0.1:1", options);
  absl::StatusOr<v1::ListJobsResponse> jobs = client->List(false);
  EXPECT_EQ(jobs.status().code(), absl::StatusCode::kUnavailable) << jobs.status();
}

}  // namespace
}  // namespace ringleader
