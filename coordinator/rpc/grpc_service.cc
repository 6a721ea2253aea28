#include "coordinator/rpc/grpc_service.h"

#include "coordinator/rpc/grpc_status.h"

namespace ringleader {
namespace {

// A unary RPC answered on the spot.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// A long poll: finished by the coordinator's completion, which may run before this returns.
StatusCallback FinishLater(grpc::ServerUnaryReactor* reactor) {
  return [reactor](absl::Status status) { reactor->Finish(ToGrpcStatus(status)); };
}

}  // namespace

grpc::ServerUnaryReactor* GrpcWorkerService::RegisterWorker(
    grpc::CallbackServerContext* context, const v1::RegisterWorkerRequest* request,
    v1::RegisterWorkerResponse* response) {
  return FinishNow(context, handler_->RegisterWorker(*request, response));
}

grpc::ServerUnaryReactor* GrpcWorkerService::Heartbeat(grpc::CallbackServerContext* context,
                                                       const v1::HeartbeatRequest* request,
                                                       v1::HeartbeatResponse* response) {
  return FinishNow(context, handler_->Heartbeat(*request, response));
}

HeartbeatStreams::Reactor* GrpcWorkerService::HeartbeatStream(
    grpc::CallbackServerContext* context) {
  return heartbeat_streams_.Open(context);
}

grpc::ServerUnaryReactor* GrpcWorkerService::WaitAssignment(
    grpc::CallbackServerContext* context, const v1::WaitAssignmentRequest* request,
    v1::WaitAssignmentResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  handler_->WaitAssignment(*request, response, FinishLater(reactor));
  return reactor;
}

absl::Status GrpcWorkerService::AuthorizeAttempt(grpc::CallbackServerContext* context,
                                                 absl::string_view job, uint64_t generation,
                                                 absl::string_view method) const {
  if (attempt_tokens_ == nullptr) return absl::OkStatus();
  absl::string_view presented;
  const auto& metadata = context->client_metadata();
  if (auto it = metadata.find(kAttemptTokenMetadata); it != metadata.end()) {
    presented = absl::string_view(it->second.data(), it->second.size());
  }
  absl::Status allowed = attempt_tokens_->Check(job, generation, presented, method);
  if (!allowed.ok()) handler_->CountRefused(method, allowed);
  return allowed;
}

grpc::ServerUnaryReactor* GrpcWorkerService::JoinJob(grpc::CallbackServerContext* context,
                                                     const v1::JoinJobRequest* request,
                                                     v1::JoinJobResponse* response) {
  if (absl::Status allowed =
          AuthorizeAttempt(context, request->job_id(), request->generation(), "JoinJob");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  return FinishNow(context, handler_->JoinJob(*request, response));
}

grpc::ServerUnaryReactor* GrpcWorkerService::KvSet(grpc::CallbackServerContext* context,
                                                   const v1::KvSetRequest* request,
                                                   v1::KvSetResponse* response) {
  if (absl::Status allowed =
          AuthorizeAttempt(context, request->job_id(), request->generation(), "KvSet");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  return FinishNow(context, handler_->KvSet(*request, response));
}

grpc::ServerUnaryReactor* GrpcWorkerService::KvGet(grpc::CallbackServerContext* context,
                                                   const v1::KvGetRequest* request,
                                                   v1::KvGetResponse* response) {
  if (absl::Status allowed =
          AuthorizeAttempt(context, request->job_id(), request->generation(), "KvGet");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  handler_->KvGet(*request, response, FinishLater(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* GrpcWorkerService::KvGetMany(grpc::CallbackServerContext* context,
                                                       const v1::KvGetManyRequest* request,
                                                       v1::KvGetManyResponse* response) {
  if (absl::Status allowed =
          AuthorizeAttempt(context, request->job_id(), request->generation(), "KvGetMany");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  handler_->KvGetMany(*request, response, FinishLater(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* GrpcWorkerService::ReportProgress(
    grpc::CallbackServerContext* context, const v1::ReportProgressRequest* request,
    v1::ReportProgressResponse* response) {
  if (absl::Status allowed =
          AuthorizeAttempt(context, request->job_id(), request->generation(), "ReportProgress");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  return FinishNow(context, handler_->ReportProgress(*request, response));
}

grpc::ServerUnaryReactor* GrpcWorkerService::FinishRank(grpc::CallbackServerContext* context,
                                                        const v1::FinishRankRequest* request,
                                                        v1::FinishRankResponse* response) {
  if (absl::Status allowed =
          AuthorizeAttempt(context, request->job_id(), request->generation(), "FinishRank");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  return FinishNow(context, handler_->FinishRank(*request, response));
}

grpc::ServerUnaryReactor* GrpcWorkerService::AppendLogs(grpc::CallbackServerContext* context,
                                                        const v1::AppendLogsRequest* request,
                                                        v1::AppendLogsResponse* response) {
  if (absl::Status allowed =
          AuthorizeAttempt(context, request->job_id(), request->generation(), "AppendLogs");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  return FinishNow(context, handler_->AppendLogs(*request, response));
}

absl::Status GrpcJobService::Authorize(grpc::CallbackServerContext* context,
                                       TokenStore::Access access, absl::string_view method) const {
  if (tokens_ == nullptr) return absl::OkStatus();
  absl::string_view authorization;
  const auto& metadata = context->client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  absl::StatusOr<std::string> caller = tokens_->Check(authorization, access, method);
  if (caller.ok()) return absl::OkStatus();
  handler_->CountRefused(method, caller.status());
  return caller.status();
}

grpc::ServerUnaryReactor* GrpcJobService::SubmitJob(grpc::CallbackServerContext* context,
                                                    const v1::SubmitJobRequest* request,
                                                    v1::SubmitJobResponse* response) {
  if (absl::Status allowed = Authorize(context, TokenStore::Access::kWrite, "SubmitJob"); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  return FinishNow(context, handler_->SubmitJob(*request, response));
}

grpc::ServerUnaryReactor* GrpcJobService::GetJob(grpc::CallbackServerContext* context,
                                                 const v1::GetJobRequest* request,
                                                 v1::GetJobResponse* response) {
  if (absl::Status allowed = Authorize(context, TokenStore::Access::kRead, "GetJob"); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  return FinishNow(context, handler_->GetJob(*request, response));
}

grpc::ServerUnaryReactor* GrpcJobService::GetJobMetrics(grpc::CallbackServerContext* context,
                                                        const v1::GetJobMetricsRequest* request,
                                                        v1::GetJobMetricsResponse* response) {
  if (absl::Status allowed = Authorize(context, TokenStore::Access::kRead, "GetJobMetrics"); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  return FinishNow(context, handler_->GetJobMetrics(*request, response));
}

grpc::ServerUnaryReactor* GrpcJobService::WatchJob(grpc::CallbackServerContext* context,
                                                   const v1::WatchJobRequest* request,
                                                   v1::WatchJobResponse* response) {
  if (absl::Status allowed = Authorize(context, TokenStore::Access::kRead, "WatchJob"); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  handler_->WatchJob(*request, response, FinishLater(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* GrpcJobService::ListJobs(grpc::CallbackServerContext* context,
                                                   const v1::ListJobsRequest* request,
                                                   v1::ListJobsResponse* response) {
  if (absl::Status allowed = Authorize(context, TokenStore::Access::kRead, "ListJobs"); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  return FinishNow(context, handler_->ListJobs(*request, response));
}

grpc::ServerUnaryReactor* GrpcJobService::ListWorkers(grpc::CallbackServerContext* context,
                                                      const v1::ListWorkersRequest* request,
                                                      v1::ListWorkersResponse* response) {
  if (absl::Status allowed = Authorize(context, TokenStore::Access::kRead, "ListWorkers"); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  return FinishNow(context, handler_->ListWorkers(*request, response));
}

grpc::ServerUnaryReactor* GrpcJobService::CancelJob(grpc::CallbackServerContext* context,
                                                    const v1::CancelJobRequest* request,
                                                    v1::CancelJobResponse* response) {
  if (absl::Status allowed = Authorize(context, TokenStore::Access::kWrite, "CancelJob"); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  return FinishNow(context, handler_->CancelJob(*request, response));
}

grpc::ServerUnaryReactor* GrpcJobService::GetLogs(grpc::CallbackServerContext* context,
                                                  const v1::GetLogsRequest* request,
                                                  v1::GetLogsResponse* response) {
  if (absl::Status allowed = Authorize(context, TokenStore::Access::kRead, "GetLogs"); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  handler_->GetLogs(*request, response, FinishLater(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* GrpcJobService::DebugJob(grpc::CallbackServerContext* context,
                                                   const v1::DebugJobRequest* request,
                                                   v1::DebugJobResponse* response) {
  if (absl::Status allowed = Authorize(context, TokenStore::Access::kRead, "DebugJob");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  handler_->DebugJob(*request, response, FinishLater(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* GrpcJobService::RunDoctor(grpc::CallbackServerContext* context,
                                                    const v1::RunDoctorRequest* request,
                                                    v1::RunDoctorResponse* response) {
  // It quarantines workers: a change, like submitting a job.
  if (absl::Status allowed = Authorize(context, TokenStore::Access::kWrite, "RunDoctor");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  handler_->RunDoctor(*request, response, FinishLater(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* GrpcJobService::UncordonWorker(grpc::CallbackServerContext* context,
                                                         const v1::UncordonWorkerRequest* request,
                                                         v1::UncordonWorkerResponse* response) {
  if (absl::Status allowed = Authorize(context, TokenStore::Access::kWrite, "UncordonWorker");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  return FinishNow(context, handler_->UncordonWorker(*request, response));
}

}  // namespace ringleader
