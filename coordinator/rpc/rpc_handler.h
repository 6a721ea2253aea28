// Translates ringleader.v1 requests into Coordinator calls and results into responses. No
// transport: the gRPC service (grpc_service.h) forwards each RPC here, and tests may call it
// directly.
//
// Unary RPCs return the status and fill `response` on success. Long polls (WaitAssignment,
// KvGet, KvGetMany, WatchJob, GetLogs) fill `response` and then call `done` exactly once, possibly on
// another thread and possibly before returning; `response` must stay valid until then. A
// request's `wait_timeout_ms` becomes the deadline now + wait (capped by the coordinator's
// max_wait).
// Errors are the Coordinator's (see core/coordinator.h and the proto's comments).
//
// With an RpcStats (rpc_stats.h), every call is counted by method (the RPC's name, e.g.
// "ReportProgress") and status code, with its latency on the coordinator's clock: from the
// call into the handler until it returns (unary) or calls `done` (long polls).
#ifndef RINGLEADER_COORDINATOR_RPC_RPC_HANDLER_H_
#define RINGLEADER_COORDINATOR_RPC_RPC_HANDLER_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/rpc/rpc_stats.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

using StatusCallback = std::function<void(absl::Status)>;

// Thread-safe (stateless besides the coordinator and the stats). Owns neither `coordinator`
// nor `stats` (nullptr = calls are not counted); both must outlive it.
class RpcHandler {
 public:
  explicit RpcHandler(Coordinator* coordinator, RpcStats* stats = nullptr)
      : coordinator_(coordinator), stats_(stats) {}

  // Counts a call the edge refused before it reached the coordinator (no or a wrong token) under
  // `method` and its code, with no latency.
  void CountRefused(absl::string_view method, const absl::Status& refusal);

  // WorkerService.
  absl::Status RegisterWorker(const v1::RegisterWorkerRequest& request,
                              v1::RegisterWorkerResponse* response);
  absl::Status Heartbeat(const v1::HeartbeatRequest& request, v1::HeartbeatResponse* response);
  void WaitAssignment(const v1::WaitAssignmentRequest& request,
                      v1::WaitAssignmentResponse* response, StatusCallback done);
  absl::Status JoinJob(const v1::JoinJobRequest& request, v1::JoinJobResponse* response);
  absl::Status KvSet(const v1::KvSetRequest& request, v1::KvSetResponse* response);
  void KvGet(const v1::KvGetRequest& request, v1::KvGetResponse* response, StatusCallback done);
  void KvGetMany(const v1::KvGetManyRequest& request, v1::KvGetManyResponse* response,
                 StatusCallback done);
  absl::Status ReportProgress(const v1::ReportProgressRequest& request,
                              v1::ReportProgressResponse* response);
  absl::Status FinishRank(const v1::FinishRankRequest& request, v1::FinishRankResponse* response);
  absl::Status AppendLogs(const v1::AppendLogsRequest& request, v1::AppendLogsResponse* response);

  // JobService.
  absl::Status SubmitJob(const v1::SubmitJobRequest& request, v1::SubmitJobResponse* response);
  absl::Status GetJob(const v1::GetJobRequest& request, v1::GetJobResponse* response);
  absl::Status GetJobMetrics(const v1::GetJobMetricsRequest& request,
                             v1::GetJobMetricsResponse* response);
  void WatchJob(const v1::WatchJobRequest& request, v1::WatchJobResponse* response,
                StatusCallback done);
  // A cursor listed twice for one rank: the last one counts.
  void GetLogs(const v1::GetLogsRequest& request, v1::GetLogsResponse* response,
               StatusCallback done);
  absl::Status ListJobs(const v1::ListJobsRequest& request, v1::ListJobsResponse* response);
  absl::Status ListWorkers(const v1::ListWorkersRequest& request,
                           v1::ListWorkersResponse* response);
  absl::Status CancelJob(const v1::CancelJobRequest& request, v1::CancelJobResponse* response);
  // Long poll: answers when the check job ends; wait_timeout_ms 0 = the coordinator's max_wait.
  void RunDoctor(const v1::RunDoctorRequest& request, v1::RunDoctorResponse* response,
                 StatusCallback done);
  absl::Status UncordonWorker(const v1::UncordonWorkerRequest& request,
                              v1::UncordonWorkerResponse* response);
  // Asks the ranks for their trace rings, waits for them (the job's version moves as each
  // arrives) up to wait_ms, and answers the report (Coordinator::CollectHangReport, kept).
  void DebugJob(const v1::DebugJobRequest& request, v1::DebugJobResponse* response,
                StatusCallback done);

 private:
  absl::Time Deadline(uint32_t wait_timeout_ms) const;
  // DebugJob's wait: answers once every rank sent its ring or at `deadline`.
  void AwaitTraces(const JobId& job, uint64_t version, absl::Time deadline,
                   v1::DebugJobResponse* response, StatusCallback done);
  // Runs a unary call's body and records it.
  template <typename Body>
  absl::Status Measured(absl::string_view method, Body body);
  // `done`, recording the call when it is called (a long poll's end).
  StatusCallback Measured(absl::string_view method, StatusCallback done);

  Coordinator* const coordinator_;
  RpcStats* const stats_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_RPC_RPC_HANDLER_H_
