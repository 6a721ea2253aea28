// A running coordinator, started from one options struct: the core with its store
// (CoordinatorInstance, coordinator_instance.h) behind the gRPC server (WorkerService and
// JobService, grpc.health.v1, reflection: rpc/grpc_server.h) and, optionally, the HTTP server
// (/metrics in the Prometheus text format and the web dashboard with its JSON API). What
// ringleader-coordinator (main.cc) runs, and what tests and benchmarks start in process:
//
//   CoordinatorServerOptions options;
//   options.instance.coordinator.max_wait = absl::Seconds(5);   // the core's settings
//   options.listen = "127.0.0.1:0";                             // port 0 picks a free port
//   absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
//       CoordinatorServer::Start(std::move(options));
//   ... dial (*server)->address() ...
//   (*server)->Shutdown(absl::Now() + absl::Seconds(2));
//
// Start order: instance (store, attempt secret, restore, ticker), gRPC server, HTTP server; on
// any error what was started is stopped again. The gRPC calls are counted in rpc_stats() (the
// RPC series of /metrics); the dashboard's API calls the same handler methods uncounted.
//
// Thread-safety: Start, Shutdown and the destructor from one thread (the owner's); serving is
// thread-safe, and so are coordinator() and the heartbeat-stream calls.
#ifndef RINGLEADER_COORDINATOR_SERVER_COORDINATOR_SERVER_H_
#define RINGLEADER_COORDINATOR_SERVER_COORDINATOR_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/http/http_server.h"
#include "coordinator/rpc/grpc_server.h"
#include "coordinator/rpc/rpc_handler.h"
#include "coordinator/rpc/token_store.h"
#include "coordinator/server/coordinator_instance.h"
#include "grpcpp/grpcpp.h"

namespace ringleader {

struct CoordinatorServerOptions {
  // The core, its store, the attempt tokens and the ticker (coordinator_instance.h).
  CoordinatorInstanceOptions instance;
  // "host:port" the gRPC server listens on; port 0 picks a free port (address() names it).
  std::string listen = "127.0.0.1:0";
  // Mutual TLS or plaintext (common/tls/tls_credentials.h); nullptr = plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // Who may call the JobService (rpc/token_store.h). Not owned, outlives the server (the owner
  // may Reload it); nullptr = no token needed.
  const TokenStore* tokens = nullptr;
  // "host:port" of the HTTP server (/metrics, the dashboard at /, its API under /api/); port 0
  // picks a free port (http_address() names it). "" = no HTTP server.
  std::string http_listen;
  // More series appended to /metrics (e.g. HaCoordinator's ringleader_leader). nullptr = none.
  std::function<std::string()> extra_metrics;
};

class CoordinatorServer {
 public:
  // Starts everything (order above). Logs "serving metrics on http://ADDRESS/metrics" and
  // "serving the dashboard on http://ADDRESS/" to options.instance.log once HTTP serves.
  // Errors: the instance's; the gRPC server's INVALID_ARGUMENT (`listen` is not host:port) or
  // UNAVAILABLE (could not bind); the HTTP server's likewise. `failed` (optional) names the
  // part that failed (CoordinatorPart).
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      CoordinatorServerOptions options, CoordinatorPart* failed = nullptr);

  ~CoordinatorServer();  // Shutdown(a past deadline) unless already done
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  // The gRPC server's bound port, and "host:port" with it (the host as given in `listen`).
  int port() const { return grpc_->port(); }
  const std::string& address() const { return grpc_->address(); }
  // The HTTP server's bound "host:port"; "" without one.
  const std::string& http_address() const;

  Coordinator& coordinator() { return instance_->coordinator(); }
  const RpcStats& rpc_stats() const { return instance_->rpc_stats(); }
  const AttemptTokens* attempt_tokens() const { return instance_->attempt_tokens(); }

  // The worker service's heartbeat streams (rpc/heartbeat_streams.h): cancels the open ones and
  // refuses new ones; how many are open.
  void CloseHeartbeatStreams() { grpc_->CloseHeartbeatStreams(); }
  size_t open_heartbeat_streams() const { return grpc_->open_heartbeat_streams(); }

  // Stops the ticker and the core (parked long polls are answered UNAVAILABLE), then the gRPC
  // server: in-flight calls may run until `deadline` (wall-clock time), open heartbeat streams
  // are cancelled at once (GrpcServer::Shutdown); then the HTTP server. Idempotent.
  void Shutdown(absl::Time deadline);

 private:
  CoordinatorServer() = default;

  std::unique_ptr<CoordinatorInstance> instance_;
  std::unique_ptr<GrpcServer> grpc_;
  // The dashboard's handler: the same methods as gRPC's, not counted in rpc_stats().
  std::unique_ptr<RpcHandler> http_handler_;
  std::unique_ptr<HttpServer> http_;
  bool shut_down_ = false;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_SERVER_COORDINATOR_SERVER_H_
