// The worker daemon's admin port: grpc.health.v1 (and server reflection), so an operator or a
// load balancer probes each daemon like the coordinator (grpc_health_probe, grpcurl).
//
// Health, for "" (the daemon) and "ringleader.v1.WorkerDaemon":
//   NOT_SERVING ──registered with the coordinator──> SERVING
//        ^                                              │
//        └── lease lost (registering again), stopping ──┘
// A daemon that cannot reach its coordinator keeps its last registration (it still runs its
// rank for the coordinator's grace), so it stays SERVING until the lease is known lost.
//
// Thread-safety: SetServing from any thread; destroy after the daemon stopped calling it.
#ifndef RINGLEADER_WORKER_DAEMON_ADMIN_SERVER_H_
#define RINGLEADER_WORKER_DAEMON_ADMIN_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace ringleader {

inline constexpr char kWorkerDaemonServiceName[] = "ringleader.v1.WorkerDaemon";

class AdminServer {
 public:
  // Listens on `listen` ("host:port"; port 0 picks a free one), NOT_SERVING until SetServing.
  // Errors: INVALID_ARGUMENT (not host:port), UNAVAILABLE (cannot listen there).
  static absl::StatusOr<std::unique_ptr<AdminServer>> Start(const std::string& listen);
  ~AdminServer();

  // "host:port" with the port actually bound.
  const std::string& address() const { return address_; }
  void SetServing(bool serving);

 private:
  AdminServer() = default;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
};

// `listen` ("host:port") with `offset` added to its port: one admin port per GPU worker on a
// host (7170 + GPU index). Errors: INVALID_ARGUMENT naming --admin_listen (not host:port, or
// the port plus the offset is past 65535).
absl::StatusOr<std::string> OffsetListenPort(const std::string& listen, int offset);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_DAEMON_ADMIN_SERVER_H_
