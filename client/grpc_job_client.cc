#include "client/grpc_job_client.h"

#include <chrono>
#include <utility>

#include "proto/ringleader.grpc.pb.h"

namespace ringleader {
namespace {

class GrpcJobClient : public JobClient {
 public:
  GrpcJobClient(std::shared_ptr<grpc::Channel> channel, GrpcJobClientOptions options)
      : stub_(v1::JobService::NewStub(channel)), options_(std::move(options)) {}

  absl::StatusOr<v1::SubmitJobResponse> Submit(const v1::JobSpec& spec) override {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    return Call(&v1::JobService::Stub::SubmitJob, request, absl::ZeroDuration());
  }

  absl::StatusOr<v1::GetJobResponse> Get(const std::string& job_id) override {
    v1::GetJobRequest request;
    request.set_job_id(job_id);
    return Call(&v1::JobService::Stub::GetJob, request, absl::ZeroDuration());
  }

  absl::StatusOr<v1::WatchJobResponse> Watch(const std::string& job_id, uint64_t after_version,
                                             absl::Duration wait) override {
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    request.set_after_version(after_version);
    request.set_wait_timeout_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(wait)));
    return Call(&v1::JobService::Stub::WatchJob, request, wait);
  }

  // Every page, concatenated (the coordinator answers at most 1000 a call).
  absl::StatusOr<v1::ListJobsResponse> List(bool include_archived) override {
    v1::ListJobsResponse all;
    v1::ListJobsRequest request;
    request.set_include_archived(include_archived);
    do {
      absl::StatusOr<v1::ListJobsResponse> page =
          Call(&v1::JobService::Stub::ListJobs, request, absl::ZeroDuration());
      if (!page.ok()) return page.status();
      for (v1::JobStatus& job : *page->mutable_jobs()) *all.add_jobs() = std::move(job);
      request.set_page_token(page->next_page_token());
    } while (!request.page_token().empty());
    return all;
  }

  absl::StatusOr<v1::ListWorkersResponse> ListWorkers() override {
    v1::ListWorkersResponse all;
    v1::ListWorkersRequest request;
    do {
      absl::StatusOr<v1::ListWorkersResponse> page =
          Call(&v1::JobService::Stub::ListWorkers, request, absl::ZeroDuration());
      if (!page.ok()) return page.status();
      for (v1::WorkerStatus& worker : *page->mutable_workers()) {
        *all.add_workers() = std::move(worker);
      }
      request.set_page_token(page->next_page_token());
    } while (!request.page_token().empty());
    return all;
  }

  absl::StatusOr<v1::CancelJobResponse> Cancel(const std::string& job_id,
                                               const std::string& reason) override {
    v1::CancelJobRequest request;
    request.set_job_id(job_id);
    request.set_reason(reason);
    return Call(&v1::JobService::Stub::CancelJob, request, absl::ZeroDuration());
  }

  absl::StatusOr<v1::GetJobMetricsResponse> GetJobMetrics(const std::string& job_id) override {
    v1::GetJobMetricsRequest request;
    request.set_job_id(job_id);
    return Call(&v1::JobService::Stub::GetJobMetrics, request, absl::ZeroDuration());
  }

  absl::StatusOr<v1::GetLogsResponse> GetLogs(const v1::GetLogsRequest& request) override {
    return Call(&v1::JobService::Stub::GetLogs, request,
                absl::Milliseconds(request.wait_timeout_ms()));
  }

  absl::StatusOr<v1::DebugJobResponse> Debug(const std::string& job_id,
                                             uint32_t wait_ms) override {
    v1::DebugJobRequest request;
    request.set_job_id(job_id);
    request.set_wait_ms(wait_ms);
    return Call(&v1::JobService::Stub::DebugJob, request,
                absl::Milliseconds(wait_ms == 0 ? 5000 : wait_ms));
  }

  absl::StatusOr<v1::RunDoctorResponse> RunDoctor(const v1::RunDoctorRequest& request) override {
    return Call(&v1::JobService::Stub::RunDoctor, request,
                absl::Milliseconds(request.wait_timeout_ms() == 0 ? 30000
                                                                  : request.wait_timeout_ms()));
  }

  absl::StatusOr<v1::UncordonWorkerResponse> Uncordon(const std::string& worker) override {
    v1::UncordonWorkerRequest request;
    request.set_worker(worker);
    return Call(&v1::JobService::Stub::UncordonWorker, request, absl::ZeroDuration());
  }

 private:
  // One unary call with deadline = now + call_timeout + extra (the server-side wait).
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(grpc::Status (v1::JobService::Stub::*method)(grpc::ClientContext*,
                                                                             const Request&,
                                                                             Response*),
                                const Request& request, absl::Duration extra) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         absl::ToChronoMilliseconds(options_.call_timeout + extra));
    if (!options_.token.empty()) context.AddMetadata("authorization", "Bearer " + options_.token);
    Response response;
    grpc::Status status = (stub_.get()->*method)(&context, request, &response);
    if (!status.ok()) return FromGrpcStatus(status);
    return response;
  }

  std::unique_ptr<v1::JobService::Stub> stub_;
  const GrpcJobClientOptions options_;
};

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

std::unique_ptr<JobClient> NewGrpcJobClient(const std::string& address,
                                            const GrpcJobClientOptions& options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      options.credentials != nullptr ? options.credentials : grpc::InsecureChannelCredentials();
  // Answers can be large (a long job's metrics, every job's status): up to 256 MiB.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  return NewGrpcJobClient(grpc::CreateCustomChannel(address, credentials, args), options);
}

std::unique_ptr<JobClient> NewGrpcJobClient(std::shared_ptr<grpc::Channel> channel,
                                            const GrpcJobClientOptions& options) {
  return std::make_unique<GrpcJobClient>(std::move(channel), options);
}

}  // namespace ringleader
