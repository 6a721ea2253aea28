#include "worker/daemon/admin_server.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"

namespace ringleader {

absl::StatusOr<std::unique_ptr<AdminServer>> AdminServer::Start(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--admin_listen: \"", listen, "\" is not host:port (e.g. 127.0.0.1:7170; port 0 picks "
        "a free port)"));
  }
  std::unique_ptr<AdminServer> server(new AdminServer());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second server on a taken port would then share it
  // silently instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &server->port_);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("--admin_listen: could not listen on ", listen,
                                               ": address in use or not local?"));
  }
  server->address_ = absl::StrCat(listen.substr(0, colon), ":", server->port_);
  server->SetServing(false);
  return server;
}

AdminServer::~AdminServer() {
  if (server_ == nullptr) return;  // Start failed
  SetServing(false);
  server_->Shutdown(absl::ToChronoTime(absl::UnixEpoch()));
  server_->Wait();
}

void AdminServer::SetServing(bool serving) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus("", serving);
  health->SetServingStatus(kWorkerDaemonServiceName, serving);
}

absl::StatusOr<std::string> OffsetListenPort(const std::string& listen, int offset) {
  const size_t colon = listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) ||
      port < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--admin_listen: '", listen, "' is not host:port"));
  }
  if (port == 0 || offset == 0) return listen;  // a free port stays a free port
  if (offset < 0 || port + offset > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--admin_listen: port ", port, " + GPU index ", offset,
        " is not a valid port; choose a lower base port or drop --admin_port_per_gpu"));
  }
  return absl::StrCat(listen.substr(0, colon), ":", port + offset);
}

}  // namespace ringleader
