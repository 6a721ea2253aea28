#include "coordinator/server/coordinator_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/http/dashboard/dashboard_routes.h"
#include "coordinator/http/prometheus_text.h"

namespace ringleader {

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    CoordinatorServerOptions options, CoordinatorPart* failed) {
  auto fail = [failed](CoordinatorPart part, absl::Status status) {
    if (failed != nullptr) *failed = part;
    return status;
  };
  Clock* clock = options.instance.clock;
  Coordinator::EventLogger log = options.instance.log;
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer());
  absl::StatusOr<std::unique_ptr<CoordinatorInstance>> instance =
      CoordinatorInstance::Start(std::move(options.instance), failed);
  if (!instance.ok()) return instance.status();
  server->instance_ = std::move(*instance);
  CoordinatorInstance& core = *server->instance_;

  std::shared_ptr<grpc::ServerCredentials> credentials =
      options.credentials != nullptr ? std::move(options.credentials)
                                     : grpc::InsecureServerCredentials();
  absl::StatusOr<std::unique_ptr<GrpcServer>> grpc_server =
      GrpcServer::Start(options.listen, std::move(credentials), &core.handler(), options.tokens,
                        core.attempt_tokens());
  if (!grpc_server.ok()) return fail(CoordinatorPart::kGrpcServer, grpc_server.status());
  server->grpc_ = std::move(*grpc_server);

  if (!options.http_listen.empty()) {
    server->http_handler_ = std::make_unique<RpcHandler>(&core.coordinator());
    HttpRouter router;
    absl::Status routed =
        AddMetricsRoute(&router, [&core, extra = std::move(options.extra_metrics)] {
          // Both snapshots are copies: the text is formatted outside every lock.
          std::string text =
              CoordinatorMetricsText(core.coordinator().Metrics(), core.rpc_stats().Take());
          return extra ? absl::StrCat(text, extra()) : text;
        });
    if (routed.ok()) routed = AddDashboardRoutes(server->http_handler_.get(), &router);
    if (!routed.ok()) return fail(CoordinatorPart::kHttpServer, routed);
    absl::StatusOr<std::unique_ptr<HttpServer>> http =
        HttpServer::Start(options.http_listen, std::move(router));
    if (!http.ok()) return fail(CoordinatorPart::kHttpServer, http.status());
    server->http_ = std::move(*http);
    if (log) {
      log(clock->Now(),
          absl::StrCat("serving metrics on http://", server->http_->address(), "/metrics"));
      log(clock->Now(), absl::StrCat("serving the dashboard on http://", server->http_->address(),
                                     "/"));
    }
  }
  return server;
}

CoordinatorServer::~CoordinatorServer() { Shutdown(absl::UnixEpoch()); }

const std::string& CoordinatorServer::http_address() const {
  static const std::string* const kNone = new std::string();
  return http_ != nullptr ? http_->address() : *kNone;
}

void CoordinatorServer::Shutdown(absl::Time deadline) {
  if (shut_down_) return;
  shut_down_ = true;
  // The core first: it answers parked long polls, so the gRPC server can drain.
  if (instance_ != nullptr) instance_->Shutdown();
  if (grpc_ != nullptr) grpc_->Shutdown(deadline);
  if (http_ != nullptr) http_->Stop();
}

}  // namespace ringleader
