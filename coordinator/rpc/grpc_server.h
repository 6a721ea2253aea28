// A running coordinator gRPC server: both services on one listening address. Started by
// CoordinatorServer (coordinator/server/coordinator_server.h) with the core behind it.
#ifndef RINGLEADER_COORDINATOR_RPC_GRPC_SERVER_H_
#define RINGLEADER_COORDINATOR_RPC_GRPC_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/rpc/grpc_service.h"
#include "coordinator/rpc/rpc_handler.h"
#include "coordinator/rpc/standby_service_grpc.h"
#include "grpcpp/grpcpp.h"

namespace ringleader {

// Health: grpc.health.v1 answers SERVING for "" (the server), "ringleader.v1.WorkerService"
// and "ringleader.v1.JobService" once Start returned (the job store is loaded before Start, so
// there is no loading phase to report: until then the port is closed), NOT_SERVING from
// Shutdown on. Server reflection (grpc.reflection.v1alpha) lists and describes every service.
//
// Owns the grpc::Server and the two services. Serving is thread-safe; Start and Shutdown are
// called from one thread (the owner's). The RpcHandler (and its Coordinator) must outlive it.
inline constexpr char kWorkerServiceName[] = "ringleader.v1.WorkerService";
inline constexpr char kJobServiceName[] = "ringleader.v1.JobService";

// The largest request the coordinator accepts (a 4 MiB key-value value, a log chunk or a batch
// of step reports fit well within it); larger ones fail with RESOURCE_EXHAUSTED before any
// handler runs.
inline constexpr int kMaxRequestBytes = 8 << 20;

class GrpcServer {
 public:
  // Starts serving on `listen` ("host:port"; port 0 picks a free port) with `credentials`
  // (mutual TLS or insecure: common/tls/tls_credentials.h).
  // Errors: INVALID_ARGUMENT (`listen` is not host:port), UNAVAILABLE (could not bind).
  // `tokens` (not owned; nullptr = none needed): who may call the JobService.
  // `attempt_tokens` (not owned; nullptr = none checked): the ranks' per-attempt credentials.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(
      const std::string& listen, std::shared_ptr<grpc::ServerCredentials> credentials,
      RpcHandler* handler, const TokenStore* tokens = nullptr,
      const AttemptTokens* attempt_tokens = nullptr);

  // A standby coordinator's server (HaCoordinator): `standby` answers every WorkerService and
  // JobService call (standby_service_grpc.h); health answers NOT_SERVING for everything;
  // reflection as above. Errors: as Start.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> StartStandby(
      const std::string& listen, std::shared_ptr<grpc::ServerCredentials> credentials,
      std::unique_ptr<StandbyService> standby);

  ~GrpcServer();  // Shutdown(a past deadline) unless already done

  // The bound port, and "host:port" with it (the host as given in `listen`).
  int port() const { return port_; }
  const std::string& address() const { return address_; }

  // Stops accepting calls, lets in-flight calls run until `deadline` (wall-clock time: gRPC's),
  // cancels the rest and waits until every call is done. Long polls must have been answered
  // first (Coordinator::Shutdown) or they hold this up until their own deadline; open
  // heartbeat streams are cancelled at once. Idempotent.
  void Shutdown(absl::Time deadline);

  // The worker service's heartbeat streams (heartbeat_streams.h): cancels the open ones and
  // refuses new ones; how many are open.
  void CloseHeartbeatStreams() { worker_service_.CloseHeartbeatStreams(); }
  size_t open_heartbeat_streams() const { return worker_service_.open_heartbeat_streams(); }

 private:
  GrpcServer(RpcHandler* handler, const TokenStore* tokens,
                    const AttemptTokens* attempt_tokens)
      : worker_service_(handler, attempt_tokens), job_service_(handler, tokens) {}

  // Binds `listen` with the services `services` registers; sets server_, port_, address_.
  absl::Status Build(const std::string& listen,
                     std::shared_ptr<grpc::ServerCredentials> credentials,
                     const std::function<void(grpc::ServerBuilder&)>& services);

  GrpcWorkerService worker_service_;
  GrpcJobService job_service_;
  std::unique_ptr<StandbyService> standby_;  // a standby's, instead of the two above
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
  bool shut_down_ = false;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_RPC_GRPC_SERVER_H_
