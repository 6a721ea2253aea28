#include "coordinator/rpc/grpc_server.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"

namespace ringleader {

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(
    const std::string& listen, std::shared_ptr<grpc::ServerCredentials> credentials,
    RpcHandler* handler, const TokenStore* tokens, const AttemptTokens* attempt_tokens) {
  std::unique_ptr<GrpcServer> server(new GrpcServer(handler, tokens, attempt_tokens));
  absl::Status built = server->Build(listen, std::move(credentials), [&](grpc::ServerBuilder& b) {
    b.RegisterService(&server->worker_service_);
    b.RegisterService(&server->job_service_);
  });
  if (!built.ok()) return built;
  grpc::HealthCheckServiceInterface* health = server->server_->GetHealthCheckService();
  for (const char* service : {"", kWorkerServiceName, kJobServiceName}) {
    health->SetServingStatus(service, true);
  }
  return server;
}

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::StartStandby(
    const std::string& listen, std::shared_ptr<grpc::ServerCredentials> credentials,
    std::unique_ptr<StandbyService> standby) {
  std::unique_ptr<GrpcServer> server(new GrpcServer(nullptr, nullptr, nullptr));
  server->standby_ = std::move(standby);
  absl::Status built = server->Build(listen, std::move(credentials), [&](grpc::ServerBuilder& b) {
    b.RegisterCallbackGenericService(server->standby_.get());
  });
  if (!built.ok()) return built;
  // A standby serves no service: health probes (a load balancer's) route to the leader. The
  // services are named NOT_SERVING rather than left unknown (NOT_FOUND), as the leader names
  // them SERVING: a per-service probe sees the same states on every coordinator.
  grpc::HealthCheckServiceInterface* health = server->server_->GetHealthCheckService();
  for (const char* service : {"", kWorkerServiceName, kJobServiceName}) {
    health->SetServingStatus(service, false);
  }
  return server;
}

absl::Status GrpcServer::Build(const std::string& listen,
                               std::shared_ptr<grpc::ServerCredentials> credentials,
                               const std::function<void(grpc::ServerBuilder&)>& services) {
  const size_t colon = listen.rfind(':');
  int requested_port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &requested_port) || requested_port < 0 ||
      requested_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "listen address \"", listen, "\" is not host:port (e.g. 127.0.0.1:7070; port 0 picks "
        "a free port)"));
  }
  // grpc.health.v1 (per service, "" for the whole server) and server reflection, so generic
  // clients (grpcurl, grpc_health_probe, load balancers) can probe and call the services.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second server on a taken port would then share it
  // silently instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  builder.AddListeningPort(listen, std::move(credentials), &port_);
  services(builder);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "could not listen on ", listen, ": address in use or not local? pick another --listen"));
  }
  address_ = absl::StrCat(listen.substr(0, colon), ":", port_);
  return absl::OkStatus();
}

// Any past deadline cancels in-flight calls at once.
GrpcServer::~GrpcServer() { Shutdown(absl::UnixEpoch()); }

void GrpcServer::Shutdown(absl::Time deadline) {
  if (shut_down_ || server_ == nullptr) return;  // a failed Start has no server
  shut_down_ = true;
  // Probes see NOT_SERVING while the calls in flight drain.
  server_->GetHealthCheckService()->SetServingStatus(false);
  worker_service_.CloseHeartbeatStreams();
  server_->Shutdown(absl::ToChronoTime(deadline));
  server_->Wait();
}

}  // namespace ringleader
