// gRPC adapters of the coordinator: WorkerService and JobService over the callback API. Each
// RPC is forwarded to the RpcHandler; long polls finish from the coordinator's completion
// callback, so no gRPC thread ever waits on the coordinator.
//
// A client that gives up on a long poll early leaves its reactor parked until the poll's own
// deadline (at most the coordinator's max_wait); Coordinator::Shutdown() answers every parked
// poll, which lets grpc::Server::Shutdown complete.
#ifndef RINGLEADER_COORDINATOR_RPC_GRPC_SERVICE_H_
#define RINGLEADER_COORDINATOR_RPC_GRPC_SERVICE_H_

#include "coordinator/core/attempt_tokens.h"
#include "coordinator/rpc/heartbeat_streams.h"
#include "coordinator/rpc/rpc_handler.h"
#include "coordinator/rpc/token_store.h"
#include "grpcpp/grpcpp.h"
#include "proto/ringleader.grpc.pb.h"

namespace ringleader {

// Thread-safe. Does not own `handler`, which must outlive the server the service is added to,
// or `attempt_tokens`: with them, every call about an attempt (JoinJob, KvSet, KvGet,
// KvGetMany, ReportProgress, FinishRank, AppendLogs) must carry that attempt's token as
// "ringleader-attempt-token" metadata (UNAUTHENTICATED without one, PERMISSION_DENIED with
// another attempt's; counted like the JobService's refusals).
class GrpcWorkerService final : public v1::WorkerService::CallbackService {
 public:
  explicit GrpcWorkerService(RpcHandler* handler, const AttemptTokens* attempt_tokens = nullptr)
      : handler_(handler), attempt_tokens_(attempt_tokens), heartbeat_streams_(handler) {}

  grpc::ServerUnaryReactor* RegisterWorker(grpc::CallbackServerContext* context,
                                           const v1::RegisterWorkerRequest* request,
                                           v1::RegisterWorkerResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  // heartbeat_streams.h.
  HeartbeatStreams::Reactor* HeartbeatStream(grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* WaitAssignment(grpc::CallbackServerContext* context,
                                           const v1::WaitAssignmentRequest* request,
                                           v1::WaitAssignmentResponse* response) override;
  grpc::ServerUnaryReactor* JoinJob(grpc::CallbackServerContext* context,
                                    const v1::JoinJobRequest* request,
                                    v1::JoinJobResponse* response) override;
  grpc::ServerUnaryReactor* KvSet(grpc::CallbackServerContext* context,
                                  const v1::KvSetRequest* request,
                                  v1::KvSetResponse* response) override;
  grpc::ServerUnaryReactor* KvGet(grpc::CallbackServerContext* context,
                                  const v1::KvGetRequest* request,
                                  v1::KvGetResponse* response) override;
  grpc::ServerUnaryReactor* KvGetMany(grpc::CallbackServerContext* context,
                                      const v1::KvGetManyRequest* request,
                                      v1::KvGetManyResponse* response) override;
  grpc::ServerUnaryReactor* ReportProgress(grpc::CallbackServerContext* context,
                                           const v1::ReportProgressRequest* request,
                                           v1::ReportProgressResponse* response) override;
  grpc::ServerUnaryReactor* FinishRank(grpc::CallbackServerContext* context,
                                       const v1::FinishRankRequest* request,
                                       v1::FinishRankResponse* response) override;
  grpc::ServerUnaryReactor* AppendLogs(grpc::CallbackServerContext* context,
                                       const v1::AppendLogsRequest* request,
                                       v1::AppendLogsResponse* response) override;

  // Cancels the open heartbeat streams and refuses new ones: before the server shuts down, so
  // they do not hold the shutdown up until its deadline. Idempotent.
  void CloseHeartbeatStreams() { heartbeat_streams_.CloseAll(); }
  size_t open_heartbeat_streams() const { return heartbeat_streams_.open_streams(); }

 private:
  // OK when the call carries attempt (`job`, `generation`)'s token (or none is checked).
  absl::Status AuthorizeAttempt(grpc::CallbackServerContext* context, absl::string_view job,
                                uint64_t generation, absl::string_view method) const;

  RpcHandler* const handler_;
  const AttemptTokens* const attempt_tokens_;
  HeartbeatStreams heartbeat_streams_;
};

// Thread-safe. Does not own `handler` or `tokens`. With `tokens` (--tokens_file) every call
// must carry a token the store accepts (token_store.h: SubmitJob and CancelJob always, reads
// unless anonymous reads are allowed); a refusal answers UNAUTHENTICATED and is counted in the
// handler's RPC statistics under its method and code. nullptr = no token needed.
class GrpcJobService final : public v1::JobService::CallbackService {
 public:
  explicit GrpcJobService(RpcHandler* handler, const TokenStore* tokens = nullptr)
      : handler_(handler), tokens_(tokens) {}

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const v1::SubmitJobRequest* request,
                                      v1::SubmitJobResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request,
                                   v1::GetJobResponse* response) override;
  grpc::ServerUnaryReactor* GetJobMetrics(grpc::CallbackServerContext* context,
                                          const v1::GetJobMetricsRequest* request,
                                          v1::GetJobMetricsResponse* response) override;
  grpc::ServerUnaryReactor* WatchJob(grpc::CallbackServerContext* context,
                                     const v1::WatchJobRequest* request,
                                     v1::WatchJobResponse* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* request,
                                      v1::CancelJobResponse* response) override;
  grpc::ServerUnaryReactor* GetLogs(grpc::CallbackServerContext* context,
                                    const v1::GetLogsRequest* request,
                                    v1::GetLogsResponse* response) override;
  grpc::ServerUnaryReactor* DebugJob(grpc::CallbackServerContext* context,
                                     const v1::DebugJobRequest* request,
                                     v1::DebugJobResponse* response) override;
  grpc::ServerUnaryReactor* RunDoctor(grpc::CallbackServerContext* context,
                                      const v1::RunDoctorRequest* request,
                                      v1::RunDoctorResponse* response) override;
  grpc::ServerUnaryReactor* UncordonWorker(grpc::CallbackServerContext* context,
                                           const v1::UncordonWorkerRequest* request,
                                           v1::UncordonWorkerResponse* response) override;

 private:
  // OK when the call may go on; else the refusal (already counted).
  absl::Status Authorize(grpc::CallbackServerContext* context, TokenStore::Access access,
                         absl::string_view method) const;

  RpcHandler* const handler_;
  const TokenStore* const tokens_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_RPC_GRPC_SERVICE_H_
