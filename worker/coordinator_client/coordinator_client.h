// The worker side's view of the coordinator's WorkerService: one method per RPC, proto request in,
// StatusOr<proto response> out. The worker daemon and the rank process talk to the coordinator only
// through this interface, so tests drive them with a gMock implementation (or an in-process fake)
// and only `GrpcCoordinatorClient` (grpc_coordinator_client.h) links grpc++.
//
// Errors are the coordinator's, as documented per RPC in proto/worker_service.proto, plus what the
// transport adds: UNAVAILABLE (coordinator unreachable; implementations may already have retried
// idempotent calls), DEADLINE_EXCEEDED (the call's own deadline passed), CANCELLED (CancelAll()).
#ifndef RINGLEADER_WORKER_COORDINATOR_CLIENT_COORDINATOR_CLIENT_H_
#define RINGLEADER_WORKER_COORDINATOR_CLIENT_COORDINATOR_CLIENT_H_

#include "absl/status/statusor.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// Thread-safe: every method may be called from any thread, concurrently. Owned by whoever creates
// it (the daemon's or the rank process's main()); must outlive its users.
class CoordinatorClient {
 public:
  virtual ~CoordinatorClient() = default;

  virtual absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(
      const v1::RegisterWorkerRequest& request) = 0;
  virtual absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) = 0;
  // Long poll: blocks for up to request.wait_timeout_ms on the coordinator.
  virtual absl::StatusOr<v1::WaitAssignmentResponse> WaitAssignment(
      const v1::WaitAssignmentRequest& request) = 0;
  virtual absl::StatusOr<v1::JoinJobResponse> JoinJob(const v1::JoinJobRequest& request) = 0;
  virtual absl::StatusOr<v1::KvSetResponse> KvSet(const v1::KvSetRequest& request) = 0;
  // Long poll: blocks for up to request.wait_timeout_ms on the coordinator.
  virtual absl::StatusOr<v1::KvGetResponse> KvGet(const v1::KvGetRequest& request) = 0;
  // Long poll: blocks until every key exists, for up to request.wait_timeout_ms. UNIMPLEMENTED
  // from a client (this default) or from a coordinator older than the RPC: the caller then reads
  // key by key with KvGet (CoordinatorKeyValueStore does).
  virtual absl::StatusOr<v1::KvGetManyResponse> KvGetMany(
      const v1::KvGetManyRequest& /*request*/) {
    return absl::UnimplementedError("KvGetMany: not implemented by this client");
  }
  virtual absl::StatusOr<v1::ReportProgressResponse> ReportProgress(
      const v1::ReportProgressRequest& request) = 0;
  virtual absl::StatusOr<v1::FinishRankResponse> FinishRank(
      const v1::FinishRankRequest& request) = 0;
  // A rank's output, shipped by its daemon (log_shipper.h). UNIMPLEMENTED from a client that
  // does not ship logs (this default; rank processes never call it) or from a coordinator older
  // than the RPC: the daemon then stops shipping.
  virtual absl::StatusOr<v1::AppendLogsResponse> AppendLogs(
      const v1::AppendLogsRequest& /*request*/) {
    return absl::UnimplementedError("AppendLogs: not implemented by this client");
  }

  // Makes every in-flight call (long polls included) and every later call fail promptly with
  // CANCELLED. Used for shutdown, so a daemon never waits out a long poll. Idempotent.
  virtual void CancelAll() = 0;

  // From now on, calls about attempt (`job_id`, `generation`) carry `token` (the assignment's
  // attempt_token; "" = nothing to carry). Thread-safe. Default: ignored (fakes, tests).
  virtual void AddAttemptToken(const std::string& job_id, uint64_t generation,
                               const std::string& token) {}
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COORDINATOR_CLIENT_COORDINATOR_CLIENT_H_
